/* notify_http.c - the receivers' URLs and one POST with civetweb's client
 * API (mg_connect_client, mg_write, mg_get_response): the HTTP library the
 * project already has, for the notifier's JSON and the profile push's
 * multipart bodies (push.c). civetweb connects with its own timeout (10 s in
 * 1.15); the wait for the response is ours. One connection per request
 * ("Connection: close"): a few requests a minute need no pooling. */
#include <civetweb.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "notify/notify_internal.h"

int cw__url_parse(const char *s, cw__url_t *u, cw_diag_t *d)
{
    memset(u, 0, sizeof *u);
    const char *p;
    if (strncmp(s, "http://", 7) == 0) {
        p = s + 7;
        u->port = 80;
    } else if (strncmp(s, "https://", 8) == 0) {
        p = s + 8;
        u->tls = true;
        u->port = 443;
    } else {
        return cw_diag_set(d, CW_EINVAL, "%s: not an http:// or https:// URL", s);
    }
    size_t hl;
    const char *after;
    if (*p == '[') { /* [v6 address] */
        const char *e = strchr(p, ']');
        if (!e) return cw_diag_set(d, CW_EINVAL, "%s: unclosed '[' in the host", s);
        hl = (size_t)(e - p - 1);
        p++;
        after = e + 1;
    } else {
        hl = strcspn(p, ":/?#");
        after = p + hl;
    }
    if (!hl || hl >= sizeof u->host) return cw_diag_set(d, CW_EINVAL, "%s: no host", s);
    memcpy(u->host, p, hl);
    u->host[hl] = '\0';
    if (*after == ':') {
        char *end;
        long port = strtol(after + 1, &end, 10);
        if (end == after + 1 || port < 1 || port > 65535 || (*end && *end != '/'))
            return cw_diag_set(d, CW_EINVAL, "%s: bad port", s);
        u->port = (int)port;
        after = end;
    }
    if ((*after && *after != '/') || strpbrk(after, "?#"))
        return cw_diag_set(d, CW_EINVAL, "%s: a query or fragment is not allowed", s);
    size_t pl = strlen(after);
    while (pl && after[pl - 1] == '/')
        pl--;
    if (pl >= sizeof u->path) return cw_diag_set(d, CW_EINVAL, "%s: path too long", s);
    memcpy(u->path, after, pl);
    u->path[pl] = '\0';
    return 0;
}

int cw__http_post(const cw__url_t *u, const char *suffix, const char *body, int64_t timeout_ns,
                  int *status, char *detail, size_t dlen)
{
    return cw__http_post_raw(u, suffix, "application/json", body, strlen(body), timeout_ns, status,
                             detail, dlen);
}

int cw__http_post_raw(const cw__url_t *u, const char *suffix, const char *content_type,
                      const void *body, size_t len, int64_t timeout_ns, int *status, char *detail,
                      size_t dlen)
{
    char ebuf[256] = "";
    *status = 0;
    detail[0] = '\0';
    struct mg_connection *c = mg_connect_client(u->host, u->port, u->tls, ebuf, sizeof ebuf);
    if (!c) {
        snprintf(detail, dlen, "cannot connect to %s:%d: %s", u->host, u->port,
                 ebuf[0] ? ebuf : "error");
        return -1;
    }
    const char *path = u->path[0] || suffix[0] ? u->path : "/";
    int rc = -1;
    if (mg_printf(c,
                  "POST %s%s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: commitwatch/" CW_VERSION
                  "\r\nContent-Type: %s\r\nContent-Length: %llu\r\n"
                  "Connection: close\r\n\r\n",
                  path, suffix, u->host, u->port, content_type, (unsigned long long)len) <= 0 ||
        len > INT_MAX || mg_write(c, body, len) != (int)len) {
        snprintf(detail, dlen, "sending to %s:%d failed", u->host, u->port);
        goto done;
    }
    int64_t ms = timeout_ns / 1000000;
    if (ms < 1) ms = 1;
    if (mg_get_response(c, ebuf, sizeof ebuf, (int)(ms > 600000 ? 600000 : ms)) < 0) {
        snprintf(detail, dlen, "no response from %s:%d: %s", u->host, u->port,
                 ebuf[0] ? ebuf : "timed out");
        goto done;
    }
    const struct mg_response_info *ri = mg_get_response_info(c);
    *status = ri ? ri->status_code : 0;
    rc = 0;
    if (*status < 200 || *status > 299) {
        /* Say what the receiver said (its first line or so). */
        char said[200];
        int n = mg_read(c, said, sizeof said - 1);
        said[n > 0 ? n : 0] = '\0';
        for (char *q = said; *q; q++)
            if (*q == '\n' || *q == '\r') *q = ' ';
        snprintf(detail, dlen, "HTTP %d%s%s", *status, said[0] ? ": " : "", said);
    }
done:
    mg_close_connection(c);
    return rc;
}
