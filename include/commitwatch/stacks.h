/* stacks.h - interning of frames and stacks.
 *
 * A frame is a string "module!function" (or "module!0xOFFSET", or a
 * pseudo-frame like "(before trace)"). Identical strings share one frame
 * id; identical frame lists share one stack id. Stack id 0 is the empty
 * stack and always exists; frame ids start at 1. Frames are stored
 * outermost caller first, allocating call last, as in the trace format.
 *
 * Each stack also caches a tag id (see tagger.h); CW_TAG_UNSET until the
 * tagger has looked at it.
 *
 * Thread: one owner thread (the core thread). Ids are dense and stable for
 * the lifetime of the table, so other modules keep plain uint32_t ids. */
#ifndef COMMITWATCH_STACKS_H
#define COMMITWATCH_STACKS_H

#include <stddef.h>
#include <stdint.h>

#define CW_TAG_UNSET UINT32_MAX

typedef struct cw_stacks cw_stacks_t;

/* 0 and *out set, or CW_ENOMEM. */
int cw_stacks_create(cw_stacks_t **out);
void cw_stacks_destroy(cw_stacks_t *s); /* accepts NULL */

/* Interns text[0..len) (need not be NUL-terminated). 0 or CW_ENOMEM. */
int cw_stacks_intern_frame(cw_stacks_t *s, const char *text, size_t len, uint32_t *out_frame);
/* Interns the frame list (outermost first). n == 0 gives stack 0. The
 * array is copied. 0 or CW_ENOMEM. */
int cw_stacks_intern(cw_stacks_t *s, const uint32_t *frames, uint32_t n, uint32_t *out_stack);
/* Convenience: interns each string, then the list. */
int cw_stacks_intern_strings(cw_stacks_t *s, const char *const *frames, uint32_t n,
                             uint32_t *out_stack);

/* A number no other table of this process has had, not even one freed
 * earlier at the same address: lets caches keyed by frame or stack id
 * (the stack-tag engine's) tell tables apart. Never 0. */
uint64_t cw_stacks_uid(const cw_stacks_t *s);

uint32_t cw_stacks_count(const cw_stacks_t *s);       /* stacks, including stack 0 */
/* Bytes the interner holds (tables, frame texts, frame id lists). */
size_t cw_stacks_memory(const cw_stacks_t *s);
uint32_t cw_stacks_frame_count(const cw_stacks_t *s); /* frames + 1 (id 0 unused) */
/* Borrowed pointer valid until the next intern call; *n set. */
const uint32_t *cw_stacks_frames(const cw_stacks_t *s, uint32_t stack_id, uint32_t *n);
/* Borrowed NUL-terminated text, stable for the table's lifetime. */
const char *cw_stacks_frame_text(const cw_stacks_t *s, uint32_t frame_id);

uint32_t cw_stacks_tag(const cw_stacks_t *s, uint32_t stack_id);
void cw_stacks_set_tag(cw_stacks_t *s, uint32_t stack_id, uint32_t tag_id);
/* Sets every stack's tag back to CW_TAG_UNSET (after a rule change). */
void cw_stacks_clear_tags(cw_stacks_t *s);

#endif
