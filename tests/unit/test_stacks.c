/* test_stacks.c - interning of frames and stacks, and the tagger seam. */
#include "commitwatch/stacks.h"
#include "commitwatch/tagger.h"
#include "test.h"

int main(void)
{
    cw_stacks_t *s;
    ASSERT_OK(cw_stacks_create(&s));
    ASSERT_EQ(cw_stacks_count(s), 1); /* the empty stack */

    const char *a[] = {"app!main", "app!Operation1", "KernelBase!VirtualAlloc"};
    const char *b[] = {"app!main", "KernelBase!VirtualAlloc"};
    uint32_t sa, sb, sa2, s0;
    ASSERT_OK(cw_stacks_intern_strings(s, a, 3, &sa));
    ASSERT_OK(cw_stacks_intern_strings(s, b, 2, &sb));
    ASSERT_OK(cw_stacks_intern_strings(s, a, 3, &sa2));
    ASSERT_OK(cw_stacks_intern_strings(s, NULL, 0, &s0));
    ASSERT_EQ(sa, sa2);
    ASSERT_TRUE(sa != sb);
    ASSERT_EQ(s0, 0);
    ASSERT_EQ(cw_stacks_frame_count(s), 4); /* 3 distinct frames + unused id 0 */
    uint32_t n;
    const uint32_t *f = cw_stacks_frames(s, sb, &n);
    ASSERT_EQ(n, 2);
    ASSERT_STR_EQ(cw_stacks_frame_text(s, f[0]), "app!main");
    ASSERT_STR_EQ(cw_stacks_frame_text(s, f[1]), "KernelBase!VirtualAlloc");

    /* Many stacks force both tables to grow; ids stay stable. */
    char buf[64];
    uint32_t first = 0;
    for (int i = 0; i < 20000; i++) {
        snprintf(buf, sizeof buf, "mod!fn%d", i);
        const char *fr[] = {"app!main", buf};
        uint32_t id;
        ASSERT_OK(cw_stacks_intern_strings(s, fr, 2, &id));
        if (i == 0) first = id;
    }
    const char *fr0[] = {"app!main", "mod!fn0"};
    uint32_t again;
    ASSERT_OK(cw_stacks_intern_strings(s, fr0, 2, &again));
    ASSERT_EQ(again, first);
    ASSERT_EQ(cw_stacks_count(s), 3 + 20000); /* empty, a, b, fn0..fn19999 */

    /* Tagger seam: builtin says Other; pseudo-frames tag themselves. */
    cw_tagger_t *t;
    ASSERT_OK(cw_tagger_create_builtin(&t));
    const char *rd[] = {"(before trace)"};
    uint32_t srd;
    ASSERT_OK(cw_stacks_intern_strings(s, rd, 1, &srd));
    ASSERT_STR_EQ(cw_tagger_tag_name(t, cw_tagger_tag(t, s, sa)), "Other");
    ASSERT_STR_EQ(cw_tagger_tag_name(t, cw_tagger_tag(t, s, srd)), "(before trace)");
    ASSERT_EQ(cw_stacks_tag(s, srd), cw_tagger_tag(t, s, srd));
    cw_stacks_clear_tags(s);
    ASSERT_EQ(cw_stacks_tag(s, srd), CW_TAG_UNSET);
    cw_tagger_destroy(t);
    cw_stacks_destroy(s);
    TEST_DONE();
}
