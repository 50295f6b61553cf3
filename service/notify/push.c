/* push.c - the profile push (push.h): the push thread, which reads each
 * whole period from the store, writes one pprof profile per active process
 * instance with the export (export.h), and posts it to the profiling
 * store's /ingest through the notifier's HTTP client (notify_http.c),
 * keeping what waits in a bounded queue (push_queue.c).
 *
 * DESIGN. Thread: the push thread owns p->store, p->q and the period
 * bookkeeping; cw_push_start and cw_push_stop (the service's thread) touch
 * only `stopping` and `deadline`, under p->mu. The counters go to the
 * status record (atomics). The core thread is never waited on: the thread
 * reads what the writer stored, through its own read-only handle.
 *
 * Periods: [k P, (k + 1) P) on the data's clock (Unix ns; a replay's
 * trace times). The first is the one holding the end of the data stored
 * before the thread started (a continued database), or the data's first
 * bucket (a new one). A period is built once the stored data reaches its
 * end, or, when the run has ended (a replay's end, cw_store_data_end),
 * up to the end of the data: the last period is then partial, and its
 * `until` is that end (whole seconds: buckets are 1 s). */
#include "commitwatch/push.h"

#include <civetweb.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/export.h"
#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "commitwatch/query.h"
#include "commitwatch/report.h"
#include "commitwatch/store.h"
#include "notify/notify_internal.h"

#define POLL_NS (CW_NS_PER_S)            /* how often the stored data's end is read */
#define TIMEOUT_DEFAULT_NS (10 * CW_NS_PER_S)
#define LABEL_MAX 128                    /* bytes of a label value */

struct cw_pusher {
    /* set at start, read-only after */
    char *db_path, *labels;
    char host[256];
    cw__url_t url;
    int64_t period_ns, timeout_ns;
    cw_status_t *status;
    bool mg_inited;
    cw_thread_t *thread;
    /* under mu */
    cw_mutex_t *mu;
    cw_cond_t *cv;
    bool stopping;
    int64_t deadline; /* mono: when stopping, give up delivering after this */
    /* the push thread's */
    cw_store_t *store;
    cw__pushq_t q;
    bool started;      /* next_from is known */
    int64_t end0;      /* the data's end when the thread started (INT64_MIN: none) */
    int64_t next_from; /* the next period to build starts here */
    bool logged_fail;  /* a failure is being reported (said once, then its end) */
};

/* The sample types as Pyroscope should show them (its sample_type_config:
 * none of them is one of Go's it knows). Each period's figures add up
 * over time: "sum"; not sampled. */
static const char SAMPLE_TYPE_CONFIG[] =
    "{\"impacting_bytes\":{\"units\":\"bytes\",\"aggregation\":\"sum\","
    "\"display-name\":\"impacting_bytes\",\"sampled\":false},"
    "\"transient_bytes\":{\"units\":\"bytes\",\"aggregation\":\"sum\","
    "\"display-name\":\"transient_bytes\",\"sampled\":false},"
    "\"commit_count\":{\"units\":\"objects\",\"aggregation\":\"sum\","
    "\"display-name\":\"commit_count\",\"sampled\":false},"
    "\"commit_bytes\":{\"units\":\"bytes\",\"aggregation\":\"sum\","
    "\"display-name\":\"commit_bytes\",\"sampled\":false}}";

/* ---- checks ---------------------------------------------------------------- */

int cw_push_check_url(const char *url, cw_diag_t *d)
{
    cw__url_t u;
    return cw__url_parse(url, &u, d);
}

static bool key_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

/* A label value's byte Pyroscope's name syntax cannot hold. */
static bool bad_value_char(unsigned char c)
{
    return c <= ' ' || c == 0x7f || c == ',' || c == '{' || c == '}' || c == '=' || c == '"' ||
           c == '\\';
}

int cw_push_check_labels(const char *labels, cw_diag_t *d)
{
    const char *p = labels ? labels : "";
    while (*p) {
        const char *k = p;
        while (key_char(*p, p == k))
            p++;
        size_t kl = (size_t)(p - k);
        if (!kl || *p != '=')
            return cw_diag_set(d, CW_EINVAL,
                               "'%s': expected key=value pairs separated by commas, keys of "
                               "letters, digits and _ (not starting with a digit)",
                               labels);
        if ((kl == 12 && !strncmp(k, "service_name", 12)) || (kl == 4 && !strncmp(k, "host", 4)) ||
            (kl == 7 && !strncmp(k, "process", 7)) || (kl >= 2 && !strncmp(k, "__", 2)))
            return cw_diag_set(d, CW_EINVAL,
                               "'%.*s': commitwatch sets service_name, host and process itself, "
                               "and keys starting with __ are reserved",
                               (int)kl, k);
        const char *v = ++p;
        while (*p && *p != ',' && !bad_value_char((unsigned char)*p))
            p++;
        if (p == v || (*p && *p != ',') || p - v > LABEL_MAX)
            return cw_diag_set(d, CW_EINVAL,
                               "the value of '%.*s': 1 to %d bytes without blanks, commas, "
                               "braces, '=', quotes or backslashes",
                               (int)kl, k, LABEL_MAX);
        if (*p == ',') {
            p++;
            if (!*p) return cw_diag_set(d, CW_EINVAL, "'%s': a comma with no label after it", labels);
        }
    }
    return 0;
}

/* ---- the request ------------------------------------------------------------- */

/* Appends s to b as a label value: bytes the name syntax cannot hold
 * become '_', at most LABEL_MAX bytes, "unknown" when empty. */
static void value(cw_buf_t *b, const char *s)
{
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c && n < LABEL_MAX; c++, n++)
        cw_buf_printf(b, "%c", bad_value_char(*c) ? '_' : (char)*c);
    if (!n) cw_buf_printf(b, "unknown");
}

/* Appends s percent-encoded (everything but RFC 3986's unreserved). */
static void urlenc(cw_buf_t *b, const char *s)
{
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                     (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.' || *c == '~';
        if (plain)
            cw_buf_printf(b, "%c", (char)*c);
        else
            cw_buf_printf(b, "%%%02X", *c);
    }
}

/* "/ingest?name=...&from=...&until=...&format=pprof" for process p's
 * profile of [from_s, until_s). malloc'd, or NULL on ENOMEM. */
static char *ingest_query(const struct cw_pusher *ps, const cw_proc_report_t *p, int64_t from_s,
                          int64_t until_s)
{
    cw_buf_t name = {0}, q = {0};
    cw_buf_printf(&name, "commitwatch.commit{service_name=");
    value(&name, p->name);
    cw_buf_printf(&name, ",host=");
    value(&name, ps->host);
    cw_buf_printf(&name, ",process=");
    value(&name, p->name);
    if (ps->labels && ps->labels[0]) cw_buf_printf(&name, ",%s", ps->labels);
    cw_buf_printf(&name, "}");
    if (!name.failed) {
        cw_buf_printf(&q, "/ingest?name=");
        urlenc(&q, name.p);
        cw_buf_printf(&q, "&from=%" PRId64 "&until=%" PRId64 "&format=pprof", from_s, until_s);
    }
    bool ok = !name.failed && !q.failed;
    free(name.p);
    if (!ok) {
        free(q.p);
        return NULL;
    }
    return q.p;
}

#define BOUNDARY "commitwatch-pprof-7f3a9c1e5b2d4086"

/* The multipart/form-data body: the profile (field "profile") and the
 * sample type configuration (field "sample_type_config"), as Pyroscope's
 * /ingest takes a pprof whose sample types it does not know. The
 * boundary is fixed: a gzip stream holding it by chance is refused (the
 * caller drops that profile). 0, CW_ENOMEM or CW_EINVAL. */
static int multipart(const char *prof, size_t plen, char **out, size_t *len)
{
    static const char head[] =
        "--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"profile\"; "
        "filename=\"profile.pprof\"\r\nContent-Type: application/octet-stream\r\n\r\n";
    static const char mid[] =
        "\r\n--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"sample_type_config\"; "
        "filename=\"sample_type_config.json\"\r\nContent-Type: application/json\r\n\r\n";
    static const char tail[] = "\r\n--" BOUNDARY "--\r\n";
    size_t bl = sizeof BOUNDARY - 1;
    for (size_t i = 0; i + bl <= plen; i++)
        if (prof[i] == '-' && memcmp(prof + i, BOUNDARY, bl) == 0) return CW_EINVAL;
    size_t n = sizeof head - 1 + plen + sizeof mid - 1 + sizeof SAMPLE_TYPE_CONFIG - 1 +
               sizeof tail - 1;
    char *b = malloc(n), *w = b;
    if (!b) return CW_ENOMEM;
    memcpy(w, head, sizeof head - 1);
    w += sizeof head - 1;
    memcpy(w, prof, plen);
    w += plen;
    memcpy(w, mid, sizeof mid - 1);
    w += sizeof mid - 1;
    memcpy(w, SAMPLE_TYPE_CONFIG, sizeof SAMPLE_TYPE_CONFIG - 1);
    w += sizeof SAMPLE_TYPE_CONFIG - 1;
    memcpy(w, tail, sizeof tail - 1);
    *out = b;
    *len = n;
    return 0;
}

/* ---- the thread -------------------------------------------------------------- */

static void publish(struct cw_pusher *p)
{
    cw_status_t *st = p->status;
    if (!st) return;
    atomic_store(&st->push_sent, p->q.sent);
    atomic_store(&st->push_sent_bytes, p->q.sent_bytes);
    atomic_store(&st->push_retries, p->q.retries);
    atomic_store(&st->push_dropped_full, p->q.dropped_full);
    atomic_store(&st->push_dropped_rejected, p->q.rejected);
    atomic_store(&st->push_queued, (uint64_t)p->q.n);
    atomic_store(&st->push_queued_bytes, p->q.bytes);
}

/* Did the process do anything in the window: an event, or figures only
 * events make (memory held through the window, AOFO, is not activity)? */
static bool active(const cw_proc_report_t *pr)
{
    return pr->events || pr->figs.size_bytes || pr->figs.commit_count ||
           pr->figs.types[CW_AIFI].bytes || pr->figs.types[CW_AIFO].bytes ||
           pr->figs.types[CW_AOFI].bytes;
}

/* Queues the profiles of [from, to): one per active process. Logs what
 * fails (a window that cannot be read is skipped: the next ones go on). */
static void build_period(struct cw_pusher *p, int64_t from, int64_t to)
{
    cw_report_t *r = NULL;
    cw_diag_t d = {{0}};
    if (cw_store_report(p->store, from, to, true, &r, &d) != 0) {
        CW_LOGW("profile push: cannot read [%" PRId64 ", %" PRId64 ") from the store: %s; its "
                "profiles are skipped", from, to, d.msg);
        return;
    }
    cw_export_opts_t eo = {.format = CW_EXPORT_PPROF};
    for (uint32_t i = 0; i < r->nprocs; i++) {
        const cw_proc_report_t *pr = &r->procs[i];
        if (!active(pr)) continue;
        char *prof = NULL;
        size_t plen = 0;
        cw__push_item_t it = {0};
        int rc = cw_export_procs(pr, 1, from, to, pr->name, &eo, &prof, &plen, &d);
        if (rc == 0) rc = multipart(prof, plen, &it.body, &it.len);
        free(prof);
        if (rc == 0 && !(it.query = ingest_query(p, pr, from / CW_NS_PER_S, to / CW_NS_PER_S)))
            rc = CW_ENOMEM;
        if (rc == 0) rc = cw__pushq_add(&p->q, &it);
        if (rc != 0) {
            free(it.body);
            free(it.query);
            CW_LOGW("profile push: the profile of %s (instance %" PRIu32 ") in [%" PRId64
                    ", %" PRId64 ") is lost: %s", pr->name ? pr->name : "?", pr->id, from, to,
                    rc == CW_EINVAL ? "it holds the multipart boundary" : cw_strerror(rc));
        }
    }
    cw_report_free(r);
}

/* Reads the stored data's end and queues every period it completes. */
static void poll_store(struct cw_pusher *p)
{
    cw_diag_t d = {{0}};
    if (!p->store && cw_store_open_readonly(p->db_path, &p->store, &d) != 0) {
        p->store = NULL;
        return; /* not there yet: the next poll tries again */
    }
    int64_t start = INT64_MIN, end = INT64_MIN, dend = INT64_MIN;
    bool ended = false;
    if (cw_store_data_span(p->store, &start, &end, &d) != 0 ||
        cw_store_data_end(p->store, &dend, &ended, &d) != 0) {
        CW_LOGW("profile push: cannot read the store: %s", d.msg);
        return;
    }
    if (!p->started) {
        if (end == INT64_MIN) return;
        p->next_from = cw_floor_to(p->end0 != INT64_MIN ? p->end0 : start, p->period_ns);
        p->started = true;
    }
    /* A run that ended: its last stored bucket is where tracking ended. */
    int64_t limit = ended && dend != INT64_MIN && dend < end ? dend : end;
    while (p->next_from + p->period_ns <= limit) {
        build_period(p, p->next_from, p->next_from + p->period_ns);
        p->next_from += p->period_ns;
    }
    /* The end of the run: the last, partial period (not the end of a run
     * this database held before the thread started). */
    if (ended && limit > p->next_from && (p->end0 == INT64_MIN || limit > p->end0)) {
        int64_t to = cw_floor_to(limit + CW_NS_PER_S - 1, CW_NS_PER_S);
        build_period(p, p->next_from, to);
        p->next_from = to;
    }
    if (p->status) atomic_store(&p->status->push_until_ns, p->next_from);
}

/* Sends the oldest profile once. */
static void send_one(struct cw_pusher *p, const cw__push_item_t *it)
{
    int status = 0;
    char detail[300];
    int rc = cw__http_post_raw(&p->url, it->query, "multipart/form-data; boundary=" BOUNDARY,
                               it->body, it->len, p->timeout_ns, &status, detail, sizeof detail);
    cw__push_outcome_t r = cw__push_outcome(rc, status);
    int64_t now = cw_plat_mono_ns();
    cw__pushq_result(&p->q, r, now);
    if (p->status) {
        atomic_store(&p->status->push_last_status, rc ? -1 : status);
        if (r == CW__PUSH_OK) atomic_store(&p->status->push_last_ok_ns, cw_plat_wall_ns());
    }
    if (r == CW__PUSH_OK) {
        if (p->logged_fail) CW_LOGI("profile push: %s:%d accepts profiles again", p->url.host, p->url.port);
        p->logged_fail = false;
    } else if (r == CW__PUSH_REJECTED) {
        CW_LOGW("profile push: %s:%d refused a profile (%s); it is dropped", p->url.host,
                p->url.port, detail);
    } else if (!p->logged_fail || cw_backoff_log_due(&p->q.bo, now)) {
        p->logged_fail = true;
        cw_backoff_log_due(&p->q.bo, now);
        CW_LOGW("profile push: %s; retrying in %" PRId64 " s (%zu profile(s), %" PRIu64
                " bytes waiting)", detail, p->q.bo.delay_ns / CW_NS_PER_S, p->q.n, p->q.bytes);
    }
    publish(p);
}

static void thread_main(void *arg)
{
    struct cw_pusher *p = arg;
    cw_mutex_lock(p->mu);
    for (;;) {
        bool stopping = p->stopping;
        int64_t deadline = p->deadline;
        cw_mutex_unlock(p->mu);

        poll_store(p);
        publish(p);
        const cw__push_item_t *it;
        while ((it = cw__pushq_due(&p->q, cw_plat_mono_ns())) != NULL) {
            if (stopping && cw_plat_mono_ns() >= deadline) break;
            send_one(p, it);
        }
        int64_t now = cw_plat_mono_ns();
        cw_mutex_lock(p->mu);
        /* A stop that came meanwhile: poll once more, for the last period. */
        if (p->stopping != stopping) continue;
        if (p->stopping && (!p->q.n || now >= p->deadline)) break;
        int64_t until = now + POLL_NS, next = cw__pushq_next(&p->q);
        if (p->q.n && next != INT64_MIN && next < until) until = next;
        if (p->stopping && p->deadline < until) until = p->deadline;
        if (until > now) cw_cond_timedwait(p->cv, p->mu, until - now);
    }
    cw_mutex_unlock(p->mu);
    if (p->q.n)
        CW_LOGW("profile push: stopping with %zu profile(s) (%" PRIu64 " bytes) not delivered",
                p->q.n, p->q.bytes);
}

static void pusher_free(struct cw_pusher *p)
{
    cw__pushq_free(&p->q);
    cw_store_close(p->store);
    if (p->mg_inited) mg_exit_library();
    cw_cond_destroy(p->cv);
    cw_mutex_destroy(p->mu);
    free(p->db_path);
    free(p->labels);
    free(p);
}

int cw_push_start(const cw_push_opts_t *o, cw_pusher_t **out, cw_diag_t *d)
{
    *out = NULL;
    if (o->period_ns < CW_NS_PER_S || o->period_ns % CW_NS_PER_S)
        return cw_diag_set(d, CW_EINVAL, "profile_push_period: a whole number of seconds, at "
                                         "least 1 s");
    int err = cw_push_check_labels(o->labels, d);
    if (err) return err;
    struct cw_pusher *p = calloc(1, sizeof *p);
    if (!p) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    cw__pushq_init(&p->q, o->buffer_bytes ? o->buffer_bytes : CW_PUSH_BUFFER_DEFAULT);
    p->period_ns = o->period_ns;
    p->timeout_ns = o->http_timeout_ns > 0 ? o->http_timeout_ns : TIMEOUT_DEFAULT_NS;
    p->status = o->status;
    p->end0 = INT64_MIN;
    if (o->host)
        cw_strlcpy(p->host, o->host, sizeof p->host);
    else
        cw_plat_hostname(p->host, sizeof p->host);
    if ((err = cw__url_parse(o->url, &p->url, d)) != 0) {
        pusher_free(p);
        return err;
    }
    if (!(p->db_path = cw_strdup(o->db_path)) || (o->labels && !(p->labels = cw_strdup(o->labels))) ||
        cw_mutex_create(&p->mu) != 0 || cw_cond_create(&p->cv) != 0) {
        pusher_free(p);
        return cw_diag_set(d, CW_ENOMEM, "out of memory");
    }
    unsigned features = p->url.tls ? MG_FEATURES_TLS : 0;
    unsigned got = mg_init_library(features);
    p->mg_inited = true;
    if (p->url.tls && !(got & MG_FEATURES_TLS) && !mg_check_feature(MG_FEATURES_TLS)) {
        pusher_free(p);
        return cw_diag_set(d, CW_EINVAL,
                           "profile_push_url: https:// needs TLS, which this civetweb cannot "
                           "provide; use http:// on loopback, or a TLS-terminating proxy");
    }
    /* Where the periods start: after what this database held already. */
    cw_store_t *s = NULL;
    cw_diag_t d2 = {{0}};
    if (cw_store_open_readonly(p->db_path, &s, &d2) == 0) {
        int64_t end = INT64_MIN;
        if (cw_store_data_span(s, NULL, &end, &d2) == 0) p->end0 = end;
        p->store = s;
    }
    if (p->status) {
        p->status->push_on = true;
        publish(p);
    }
    if (cw_thread_start(&p->thread, thread_main, p) != 0) {
        pusher_free(p);
        return cw_diag_set(d, CW_EIO, "profile push: cannot start its thread");
    }
    *out = p;
    return 0;
}

void cw_push_stop(cw_pusher_t *p, int64_t timeout_ns)
{
    if (!p) return;
    cw_mutex_lock(p->mu);
    p->stopping = true;
    p->deadline = cw_plat_mono_ns() + timeout_ns;
    cw_cond_signal(p->cv);
    cw_mutex_unlock(p->mu);
    cw_thread_join(p->thread);
    pusher_free(p);
}
