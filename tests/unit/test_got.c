/* test_got.c - cwh_got_hook / cwh_got_unhook (platform/posix/intarget/
 * got.h), in this process: after hooking malloc, this program's own calls
 * and the C library's internal ones (fopen's, through libc's read-only
 * GOT: the RELRO path) reach the hook; with this program named as `self`
 * its own calls do not; after unhooking none do; a name nothing imports
 * rewrites nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/posix/intarget/got.h"
#include "test.h"

static void *(*real_malloc)(size_t);
/* volatile: the compiler takes malloc for a function that touches no
 * global of ours, and would read these once. */
static volatile int calls;
static void *volatile sink;

static void *hook_malloc(size_t n)
{
    calls++;
    return real_malloc(n);
}

static int direct_calls(void)
{
    calls = 0;
    sink = malloc(24);
    free(sink);
    return calls;
}

/* fopen allocates its FILE with malloc inside the C library (and neither
 * ASan nor valgrind replace fopen's allocation, as they do strdup's). */
static int libc_calls(void)
{
    calls = 0;
    FILE *f = fopen("/dev/null", "r");
    ASSERT_TRUE(f != NULL);
    fclose(f);
    return calls;
}

int main(void)
{
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    ASSERT_TRUE(real_malloc != NULL);
    const cwh_hook_t hooks[] = {{"malloc", (void *)hook_malloc}};
    ASSERT_EQ(direct_calls(), 0);

    size_t skipped = 9;
    int n = cwh_got_hook(hooks, 1, NULL, &skipped);
    ASSERT_TRUE(n >= 2); /* this program's slot and libc's at least */
    ASSERT_EQ(skipped, 0);
    ASSERT_EQ(direct_calls(), 1);
    ASSERT_EQ(libc_calls(), 1);
    /* Hooking again finds every slot ours already. */
    ASSERT_EQ(cwh_got_hook(hooks, 1, NULL, &skipped), 0);
    ASSERT_EQ(cwh_got_unhook(), n);
    ASSERT_EQ(direct_calls(), 0);
    ASSERT_EQ(libc_calls(), 0);

    /* This program as `self`: its slots are left alone, libc's are not. */
    int m = cwh_got_hook(hooks, 1, (const void *)main, &skipped);
    ASSERT_EQ(m, n - 1);
    ASSERT_EQ(direct_calls(), 0);
    ASSERT_EQ(libc_calls(), 1);
    ASSERT_EQ(cwh_got_unhook(), m);
    ASSERT_EQ(libc_calls(), 0);

    const cwh_hook_t none[] = {{"cw_no_such_function_anywhere", (void *)hook_malloc}};
    ASSERT_EQ(cwh_got_hook(none, 1, NULL, &skipped), 0);
    ASSERT_EQ(cwh_got_unhook(), 0);
    TEST_DONE();
}
