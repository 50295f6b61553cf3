/* alerting.c - the alert engine and its notifier as the service runs
 * them: the commit limit the alerts forecast against, starting them over
 * the rules in force, new rules on a reload, stopping them. Core thread
 * (the engine and the notifier run threads of their own). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/svc.h"
#include "commitwatch/log.h"

/* Records whose commit limit the alerts forecast against for this data
 * (CW_COMMIT_LIMIT_META_KEY): this machine's for a live source, a
 * recorded input's own (a trace header's commit_limit), or none, with one
 * log line saying why. The caller owns the store. */
int cw__svc_record_commit_limit(svc_t *s, const cw_source_ops_t *ops, void *src, cw_diag_t *d)
{
    char v[32] = "live";
    uint64_t bytes = 0;
    const char *why = "";
    if (ops->commit_limit && ops->commit_limit(src, &bytes, &why) == 0) {
        snprintf(v, sizeof v, "%" PRIu64, bytes);
        CW_LOGI("alerts: time to limit is computed against the recorded machine's commit limit, "
                "%" PRIu64 " bytes (%.1f GiB), never this machine's",
                bytes, (double)bytes / (1 << 30));
    } else if (ops->commit_limit) {
        cw_strlcpy(v, "none", sizeof v);
        CW_LOGI("alerts: %s, and this machine's limit says nothing of the recorded one: rules "
                "against the machine's or a process's commit limit (the default commit_limit) "
                "are not evaluated for this input",
                why);
    }
    return cw_store_meta_set(s->store, CW_COMMIT_LIMIT_META_KEY, v, d);
}

/* The base of the alerts' links: external_url, else http://LISTEN. */
static void external_url(const cw_config_t *cfg, const cw_service_args_t *a, char *buf, size_t n)
{
    if (cfg->external_url) {
        cw_strlcpy(buf, cfg->external_url, n);
        size_t len = strlen(buf);
        while (len > 0 && buf[len - 1] == '/')
            buf[--len] = '\0';
        return;
    }
    snprintf(buf, n, "http://%s",
             a->listen     ? a->listen
             : cfg->listen ? cfg->listen
                           : "127.0.0.1:8470");
}

/* Starts the alert engine over rules (its own handle on db_path), and
 * first the notifier it hands notices to. Nothing when there are no
 * rules. At the service's start (d given) bad delivery settings (a URL,
 * alert_exec, alert_log: the notifier refuses them, naming the key) stop
 * the start: CW_EINVAL with d set (docs/ALERTS.md, "Delivery"). Any other
 * failure, and any on a reload (d NULL), is logged and the service runs
 * without alerts (or without their delivery). The stages' options are
 * configuration keys copied one a line, alike to start_push's (service.c)
 * in form only. */
static int alerts_start(svc_t *s, const cw_config_t *cfg, const cw_alert_rules_t *rules,
                        cw_diag_t *startd)
{
    cw_diag_t d = {{0}};
    char url[512];
    if (!rules->n) return 0;
    external_url(cfg, s->args, url, sizeof url);
    cw_notify_opts_t no = {0};
    no.db_path = s->db_path;
    no.alertmanager_url = cfg->alertmanager_url;
    no.webhook_url = cfg->webhook_url;
    no.exec_path = cfg->alert_exec;
    no.exec_timeout_ns = cfg->alert_exec_timeout_ns;
    no.log = cfg->alert_log;
    no.repeat_ns = cfg->alert_repeat_ns;
    no.rate_limit = cfg->alert_rate_limit;
    no.retries = (unsigned)cfg->alert_retries;
    no.resend_ns = cfg->alert_resend_ns;
    no.interval_ns = cfg->alert_interval_ns;
    no.external_url = url;
    int nrc;
    if (!s->notifier && (nrc = cw_notifier_start(&no, &s->notifier, &d)) != 0) {
        s->notifier = NULL;
        if (startd && nrc == CW_EINVAL) return cw_diag_set(startd, nrc, "%s", d.msg);
        CW_LOGE("alerts: %s; alerts are evaluated and stored but not delivered", d.msg);
    }
    cw_alert_engine_opts_t eo = {0};
    eo.db_path = s->db_path;
    eo.interval_ns = cfg->alert_interval_ns;
    eo.step_ns = cfg->alert_step_ns;
    eo.on_notices = s->notifier ? cw_notifier_submit : NULL;
    eo.ctx = s->notifier;
    eo.generator_url = url;
    eo.resend_ns = cfg->alert_resend_ns;
    eo.on_fire = s->heaps ? cw__svc_heap_on_fire : NULL;
    eo.fire_ctx = s->heaps;
    if (cw_alert_engine_start(&eo, rules, &s->alerts, &d) != 0) {
        CW_LOGE("alerts: cannot start the alert engine: %s; alerts are off", d.msg);
        s->alerts = NULL;
    } else {
        int64_t iv = cfg->alert_interval_ns > 0 ? cfg->alert_interval_ns : (10 * CW_NS_PER_S);
        CW_LOGI("alerts: %zu rule(s) in force, evaluated every %" PRId64 " ms", rules->n,
                iv / 1000000);
    }
    return 0;
}

/* The alert rules in force: at start (startd given: bad delivery settings
 * stop it, alerts_start), and on each reload (startd NULL; the running
 * engine keeps the state of unchanged rules; the first rules of a reload
 * start it). rules are borrowed. Logs what fails. */
int cw__svc_alerts_apply(svc_t *s, const cw_config_t *cfg, const cw_alert_rules_t *rules,
                         cw_diag_t *startd)
{
    cw_diag_t d = {{0}};
    int rc = 0;
    if (!s->alerts)
        rc = alerts_start(s, cfg, rules, startd);
    else if (cw_alert_engine_set_rules(s->alerts, rules, &d) != 0)
        CW_LOGE("alerts: new rules: %s; keeping the running ones", d.msg);
    return rc;
}

void cw__svc_alerts_stop(svc_t *s)
{
    cw_alert_engine_stop(s->alerts);
    s->alerts = NULL;
    cw_notifier_stop(s->notifier, 5000000000LL);
    s->notifier = NULL;
}
