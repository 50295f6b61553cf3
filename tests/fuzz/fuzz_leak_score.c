/* fuzz_leak_score.c - libFuzzer target for the leak score and time to
 * limit (service/alerts/leak.c, limit.c): the input is read as committed
 * and impacting, then n points of (time, outstanding) int64 pairs, then an
 * optional recent span (int64 ns). Whatever the values (negative, huge,
 * times going back), the score must be in 0..1, every component finite,
 * the interval around the slope, and the times to limit never negative
 * with the upper one never later. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alerts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_leak_score: %s:%d: %s\n", __FILE__, __LINE__, #c);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int64_t t[CW_LEAK_MAX_POINTS], x[CW_LEAK_MAX_POINTS];
    if (size < 16) return 0;
    int64_t committed, impacting;
    memcpy(&committed, data, 8);
    memcpy(&impacting, data + 8, 8);
    data += 16;
    size -= 16;
    size_t n = size / 16 > CW_LEAK_MAX_POINTS ? CW_LEAK_MAX_POINTS : size / 16;
    /* The first byte of a pair's time decides: a raw time, or a step of
     * the raw value's low 24 bits seconds after the previous one (so the
     * fuzzer reaches valid series often). */
    int64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t raw;
        memcpy(&raw, data + 16 * i, 8);
        memcpy(&x[i], data + 16 * i + 8, 8);
        if (raw & 1) {
            t[i] = raw;
        } else {
            int64_t step = ((raw >> 1) & 0xffffff) * 1000000000LL;
            t[i] = prev > INT64_MAX - step ? INT64_MAX : prev + step;
        }
        prev = t[i];
    }
    /* The recent span: 8 bytes after the pairs when there are (any value,
     * negative too), else 10 minutes (so the committed seeds, written
     * before there was one, still reach the recent cap). */
    int64_t recent = 600000000000LL;
    if (size - 16 * n >= 8) memcpy(&recent, data + 16 * n, 8);
    cw_leak_score_t s;
    cw_leak_score(t, x, n, committed, impacting, recent, &s);
    CHECK(s.score >= 0 && s.score <= 1);
    CHECK(isfinite(s.slope) && isfinite(s.slope_lo) && isfinite(s.slope_hi));
    CHECK(s.slope_lo <= s.slope && s.slope <= s.slope_hi);
    CHECK(isfinite(s.mk_z) && s.mk_p >= 0 && s.mk_p <= 1);
    CHECK(isfinite(s.floor_slope));
    CHECK(s.stay_share >= 0 && s.stay_share <= 1);
    CHECK(s.plateau >= 0 && s.plateau <= 1 && s.step_fit >= 0 && s.step_fit <= 1);
    CHECK(s.recent >= 0 && s.recent <= 1);
    CHECK(s.cap >= 0 && s.cap <= 1);
    uint64_t headroom = (uint64_t)committed;
    cw_time_to_limit_t tl;
    cw_time_to_limit(headroom, s.slope, s.slope_hi, &tl);
    CHECK(tl.median_s >= 0 && tl.upper_s >= 0 && tl.upper_s <= tl.median_s);
    return 0;
}
