/* notify.c - the notifier (notify.h): a queue and a thread per channel
 * (Alertmanager, webhook, exec, system log), the rate limit and repeat
 * interval, retries with backoff, and the record of every attempt.
 *
 * DESIGN. Threads: the engine thread calls cw_notifier_submit(), which
 * copies the notices into each channel's queue under the notifier's one
 * mutex and returns: it never waits on a receiver. Each channel's thread
 * takes one submitted batch at a time and delivers it; a slow receiver
 * (an exec hook running into its timeout, an HTTP receiver retrying) only
 * delays its own channel. A queue holds at most QUEUE_MAX notices; a
 * submit past that drops the oldest batches (recorded as "dropped",
 * "queue full"). The attempts are recorded on the notifier's own
 * read-write store handle (opened on opts.db_path, shared by the channel
 * threads under db_mu), one transaction per delivered batch.
 *
 * Rows (table notifications): one per attempt, i.e. one per HTTP request
 * (Alertmanager: one per POST of up to AM_BATCH alerts, with the series
 * when it holds one; the webhook: one notice per POST), exec run or log
 * write; one per notice (per POST for Alertmanager) the rate limit or a
 * full queue dropped; one per notice a stop abandoned. result: "ok",
 * "error" (detail: "HTTP 500: ...", "timeout", "exit status 3", ...) or
 * "dropped" (detail: "rate limit", "queue full", "stopped"). */
#include <civetweb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alertdb.h"
#include "commitwatch/common.h"
#include "commitwatch/log.h"
#include "notify/notify_internal.h"

#define QUEUE_MAX 10000 /* notices per channel queue */
#define AM_BATCH 256    /* alerts per POST: Prometheus notifier/manager.go DefaultMaxBatchSize */
#define BACKOFF_MAX_NS 60000000000LL

enum { CH_AM, CH_WEBHOOK, CH_EXEC, CH_LOG, CH__N };
static const char *const channel_names[CH__N] = {"alertmanager", "webhook", "exec", "log"};

typedef struct batch {
    cw_alert_notice_t **v;
    size_t n;
    const char *why; /* for a dropped batch: why */
    struct batch *next;
} batch_t;

typedef struct channel {
    struct cw_notifier *nf;
    int kind;
    bool on;
    cw_thread_t *thread;
    batch_t *head, *tail; /* under nf->mu */
    batch_t *dropped;     /* batches a full queue dropped: recorded by the thread */
    size_t queued;        /* notices in head..tail */
    /* The channel thread's own: */
    cw__bucket_t bucket;
    cw__repeat_t repeat;
    uint64_t limited; /* notices dropped in the current burst; 0 when none */
    bool failing;     /* the log channel's last write failed (said once) */
    cw__url_t url;
    cw_plat_alert_log_t *log;
    cw_notify_row_t *rows;
    size_t nrows, caprows;
} channel_t;

struct cw_notifier {
    cw_notify_opts_t o; /* strings owned (below) */
    char *db_path, *am_url, *webhook_url, *exec_path, *log, *external_url, *log_root;
    int64_t valid_ns; /* Alertmanager's lease of a firing alert */
    cw_mutex_t *mu;
    cw_cond_t *cv;
    bool stopping;
    int64_t deadline; /* when stopping: give up delivering after this (mono) */
    cw_mutex_t *db_mu;
    cw_store_t *db;
    bool db_warned;
    bool mg_inited;
    channel_t ch[CH__N];
};

/* ---- recording -------------------------------------------------------------- */

static void row(channel_t *c, const cw_alert_notice_t *a, int attempt, const char *result,
                const char *detail)
{
    if (!c->nf->db) return;
    if (CW_RESERVE(c->rows, c->caprows, c->nrows + 1))
        return; /* the row is lost, the delivery is not */
    cw_notify_row_t *r = &c->rows[c->nrows];
    memset(r, 0, sizeof *r);
    r->ts_ns = cw_plat_wall_ns();
    r->channel = cw_strdup(channel_names[c->kind]);
    r->series = a ? (int64_t)a->series_id : 0;
    r->transition = a ? (int64_t)a->transition_id : 0;
    r->attempt = attempt;
    r->result = cw_strdup(result);
    r->detail = detail && detail[0] ? cw_strdup(detail) : NULL;
    c->nrows++;
}

static void flush_rows(channel_t *c)
{
    struct cw_notifier *nf = c->nf;
    if (!c->nrows) return;
    cw_diag_t d = {{0}};
    cw_mutex_lock(nf->db_mu);
    int err = cw_store_notify_add(nf->db, c->rows, c->nrows, &d);
    if (err && !nf->db_warned) CW_LOGW("notify: recording attempts failed: %s", d.msg);
    nf->db_warned = err != 0;
    cw_mutex_unlock(nf->db_mu);
    for (size_t i = 0; i < c->nrows; i++)
        cw_notify_row_clear(&c->rows[i]);
    c->nrows = 0;
}

/* ---- waiting ---------------------------------------------------------------- */

/* Past the stop deadline? */
static bool abandoned(struct cw_notifier *nf)
{
    cw_mutex_lock(nf->mu);
    bool late = nf->stopping && cw_plat_mono_ns() >= nf->deadline;
    cw_mutex_unlock(nf->mu);
    return late;
}

/* Sleeps ns, cut short by the stop deadline. false when abandoned. */
static bool backoff(struct cw_notifier *nf, int64_t ns)
{
    int64_t until = cw_plat_mono_ns() + ns;
    cw_mutex_lock(nf->mu);
    for (;;) {
        int64_t now = cw_plat_mono_ns(), end = until;
        if (nf->stopping && nf->deadline < end) end = nf->deadline;
        if (now >= end) break;
        cw_cond_timedwait(nf->cv, nf->mu, end - now);
    }
    bool ok = !(nf->stopping && cw_plat_mono_ns() >= nf->deadline);
    cw_mutex_unlock(nf->mu);
    return ok;
}

/* The response timeout: the configured one, cut to what a stop leaves. */
static int64_t http_timeout(struct cw_notifier *nf)
{
    int64_t t = nf->o.http_timeout_ns;
    cw_mutex_lock(nf->mu);
    if (nf->stopping) {
        int64_t left = nf->deadline - cw_plat_mono_ns();
        if (left < t) t = left > 100000000 ? left : 100000000;
    }
    cw_mutex_unlock(nf->mu);
    return t;
}

/* ---- limits ------------------------------------------------------------------ */

/* A token for one delivery; without one, records the drop (a, or n
 * alerts of a POST) and says so in the log once per burst. */
static bool admit(channel_t *c, const cw_alert_notice_t *a, size_t n)
{
    if (cw__bucket_take(&c->bucket, cw_plat_mono_ns())) {
        if (c->limited)
            CW_LOGI("notify: %s: rate limit: %llu notices dropped in the last burst",
                    channel_names[c->kind], (unsigned long long)c->limited);
        c->limited = 0;
        return true;
    }
    if (!c->limited)
        CW_LOGW("notify: %s: rate limit of %llu a minute reached; dropping notices until it "
                "refills (alert_rate_limit)",
                channel_names[c->kind], (unsigned long long)c->bucket.per_min);
    c->limited += n;
    char detail[64];
    snprintf(detail, sizeof detail, n > 1 ? "rate limit (%zu alerts)" : "rate limit", n);
    row(c, a, 0, "dropped", detail);
    return false;
}

/* ---- channels ----------------------------------------------------------------- */

/* POSTs body with retries and backoff; a row per attempt. Retries what
 * may succeed later: no connection, no response, 5xx, 429. */
static void post(channel_t *c, const char *suffix, const char *body, const cw_alert_notice_t *a,
                 size_t nalerts)
{
    struct cw_notifier *nf = c->nf;
    unsigned tries = nf->o.retries ? nf->o.retries : 1;
    int64_t delay = nf->o.backoff_ns;
    for (unsigned k = 1; k <= tries; k++) {
        int status;
        char detail[320];
        int rc =
            cw__http_post(&c->url, suffix, body, http_timeout(nf), &status, detail, sizeof detail);
        bool ok = rc == 0 && status >= 200 && status <= 299;
        if (ok && nalerts > 1) snprintf(detail, sizeof detail, "%zu alerts", nalerts);
        row(c, a, (int)k, ok ? "ok" : "error", detail);
        if (ok) return;
        if (rc == 0 && status < 500 && status != 429) {
            CW_LOGW("notify: %s refused a notification: %s", channel_names[c->kind], detail);
            return;
        }
        if (k == tries) {
            CW_LOGW("notify: %s: giving up after %u attempts: %s", channel_names[c->kind], tries,
                    detail);
            return;
        }
        if (!backoff(nf, delay)) {
            row(c, a, 0, "dropped", "stopped");
            return;
        }
        delay = delay * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : delay * 2;
    }
}

static void deliver_am(channel_t *c, batch_t *b)
{
    for (size_t i = 0; i < b->n; i += AM_BATCH) {
        size_t n = b->n - i < AM_BATCH ? b->n - i : AM_BATCH;
        const cw_alert_notice_t *one = n == 1 ? b->v[i] : NULL;
        if (abandoned(c->nf)) {
            row(c, one, 0, "dropped", "stopped");
            continue;
        }
        if (!admit(c, one, n)) continue;
        char *body = cw__notify_am_body(b->v + i, n, c->nf->valid_ns);
        if (!body) {
            row(c, one, 0, "error", "out of memory");
            continue;
        }
        post(c, "/api/v2/alerts", body, one, n);
        free(body);
    }
}

static void deliver_one(channel_t *c, const cw_alert_notice_t *a)
{
    struct cw_notifier *nf = c->nf;
    char *body = NULL;
    char detail[CW_PATH_MAX + 64];
    cw_diag_t d = {{0}};
    switch (c->kind) {
    case CH_WEBHOOK:
        if (!(body = cw__notify_webhook_body(a, nf->external_url))) break;
        post(c, "", body, a, 1);
        free(body);
        return;
    case CH_EXEC: {
        if (!(body = cw__notify_alert_json(a))) break;
        int code;
        bool timed_out;
        int rc = cw_plat_run(nf->exec_path, body, strlen(body), nf->o.exec_timeout_ns, &code,
                             &timed_out, &d);
        free(body);
        if (rc) {
            row(c, a, 1, "error", d.msg);
            CW_LOGW("notify: exec: %s", d.msg);
        } else if (timed_out) {
            row(c, a, 1, "error", "timeout");
            CW_LOGW("notify: exec: %s was killed after alert_exec_timeout", nf->exec_path);
        } else if (code != 0) {
            snprintf(detail, sizeof detail, code < 0 ? "killed by signal %d" : "exit status %d",
                     code < 0 ? -code : code);
            row(c, a, 1, "error", detail);
        } else {
            row(c, a, 1, "ok", NULL);
        }
        return;
    }
    case CH_LOG: {
        cw__notify_log_entry_t e;
        cw__notify_log_entry(a, &e);
        int rc = cw_plat_alert_log_write(c->log, &e.e, &d);
        row(c, a, 1, rc ? "error" : "ok", rc ? d.msg : NULL);
        if (rc && !c->failing) CW_LOGW("notify: log: %s (said once until it works)", d.msg);
        c->failing = rc != 0;
        return;
    }
    default:
        return;
    }
    row(c, a, 1, "error", "out of memory");
}

static void deliver(channel_t *c, batch_t *b)
{
    if (c->kind == CH_AM) {
        deliver_am(c, b);
        return;
    }
    for (size_t i = 0; i < b->n; i++) {
        const cw_alert_notice_t *a = b->v[i];
        if (abandoned(c->nf)) {
            row(c, a, 0, "dropped", "stopped");
            continue;
        }
        /* Alertmanager deduplicates re-sends itself; the others get a
         * firing alert again only every repeat interval. */
        if (!cw__repeat_due(&c->repeat, a, c->nf->o.repeat_ns)) continue;
        if (!admit(c, a, 1)) continue;
        deliver_one(c, a);
        if (c->nrows >= 256) flush_rows(c);
    }
}

static void batch_free(batch_t *b)
{
    for (size_t i = 0; i < b->n; i++)
        cw_alert_notice_free(b->v[i]);
    free(b->v);
    free(b);
}

/* Frees a chain of batches linked by next (NULL: none). */
static void batches_free(batch_t *b)
{
    while (b) {
        batch_t *next = b->next;
        batch_free(b);
        b = next;
    }
}

static void channel_main(void *arg)
{
    channel_t *c = arg;
    struct cw_notifier *nf = c->nf;
    cw_mutex_lock(nf->mu);
    for (;;) {
        while (!c->head && !c->dropped && !nf->stopping)
            cw_cond_wait(nf->cv, nf->mu);
        batch_t *dropped = c->dropped, *b = c->head;
        c->dropped = NULL;
        if (b) {
            c->head = b->next;
            if (!c->head) c->tail = NULL;
            c->queued -= b->n;
        }
        if (!b && !dropped) break; /* stopping, nothing left */
        cw_mutex_unlock(nf->mu);
        while (dropped) {
            batch_t *next = dropped->next;
            for (size_t i = 0; i < dropped->n; i++)
                row(c, dropped->v[i], 0, "dropped", dropped->why);
            batch_free(dropped);
            dropped = next;
        }
        if (b) {
            deliver(c, b);
            batch_free(b);
        }
        flush_rows(c);
        cw_mutex_lock(nf->mu);
    }
    cw_mutex_unlock(nf->mu);
}

/* ---- the API -------------------------------------------------------------------- */

/* The strings the notifier owns (copies of the options'). */
static const size_t notifier_strings[] = {
    offsetof(struct cw_notifier, db_path),     offsetof(struct cw_notifier, am_url),
    offsetof(struct cw_notifier, webhook_url), offsetof(struct cw_notifier, exec_path),
    offsetof(struct cw_notifier, log),         offsetof(struct cw_notifier, external_url),
    offsetof(struct cw_notifier, log_root)};

static void free_notifier(struct cw_notifier *nf)
{
    for (int k = 0; k < CH__N; k++) {
        channel_t *c = &nf->ch[k];
        batches_free(c->head);
        batches_free(c->dropped);
        cw__repeat_free(&c->repeat);
        cw_plat_alert_log_close(c->log);
        for (size_t i = 0; i < c->nrows; i++)
            cw_notify_row_clear(&c->rows[i]);
        free(c->rows);
    }
    cw_store_close(nf->db);
    if (nf->mg_inited) mg_exit_library();
    cw_cond_destroy(nf->cv);
    cw_mutex_destroy(nf->mu);
    cw_mutex_destroy(nf->db_mu);
    cw_free_members(nf, notifier_strings, CW_ARRAY_LEN(notifier_strings));
    free(nf);
}

/* A copy of s into *dst (NULL stays NULL); false when out of memory. */
static bool dup_into(char **dst, const char *s)
{
    *dst = s ? cw_strdup(s) : NULL;
    return !s || *dst;
}

/* d's message prefixed with the configuration key it is about; err. */
static int name_key(cw_diag_t *d, int err, const char *key)
{
    char why[sizeof d->msg];
    cw_strlcpy(why, d->msg, sizeof why);
    return cw_diag_set(d, err, "%s = %s", key, why);
}

/* Checks the channels' settings and opens what they need. */
static int open_channels(struct cw_notifier *nf, cw_diag_t *d)
{
    int err;
    unsigned features = 0;
    if (nf->am_url) {
        nf->ch[CH_AM].on = true;
        if ((err = cw__url_parse(nf->am_url, &nf->ch[CH_AM].url, d)))
            return name_key(d, err, "alertmanager_url");
        if (nf->ch[CH_AM].url.tls) features |= MG_FEATURES_TLS;
    }
    if (nf->webhook_url) {
        nf->ch[CH_WEBHOOK].on = true;
        if ((err = cw__url_parse(nf->webhook_url, &nf->ch[CH_WEBHOOK].url, d)))
            return name_key(d, err, "webhook_url");
        if (nf->ch[CH_WEBHOOK].url.tls) features |= MG_FEATURES_TLS;
    }
    if (nf->am_url || nf->webhook_url) {
        unsigned got = mg_init_library(features);
        nf->mg_inited = true;
        if ((features & MG_FEATURES_TLS) && !(got & MG_FEATURES_TLS) &&
            !mg_check_feature(MG_FEATURES_TLS))
            return cw_diag_set(d, CW_EINVAL,
                               "an https:// alert URL needs TLS, which this civetweb cannot "
                               "provide (it was built without it, or libssl cannot be loaded); "
                               "use http:// on loopback, or a TLS-terminating proxy");
        if (features & MG_FEATURES_TLS)
            CW_LOGW("notify: https receivers: civetweb's client does not verify the server's "
                    "certificate");
    }
    if (nf->exec_path) {
        nf->ch[CH_EXEC].on = true;
        if (!cw_plat_is_file(nf->exec_path))
            return cw_diag_set(d, CW_EINVAL,
                               "alert_exec = %s: not a file (give the program's full path; it "
                               "is run without a shell)",
                               nf->exec_path);
    }
    if (!nf->log || strcmp(nf->log, "no") != 0) {
        nf->ch[CH_LOG].on = true;
        const char *kind = nf->log ? nf->log : "auto";
        if ((err = cw_plat_alert_log_open(kind, nf->log_root, &nf->ch[CH_LOG].log, d))) return err;
    }
    return 0;
}

int cw_notifier_start(const cw_notify_opts_t *o, cw_notifier_t **out, cw_diag_t *d)
{
    *out = NULL;
    struct cw_notifier *nf = calloc(1, sizeof *nf);
    if (!nf) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    nf->o = *o;
    int err = CW_ENOMEM;
    if (!dup_into(&nf->db_path, o->db_path) || !dup_into(&nf->am_url, o->alertmanager_url) ||
        !dup_into(&nf->webhook_url, o->webhook_url) || !dup_into(&nf->exec_path, o->exec_path) ||
        !dup_into(&nf->log, o->log) || !dup_into(&nf->external_url, o->external_url) ||
        !dup_into(&nf->log_root, o->log_root) || cw_mutex_create(&nf->mu) ||
        cw_mutex_create(&nf->db_mu) || cw_cond_create(&nf->cv)) {
        cw_diag_set(d, CW_ENOMEM, "out of memory");
        goto fail;
    }
    if (nf->o.resend_ns <= 0) nf->o.resend_ns = 60 * CW_NS_PER_S;
    if (nf->o.interval_ns <= 0) nf->o.interval_ns = 10 * CW_NS_PER_S;
    if (nf->o.backoff_ns <= 0) nf->o.backoff_ns = CW_NS_PER_S;
    if (nf->o.http_timeout_ns <= 0) nf->o.http_timeout_ns = 10 * CW_NS_PER_S;
    if (nf->o.exec_timeout_ns <= 0) nf->o.exec_timeout_ns = 10 * CW_NS_PER_S;
    /* Prometheus (rules/alerting.go, sendAlerts): ValidUntil = ts + 4 x
     * max(evaluation interval, resend delay), "allow for two Eval or
     * Alertmanager send failures"; endsAt = ValidUntil while firing. */
    nf->valid_ns = 4 * (nf->o.resend_ns > nf->o.interval_ns ? nf->o.resend_ns : nf->o.interval_ns);
    if ((err = open_channels(nf, d))) goto fail;
    /* Beside the service, a side handle (the writer's tier state and
     * retention are its own); a database that does not exist yet (the
     * cw_notify_send tool) is created. */
    if (nf->db_path) {
        err = cw_store_open_side(nf->db_path, &nf->db, d);
        if (err == CW_ENOENT) err = cw_store_open(nf->db_path, NULL, &nf->db, d);
        if (err) goto fail;
    }
    int64_t now = cw_plat_mono_ns();
    for (int k = 0; k < CH__N; k++) {
        channel_t *c = &nf->ch[k];
        c->nf = nf;
        c->kind = k;
        cw__bucket_init(&c->bucket, o->rate_limit, now);
    }
    for (int k = 0; k < CH__N; k++) {
        channel_t *c = &nf->ch[k];
        if (c->on && cw_thread_start(&c->thread, channel_main, c)) {
            err = cw_diag_set(d, CW_ENOMEM, "cannot start the notifier's %s thread",
                              channel_names[k]);
            cw_notifier_stop(nf, 0);
            return err;
        }
    }
    *out = nf;
    return 0;
fail:
    free_notifier(nf);
    return err;
}

void cw_notifier_submit(void *notifier, const cw_alert_notice_t *v, size_t n)
{
    struct cw_notifier *nf = notifier;
    if (!nf || !n) return;
    for (int k = 0; k < CH__N; k++) {
        channel_t *c = &nf->ch[k];
        if (!c->on) continue;
        batch_t *b = calloc(1, sizeof *b);
        if (b) b->v = calloc(n, sizeof *b->v);
        if (!b || !b->v) {
            free(b);
            CW_LOGW("notify: out of memory: %zu notices not delivered to %s", n, channel_names[k]);
            continue;
        }
        for (size_t i = 0; i < n; i++)
            if ((b->v[b->n] = cw_alert_notice_copy(&v[i]))) b->n++;
        cw_mutex_lock(nf->mu);
        if (nf->stopping) {
            cw_mutex_unlock(nf->mu);
            batch_free(b);
            continue;
        }
        if (c->tail)
            c->tail->next = b;
        else
            c->head = b;
        c->tail = b;
        c->queued += b->n;
        /* Full: the oldest batches go, recorded by the channel's thread. */
        while (c->queued > QUEUE_MAX && c->head != b) {
            batch_t *old = c->head;
            c->head = old->next;
            c->queued -= old->n;
            old->why = "queue full";
            old->next = c->dropped;
            c->dropped = old;
        }
        cw_mutex_unlock(nf->mu);
    }
    cw_mutex_lock(nf->mu);
    cw_cond_broadcast(nf->cv);
    cw_mutex_unlock(nf->mu);
}

void cw_notifier_stop(cw_notifier_t *nf, int64_t timeout_ns)
{
    if (!nf) return;
    cw_mutex_lock(nf->mu);
    nf->stopping = true;
    nf->deadline = cw_plat_mono_ns() + (timeout_ns > 0 ? timeout_ns : 0);
    cw_cond_broadcast(nf->cv);
    cw_mutex_unlock(nf->mu);
    for (int k = 0; k < CH__N; k++)
        cw_thread_join(nf->ch[k].thread);
    free_notifier(nf);
}
