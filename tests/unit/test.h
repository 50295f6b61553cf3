/* test.h - the assertions of every unit test: always on, printing both
 * sides and where they fired; a failed assertion exits nonzero at once. */
#ifndef CW_TEST_H
#define CW_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <unistd.h>
#endif

/* RUNNING_ON_VALGRIND: nonzero under valgrind (its client request), 0
 * where valgrind's header is missing (MinGW): a test that measures time
 * prints instead of asserting there. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

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

/* ctest counts this exit status as "skipped" (tests/CMakeLists.txt:
 * SKIP_RETURN_CODE), the same as tests/e2e/cwtest.py's SKIP. */
#define CW_TEST_SKIP_CODE 77

static int cw_test_skipped; /* parts of the test that could not run here */

/* True in CI: CI set (to anything but 0, false or no), or running as root
 * (.ci/run runs as root without setting CI). cwtest.py's in_ci(). */
static inline int cw_test_in_ci(void)
{
    const char *ci = getenv("CI");
    if (ci && *ci && strcmp(ci, "0") != 0 && strcmp(ci, "false") != 0 && strcmp(ci, "no") != 0)
        return 1;
#ifndef _WIN32
    if (geteuid() == 0) return 1;
#endif
    return 0;
}

/* Part of the test cannot run here, for want of a prerequisite (what the
 * format says). In CI that is a failure, at once; elsewhere it prints SKIP,
 * the rest of the test runs, and TEST_DONE() exits 77 (ctest: skipped)
 * instead of 0: a test that left out checks does not count as passed. */
#define TEST_SKIP_PART(...)                                                                        \
    do {                                                                                           \
        if (cw_test_in_ci()) {                                                                     \
            fprintf(stderr, "%s:%d: FAIL: missing prerequisite (in CI, or as root, a skip is a "    \
                            "failure): ", __FILE__, __LINE__);                                     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
        printf("SKIP ");                                                                           \
        printf(__VA_ARGS__);                                                                       \
        putchar('\n');                                                                             \
        cw_test_skipped++;                                                                         \
    } while (0)

/* A test that ran no check proved nothing: it fails. One that skipped a
 * part (TEST_SKIP_PART) exits 77 once the rest passed. */
#define TEST_DONE()                                                                                \
    do {                                                                                           \
        if (cw_test_checks == 0) {                                                                 \
            fprintf(stderr, "%s: FAIL: no check ran\n", __FILE__);                                 \
            return 1;                                                                              \
        }                                                                                          \
        if (cw_test_skipped) {                                                                     \
            printf("%d checks passed, %d parts SKIPPED\n", cw_test_checks, cw_test_skipped);       \
            fflush(stdout);                                                                        \
            return CW_TEST_SKIP_CODE;                                                              \
        }                                                                                          \
        printf("%d checks passed\n", cw_test_checks);                                              \
        return 0;                                                                                  \
    } while (0)

#endif
