/* http_static.c - the dashboard's static files, confined to the web root.
 *
 * "/" is index.html. "/vendor/PKG/FILE" is a front-end package shipped
 * with the service (uPlot; d3-flame-graph and the d3 modules it needs):
 * web/vendor/PKG/ in an installed tree, or the npm package's dist folder,
 * web/node_modules/PKG/dist/, in a source tree (after `npm ci` in web/).
 * Only the packages of `vendors` are served.
 * A path with a ".." segment, a backslash or a dot-file segment is
 * refused, and the resolved real path must still lie under the web root,
 * so neither "../" nor a symlink leads out of it (for a package: out of
 * its folder). Files are revalidated on every load (ETag), so a dashboard
 * upgrade is never half-cached. */
#include "http/http_resources.h"
#include "commitwatch/platform.h"

#include <civetweb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The headers every static file carries, before the server's Keep-Alive. */
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
        char headers[sizeof extra_headers + sizeof r->ctx->keep_alive + 16];
        snprintf(headers, sizeof headers, "%sKeep-Alive: %s\r\n", extra_headers,
                 r->ctx->keep_alive);
        mg_send_mime_file2(r->conn, real, mime, headers);
    }
    free(real);
    return ok;
}

/* The packages of web/package.json the dashboard loads (CMakeLists.txt
 * installs the same list): uPlot, d3-flame-graph, whose UMD bundle takes
 * the d3 modules from the global d3, and those modules (with theirs). */
static const char *const vendors[] = {
    "uplot",     "d3-flame-graph", "d3-array",       "d3-dispatch", "d3-selection",
    "d3-color",  "d3-interpolate", "d3-ease",        "d3-timer",    "d3-transition",
    "d3-format", "d3-time",        "d3-time-format", "d3-scale",    "d3-hierarchy",
};

int cw__http_static(cw__http_req_t *r)
{
    const char *p = r->path;
    if (p[0] != '/' || !safe_path(p)) return cw__http_fail(r, 404, "not found: %s", p);
    if (strcmp(p, "/") == 0) p = "/index.html";
    static const char vend[] = "/vendor/";
    char root[CW_PATH_MAX];
    if (strncmp(p, vend, sizeof vend - 1) == 0) {
        const char *pkg = p + sizeof vend - 1, *slash = strchr(pkg, '/');
        size_t n = slash ? (size_t)(slash - pkg) : 0;
        for (size_t i = 0; slash && i < CW_ARRAY_LEN(vendors); i++) {
            if (strlen(vendors[i]) != n || strncmp(vendors[i], pkg, n) != 0) continue;
            snprintf(root, sizeof root, "%s/vendor/%s", r->ctx->web_root, vendors[i]);
            if (try_send(r, root, slash + 1)) return 0;
            snprintf(root, sizeof root, "%s/node_modules/%s/dist", r->ctx->web_root, vendors[i]);
            if (try_send(r, root, slash + 1)) return 0;
            return cw__http_fail(r, 404, "not found: %s (run `npm ci` in web/ to fetch %s)", p,
                                 vendors[i]);
        }
        return cw__http_fail(r, 404, "not found: %s", p);
    }
    if (strncmp(p, "/node_modules/", 14) == 0) return cw__http_fail(r, 404, "not found: %s", p);
    if (try_send(r, r->ctx->web_root, p + 1)) return 0;
    return cw__http_fail(r, 404, "not found: %s", p);
}
