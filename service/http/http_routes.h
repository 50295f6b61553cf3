/* http_routes.h - the route table (http_routes.c): which handler answers
 * a method and a path, and the 400, 404 and 405 answers of requests no
 * route takes. Used by http.c. Thread: any civetweb worker (the table is
 * constant). */
#ifndef CW_HTTP_ROUTES_H
#define CW_HTTP_ROUTES_H

#include <stdbool.h>
#include <stddef.h>

#include "http/http_req.h"

/* Answers r (path, method and query parsed) through its route: 0 once a
 * response is sent, or an HTTP status with r->err filled (400 for a bad
 * id or an unknown parameter, 404 for an unknown /api/ path, 405 with
 * r->allow for a method the path does not take). A path outside /api/
 * and /metrics is a static file. */
int cw__http_dispatch(cw__http_req_t *r);

/* Route i of the table: its method ("GET" stands for GET and HEAD) and
 * path pattern ("/api/processes/{id}/series"). false past the last. For
 * the test that the OpenAPI document lists every route. */
bool cw__http_route_at(size_t i, const char **method, const char **pattern);

#endif
