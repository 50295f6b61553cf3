/* reload.c - the configuration in force: the configuration file, the
 * stack-tag rule files (the command line's or the file's) and the alert
 * rule files, read at the start and again on a reload (SIGHUP, POST
 * /api/reload), with what the reload did shown in the status
 * (cw_status_config_t). Core thread. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/svc.h"
#include "commitwatch/log.h"

/* The stack-tag rule files in force: the command line's, else the config's.
 * *files (malloc'd array, borrowed strings) is freed by the caller. */
int cw__svc_rules_from(const cw_service_args_t *a, const cw_config_t *cfg, const char ***files,
                       size_t *n)
{
    const char *const *src = a->nstacktags ? a->stacktags : (const char *const *)cfg->stacktags;
    size_t cnt = a->nstacktags ? a->nstacktags : cfg->nstacktags;
    *files = NULL;
    *n = 0;
    if (!cnt) return 0;
    if (!(*files = malloc(cnt * sizeof **files))) return CW_ENOMEM;
    memcpy(*files, src, cnt * sizeof **files);
    *n = cnt;
    return 0;
}

void cw__svc_apply_log_level(const cw_config_t *cfg)
{
    cw_log_level_t l;
    if (cw_log_level_parse(cfg->log_level, &l) == 0) cw_log_set_level(l);
}

/* Loads the configuration file (if any) over the defaults. */
int cw__svc_load_config(const cw_service_args_t *a, cw_config_t *cfg, cw_diag_t *d)
{
    int rc = cw_config_init(cfg);
    if (rc) return cw_diag_set(d, rc, "out of memory");
    if (a->config_path && (rc = cw_config_load(cfg, a->config_path, stderr, d)) != 0) return rc;
    return 0;
}

/* Re-tags the stored stacks when the tagger's rules differ from the
 * database's (the caller owns the store: the writer is not running). */
int cw__svc_retag(svc_t *s, cw_diag_t *d)
{
    cw_retag_result_t rt;
    int rc = cw_retag_store(s->store, s->tagger, &rt, d);
    if (rc == 0 && rt.ran && rt.stacks > 0)
        CW_LOGI("stack-tag rules %s: re-tagged %" PRIu64 " of %" PRIu64 " stored stacks",
                cw_tagger_rules_hash(s->tagger), rt.changed, rt.stacks);
    return rc;
}

/* Records the rule files in force in the database (meta 'rule_files'),
 * which /api/tags shows: the startup rules, then each reload's. The caller
 * owns the store (the writer is not running). */
int cw__svc_record_rules(svc_t *s, const char *const *files, size_t n, cw_diag_t *d)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(files[i]) + 1;
    char *v = malloc(len), *p = v;
    if (!v) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    *p = '\0';
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s%s", i ? "\n" : "", files[i]);
    int rc = cw_store_meta_set(s->store, CW_RULE_FILES_META_KEY, v, d);
    free(v);
    return rc;
}

/* Fills c from an error message d, naming the file at fault (the one of
 * files[0..n) the message starts with, "FILE:" or "FILE:LINE:") and its
 * line. */
static void config_fault(cw_status_config_t *c, const char *msg, const char *const *files, size_t n)
{
    c->ok = false;
    cw_strlcpy(c->error, msg, sizeof c->error);
    for (size_t i = 0; i < n; i++) {
        size_t len = files[i] ? strlen(files[i]) : 0;
        if (!len || strncmp(msg, files[i], len) != 0 || msg[len] != ':') continue;
        cw_strlcpy(c->file, files[i], sizeof c->file);
        char *end;
        unsigned long line = strtoul(msg + len + 1, &end, 10);
        if (end > msg + len + 1 && *end == ':' && line <= UINT32_MAX) c->line = (uint32_t)line;
        return;
    }
}

/* The alert rules of the configuration: the shipped defaults (unless
 * alert_default_rules = no), then each alert_rules file. At the start
 * (strict false) a bad rule is warned about with file:line and the rest
 * load; a file that cannot be read is logged and skipped; the first such
 * fault goes to *c. On a reload (strict) either is CW_EPARSE (or CW_EIO)
 * with *c saying where, and rs is freed: nothing changes. 0 or CW_ENOMEM. */
int cw__svc_alert_rules_load(const cw_config_t *cfg, cw_alert_rules_t *rs, bool strict,
                             cw_status_config_t *c)
{
    unsigned nbad = 0;
    cw_diag_t d = {{0}};
    int rc;
    memset(rs, 0, sizeof *rs);
    if (cfg->alert_default_rules &&
        (rc = cw_alert_rules_parse(rs, "(default rules)", cw_alert_default_rules(), stderr, &nbad,
                                   &d)) != 0)
        CW_LOGE("alerts: the default rules: %s", d.msg);
    for (size_t i = 0; i < cfg->nalert_rules; i++) {
        unsigned had = nbad;
        d.msg[0] = '\0';
        const char *file = cfg->alert_rules[i];
        rc = cw_alert_rules_load(rs, file, stderr, &nbad, &d);
        if (rc == CW_ENOMEM) return rc;
        if ((rc != 0 || nbad > had) && c->ok) config_fault(c, d.msg, &file, 1);
        if (rc != 0 && !strict) CW_LOGE("alerts: %s: %s; its rules are not loaded", file, d.msg);
        if ((rc != 0 || nbad > had) && strict) {
            cw_alert_rules_free(rs);
            return rc ? rc : CW_EPARSE;
        }
    }
    if (nbad) CW_LOGW("alerts: %u bad rule(s) refused (see above); %zu loaded", nbad, rs->n);
    return 0;
}

/* A reload: the configuration file, the stack-tag rules and the alert
 * rules. Everything is read and checked first; on any error (a bad line,
 * a file that cannot be read) nothing changes: the running configuration
 * and rules stay, and the log, /api/health ("config") and the reload's
 * reply say which file and line (docs/DESIGN.md, "Reload"). The writer,
 * when it runs, is paused (drained and joined) so this thread may use
 * the store; after the end of a replay (still serving) it no longer runs.
 * Returns 0 or an error that stops the service (the writer could not be
 * restarted). */
int cw__svc_reload(svc_t *s)
{
    bool writing = s->writer != NULL;
    cw_config_t cfg;
    const char **files = NULL;
    size_t nfiles = 0;
    cw_tagger_t *nt = NULL;
    cw_alert_rules_t arules = {0};
    cw_diag_t d = {{0}};
    cw_status_config_t c = {.ok = true, .reload = true, .at_ns = cw_plat_wall_ns()};
    const char *path = s->args->config_path;
    int rc = 0;

    atomic_fetch_add(&s->status.config_loads_begun, 1);
    atomic_store(&cw__svc_reload_flag, false);
    CW_LOGI("reload requested: reloading %s", path ? path : "the stack-tag rules");
    if (cw__svc_load_config(s->args, &cfg, &d) != 0) {
        config_fault(&c, d.msg, &path, 1);
        goto refused;
    }
    if ((rc = cw__svc_rules_from(s->args, &cfg, &files, &nfiles)) != 0) goto done;
    if (cw_stacktags_tagger_for(cw_stacktags_platform(s->platform), files, nfiles, &nt, &d) != 0) {
        config_fault(&c, d.msg, files, nfiles);
        goto refused;
    }
    if ((rc = cw__svc_alert_rules_load(&cfg, &arules, true, &c)) == CW_ENOMEM) goto done;
    if (rc != 0) {
        rc = 0;
        goto refused;
    }
    rc = cw__svc_writer_stop(s, &d);
    if (rc != 0) {
        cw_diag_set(s->d, rc, "%s", d.msg);
        goto done;
    }
    cw_tagger_t *old = s->tagger;
    s->tagger = nt;
    if (cw__svc_retag(s, &d) != 0) {
        CW_LOGE("reload: re-tagging failed: %s; keeping the running rules", d.msg);
        s->tagger = old;
        config_fault(&c, d.msg, NULL, 0);
    } else {
        nt = old; /* freed below */
        cw_stacks_clear_tags(s->stacks);
        cw_agg_set_tagger(s->agg, s->tagger);
        if (cw__svc_record_rules(s, files, nfiles, &d) != 0)
            CW_LOGE("reload: recording the rule files for /api/tags failed: %s", d.msg);
        cw__svc_apply_log_level(&cfg);
        cw__svc_alerts_apply(s, &cfg, &arules, NULL);
        CW_LOGI("reload: done");
    }
    if (writing && (rc = cw__svc_writer_start(s)) != 0)
        cw_diag_set(s->d, rc, "cannot restart the store writer: %s", cw_strerror(rc));
    goto done;
refused:
    CW_LOGE("reload: %s; keeping the running configuration and rules (nothing changed)", c.error);
done:
    if (rc == CW_ENOMEM) config_fault(&c, "out of memory reading the configuration", NULL, 0);
    cw_status_config_set(&s->status, &c);
    cw_alert_rules_free(&arules);
    cw_tagger_destroy(nt);
    free(files);
    cw_config_free(&cfg);
    return rc;
}
