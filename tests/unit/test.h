/* test.h - the assertions of every unit test: always on, printing both
 * sides and where they fired; a failed assertion exits nonzero at once. */
#ifndef CW_TEST_H
#define CW_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cw_test_checks;

#define CW_FAIL(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

#define ASSERT_TRUE(c)                                                                             \
    do {                                                                                           \
        cw_test_checks++;                                                                          \
        if (!(c)) CW_FAIL("assertion failed: %s", #c);                                             \
    } while (0)

#define ASSERT_EQ(a, b)                                                                            \
    do {                                                                                           \
        long long cw__a = (long long)(a), cw__b = (long long)(b);                                  \
        cw_test_checks++;                                                                          \
        if (cw__a != cw__b) CW_FAIL("%s == %s: %lld != %lld", #a, #b, cw__a, cw__b);               \
    } while (0)

#define ASSERT_U64_EQ(a, b)                                                                        \
    do {                                                                                           \
        unsigned long long cw__a = (unsigned long long)(a), cw__b = (unsigned long long)(b);       \
        cw_test_checks++;                                                                          \
        if (cw__a != cw__b) CW_FAIL("%s == %s: %llu != %llu", #a, #b, cw__a, cw__b);               \
    } while (0)

#define ASSERT_STR_EQ(a, b)                                                                        \
    do {                                                                                           \
        const char *cw__a = (a), *cw__b = (b);                                                     \
        cw_test_checks++;                                                                          \
        if (!cw__a || !cw__b || strcmp(cw__a, cw__b) != 0)                                         \
            CW_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, cw__a ? cw__a : "(null)",                \
                    cw__b ? cw__b : "(null)");                                                     \
    } while (0)

#define ASSERT_OK(expr)                                                                            \
    do {                                                                                           \
        int cw__rc = (expr);                                                                       \
        cw_test_checks++;                                                                          \
        if (cw__rc != 0) CW_FAIL("%s returned %d", #expr, cw__rc);                                 \
    } while (0)

/* A test that ran no check proved nothing: it fails. */
#define TEST_DONE()                                                                                \
    do {                                                                                           \
        if (cw_test_checks == 0) {                                                                 \
            fprintf(stderr, "%s: FAIL: no check ran\n", __FILE__);                                 \
            return 1;                                                                              \
        }                                                                                          \
        printf("%d checks passed\n", cw_test_checks);                                              \
        return 0;                                                                                  \
    } while (0)

#endif
