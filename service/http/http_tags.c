/* http_tags.c - GET /api/tags: the stack tags of the stored stacks as a
 * tree (a tag A\\B is the node A with the child B), the rule files in
 * force and their hash, as the store records them with each re-tag. */
#include "http/http_resources.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/query.h"
#include "commitwatch/retag.h"

/* Finds or adds the child named name[0..len) of arr (objects with
 * "name", "path", "children"). */
static cJSON *tag_child(cJSON *arr, const char *name, size_t len, const char *path, size_t plen)
{
    cJSON *c;
    cJSON_ArrayForEach(c, arr)
    {
        const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
        if (n && strlen(n) == len && strncmp(n, name, len) == 0) return c;
    }
    char nb[512], pb[1024];
    snprintf(nb, sizeof nb, "%.*s", (int)len, name);
    snprintf(pb, sizeof pb, "%.*s", (int)plen, path);
    c = cJSON_CreateObject();
    if (!c || !cJSON_AddItemToArray(arr, c) || !cJSON_AddStringToObject(c, "name", nb) ||
        !cJSON_AddStringToObject(c, "path", pb) || !cJSON_AddArrayToObject(c, "children"))
        return NULL;
    return c;
}

int cw__http_tags(cw__http_req_t *r)
{
    cw_tag_list_t tags = {0};
    cw_diag_t d = {{0}};
    char *hash = NULL;
    int rc = cw_store_tags(r->store, &tags, &d);
    if (rc) return cw__http_fail(r, 500, "query failed: %s", d.msg);
    cJSON *o = cJSON_CreateObject(), *rules, *tree;
    bool ok = o && (rules = cJSON_AddArrayToObject(o, "rule_files")) &&
              (tree = cJSON_AddArrayToObject(o, "tags"));
    /* The rule files in force: the service records them with every re-tag
     * (a SIGHUP may have changed them since the server started); the
     * startup files when the database has none recorded. */
    char *files = NULL;
    unsigned nfiles = 0;
    if (ok && cw_store_meta_get(r->store, CW_RULE_FILES_META_KEY, &files, &d) == 0 && files) {
        for (char *p = files, *e; ok && *p; p = e + (*e != '\0')) {
            e = p + strcspn(p, "\n");
            char c = *e;
            *e = '\0';
            ok = cJSON_AddItemToArray(rules, cJSON_CreateString(p));
            nfiles++;
            *e = c;
        }
    } else {
        for (unsigned i = 0; ok && i < r->ctx->nrule_files; i++)
            ok = cJSON_AddItemToArray(rules, cJSON_CreateString(r->ctx->rule_files[i]));
        nfiles = r->ctx->nrule_files;
    }
    free(files);
    /* No files given: the tagger uses the platform's default rules. */
    ok = ok && cJSON_AddBoolToObject(o, "default_rules", nfiles == 0);
    if (ok && cw_store_meta_get(r->store, "rules_hash", &hash, &d) == 0 && hash)
        ok = cJSON_AddStringToObject(o, "rules_hash", hash) != NULL;
    free(hash);
    /* A tag path A\B becomes the node A with the child B. */
    for (size_t k = 0; ok && k < tags.n; k++) {
        const char *tag = tags.v[k], *p = tag;
        cJSON *arr = tree;
        while (ok) {
            const char *bs = strchr(p, '\\');
            size_t len = bs ? (size_t)(bs - p) : strlen(p);
            cJSON *node = tag_child(arr, p, len, tag, (size_t)(p - tag) + len);
            ok = node != NULL;
            if (!ok || !bs) break;
            arr = cJSON_GetObjectItem(node, "children");
            p = bs + 1;
        }
    }
    rc = ok ? cw__http_send_json(r, o) : cw__http_oom(r);
    cJSON_Delete(o);
    cw_tag_list_clear(&tags);
    return rc;
}
