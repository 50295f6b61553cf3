/* fuzz_etl_reader.c - libFuzzer target for the .etl reader: the input is a
 * whole file. It is written to a temporary file in /dev/shm (the reader reads files)
 * and read twice, as `commitwatch etl info --images` reads it and as
 * `--source etl:` does (every event through the stack joiner into
 * interned stacks). Either may refuse the file (CW_EPARSE, CW_EIO, or a
 * clock it cannot convert), never crash, hang or leak; the source's
 * events must come in time order. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commitwatch/etl.h"
#include "commitwatch/log.h"
#include "commitwatch/stacks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_etl_reader: invariant failed: %s\n", #c);                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static char path[64];

typedef struct sink_state {
    int64_t last;
    uint64_t n;
    cw_stacks_t *stacks;
} sink_state_t;

static int on_event(void *ctx, const cw_event_t *ev)
{
    sink_state_t *s = ctx;
    CHECK(s->n == 0 || ev->ts >= s->last);
    CHECK(ev->op < CW_OP__COUNT);
    if (ev->op == CW_OP_PROCESS_START) CHECK(ev->name != NULL && strlen(ev->name) < (1u << 20));
    if (ev->stack_id) {
        uint32_t n = 0;
        const uint32_t *f = cw_stacks_frames(s->stacks, ev->stack_id, &n);
        for (uint32_t i = 0; i < n; i++) CHECK(cw_stacks_frame_text(s->stacks, f[i]) != NULL);
    }
    s->last = ev->ts;
    s->n++;
    return 0;
}

static void remove_files(void)
{
    remove(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        /* In memory (tmpfs) where there is one (see fuzz_trace.c). */
        const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof path, "%s/fuzz_etl_reader.%ld.etl", tmp, (long)getpid());
        atexit(remove_files);
        cw_log_set_level(CW_LOG_ERROR); /* the reader's warnings are expected here */
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);

    cw_etl_info_t *in = NULL;
    cw_diag_t d;
    int rc = cw_etl_info(path, true, &in, &d);
    if (rc == 0) {
        CHECK(in->file.buffers >= 1);
        for (size_t i = 0; i < in->nprocs; i++) CHECK(in->procs[i].name != NULL);
        for (size_t i = 0; i < in->nimages; i++) CHECK(in->images[i].name != NULL);
        for (size_t i = 1; i < in->ncounts; i++) {
            const cw_etl_count_t *a = &in->counts[i - 1], *b = &in->counts[i];
            CHECK(a->group < b->group || (a->group == b->group && (a->type < b->type ||
                  (a->type == b->type && a->version < b->version))));
        }
        cw_etl_info_free(in);
    } else {
        CHECK(d.msg[0] != '\0');
    }

    sink_state_t st = {0};
    if (cw_stacks_create(&st.stacks) != 0) return 0;
    cw_source_opts_t so = {.arg = path, .stacks = st.stacks};
    void *src = NULL;
    if (cw_source_etl.open(&src, &so, &d) == 0) {
        cw_source_sink_t sink = {&st, on_event, NULL, NULL, NULL, NULL};
        rc = cw_source_etl.run(src, &sink, &d);
        CHECK(rc == 0 || rc == CW_EIO || rc == CW_ENOMEM);
        cw_source_etl.close(src);
    }
    cw_stacks_destroy(st.stacks);
    return 0;
}
