/* cw_alert_fill - writes alert state into a commitwatch database, as the
 * alert engine would, for the API's end-to-end tests.
 *
 *     cw_alert_fill DB FILE.json
 *
 * FILE.json: {"rules": [...] (stored as is: cw_store_alert_rules_set),
 * "evaluations": [{"eval_ns": N, "series": [ROW...], "transitions":
 * [{"row": I, ...}]}...] (each one cw_store_alert_save, on a side handle
 * opened beside the running service's writer; a row with "id" updates
 * it, "ref": K re-uses the id given to row K of an earlier evaluation),
 * "silences": [...]}. Prints the ids it assigned as JSON: {"series":
 * [ids of every row, in order], "transitions": [...], "silences": [...]}.
 * Exit 0, or 1 with a message. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alertdb.h"
#include "commitwatch/event.h"
#include "commitwatch/store.h"

static int64_t num_i64(const cJSON *o, const char *k, int64_t dflt)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? (int64_t)x->valuedouble : dflt;
}

static double num_d(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(x) && strcmp(x->valuestring, "inf") == 0) return INFINITY;
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* Texts printed from JSON members, freed at exit. */
static char *printed[4096];
static size_t nprinted;

static char *str(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(x)) return x->valuestring;
    if ((cJSON_IsObject(x) || cJSON_IsArray(x)) && nprinted < 4096)
        return printed[nprinted++] = cJSON_PrintUnformatted(x);
    return NULL;
}

static void free_printed(void)
{
    while (nprinted)
        free(printed[--nprinted]);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

int main(int argc, char **argv)
{
    cw_diag_t d = {{0}};
    cw_store_t *s = NULL;
    atexit(free_printed);
    if (argc != 3) {
        fprintf(stderr, "usage: cw_alert_fill DB FILE.json\n");
        return 1;
    }
    char *text = read_file(argv[2]);
    cJSON *j = text ? cJSON_Parse(text) : NULL, *it;
    if (!j) {
        fprintf(stderr, "cw_alert_fill: %s: cannot read it as JSON\n", argv[2]);
        return 1;
    }
    if (cw_store_open_side(argv[1], &s, &d)) {
        fprintf(stderr, "cw_alert_fill: %s\n", d.msg);
        return 1;
    }
    cJSON *out = cJSON_CreateObject();
    cJSON *oser = cJSON_AddArrayToObject(out, "series"), *otr = cJSON_AddArrayToObject(out, "transitions");
    cJSON *osil = cJSON_AddArrayToObject(out, "silences");
    int64_t ids[1024];
    size_t nids = 0;
    const cJSON *rules = cJSON_GetObjectItemCaseSensitive(j, "rules");
    if (rules) {
        char *rj = cJSON_PrintUnformatted(rules);
        if (cw_store_alert_rules_set(s, rj, &d)) goto fail;
        free(rj);
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "evaluations"))
    {
        const cJSON *ser = cJSON_GetObjectItemCaseSensitive(it, "series");
        const cJSON *trs = cJSON_GetObjectItemCaseSensitive(it, "transitions"), *x;
        size_t nr = (size_t)cJSON_GetArraySize(ser), nt = (size_t)cJSON_GetArraySize(trs), i = 0;
        cw_alert_row_t *rows = calloc(nr + 1, sizeof *rows);
        cw_alert_tr_row_t *tr = calloc(nt + 1, sizeof *tr);
        size_t *trow = calloc(nt + 1, sizeof *trow);
        cJSON_ArrayForEach(x, ser)
        {
            cw_alert_row_t *r = &rows[i++];
            int64_t ref = num_i64(x, "ref", -1);
            r->id = ref >= 0 && (size_t)ref < nids ? ids[ref] : num_i64(x, "id", 0);
            r->rule = str(x, "rule");
            r->rule_hash = str(x, "rule_hash");
            r->key = str(x, "key");
            r->process = str(x, "process");
            r->proc = (uint32_t)num_i64(x, "proc", 0);
            r->pid = (uint32_t)num_i64(x, "pid", 0);
            r->tag = str(x, "tag");
            r->state = (int)num_i64(x, "state", 0);
            r->severity = (int)num_i64(x, "severity", 0);
            r->active_since = num_i64(x, "active_since", CW_TS_NEVER);
            r->firing_since = num_i64(x, "firing_since", CW_TS_NEVER);
            r->false_since = num_i64(x, "false_since", CW_TS_NEVER);
            r->last_sent_ns = num_i64(x, "last_sent_ns", CW_TS_NEVER);
            r->value = num_d(x, "value");
            r->threshold = num_d(x, "threshold");
            r->leak_score = num_d(x, "leak_score");
            r->ttl_s = num_d(x, "ttl_s");
            r->detail = str(x, "detail");
            r->updated_ns = num_i64(x, "updated_ns", num_i64(it, "eval_ns", 0));
        }
        i = 0;
        cJSON_ArrayForEach(x, trs)
        {
            cw_alert_tr_row_t *t = &tr[i];
            trow[i++] = (size_t)num_i64(x, "row", 0);
            t->ts_ns = num_i64(x, "ts_ns", 0);
            t->from_state = (int)num_i64(x, "from", 0);
            t->to_state = (int)num_i64(x, "to", 0);
            t->severity = (int)num_i64(x, "severity", 0);
            t->value = num_d(x, "value");
            t->threshold = num_d(x, "threshold");
            t->leak_score = num_d(x, "leak_score");
            t->ttl_s = num_d(x, "ttl_s");
            t->reason = str(x, "reason");
            t->silenced = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "silenced"));
        }
        if (cw_store_alert_save(s, rows, nr, tr, trow, nt, num_i64(it, "eval_ns", 0), &d)) goto fail;
        for (i = 0; i < nr && nids < 1024; i++) {
            ids[nids++] = rows[i].id;
            cJSON_AddItemToArray(oser, cJSON_CreateNumber((double)rows[i].id));
        }
        for (i = 0; i < nt; i++)
            cJSON_AddItemToArray(otr, cJSON_CreateNumber((double)tr[i].id));
        free(rows);
        free(tr);
        free(trow);
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "silences"))
    {
        cw_silence_row_t r = {.matchers = str(it, "matchers"),
                              .starts_ns = num_i64(it, "starts_ns", 0),
                              .ends_ns = num_i64(it, "ends_ns", 0),
                              .created_by = str(it, "created_by"),
                              .comment = str(it, "comment"),
                              .created_ns = num_i64(it, "created_ns", 0)};
        if (cw_store_silence_add(s, &r, &d)) goto fail;
        cJSON_AddItemToArray(osil, cJSON_CreateNumber((double)r.id));
    }
    char *o = cJSON_PrintUnformatted(out);
    puts(o);
    free(o);
    cJSON_Delete(out);
    cJSON_Delete(j);
    free(text);
    cw_store_close(s);
    return 0;
fail:
    fprintf(stderr, "cw_alert_fill: %s\n", d.msg);
    cw_store_close(s);
    return 1;
}
