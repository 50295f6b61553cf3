/* fuzz_cells.c - libFuzzer target for a cell's bytes as the store reads
 * them back from its database (cw__cell_decode, service/store/cells.c; a
 * file may be damaged, or written by hand with sqlite3). Whatever the
 * bytes: no crash, no leak, no read past them; a cell that decodes
 * encodes back (at its own time unit) to one that decodes to the same
 * rows, so nothing read is silently changed by the writer's merges. The
 * first 8 bytes are the cell's bucket, the rest its data. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/error.h"
#include "store/cells.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_cells: %s:%d: %s\n", __FILE__, __LINE__, #c);                    \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8) return 0;
    int64_t bucket = 0;
    memcpy(&bucket, data, 8);
    cw__cell_rows_t a = {0}, b = {0};
    int64_t unit = 0;
    /* A copy of exactly the data's size: a read past it is ASan's. */
    uint8_t *cell = malloc(size - 8 ? size - 8 : 1);
    CHECK(cell != NULL);
    memcpy(cell, data + 8, size - 8);
    int rc = cw__cell_decode(cell, size - 8, bucket, 1, &a, &unit);
    CHECK(rc == 0 || rc == CW_EDB || rc == CW_ENOMEM);
    /* Encoded rows go by stack; a damaged cell's stacks may not ascend. */
    bool sorted = true;
    for (uint32_t i = 1; i < a.c.n; i++)
        sorted = sorted && a.c.v[i - 1].stack < a.c.v[i].stack;
    for (uint32_t i = 1; i < a.r.n; i++)
        sorted = sorted && a.r.v[i - 1].stack <= a.r.v[i].stack;
    if (rc == 0 && sorted && !(bucket == INT64_MIN && a.r.n)) {
        cw_buf_t e = {0};
        int64_t ub = 0;
        CHECK(cw__cell_encode(&e, bucket, unit, a.c.v, a.c.n, a.r.v, a.r.n, NULL, NULL) == 0);
        CHECK(cw__cell_decode(e.p, e.n, bucket, 1, &b, &ub) == 0);
        CHECK(b.c.n == a.c.n && b.r.n == a.r.n);
        CHECK(a.c.n == 0 || memcmp(a.c.v, b.c.v, a.c.n * sizeof *a.c.v) == 0);
        CHECK(a.r.n == 0 || memcmp(a.r.v, b.r.v, a.r.n * sizeof *a.r.v) == 0);
        free(e.p);
    }
    cw__cell_rows_free(&a);
    cw__cell_rows_free(&b);
    free(cell);
    return 0;
}
