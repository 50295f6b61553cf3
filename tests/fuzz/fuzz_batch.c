/* fuzz_batch.c - libFuzzer target for the batch's bytes as the
 * pending-batch journal stores them (cw_batch_decode, service/track/
 * batch.c; the journal's records are files beside the database that a
 * disk, a kill or a person may have damaged). Whatever the bytes: no
 * crash, no leak, no read past them, and a decoded batch encodes back to
 * exactly the input (the encoding is canonical: one batch, one byte
 * string), so nothing is silently changed on the way to the store. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/batch.h"
#include "commitwatch/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_batch: %s:%d: %s\n", __FILE__, __LINE__, #c);                    \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cw_batch_t *b = NULL;
    int rc = cw_batch_decode(data, size, &b);
    CHECK(rc == 0 || rc == CW_EPARSE || rc == CW_ENOMEM);
    CHECK((rc == 0) == (b != NULL));
    if (rc != 0) return 0;
    cw_buf_t e = {0};
    CHECK(cw_batch_encode(b, &e) == 0);
    CHECK(e.n == size && (size == 0 || memcmp(e.p, data, size) == 0));
    free(e.p);
    cw_batch_free(b);
    return 0;
}
