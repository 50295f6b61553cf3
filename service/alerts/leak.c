/* leak.c - the leak score of one series (alerts.h, cw_leak_score; the
 * formula and why each part is there: docs/ALERTS.md, "The leak score").
 *
 * Input: the outstanding bytes of a process (or name, or tag) at the ends
 * of equal steps over the rule's window, and the window's committed and
 * impacting bytes. Output: a 0..1 confidence that the series leaks, with
 * the components it was made of.
 *
 * Speed: the engine scores up to 10,000 series per evaluation in a 50 ms
 * budget. The points are first averaged into at most TS_GROUPS groups
 * (Theil-Sen), MK_GROUPS groups (Mann-Kendall, step) and FLOOR_GROUPS
 * minima (floor), in one pass; the pairwise parts run on those, with
 * quickselect instead of a sort, on stack arrays. No allocation. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "commitwatch/alerts.h"

#define TS_GROUPS 32    /* points of the Theil-Sen slope: 496 pairs */
#define MK_GROUPS 16    /* coarser buckets of the trend test and the step */
#define FLOOR_GROUPS 12 /* intervals whose minima make the floor */
#define RECENT_PART 3   /* the recent slope is over the last third */
#define RECENT_NOISE_PTS 32  /* at most this many second differences estimate its noise */
#define RECENT_MIN_CENTRES 5 /* and at least this many */
#define NS_PER_HOUR 3.6e12
#define Z_975 1.959963984540054 /* two-sided 95 % */

/* ---- selection -------------------------------------------------------------- */

static void swap(double *a, double *b)
{
    double t = *a;
    *a = *b;
    *b = t;
}

/* The k-th smallest of a[lo..hi] (inclusive, 0-based over a), lo <= k <=
 * hi; reorders a[lo..hi] so that a[lo..k-1] <= a[k] <= a[k+1..hi]
 * (Wirth's selection: Hoare's partition around the value at k, narrowed to
 * the side holding k). */
static double select_k(double *a, size_t lo, size_t hi, size_t k)
{
    ptrdiff_t l = (ptrdiff_t)lo, r = (ptrdiff_t)hi, kk = (ptrdiff_t)k;
    while (l < r) {
        double pivot = a[kk];
        ptrdiff_t i = l, j = r;
        do {
            while (a[i] < pivot)
                i++;
            while (pivot < a[j])
                j--;
            if (i <= j) {
                swap(&a[i], &a[j]);
                i++;
                j--;
            }
        } while (i <= j);
        if (j < kk) l = i;
        if (kk < i) r = j;
    }
    return a[kk];
}

/* The median of a[0..n-1], n > 0; leaves a partitioned around n / 2. */
static double median_inplace(double *a, size_t n)
{
    double med = select_k(a, 0, n - 1, n / 2);
    if (n % 2 == 0) {
        /* The lower middle is the largest of a[0..n/2-1]. */
        double below = a[0];
        for (size_t i = 1; i < n / 2; i++)
            if (a[i] > below) below = a[i];
        med = (med + below) / 2;
    }
    return med;
}

/* ---- Theil-Sen ------------------------------------------------------------- */

/* Fills s with the slopes of every pair i < j of (t, x), m points with
 * increasing t; returns how many. s holds m(m-1)/2. (Times that increase
 * may still round to the same double, hours from the first point: such a
 * pair has no slope and is left out.) */
static size_t pair_slopes(const double *t, const double *x, size_t m, double *s)
{
    size_t n = 0;
    for (size_t i = 0; i + 1 < m; i++)
        for (size_t j = i + 1; j < m; j++)
            if (t[j] > t[i]) s[n++] = (x[j] - x[i]) / (t[j] - t[i]);
    return n;
}

/* The median slope of m points; with lo and hi non-NULL also Sen's (1968)
 * ~95 % confidence interval: ranks (N -+ C) / 2 of the N ordered slopes,
 * C = z * sqrt(Var S), Var S = m(m-1)(2m+5)/18 (Kendall's S, no ties). */
static double theil_sen(const double *t, const double *x, size_t m, double *lo, double *hi)
{
    double s[TS_GROUPS * (TS_GROUPS - 1) / 2];
    size_t n = pair_slopes(t, x, m, s);
    if (n == 0) return 0;
    size_t mid = n / 2;
    double med = median_inplace(s, n);
    if (lo && hi) {
        double c = Z_975 * sqrt((double)m * (double)(m - 1) * (double)(2 * m + 5) / 18.0);
        double m1 = ((double)n - c) / 2, m2 = ((double)n + c) / 2;
        /* 1-based ranks M1 and M2 + 1, clamped to the slopes there are. */
        size_t k1 = m1 < 1 ? 0 : (size_t)floor(m1) - 1;
        size_t k2 = m2 + 1 > (double)n ? n - 1 : (size_t)ceil(m2);
        if (k2 > n - 1) k2 = n - 1;
        /* s[0..mid-1] <= s[mid] <= s[mid+1..]: each bound is searched in
         * its half. */
        *lo = k1 < mid ? select_k(s, 0, mid - 1, k1) : s[mid];
        *hi = k2 > mid ? select_k(s, mid + 1, n - 1, k2) : s[mid];
    }
    return med;
}

/* ---- Mann-Kendall ---------------------------------------------------------- */

/* S, its variance with the tie correction, z (continuity-corrected) and the
 * two-sided p-value, over m values in time order. */
static void mann_kendall(const double *x, size_t m, double *z, double *p)
{
    long s = 0;
    for (size_t i = 0; i + 1 < m; i++)
        for (size_t j = i + 1; j < m; j++)
            s += (x[j] > x[i]) - (x[j] < x[i]);
    /* Ties: sort a copy (m is small) and count the runs of equal values. */
    double v[MK_GROUPS];
    memcpy(v, x, m * sizeof *x);
    for (size_t i = 1; i < m; i++)
        for (size_t j = i; j > 0 && v[j] < v[j - 1]; j--)
            swap(&v[j], &v[j - 1]);
    double md = (double)m;
    double var = md * (md - 1) * (2 * md + 5);
    for (size_t i = 0; i < m;) {
        size_t k = i + 1;
        while (k < m && v[k] == v[i])
            k++;
        double tg = (double)(k - i);
        var -= tg * (tg - 1) * (2 * tg + 5);
        i = k;
    }
    var /= 18;
    if (var <= 0 || s == 0) {
        *z = 0;
        *p = 1;
        return;
    }
    *z = ((double)s - (s > 0 ? 1 : -1)) / sqrt(var);
    *p = erfc(fabs(*z) / sqrt(2.0));
}

/* The median of n values (copied: v is left as it is). */
static double median_of(const double *v, size_t n)
{
    double c[TS_GROUPS];
    memcpy(c, v, n * sizeof *v);
    return median_inplace(c, n);
}

/* ---- the score ------------------------------------------------------------- */

static double clamp01(double v)
{
    return v > 1 ? 1 : v > 0 ? v : 0; /* NaN -> 0 */
}

/* 1 - SSE(best one-step fit) / SSE(least-squares line), clamped to 0..1,
 * over m >= 4 points: near 1 when the points are two levels, 0 for a line. */
static double step_fit(const double *t, const double *x, size_t m)
{
    double st = 0, sx = 0, stt = 0, stx = 0, sxx = 0;
    for (size_t i = 0; i < m; i++) {
        st += t[i];
        sx += x[i];
        stt += t[i] * t[i];
        stx += t[i] * x[i];
        sxx += x[i] * x[i];
    }
    double md = (double)m, vt = stt - st * st / md, vx = sxx - sx * sx / md;
    double cov = stx - st * sx / md;
    double sse_line = vt > 0 ? vx - cov * cov / vt : vx;
    if (!(sse_line > 0)) return 0;
    /* Two levels split after point k (at least 2 points each side): the
     * SSE is vx minus the between-levels sum of squares. */
    double best = vx, left = 0;
    for (size_t k = 0; k + 2 < m; k++) {
        left += x[k];
        if (k < 1) continue;
        double nl = (double)(k + 1), nr = md - nl, right = sx - left;
        double between = left * left / nl + right * right / nr - sx * sx / md;
        if (vx - between < best) best = vx - between;
    }
    return clamp01(1 - best / sse_line);
}

/* Mean of t and x, and min of x, over groups of the points: group g of m
 * holds the points [g*n/m, (g+1)*n/m). */
static void group(const int64_t *t_ns, const int64_t *x, size_t n, size_t m, double *gt,
                  double *gx, double *gmin)
{
    for (size_t g = 0; g < m; g++) {
        size_t a = g * n / m, b = (g + 1) * n / m;
        double st = 0, sx = 0, mn = (double)x[a];
        for (size_t i = a; i < b; i++) {
            st += (double)(t_ns[i] - t_ns[0]) / NS_PER_HOUR;
            sx += (double)x[i];
            if ((double)x[i] < mn) mn = (double)x[i];
        }
        if (gt) gt[g] = st / (double)(b - a);
        if (gx) gx[g] = sx / (double)(b - a);
        if (gmin) gmin[g] = mn;
    }
}

static double med3(int64_t a, int64_t b, int64_t c)
{
    int64_t lo = a < b ? a : b, hi = a < b ? b : a;
    return (double)(c < lo ? lo : c > hi ? hi : c);
}

/* Growth over the last recent_ns: the rise from the level at its start to
 * the level at its end, each a median of 3 points (centred on point i and
 * on point n - 2, so that a jump at the last point counts one step later
 * and the span between the two centres stays recent_ns or more: a stair
 * whose steps are shorter always has one in it). Sets *rise (bytes),
 * *span_h (hours between the centres) and *noise, the rise's noise: the
 * spread (1.4826 x MAD) of the second differences x[j-h] - 2 x[j] + x[j+h]
 * over the window (at most RECENT_NOISE_PTS centres, every k-th), h a
 * quarter of the span, times sqrt(span / 2h). A line, a ramp or a plateau
 * gives 0 there but near a bend (which, at a quarter of the span, touches
 * few centres); churn that wanders slowly (a random walk on the span's
 * time scale) gives the rise's own spread, faster churn up to 2.4 times
 * it; a stair's jumps show there as noise. False when the points do not
 * reach recent_ns back or hold too few centres (a series younger than the
 * span and 3 steps): no recent part. */
static bool recent_rise(const int64_t *t_ns, const int64_t *x, size_t n, int64_t recent_ns,
                        double *rise, double *span_h, double *noise)
{
    if (recent_ns <= 0 || n < 5) return false;
    size_t e = n - 2, i = e;
    /* The newest point i >= 1 at least recent_ns before point e (times
     * increase; the difference fits: the caller refused spans past int64). */
    while (i > 1 && t_ns[e] - t_ns[i] < recent_ns)
        i--;
    if (t_ns[e] - t_ns[i] < recent_ns) return false;
    size_t span = e - i, h = (span + 2) / 4;
    if (h < 1) h = 1;
    if (n < 2 * h + RECENT_MIN_CENTRES) return false;
    *rise = med3(x[e - 1], x[e], x[e + 1]) - med3(x[i - 1], x[i], x[i + 1]);
    *span_h = (double)(t_ns[e] - t_ns[i]) / NS_PER_HOUR;
    double v[RECENT_NOISE_PTS];
    size_t cnt = n - 2 * h, k = (cnt + RECENT_NOISE_PTS - 1) / RECENT_NOISE_PTS, m = 0;
    for (size_t j = n - 1 - h; m < RECENT_NOISE_PTS && j >= h && j < n; j -= k)
        v[m++] = (double)x[j - h] - 2 * (double)x[j] + (double)x[j + h];
    double centre = median_inplace(v, m);
    for (size_t j = 0; j < m; j++)
        v[j] = fabs(v[j] - centre);
    *noise = 1.4826 * median_inplace(v, m) * sqrt((double)span / (double)(2 * h));
    return true;
}

/* A stair: jumps are rises of at least min_rise (> 0) from one point to
 * the next. Sets *longest, the longest time between two jumps (the
 * stair's longest flat step; 0 with fewer than two: the flat run before
 * the first jump and after the last are not known to be steps, a warm-up
 * after a flat start, a plateau now), and *last, the time of the last
 * jump (INT64_MIN: none). */
static void stair(const int64_t *t_ns, const int64_t *x, size_t n, double min_rise,
                  int64_t *longest, int64_t *last)
{
    size_t prev = 0;
    *longest = 0;
    *last = INT64_MIN;
    if (!(min_rise > 0)) return;
    for (size_t j = 1; j < n; j++) {
        if ((double)x[j] - (double)x[j - 1] < min_rise) continue;
        if (prev > 0 && t_ns[j] - t_ns[prev] > *longest) *longest = t_ns[j] - t_ns[prev];
        prev = j;
    }
    if (prev > 0) *last = t_ns[prev];
}

void cw_leak_score(const int64_t *t_ns, const int64_t *outstanding, size_t n, int64_t committed,
                   int64_t impacting, int64_t recent_ns, cw_leak_score_t *out)
{
    memset(out, 0, sizeof *out);
    if (!t_ns || !outstanding || n < 4) return;
    for (size_t i = 0; i < n; i++)
        if (outstanding[i] < 0 || (i > 0 && t_ns[i] <= t_ns[i - 1])) return;
    /* (Times increase, so t - t[0] cannot overflow unless the span passes
     * 292 years; refuse that too.) */
    if (t_ns[0] < 0 && t_ns[n - 1] > INT64_MAX + t_ns[0]) return;

    /* Theil-Sen over the group means, with its interval. */
    double gt[TS_GROUPS], gx[TS_GROUPS];
    size_t m = n < TS_GROUPS ? n : TS_GROUPS;
    group(t_ns, outstanding, n, m, gt, gx, NULL);
    out->slope = theil_sen(gt, gx, m, &out->slope_lo, &out->slope_hi);

    /* Mann-Kendall over coarser means: neighbouring points of a churning
     * series are correlated (memory held for minutes), which the test
     * assumes they are not; coarser buckets are closer to independent. */
    double mt[MK_GROUPS], mx[MK_GROUPS];
    size_t mm = n < MK_GROUPS ? n : MK_GROUPS;
    group(t_ns, outstanding, n, mm, mt, mx, NULL);
    mann_kendall(mx, mm, &out->mk_z, &out->mk_p);

    /* The floor: the slope of per-interval minima. */
    double ft[FLOOR_GROUPS], fmin[FLOOR_GROUPS];
    size_t fm = n < FLOOR_GROUPS ? n : FLOOR_GROUPS;
    group(t_ns, outstanding, n, fm, ft, NULL, fmin);
    out->floor_slope = theil_sen(ft, fmin, fm, NULL, NULL);

    /* How much of what was committed in the window stayed. */
    out->stay_share = committed > 0 && impacting > 0 ? clamp01((double)impacting / (double)committed)
                                                      : 0;
    out->points = (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n);

    if (!(out->slope > 0)) return; /* not growing: score 0, components kept */

    /* Growth stopped: the rate from the middle third to the last third
     * (the slope between their medians) against the window's slope.
     * (Levels, not a slope fitted on the last third alone: a slope on a few
     * noisy points swings widely, a median of a third of them much less.)
     * The cap takes the rise's noise into account: it bites only when the
     * recent rise, plus two standard errors of it, is under half what the
     * slope predicts. The noise: the residuals' MAD around the line. */
    size_t k = m / RECENT_PART, a = m - 2 * k, b = m - k;
    double dt = median_of(gt + b, k) - median_of(gt + a, k);
    double rise = median_of(gx + b, k) - median_of(gx + a, k);
    double expect = out->slope * dt;
    double res[TS_GROUPS];
    for (size_t i = 0; i < m; i++)
        res[i] = gx[i] - out->slope * gt[i];
    double centre = median_of(res, m);
    for (size_t i = 0; i < m; i++)
        res[i] = fabs(res[i] - centre);
    double sigma = 1.4826 * median_of(res, m);
    double se_rise = 1.2533 * sigma * sqrt(2.0 / (double)k); /* of a difference of medians */
    out->plateau = clamp01(rise / expect);
    double plateau_cap = clamp01(2 * (rise + 2 * se_rise) / expect);

    /* Growth stopped recently: the rise over the recent span against what
     * the window's slope predicts for it, with the plateau cap's factor 2
     * and a wider noise allowance (three times the noise: the span is
     * short, its two levels are single points, and a noisy leak must not
     * flap). The span is the rule's `for` (recent_ns), or a stair's longest
     * flat step in the window when that is longer: a leak that grows in
     * jumps (a heap extended by brk 132 KiB at a time) keeps its rhythm.
     * A jump (a rise between two points of at least a quarter of what the
     * slope predicts for `for`) inside the span is growth too: a stair
     * whose steps are long beside the span rises there by one step only.
     * A plateau as long as the span has no rise left and is capped. */
    double r_rise, r_span, r_noise, recent_cap = 1;
    int64_t span_ns = recent_ns, longest, last_jump;
    out->recent = 1;
    stair(t_ns, outstanding, n, 0.25 * out->slope * (double)recent_ns / NS_PER_HOUR, &longest,
          &last_jump);
    if (longest > span_ns) span_ns = longest;
    if (recent_rise(t_ns, outstanding, n, span_ns, &r_rise, &r_span, &r_noise)) {
        double r_expect = out->slope * r_span;
        out->recent = clamp01(r_rise / r_expect);
        /* (t_ns[n - 2] - span_ns >= t_ns[0]: recent_rise found a point there.) */
        if (last_jump <= t_ns[n - 2] - span_ns)
            recent_cap = clamp01(2 * (r_rise + 3 * r_noise) / r_expect);
    }

    /* A step: how much better one step (two levels) fits the coarse
     * means than a line does. A ramp fits a line; a one-off step, or a
     * warm-up and its plateau, fit two levels; noise fits both alike. */
    out->step_fit = step_fit(mt, mx, mm);

    /* The combination (docs/ALERTS.md, "The leak score"). */
    double trend = clamp01((out->mk_z - 1.5) / 2);
    double conf = clamp01(2 * out->slope_lo / out->slope);
    double growth = trend * (0.5 + 0.5 * conf);
    double floor_f = clamp01(out->floor_slope / out->slope);
    double persist = 0.3 + 0.7 * (floor_f > out->stay_share ? floor_f : out->stay_share);
    double step_cap = clamp01((0.8 - out->step_fit) / 0.3);
    out->cap = plateau_cap < step_cap ? plateau_cap : step_cap;
    if (recent_cap < out->cap) out->cap = recent_cap;
    out->score = clamp01(growth * persist * out->cap);
}

int64_t cw_leak_recent_ns(const cw_alert_rule_t *r)
{
    /* The rule's `for`: a plateau then resolves within `for` of its start,
     * and a stair whose flat steps are shorter than `for` keeps firing.
     * At least a twelfth of the window (a rule without `for` still wants a
     * few points to call a span flat), at most a third (the plateau cap,
     * the last third against the middle one, covers longer spans). */
    int64_t lo = r->window_ns / 12, hi = r->window_ns / 3;
    return r->for_ns < lo ? lo : r->for_ns > hi ? hi : r->for_ns;
}
