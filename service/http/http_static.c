/* http_static.c - the dashboard's static files, confined to the web root.
 *
 * "/" is index.html. "/vendor/uplot/FILE" is uPlot, shipped with the
 * service: web/vendor/uplot/ in an installed tree, or the npm package in
 * web/node_modules/uplot/dist/ in a source tree (after `npm ci` in web/).
 * A path with a ".." segment, a backslash or a dot-file segment is
 * refused, and the resolved real path must still lie under the web root,
 * so neither "../" nor a symlink leads out of it (for uPlot: out of its
 * folder). Files are revalidated on every load (ETag), so a dashboard
 * upgrade is never half-cached. */
#include "http/http_internal.h"
#include "commitwatch/platform.h"

#include <civetweb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char extra_headers[] =
    "X-Content-Type-Options: nosniff\r\n"
    "X-Frame-Options: DENY\r\n"
    "Content-Security-Policy: default-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'\r\n";

/* Rejects "..", ".x" segments, backslashes and control characters. */
static bool safe_path(const char *p)
{
    for (const char *s = p; *s; s++)
        if (*s == '\\' || (unsigned char)*s < 0x20) return false;
    for (const char *s = p; (s = strchr(s, '/'));) {
        s++;
        if (s[0] == '.') return false; /* "..", "." and hidden files */
    }
    return true;
}

/* Sends the file when it is a regular file inside root (both resolved:
 * root itself may be a symlink, e.g. a shared node_modules). */
static bool try_send(cw__http_req_t *r, const char *root, const char *rel)
{
    char path[CW_PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", root, rel) >= sizeof path) return false;
    char *real = cw_plat_realpath(path), *rroot = cw_plat_realpath(root);
    size_t n = rroot ? strlen(rroot) : 0;
    bool ok = real && rroot && strncmp(real, rroot, n) == 0 && cw_plat_is_sep(real[n]) &&
              cw_plat_is_file(real);
    free(rroot);
    if (!real) return false;
    if (ok) {
        const char *dot = strrchr(real, '.');
        const char *mime = dot && strcmp(dot, ".js") == 0     ? "text/javascript; charset=utf-8"
                           : dot && strcmp(dot, ".html") == 0 ? "text/html; charset=utf-8"
                           : dot && strcmp(dot, ".css") == 0  ? "text/css; charset=utf-8"
                                                              : NULL;
        mg_send_mime_file2(r->conn, real, mime, extra_headers);
    }
    free(real);
    return ok;
}

int cw__http_static(cw__http_req_t *r)
{
    const char *p = r->path;
    if (p[0] != '/' || !safe_path(p)) return cw__http_fail(r, 404, "not found: %s", p);
    if (strcmp(p, "/") == 0) p = "/index.html";
    static const char vend[] = "/vendor/uplot/";
    char root[CW_PATH_MAX];
    if (strncmp(p, vend, sizeof vend - 1) == 0) {
        const char *file = p + sizeof vend - 1;
        snprintf(root, sizeof root, "%s/vendor/uplot", r->ctx->web_root);
        if (try_send(r, root, file)) return 0;
        snprintf(root, sizeof root, "%s/node_modules/uplot/dist", r->ctx->web_root);
        if (try_send(r, root, file)) return 0;
        return cw__http_fail(r, 404, "not found: %s (run `npm ci` in web/ to fetch uPlot)", p);
    }
    if (strncmp(p, "/node_modules/", 14) == 0) return cw__http_fail(r, 404, "not found: %s", p);
    if (try_send(r, r->ctx->web_root, p + 1)) return 0;
    return cw__http_fail(r, 404, "not found: %s", p);
}
