/* trace.c - the JSONL v1 trace: streaming reader and writer (see trace.h).
 *
 * Reader: lines come from a growing buffer filled with fread, so a trace
 * of any size streams in constant memory (one line at a time). cJSON
 * validates each line and gives strings and arrays; integer fields are
 * then read from the raw number text of the line (int_field below),
 * because cJSON keeps numbers as doubles and nanosecond timestamps need
 * 64 bits (DESIGN.md, "Integers in JSON").
 *
 * Writer: integers are printed with PRId64/PRIu64; strings are escaped by
 * cJSON (cJSON_PrintUnformatted of a string item), and each frame's escaped
 * text is cached by frame id. */
#include "commitwatch/trace.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"

struct cw_trace_reader {
    FILE *f;
    bool own;
    char *path;
    cw_stacks_t *stacks;
    cw_trace_header_t hdr;
    char *buf;       /* fread buffer */
    size_t cap, len; /* capacity, bytes held */
    size_t pos;      /* start of the next line */
    bool eof;
    uint64_t line;
    int64_t last_ts;
    bool have_ts;
    cJSON *cur; /* the last event's tree: its strings back the event */
    uint32_t *ids;
    size_t idcap;
};

/* ---- line reading ------------------------------------------------------ */

/* The read buffer's first size: lines are read in chunks of it, and it
 * grows to hold a longer line. A build may make it smaller (the fuzz
 * target: -DCW_TRACE_READ_CAP=64, so a line split between reads and the
 * buffer's growth happen on small inputs, and a reader opened per input
 * does not allocate 1 MiB). */
#ifndef CW_TRACE_READ_CAP
#define CW_TRACE_READ_CAP (1 << 20)
#endif

/* Next line without its newline (and without a trailing CR): 1 and
 * line and len set (NUL-terminated in place), 0 at EOF, CW_EIO/ENOMEM. */
static int next_line(cw_trace_reader_t *r, char **line, size_t *len)
{
    for (;;) {
        char *nl = memchr(r->buf + r->pos, '\n', r->len - r->pos);
        if (nl || (r->eof && r->pos < r->len)) {
            char *start = r->buf + r->pos;
            size_t n = nl ? (size_t)(nl - start) : r->len - r->pos;
            r->pos += n + (nl ? 1 : 0);
            if (n > 0 && start[n - 1] == '\r') n--;
            start[n] = '\0'; /* the byte was '\n' or '\r', or spare room */
            *line = start;
            *len = n;
            r->line++;
            return 1;
        }
        if (r->eof) return 0;
        /* Move the partial line to the front, grow if it fills the buffer. */
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->len -= r->pos;
        r->pos = 0;
        if (CW_RESERVE(r->buf, r->cap, r->len + 2)) return CW_ENOMEM; /* room and a NUL */
        size_t got = fread(r->buf + r->len, 1, r->cap - r->len - 1, r->f);
        r->len += got;
        if (got == 0) {
            if (ferror(r->f)) return CW_EIO;
            r->eof = true;
        }
    }
}

/* ---- exact integers from the raw line ---------------------------------- */

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static const char *skip_string(const char *p) /* p at the opening quote */
{
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && p[1]) p++;
    return *p ? p + 1 : p;
}

static const char *skip_value(const char *p)
{
    if (*p == '"') return skip_string(p);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        for (; *p; p++) {
            if (*p == '"') {
                p = skip_string(p) - 1;
            } else if (*p == '{' || *p == '[') {
                depth++;
            } else if (*p == '}' || *p == ']') {
                if (--depth == 0) return p + 1;
            }
        }
        return p;
    }
    while (*p && *p != ',' && *p != '}' && *p != ' ' && *p != '\t')
        p++;
    return p;
}

/* In a line that cJSON accepted as an object, finds the top-level member
 * `key` and returns the start of its value text (NULL if absent). */
static const char *raw_member(const char *line, const char *key)
{
    size_t klen = strlen(key);
    const char *p = skip_ws(line);
    if (*p != '{') return NULL;
    p = skip_ws(p + 1);
    while (*p == '"') {
        const char *kstart = p + 1, *kend = skip_string(p) - 1;
        p = skip_ws(kend + 1);
        if (*p != ':') return NULL;
        p = skip_ws(p + 1);
        if ((size_t)(kend - kstart) == klen && memcmp(kstart, key, klen) == 0) return p;
        p = skip_ws(skip_value(p));
        if (*p != ',') return NULL;
        p = skip_ws(p + 1);
    }
    return NULL;
}

typedef enum { INT_OK = 0, INT_ABSENT, INT_NOT_INTEGER, INT_NEGATIVE, INT_TOO_BIG } int_status_t;

/* Reads member `key` as an exact unsigned integer (a JSON integer, or for
 * hex_ok a "0x..." string). */
static int_status_t int_field(const cJSON *obj, const char *line, const char *key, bool hex_ok,
                              uint64_t *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it) return INT_ABSENT;
    if (hex_ok && cJSON_IsString(it)) {
        const char *s = it->valuestring;
        char *end;
        if (!(s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && s[2])) return INT_NOT_INTEGER;
        errno = 0;
        unsigned long long v = strtoull(s + 2, &end, 16);
        if (*end) return INT_NOT_INTEGER;
        if (errno == ERANGE) return INT_TOO_BIG;
        *out = v;
        return INT_OK;
    }
    if (!cJSON_IsNumber(it)) return INT_NOT_INTEGER;
    const char *p = raw_member(line, key);
    if (!p) return INT_NOT_INTEGER;
    const char *q = p + (*p == '-');
    while (*q >= '0' && *q <= '9')
        q++;
    if (*q == '.' || *q == 'e' || *q == 'E') return INT_NOT_INTEGER;
    if (*p == '-') return INT_NEGATIVE;
    errno = 0;
    unsigned long long v = strtoull(p, NULL, 10);
    if (errno == ERANGE) return INT_TOO_BIG;
    *out = v;
    return INT_OK;
}

static int bad(cw_trace_reader_t *r, cw_diag_t *d, const char *fmt, const char *what)
{
    char detail[512];
    snprintf(detail, sizeof detail, fmt, what);
    return cw_diag_set(d, CW_EPARSE, "%s:%" PRIu64 ": %s", r->path, r->line, detail);
}

static int int_error(cw_trace_reader_t *r, cw_diag_t *d, int_status_t st, const char *key,
                     bool hex_ok)
{
    switch (st) {
    case INT_ABSENT:
        return bad(r, d, "missing field \"%s\"", key);
    case INT_NEGATIVE:
        return bad(r, d, "field \"%s\" must not be negative", key);
    case INT_TOO_BIG:
        return bad(r, d, "field \"%s\" does not fit in 64 bits", key);
    default:
        return hex_ok ? bad(r, d, "field \"%s\" must be an integer or a \"0x...\" string", key)
                      : bad(r, d, "field \"%s\" must be an integer", key);
    }
}

/* ---- reader ------------------------------------------------------------ */

/* One JSON value that must fill the whole line (trailing text is an
 * error). The line is NUL-terminated in place; cJSON requires that NUL to
 * lie inside the length it is given. */
static cJSON *parse_line(const char *line, size_t len)
{
    return cJSON_ParseWithLengthOpts(line, len + 1, NULL, 1);
}

static int read_header(cw_trace_reader_t *r, cw_diag_t *d)
{
    char *line;
    size_t len;
    int rc = next_line(r, &line, &len);
    if (rc < 0) return cw_diag_set(d, rc, "%s: cannot read: %s", r->path, cw_strerror(rc));
    if (rc == 0)
        return cw_diag_set(d, CW_EPARSE,
                           "%s: empty file: a trace starts with a header line "
                           "{\"format\":\"%s\",\"version\":%d,...}",
                           r->path, CW_TRACE_FORMAT, CW_TRACE_VERSION);
    cJSON *h = parse_line(line, len);
    if (!h || !cJSON_IsObject(h)) {
        cJSON_Delete(h);
        return bad(r, d, "%s", "the header line is not a JSON object");
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(h, "format");
    const cJSON *plat = cJSON_GetObjectItemCaseSensitive(h, "platform");
    uint64_t version = 0, psize = 8, climit = 0;
    int_status_t st = int_field(h, line, "version", false, &version);
    rc = 0;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CW_TRACE_FORMAT) != 0)
        rc = bad(r, d, "not a commitwatch trace: the header's \"format\" must be \"%s\"",
                 CW_TRACE_FORMAT);
    else if (st != INT_OK)
        rc = int_error(r, d, st, "version", false);
    else if (version != CW_TRACE_VERSION)
        rc = cw_diag_set(d, CW_EPARSE,
                         "%s:%" PRIu64 ": trace version %" PRIu64
                         " is not supported (this commitwatch reads version %d)",
                         r->path, r->line, version, CW_TRACE_VERSION);
    else if (plat && (!cJSON_IsString(plat) || strlen(plat->valuestring) >= sizeof r->hdr.platform))
        rc = bad(r, d, "%s",
                 "field \"platform\" must be a short string such as \"windows\" or \"linux\"");
    else if ((st = int_field(h, line, "pointer_size", false, &psize)) != INT_OK && st != INT_ABSENT)
        rc = int_error(r, d, st, "pointer_size", false);
    else if (psize != 4 && psize != 8)
        rc = bad(r, d, "%s", "field \"pointer_size\" must be 4 or 8");
    else if ((st = int_field(h, line, "commit_limit", false, &climit)) != INT_OK &&
             st != INT_ABSENT)
        rc = int_error(r, d, st, "commit_limit", false);
    else if (st == INT_OK && climit == 0)
        rc = bad(r, d, "%s", "field \"commit_limit\" must be a byte count above 0");
    if (rc == 0) {
        cw_strlcpy(r->hdr.platform, plat ? plat->valuestring : "unknown", sizeof r->hdr.platform);
        r->hdr.pointer_size = (uint32_t)psize;
        r->hdr.commit_limit = climit;
    }
    cJSON_Delete(h);
    return rc;
}

/* The file at path opened with mode, or std when path is "-"; *own says
 * whether the stream is ours to close. NULL (errno set) when fopen fails. */
static FILE *open_stream(const char *path, const char *mode, FILE *std, bool *own)
{
    *own = strcmp(path, "-") != 0;
    return *own ? fopen(path, mode) : std;
}

int cw_trace_reader_open(const char *path, cw_stacks_t *stacks, cw_trace_reader_t **out,
                         cw_diag_t *d)
{
    cw_trace_reader_t *r = calloc(1, sizeof *r);
    int rc = CW_ENOMEM;
    if (!r) return CW_ENOMEM;
    r->stacks = stacks;
    r->path = strdup(path);
    r->cap = CW_TRACE_READ_CAP;
    r->buf = malloc(r->cap);
    if (!r->path || !r->buf) goto fail;
    if (!(r->f = open_stream(path, "rb", stdin, &r->own))) {
        rc = cw_diag_set(d, CW_EIO, "%s: cannot open the trace: %s", path, strerror(errno));
        goto fail;
    }
    if ((rc = read_header(r, d)) != 0) goto fail;
    *out = r;
    return 0;
fail:
    cw_trace_reader_close(r); /* takes the half-opened reader */
    return rc;
}

/* A teardown list, alike to other readers' close in form only. */
void cw_trace_reader_close(cw_trace_reader_t *r)
{
    if (!r) return;
    if (r->own && r->f) fclose(r->f);
    cJSON_Delete(r->cur);
    free(r->ids);
    free(r->buf);
    free(r->path);
    free(r);
}

const cw_trace_header_t *cw_trace_reader_header(const cw_trace_reader_t *r)
{
    return &r->hdr;
}

uint64_t cw_trace_reader_line(const cw_trace_reader_t *r)
{
    return r->line;
}

static int read_stack(cw_trace_reader_t *r, const cJSON *stack, uint32_t *out, cw_diag_t *d)
{
    int n = cJSON_GetArraySize(stack), i = 0;
    const cJSON *fr;
    if (n > 0 && CW_RESERVE(r->ids, r->idcap, (size_t)n)) return CW_ENOMEM;
    cJSON_ArrayForEach(fr, stack)
    {
        if (!cJSON_IsString(fr) || !fr->valuestring[0])
            return bad(r, d, "%s",
                       "field \"stack\" must be an array of non-empty strings (frames "
                       "\"module!function\")");
        if (cw_stacks_intern_frame(r->stacks, fr->valuestring, strlen(fr->valuestring),
                                   &r->ids[i++]))
            return CW_ENOMEM;
    }
    return cw_stacks_intern(r->stacks, r->ids, (uint32_t)n, out);
}

int cw_trace_reader_next(cw_trace_reader_t *r, cw_event_t *ev, cw_diag_t *d)
{
    char *line;
    size_t len;
    int rc;

    cJSON_Delete(r->cur);
    r->cur = NULL;
    rc = next_line(r, &line, &len);
    if (rc < 0) return cw_diag_set(d, rc, "%s: cannot read: %s", r->path, cw_strerror(rc));
    if (rc == 0) return 0;
    if (len == 0) return bad(r, d, "%s", "empty line (every line must be one JSON event)");

    cJSON *o = parse_line(line, len);
    if (!o) {
        const char *at = cJSON_GetErrorPtr();
        long col = (at && at >= line && at <= line + len) ? (long)(at - line) + 1 : 0;
        return cw_diag_set(d, CW_EPARSE, "%s:%" PRIu64 ":%ld: not valid JSON", r->path, r->line,
                           col);
    }
    r->cur = o;
    if (!cJSON_IsObject(o)) return bad(r, d, "%s", "an event must be a JSON object");

    memset(ev, 0, sizeof *ev);
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "op");
    if (!op) return bad(r, d, "%s", "missing field \"op\"");
    if (!cJSON_IsString(op) || cw_op_parse(op->valuestring, &ev->op) != 0)
        return bad(r, d, "%s",
                   "field \"op\" must be one of commit, decommit, reserve, release, process_start, "
                   "process_exit");

    uint64_t v;
    int_status_t st;
    if ((st = int_field(o, line, "ts", false, &v)) != INT_OK)
        return int_error(r, d, st, "ts", false);
    if (v >= INT64_MAX)
        return bad(r, d, "%s",
                   "field \"ts\" must be below 2^63 - 1 (nanoseconds since the Unix epoch)");
    ev->ts = (int64_t)v;
    if ((st = int_field(o, line, "pid", false, &v)) != INT_OK)
        return int_error(r, d, st, "pid", false);
    if (v > UINT32_MAX) return bad(r, d, "%s", "field \"pid\" must fit in 32 bits");
    ev->pid = (uint32_t)v;
    st = int_field(o, line, "tid", false, &v);
    if (st == INT_OK && v <= UINT32_MAX)
        ev->tid = (uint32_t)v;
    else if (st != INT_ABSENT)
        return v > UINT32_MAX && st == INT_OK ? bad(r, d, "%s", "field \"tid\" must fit in 32 bits")
                                              : int_error(r, d, st, "tid", false);

    bool ranged = ev->op <= CW_OP_RELEASE;
    if (ranged) {
        if ((st = int_field(o, line, "addr", true, &ev->addr)) != INT_OK)
            return int_error(r, d, st, "addr", true);
        if ((st = int_field(o, line, "size", false, &ev->size)) != INT_OK)
            return int_error(r, d, st, "size", false);
        if (ev->size == 0) return bad(r, d, "%s", "field \"size\" must be greater than 0");
        if (ev->size > INT64_MAX)
            return bad(r, d, "%s",
                       "field \"size\" must be below 2^63 (no address space is larger)");
        if (!cw_range_ok(ev->addr, ev->size))
            return bad(r, d, "%s", "the range addr + size goes past the end of the address space");
        if (ev->op == CW_OP_COMMIT && !cw_commit_ok(ev->addr, ev->size))
            return bad(r, d, "%s",
                       "a commit's range addr + size ends past 2^63 - 1 (no user memory is "
                       "committed there)");
    }
    const cJSON *rd = cJSON_GetObjectItemCaseSensitive(o, "rundown");
    if (rd) {
        if (!cJSON_IsBool(rd)) return bad(r, d, "%s", "field \"rundown\" must be true or false");
        if (ev->op != CW_OP_COMMIT && cJSON_IsTrue(rd))
            return bad(r, d, "%s", "\"rundown\" is only valid on a commit");
        ev->rundown = cJSON_IsTrue(rd);
    }
    if (ev->op == CW_OP_PROCESS_START) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
        const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(o, "cmdline");
        if (!name)
            return bad(r, d, "%s", "missing field \"name\" (process_start needs the image name)");
        if (!cJSON_IsString(name)) return bad(r, d, "%s", "field \"name\" must be a string");
        if (cmd && !cJSON_IsNull(cmd) && !cJSON_IsString(cmd))
            return bad(r, d, "%s", "field \"cmdline\" must be a string");
        ev->name = name->valuestring;
        ev->cmdline = cJSON_IsString(cmd) ? cmd->valuestring : NULL;
    }
    const cJSON *stack = cJSON_GetObjectItemCaseSensitive(o, "stack");
    if (stack && !cJSON_IsNull(stack)) {
        if (!cJSON_IsArray(stack))
            return bad(r, d, "%s", "field \"stack\" must be an array of strings");
        if ((rc = read_stack(r, stack, &ev->stack_id, d)) != 0) return rc;
    }
    if (r->have_ts && ev->ts < r->last_ts)
        return cw_diag_set(d, CW_ETIME,
                           "%s:%" PRIu64 ": ts %" PRId64
                           " goes back in time (the previous event is at %" PRId64
                           "); events must be in time order",
                           r->path, r->line, ev->ts, r->last_ts);
    r->last_ts = ev->ts;
    r->have_ts = true;
    return 1;
}

/* ---- writer ------------------------------------------------------------ */

struct cw_trace_writer {
    FILE *f;
    bool own;
    char *path;
    const cw_stacks_t *stacks;
    char **esc; /* escaped frame text by frame id */
    size_t nesc;
};

/* cJSON's escaping of s, quotes included; malloc'd or NULL. */
static char *escape(const char *s)
{
    cJSON *item = cJSON_CreateString(s);
    char *out = item ? cJSON_PrintUnformatted(item) : NULL;
    cJSON_Delete(item);
    return out;
}

int cw_trace_writer_open(const char *path, const cw_trace_header_t *h, const cw_stacks_t *stacks,
                         cw_trace_writer_t **out, cw_diag_t *d)
{
    cw_trace_writer_t *w = calloc(1, sizeof *w);
    if (!w) return CW_ENOMEM;
    w->stacks = stacks;
    w->path = strdup(path);
    if (!w->path) {
        free(w);
        return CW_ENOMEM;
    }
    if (!(w->f = open_stream(path, "wb", stdout, &w->own))) {
        int rc = cw_diag_set(d, CW_EIO, "%s: cannot create the trace: %s", path, strerror(errno));
        free(w->path);
        free(w);
        return rc;
    }
    char *plat = escape(h->platform[0] ? h->platform : "unknown");
    if (!plat) {
        cw_trace_writer_close(w, NULL);
        return CW_ENOMEM;
    }
    fprintf(w->f, "{\"format\":\"%s\",\"version\":%d,\"platform\":%s,\"pointer_size\":%u",
            CW_TRACE_FORMAT, CW_TRACE_VERSION, plat, h->pointer_size ? h->pointer_size : 8);
    if (h->commit_limit) fprintf(w->f, ",\"commit_limit\":%" PRIu64, h->commit_limit);
    fputs("}\n", w->f);
    free(plat);
    *out = w;
    return 0;
}

static const char *frame_esc(cw_trace_writer_t *w, uint32_t id)
{
    if (CW_RESERVE_ZEROED(w->esc, w->nesc, (size_t)id + 1)) return NULL;
    if (!w->esc[id]) w->esc[id] = escape(cw_stacks_frame_text(w->stacks, id));
    return w->esc[id];
}

int cw_trace_writer_write(cw_trace_writer_t *w, const cw_event_t *ev)
{
    FILE *f = w->f;
    fprintf(f, "{\"ts\":%" PRId64 ",\"op\":\"%s\",\"pid\":%" PRIu32, ev->ts, cw_op_name(ev->op),
            ev->pid);
    if (ev->tid) fprintf(f, ",\"tid\":%" PRIu32, ev->tid);
    if (ev->op <= CW_OP_RELEASE)
        fprintf(f, ",\"addr\":\"0x%" PRIx64 "\",\"size\":%" PRIu64, ev->addr, ev->size);
    if (ev->op == CW_OP_PROCESS_START) {
        char *name = escape(ev->name ? ev->name : "");
        char *cmd = ev->cmdline ? escape(ev->cmdline) : NULL;
        if (!name || (ev->cmdline && !cmd)) {
            free(name);
            free(cmd);
            return CW_ENOMEM;
        }
        fprintf(f, ",\"name\":%s", name);
        if (cmd) fprintf(f, ",\"cmdline\":%s", cmd);
        free(name);
        free(cmd);
    }
    if (ev->rundown) fputs(",\"rundown\":true", f);
    if (ev->stack_id) {
        uint32_t n;
        const uint32_t *fr = cw_stacks_frames(w->stacks, ev->stack_id, &n);
        fputs(",\"stack\":[", f);
        for (uint32_t i = 0; i < n; i++) {
            const char *e = frame_esc(w, fr[i]);
            if (!e) return CW_ENOMEM;
            if (i) fputc(',', f);
            fputs(e, f);
        }
        fputc(']', f);
    }
    fputs("}\n", f);
    return ferror(f) ? CW_EIO : 0;
}

int cw_trace_writer_close(cw_trace_writer_t *w, cw_diag_t *d)
{
    int rc = 0;
    if (!w) return 0;
    if (fflush(w->f) != 0 || ferror(w->f))
        rc = cw_diag_set(d, CW_EIO, "%s: cannot write the trace: %s", w->path, strerror(errno));
    if (w->own && fclose(w->f) != 0 && rc == 0)
        rc = cw_diag_set(d, CW_EIO, "%s: cannot close the trace: %s", w->path, strerror(errno));
    cw_free_strv(w->esc, w->nesc);
    free(w->path);
    free(w);
    return rc;
}
