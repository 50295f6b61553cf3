/* http_json.c - the JSON helpers every resource of the API shares: 64-bit
 * integers as raw number text (docs/DESIGN.md, "Integers in JSON": a
 * double would round them), arrays of them, times and strings that may be
 * null, and the window object; and the one order of ranked rows (largest
 * first, ties by id) the listings share.
 *
 * Each adds to a cJSON tree the caller owns and returns the new item, or
 * NULL on ENOMEM (the tree may then hold a part; the caller deletes it). */
#include "http/http_req.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>

cJSON *cw__json_raw_i64(int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return cJSON_CreateRaw(buf);
}

cJSON *cw__json_i64(cJSON *obj, const char *name, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return cJSON_AddRawToObject(obj, name, buf);
}

cJSON *cw__json_u64(cJSON *obj, const char *name, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return cJSON_AddRawToObject(obj, name, buf);
}

cJSON *cw__json_i64_or_null(cJSON *obj, const char *name, int64_t v, int64_t none)
{
    return v == none ? cJSON_AddNullToObject(obj, name) : cw__json_i64(obj, name, v);
}

cJSON *cw__json_time(cJSON *obj, const char *name, int64_t t)
{
    return t == INT64_MIN || t == INT64_MAX ? cJSON_AddNullToObject(obj, name)
                                            : cw__json_i64(obj, name, t);
}

cJSON *cw__json_str_or_null(cJSON *obj, const char *name, const char *v)
{
    return v ? cJSON_AddStringToObject(obj, name, v) : cJSON_AddNullToObject(obj, name);
}

cJSON *cw__json_i64_array(cJSON *obj, const char *name, const int64_t *v, uint32_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (uint32_t i = 0; a && i < n; i++)
        if (!cJSON_AddItemToArray(a, cw__json_raw_i64(v[i]))) {
            cJSON_Delete(a);
            return NULL;
        }
    if (a && !cJSON_AddItemToObject(obj, name, a)) {
        cJSON_Delete(a);
        return NULL;
    }
    return a;
}

cJSON *cw__json_window(cJSON *obj, int64_t from, int64_t to)
{
    cJSON *w = cJSON_AddObjectToObject(obj, "window");
    if (!w || !cw__json_i64(w, "from_ns", from) || !cw__json_i64(w, "to_ns", to)) return NULL;
    return w;
}

int cw__http_rank_cmp(const void *x, const void *y)
{
    const cw__http_rank_t *a = x, *b = y;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}
