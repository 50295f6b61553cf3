/* heap_diff.c - a heap report read back from its JSON (as stored with a
 * heap trace, or saved by `heap --json`), so a stored report serves as one
 * just made: its diff between two points (heap.h, cw_heap_diff_json:
 * UMDH's "what grew between two snapshots") and its pprof profile
 * (cw_heap_pprof).
 *
 * A point is "start" (nothing outstanding), "end" (the stacks'
 * outstanding at the report's end) or a snapshot's number (1-based). Each
 * point is a map stack -> (bytes, blocks); the key is the pid and the
 * frames joined, so the same stack matches across points. Pure; any
 * thread. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analysis/export_pprof.h"
#include "commitwatch/common.h"
#include "commitwatch/heap.h"
#include "commitwatch/report.h"

typedef struct row {
    char *key;           /* "pid\nframe\nframe..." */
    const cJSON *frames; /* borrowed from the parsed report */
    double pid;
    double bytes[2], count[2]; /* at a, at b */
} row_t;

typedef struct rows {
    row_t *v;
    size_t n, cap;
} rows_t;

static char *key_of(double pid, const cJSON *frames)
{
    size_t len = 32;
    const cJSON *f;
    cJSON_ArrayForEach(f, frames) len += (cJSON_IsString(f) ? strlen(f->valuestring) : 1) + 1;
    char *k = malloc(len), *p = k;
    if (!k) return NULL;
    p += snprintf(p, len, "%.0f", pid);
    cJSON_ArrayForEach(f, frames)
    {
        const char *t = cJSON_IsString(f) ? f->valuestring : "?";
        *p++ = '\n';
        size_t n = strlen(t);
        memcpy(p, t, n);
        p += n;
    }
    *p = '\0';
    return k;
}

/* Adds (bytes, count) at side to the row of (pid, frames). */
static int add(rows_t *rs, double pid, const cJSON *frames, int side, double bytes, double count)
{
    char *k = key_of(pid, frames);
    if (!k) return CW_ENOMEM;
    for (size_t i = 0; i < rs->n; i++)
        if (strcmp(rs->v[i].key, k) == 0) {
            free(k);
            rs->v[i].bytes[side] += bytes;
            rs->v[i].count[side] += count;
            return 0;
        }
    if (CW_RESERVE(rs->v, rs->cap, rs->n + 1)) {
        free(k);
        return CW_ENOMEM;
    }
    row_t *r = &rs->v[rs->n++];
    memset(r, 0, sizeof *r);
    r->key = k;
    r->frames = frames;
    r->pid = pid;
    r->bytes[side] = bytes;
    r->count[side] = count;
    return 0;
}

static double num(const cJSON *o, const char *name)
{
    return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, name));
}

/* The stacks of point `point` of report rep into side of rs; *ts its time. */
static int load_point(const cJSON *rep, const char *point, int side, rows_t *rs, double *ts,
                      cw_diag_t *d)
{
    const cJSON *snaps = cJSON_GetObjectItemCaseSensitive(rep, "snapshots"), *it;
    if (strcmp(point, "start") == 0) {
        *ts = num(rep, "from_ns");
        return 0;
    }
    if (strcmp(point, "end") == 0) {
        *ts = num(rep, "to_ns");
        const cJSON *p;
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(rep, "processes"))
        {
            double pid = num(p, "pid");
            cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(p, "stacks"))
            {
                double c = num(it, "outstanding_count");
                if (c > 0 && add(rs, pid, cJSON_GetObjectItemCaseSensitive(it, "frames"), side,
                                 num(it, "outstanding_bytes"), c))
                    return cw_diag_set(d, CW_ENOMEM, "out of memory diffing a heap report");
            }
        }
        return 0;
    }
    char *e = NULL;
    long n = strtol(point, &e, 10);
    int count = cJSON_GetArraySize(snaps);
    if (!*point || *e || n < 1 || n > count)
        return cw_diag_set(d, CW_EINVAL,
                           "'%s' is not a point of this report: start, end or a snapshot from 1 "
                           "to %d",
                           point, count);
    const cJSON *sn = cJSON_GetArrayItem(snaps, (int)n - 1);
    *ts = num(sn, "ts_ns");
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sn, "stacks"))
    {
        if (add(rs, num(it, "pid"), cJSON_GetObjectItemCaseSensitive(it, "frames"), side,
                num(it, "outstanding_bytes"), num(it, "outstanding_count")))
            return cw_diag_set(d, CW_ENOMEM, "out of memory diffing a heap report");
    }
    return 0;
}

/* The report's "layer" is "heap": else CW_EPARSE with d set. */
static int check_heap(const cJSON *rep, cw_diag_t *d)
{
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(rep, "layer");
    if (cJSON_IsString(l) && strcmp(l->valuestring, "heap") == 0) return 0;
    return cw_diag_set(d, CW_EPARSE, "not a heap report (the JSON of `commitwatch heap --json`)");
}

static int cmp_growth(const void *a, const void *b)
{
    const row_t *x = a, *y = b;
    double dx = x->bytes[1] - x->bytes[0], dy = y->bytes[1] - y->bytes[0];
    if (dx != dy) return dx > dy ? -1 : 1;
    return strcmp(x->key, y->key);
}

static cJSON *point_json(const char *point, double ts)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "point", point);
    cJSON_AddNumberToObject(o, "ts_ns", ts);
    return o;
}

int cw_heap_diff_json(const char *report, const char *a, const char *b, char **text, cw_diag_t *d)
{
    cJSON *rep = cJSON_Parse(report), *out = NULL;
    rows_t rs = {0};
    double ta = 0, tb = 0;
    int rc;
    *text = NULL;
    if ((rc = check_heap(rep, d))) goto done;
    if ((rc = load_point(rep, a, 0, &rs, &ta, d)) || (rc = load_point(rep, b, 1, &rs, &tb, d)))
        goto done;
    qsort(rs.v, rs.n, sizeof *rs.v, cmp_growth);
    out = cJSON_CreateObject();
    cJSON_AddItemToObject(out, "a", point_json(a, ta));
    cJSON_AddItemToObject(out, "b", point_json(b, tb));
    double db = 0, dc = 0;
    cJSON *arr = cJSON_AddArrayToObject(out, "stacks");
    for (size_t i = 0; arr && i < rs.n; i++) {
        const row_t *r = &rs.v[i];
        double gb = r->bytes[1] - r->bytes[0], gc = r->count[1] - r->count[0];
        db += gb;
        dc += gc;
        if (gb == 0 && gc == 0) continue;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "pid", r->pid);
        cJSON_AddNumberToObject(x, "bytes_delta", gb);
        cJSON_AddNumberToObject(x, "count_delta", gc);
        cJSON_AddNumberToObject(x, "bytes_a", r->bytes[0]);
        cJSON_AddNumberToObject(x, "bytes_b", r->bytes[1]);
        cJSON_AddNumberToObject(x, "count_a", r->count[0]);
        cJSON_AddNumberToObject(x, "count_b", r->count[1]);
        cJSON_AddItemToObject(x, "frames", cJSON_Duplicate(r->frames, true));
        cJSON_AddItemToArray(arr, x);
    }
    cJSON_AddNumberToObject(out, "bytes_delta", db);
    cJSON_AddNumberToObject(out, "count_delta", dc);
    *text = cJSON_PrintUnformatted(out);
    rc = *text ? 0 : cw_diag_set(d, CW_ENOMEM, "out of memory diffing a heap report");
done:
    for (size_t i = 0; i < rs.n; i++)
        free(rs.v[i].key);
    free(rs.v);
    cJSON_Delete(out);
    cJSON_Delete(rep);
    return rc;
}

int cw_heap_diff_print(const char *diff, uint32_t max_stacks, FILE *out)
{
    cJSON *j = cJSON_Parse(diff);
    if (!j) return CW_EPARSE;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "a");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "b");
    const cJSON *stacks = cJSON_GetObjectItemCaseSensitive(j, "stacks"), *s;
    char tb[32];
    double total = num(j, "bytes_delta");
    cw_format_bytes((int64_t)total, tb, sizeof tb);
    fprintf(out, "heap diff: %s -> %s: %s%s (%+.0f B) in %+.0f blocks, %d stacks changed\n",
            cJSON_GetObjectItemCaseSensitive(a, "point")->valuestring,
            cJSON_GetObjectItemCaseSensitive(b, "point")->valuestring, total > 0 ? "+" : "", tb,
            total, num(j, "count_delta"), cJSON_GetArraySize(stacks));
    uint32_t shown = 0;
    cJSON_ArrayForEach(s, stacks)
    {
        if (max_stacks && shown == max_stacks) break;
        char gb[32];
        double g = num(s, "bytes_delta");
        cw_format_bytes((int64_t)g, gb, sizeof gb);
        fprintf(out, "\n%s%s (%+.0f B) in %+.0f blocks: %.0f -> %.0f B, pid %.0f\n",
                g > 0 ? "+" : "", gb, g, num(s, "count_delta"), num(s, "bytes_a"),
                num(s, "bytes_b"), num(s, "pid"));
        const cJSON *fr = cJSON_GetObjectItemCaseSensitive(s, "frames");
        for (int k = cJSON_GetArraySize(fr) - 1; k >= 0; k--) {
            const cJSON *f = cJSON_GetArrayItem(fr, k);
            fprintf(out, "    %s\n", cJSON_IsString(f) ? f->valuestring : "?");
        }
        shown++;
    }
    int left = cJSON_GetArraySize(stacks) - (int)shown;
    if (left > 0) fprintf(out, "\n(%d more stacks; --json lists all)\n", left);
    cJSON_Delete(j);
    return ferror(out) ? CW_EIO : 0;
}

int cw_heap_pprof(const char *report, char **out, size_t *len, cw_diag_t *d)
{
    cJSON *rep = cJSON_Parse(report);
    cw__pprof_sample_t *v = NULL;
    char **frames = NULL;
    size_t n = 0, nf = 0, k = 0, fi = 0;
    const cJSON *p, *st, *f;
    int rc = rep ? check_heap(rep, d) : check_heap(NULL, d);
    if (rc) goto done;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(rep, "processes"))
    {
        cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(p, "stacks"))
        {
            n++;
            nf += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(st, "frames"));
        }
    }
    v = calloc(n ? n : 1, sizeof *v);
    frames = calloc(nf ? nf : 1, sizeof *frames); /* borrowed from rep */
    if (!v || !frames) {
        rc = cw_diag_set(d, CW_ENOMEM, "out of memory writing a heap profile");
        goto done;
    }
    static const char *const names[] = {"inuse_space", "inuse_objects", "alloc_space",
                                        "alloc_objects"};
    static const char *const fields[] = {"outstanding_bytes", "outstanding_count", "alloc_bytes",
                                         "alloc_count"};
    cw__pprof_types_t t = {.n = 4, .default_type = 0};
    for (int x = 0; x < 4; x++) {
        t.name[x] = names[x];
        t.unit[x] = x % 2 ? "count" : "bytes";
    }
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(rep, "processes"))
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "name");
        cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(p, "stacks"))
        {
            cw__pprof_sample_t *s = &v[k++];
            s->frames = &frames[fi];
            cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(st, "frames"))
            {
                static char unknown[] = "?";
                frames[fi++] = cJSON_IsString(f) ? f->valuestring : unknown;
                s->nframes++;
            }
            for (int x = 0; x < 4; x++)
                s->value[x] = (int64_t)num(st, fields[x]);
            s->process = cJSON_IsString(name) ? name->valuestring : "";
            s->pid = (uint32_t)num(p, "pid");
        }
    }
    rc = cw__pprof_write(v, n, &t, (int64_t)num(rep, "from_ns"), (int64_t)num(rep, "to_ns"), "heap",
                         out, len, d);
done:
    free(frames);
    free(v);
    cJSON_Delete(rep);
    return rc;
}
