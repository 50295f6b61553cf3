/* http_req.c - the response side of a request: sending a body, a
 * download or a cJSON tree with the headers every answer carries, the
 * {"error": ...} answer of a failed one, and the request's read handle
 * and token check.
 *
 * Every answer is data, never a page: no-store, nosniff and a
 * Content-Security-Policy that loads and frames nothing; a 405 carries
 * the Allow header the dispatcher set (http_routes.c). The floor of
 * service/http/: it includes no resource and never http.c. */
#include "http/http_req.h"

#include <civetweb.h>
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- responses */

/* The response; disposition (a Content-Disposition value) may be NULL. */
static int send_response(cw__http_req_t *r, int status, const char *ctype, const char *disposition,
                         const char *body, size_t len)
{
    char clen[32];
    snprintf(clen, sizeof clen, "%zu", len);
    mg_response_header_start(r->conn, status);
    mg_response_header_add(r->conn, "Content-Type", ctype, -1);
    mg_response_header_add(r->conn, "Content-Length", clen, -1);
    if (disposition) mg_response_header_add(r->conn, "Content-Disposition", disposition, -1);
    mg_response_header_add(r->conn, "Cache-Control", "no-store", -1);
    mg_response_header_add(r->conn, "X-Content-Type-Options", "nosniff", -1);
    /* Data, never a page: nothing in it may load or frame anything. */
    mg_response_header_add(r->conn, "Content-Security-Policy",
                           "default-src 'none'; frame-ancestors 'none'", -1);
    if (status == 405)
        mg_response_header_add(r->conn, "Allow", r->allow ? r->allow : "GET, HEAD", -1);
    if (r->ctx && r->ctx->keep_alive[0])
        mg_response_header_add(r->conn, "Keep-Alive", r->ctx->keep_alive, -1);
    mg_response_header_send(r->conn);
    if (!r->head && len) mg_write(r->conn, body, len);
    return 0;
}

int cw__http_send(cw__http_req_t *r, int status, const char *ctype, const char *body, size_t len)
{
    return send_response(r, status, ctype, NULL, body, len);
}

int cw__http_send_attachment(cw__http_req_t *r, const char *ctype, const char *filename,
                             const char *body, size_t len)
{
    char disp[300];
    snprintf(disp, sizeof disp, "attachment; filename=\"%s\"", filename);
    return send_response(r, 200, ctype, disp, body, len);
}

int cw__http_send_json(cw__http_req_t *r, const cJSON *root)
{
    char *s = cJSON_PrintUnformatted(root);
    if (!s) return cw__http_fail(r, 500, "out of memory while building the response");
    cw__http_send(r, 200, "application/json", s, strlen(s));
    free(s);
    return 0;
}

int cw__http_fail(cw__http_req_t *r, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return status;
}

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong
 * forms, surrogates or code points past U+10FFFF), 0 if there is none. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!n) return 0;
    unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t k = 2; k < n; k++)
        if ((p[k] & 0xC0) != 0x80) return 0;
    return n;
}

void cw__http_utf8_clean(char *s)
{
    for (unsigned char *p = (unsigned char *)s; *p;) {
        size_t n = utf8_len(p);
        if (n) {
            p += n;
        } else {
            *p++ = '?';
        }
    }
}

void cw__http_send_error(cw__http_req_t *r, int status)
{
    cJSON *o = cJSON_CreateObject();
    char *s = NULL;
    /* Messages quote paths and parameters as sent: JSON must be UTF-8. */
    cw__http_utf8_clean(r->err);
    if (o && cJSON_AddStringToObject(o, "error", r->err[0] ? r->err : "error"))
        s = cJSON_PrintUnformatted(o);
    if (s)
        cw__http_send(r, status, "application/json", s, strlen(s));
    else
        cw__http_send(r, status, "application/json", "{\"error\":\"out of memory\"}", 25);
    free(s);
    cJSON_Delete(o);
}

int cw__http_oom(cw__http_req_t *r)
{
    return cw__http_fail(r, 500, "out of memory while building the response");
}

int cw__http_send_tree(cw__http_req_t *r, bool ok, cJSON *root)
{
    int rc = ok ? cw__http_send_json(r, root) : cw__http_oom(r);
    cJSON_Delete(root);
    return rc;
}

int cw__http_db_fail(cw__http_req_t *r, int rc, const cw_diag_t *d)
{
    if (rc == CW_ENOMEM) return cw__http_oom(r);
    return cw__http_fail(r, 500, "query failed: %s", d->msg[0] ? d->msg : cw_strerror(rc));
}

/* ---------------------------------------------------------------- stores */

int cw__http_need_store(cw__http_req_t *r)
{
    if (r->store) return 0;
    cw_diag_t d = {{0}};
    int rc = cw_store_pool_get(r->ctx->pool, &r->store, &d);
    if (rc)
        return cw__http_fail(r, 503, "database %s cannot be read yet: %s", r->ctx->db_path,
                             d.msg[0] ? d.msg : cw_strerror(rc));
    /* The pool's handles read the closed hours of /metrics from the
     * server's share (docs/DESIGN.md, "/metrics"). */
    cw_store_set_share(r->store, r->ctx->share);
    return 0;
}

/* ---------------------------------------------------------------- security */

bool cw__http_token_ok(const char *want, const char *auth)
{
    static const char pfx[] = "Bearer ";
    if (!auth || strncmp(auth, pfx, sizeof pfx - 1) != 0) return false;
    const char *got = auth + sizeof pfx - 1;
    size_t n = strlen(want), m = strlen(got);
    /* Every byte of want is compared, whatever differs first: the time
     * says nothing of the token but its length. */
    unsigned char diff = n != m;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(want[i] ^ got[i < m ? i : 0]);
    return diff == 0;
}
