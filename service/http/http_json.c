/* http_json.c - the JSON helpers every resource of the API shares: 64-bit
 * integers as raw number text (docs/DESIGN.md, "Integers in JSON": a
 * double would round them), arrays of them, and the window object.
 *
 * Each adds to a cJSON tree the caller owns and returns the new item, or
 * NULL on ENOMEM (the tree may then hold a part; the caller deletes it). */
#include "http/http_internal.h"

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
