/* export_pprof.c - a window's stacks as a pprof profile: the Profile
 * message of pprof's profile.proto, serialized by protobuf-c (the C code is
 * generated at build time from the profile.proto Debian ships with pprof,
 * CMakeLists.txt), gzipped with zlib as pprof writes it.
 *
 * The builder takes any samples (cw__pprof_write: a stack, its values,
 * its labels); the commit export makes one per process and stack.
 *
 * The commit profile: sample types impacting_bytes/bytes, transient_bytes/bytes,
 * commit_count/count (the three values of cw_export_value_t) and
 * commit_bytes/bytes (the bytes newly committed in the window, size_bytes:
 * what a profiling store shows as the commit rate, like alloc_space);
 * impacting_bytes the default; one sample per
 * process and stack, its locations leaf first; every distinct frame text
 * one Function (its name) and one Location (one Line of that function);
 * labels tag, process (its name) and pid, and the number instance (the
 * process instance id); time_nanos and duration_nanos the window. No
 * mappings: the frames are already symbolized text. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "analysis/export_int.h"
#include "analysis/export_pprof.h"
#include "analysis/profile.pb-c.h"
#include "commitwatch/common.h"

typedef Perftools__Profiles__Profile profile_t;
typedef Perftools__Profiles__Sample sample_t;
typedef Perftools__Profiles__Label label_t;
typedef Perftools__Profiles__Location location_t;
typedef Perftools__Profiles__Line line_t;
typedef Perftools__Profiles__Function function_t;
typedef Perftools__Profiles__ValueType value_type_t;

#define NLABELS 4
/* The export's values, then commit_bytes (pprof only: the flame graph
 * formats keep their three). */
#define NTYPES (CW_EXPORT__NVALUES + 1)
#define COMMIT_BYTES CW_EXPORT__NVALUES

/* Everything the message points into; freed at once. */
typedef struct pprof_build {
    cw__interner_t strings; /* the string table; "" first */
    cw__interner_t frames;  /* distinct frames: function and location id = index + 1 */
    sample_t *smp;
    sample_t **smpp;
    uint64_t *locids;
    int64_t *values;
    label_t *lab;
    label_t **labp;
    function_t *fn;
    function_t **fnp;
    location_t *loc;
    location_t **locp;
    line_t *line;
    line_t **linep;
    int64_t comment[2];
} pprof_build_t;

#define B(f) offsetof(pprof_build_t, f)
/* The arrays the build owns besides its two interners. */
static const size_t build_arrays[] = {B(smp), B(smpp), B(locids), B(values), B(lab),  B(labp),
                                      B(fn),  B(fnp),  B(loc),    B(locp),   B(line), B(linep)};
#undef B

static void build_free(pprof_build_t *b)
{
    cw__interner_free(&b->strings);
    cw__interner_free(&b->frames);
    cw_free_members(b, build_arrays, CW_ARRAY_LEN(build_arrays));
}

/* The string's index in the table, or -1 on ENOMEM. */
static int64_t str(pprof_build_t *b, const char *s)
{
    uint32_t i = cw__intern(&b->strings, s);
    return i == UINT32_MAX ? -1 : (int64_t)i;
}

/* The message of samples v[0..n), pointing into b. 0 or CW_ENOMEM. */
static int build(pprof_build_t *b, const cw__pprof_sample_t *v, size_t nsamples,
                 const cw__pprof_types_t *t, int64_t from_ns, int64_t to_ns, const char *name,
                 profile_t *prof, value_type_t vt[CW__PPROF_MAX_TYPES],
                 value_type_t *vtp[CW__PPROF_MAX_TYPES], char *comment, size_t comment_len)
{
    size_t nlocs = 0;
    for (size_t i = 0; i < nsamples; i++)
        nlocs += v[i].nframes ? v[i].nframes : 1;
    size_t ns = nsamples ? nsamples : 1, nt = (size_t)t->n;
    if (cw__interner_init(&b->strings) != 0 || cw__interner_init(&b->frames) != 0 ||
        !(b->smp = calloc(ns, sizeof *b->smp)) || !(b->smpp = calloc(ns, sizeof *b->smpp)) ||
        !(b->locids = calloc(nlocs ? nlocs : 1, sizeof *b->locids)) ||
        !(b->values = calloc(ns * nt, sizeof *b->values)) ||
        !(b->lab = calloc(ns * NLABELS, sizeof *b->lab)) ||
        !(b->labp = calloc(ns * NLABELS, sizeof *b->labp)))
        return CW_ENOMEM;
    /* The string table starts with "" (profile.proto requires it). */
    int64_t s_empty = str(b, "");
    int64_t k_tag = str(b, "tag"), k_proc = str(b, "process"), k_pid = str(b, "pid"),
            k_inst = str(b, "instance");
    if (s_empty != 0 || k_tag < 0 || k_proc < 0 || k_pid < 0 || k_inst < 0) return CW_ENOMEM;
    for (int x = 0; x < t->n; x++) {
        perftools__profiles__value_type__init(&vt[x]);
        vt[x].type = str(b, t->name[x]);
        vt[x].unit = str(b, t->unit[x]);
        if (vt[x].type < 0 || vt[x].unit < 0) return CW_ENOMEM;
        vtp[x] = &vt[x];
    }

    size_t li = 0;
    for (size_t k = 0; k < nsamples; k++) {
        const cw__pprof_sample_t *s = &v[k];
        sample_t *sm = &b->smp[k];
        perftools__profiles__sample__init(sm);
        b->smpp[k] = sm;
        /* Leaf first: the samples' frames are outermost first. */
        sm->location_id = &b->locids[li];
        for (uint32_t f = s->nframes; f-- > 0;) {
            uint32_t fi = cw__intern(&b->frames, s->frames[f]);
            if (fi == UINT32_MAX) return CW_ENOMEM;
            b->locids[li++] = (uint64_t)fi + 1;
        }
        if (s->nframes == 0) {
            uint32_t fi = cw__intern(&b->frames, CW__EXPORT_NO_FRAMES);
            if (fi == UINT32_MAX) return CW_ENOMEM;
            b->locids[li++] = (uint64_t)fi + 1;
        }
        sm->n_location_id = (size_t)(&b->locids[li] - sm->location_id);
        sm->value = &b->values[k * nt];
        sm->n_value = nt;
        memcpy(sm->value, s->value, nt * sizeof *sm->value);
        label_t *l = &b->lab[k * NLABELS];
        for (int x = 0; x < NLABELS; x++) {
            perftools__profiles__label__init(&l[x]);
            b->labp[k * NLABELS + (size_t)x] = &l[x];
        }
        l[0].key = k_tag;
        l[0].str = str(b, s->tag ? s->tag : "");
        l[1].key = k_proc;
        l[1].str = str(b, s->process ? s->process : "");
        l[2].key = k_pid;
        l[2].num = s->pid;
        l[3].key = k_inst;
        l[3].num = s->instance;
        if (l[0].str < 0 || l[1].str < 0) return CW_ENOMEM;
        /* No tag: the other three. */
        sm->label = &b->labp[k * NLABELS + (s->tag ? 0 : 1)];
        sm->n_label = s->tag ? NLABELS : NLABELS - 1;
    }

    /* One function and one location per distinct frame. */
    size_t nf = b->frames.n, nfa = nf ? nf : 1;
    if (!(b->fn = calloc(nfa, sizeof *b->fn)) || !(b->fnp = calloc(nfa, sizeof *b->fnp)) ||
        !(b->loc = calloc(nfa, sizeof *b->loc)) || !(b->locp = calloc(nfa, sizeof *b->locp)) ||
        !(b->line = calloc(nfa, sizeof *b->line)) || !(b->linep = calloc(nfa, sizeof *b->linep)))
        return CW_ENOMEM;
    for (size_t f = 0; f < nf; f++) {
        int64_t s_frame = str(b, b->frames.v[f]);
        if (s_frame < 0) return CW_ENOMEM;
        perftools__profiles__function__init(&b->fn[f]);
        b->fn[f].id = f + 1;
        b->fn[f].name = s_frame;
        b->fn[f].system_name = s_frame;
        b->fnp[f] = &b->fn[f];
        perftools__profiles__line__init(&b->line[f]);
        b->line[f].function_id = f + 1;
        b->linep[f] = &b->line[f];
        perftools__profiles__location__init(&b->loc[f]);
        b->loc[f].id = f + 1;
        b->loc[f].n_line = 1;
        b->loc[f].line = &b->linep[f];
        b->locp[f] = &b->loc[f];
    }

    snprintf(comment, comment_len, "commitwatch %s: window [%" PRId64 ", %" PRId64 ") ns",
             name ? name : "", from_ns, to_ns);
    int64_t s_comment = str(b, comment), s_default = str(b, t->name[t->default_type]);
    if (s_comment < 0 || s_default < 0) return CW_ENOMEM;
    b->comment[0] = s_comment;

    perftools__profiles__profile__init(prof);
    prof->n_sample_type = (size_t)t->n;
    prof->sample_type = vtp;
    prof->n_sample = nsamples;
    prof->sample = b->smpp;
    prof->n_location = nf;
    prof->location = b->locp;
    prof->n_function = nf;
    prof->function = b->fnp;
    prof->n_string_table = b->strings.n;
    prof->string_table = (char **)b->strings.v;
    prof->time_nanos = from_ns;
    prof->duration_nanos = to_ns > from_ns ? to_ns - from_ns : 0;
    prof->n_comment = 1;
    prof->comment = b->comment;
    prof->default_sample_type = s_default;
    return 0;
}

/* gzip of in[0..n), as pprof's readers expect. 0, CW_ENOMEM or CW_EIO. */
static int gzip(const uint8_t *in, size_t n, char **out, size_t *len, cw_diag_t *d)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (n > UINT32_MAX / 2)
        return cw_diag_set(d, CW_ERANGE, "the pprof profile is too large (%zu bytes)", n);
    /* windowBits 15 + 16: a gzip header and trailer instead of zlib's. */
    int zr = deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    if (zr != Z_OK)
        return cw_diag_set(d, zr == Z_MEM_ERROR ? CW_ENOMEM : CW_EIO, "zlib: deflateInit2: %s",
                           zError(zr));
    uLong bound = deflateBound(&z, (uLong)n); /* a little over n: fits uInt */
    unsigned char *buf = malloc(bound ? bound : 1);
    if (!buf) {
        deflateEnd(&z);
        return cw_diag_set(d, CW_ENOMEM, "out of memory while compressing the pprof profile");
    }
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = buf;
    z.avail_out = (uInt)bound;
    zr = deflate(&z, Z_FINISH);
    size_t done = z.total_out;
    deflateEnd(&z);
    if (zr != Z_STREAM_END) {
        free(buf);
        return cw_diag_set(d, CW_EIO, "zlib: deflate did not finish (%d)", zr);
    }
    *out = (char *)buf;
    *len = done;
    return 0;
}

int cw__pprof_write(const cw__pprof_sample_t *v, size_t n, const cw__pprof_types_t *t,
                    int64_t from_ns, int64_t to_ns, const char *name, char **out, size_t *len,
                    cw_diag_t *d)
{
    pprof_build_t b;
    profile_t prof;
    value_type_t vt[CW__PPROF_MAX_TYPES];
    value_type_t *vtp[CW__PPROF_MAX_TYPES];
    char comment[512];
    memset(&b, 0, sizeof b);
    int rc = build(&b, v, n, t, from_ns, to_ns, name, &prof, vt, vtp, comment, sizeof comment);
    uint8_t *packed = NULL;
    if (rc == 0) {
        size_t sz = perftools__profiles__profile__get_packed_size(&prof);
        packed = malloc(sz ? sz : 1);
        if (!packed)
            rc = CW_ENOMEM;
        else if (perftools__profiles__profile__pack(&prof, packed) != sz)
            rc = cw_diag_set(d, CW_EIO, "protobuf-c packed a pprof profile of another size");
        else
            rc = gzip(packed, sz, out, len, d);
    }
    if (rc == CW_ENOMEM) cw_diag_set(d, rc, "out of memory while writing the pprof profile");
    free(packed);
    build_free(&b);
    return rc;
}

int cw__export_pprof(const cw_proc_report_t *procs, uint32_t nprocs, int64_t from_ns,
                     int64_t to_ns, const char *name, char **out, size_t *len, cw_diag_t *d)
{
    /* The three export values, then commit_bytes (pprof only). */
    cw__pprof_types_t t = {.n = NTYPES, .default_type = CW_EXPORT_IMPACTING};
    for (int x = 0; x < CW_EXPORT__NVALUES; x++) {
        t.name[x] = cw_export_value_name((cw_export_value_t)x);
        t.unit[x] = x == CW_EXPORT_COUNT ? "count" : "bytes";
    }
    t.name[COMMIT_BYTES] = "commit_bytes";
    t.unit[COMMIT_BYTES] = "bytes";
    size_t n = 0;
    for (uint32_t i = 0; i < nprocs; i++)
        n += procs[i].nstacks;
    cw__pprof_sample_t *v = calloc(n ? n : 1, sizeof *v);
    if (!v) return cw_diag_set(d, CW_ENOMEM, "out of memory while writing the pprof profile");
    size_t k = 0;
    for (uint32_t i = 0; i < nprocs; i++)
        for (uint32_t j = 0; j < procs[i].nstacks; j++, k++) {
            const cw_stack_report_t *s = &procs[i].stacks[j];
            v[k].frames = s->frames;
            v[k].nframes = s->nframes;
            for (int x = 0; x < CW_EXPORT__NVALUES; x++)
                v[k].value[x] = cw_export_stack_value(&s->figs, (cw_export_value_t)x);
            v[k].value[COMMIT_BYTES] =
                s->figs.size_bytes > INT64_MAX ? INT64_MAX : (int64_t)s->figs.size_bytes;
            v[k].tag = s->tag ? s->tag : "";
            v[k].process = procs[i].name;
            v[k].pid = procs[i].pid;
            v[k].instance = procs[i].id;
        }
    int rc = cw__pprof_write(v, n, &t, from_ns, to_ns, name, out, len, d);
    free(v);
    return rc;
}
