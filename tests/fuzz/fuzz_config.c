/* fuzz_config.c - libFuzzer target for the configuration file
 * (service/app/config.c, `--config FILE` and SIGHUP): the input is one
 * file, read from memory (fmemopen) by cw_config_load_stream, what
 * cw_config_load runs after opening the file and checking its
 * permissions, and loaded over the defaults. It must load (0) or be refused with CW_EPARSE and a
 * message naming file:line, never crash or leak. What it keeps must be
 * whole: every string value must stand in the file as a value does (its
 * end followed by a blank, `#`, a line end or the end of the file), so a
 * long line is never cut into a value and a second line (a line past
 * 4095 bytes, or with a NUL byte, is an error); durations are not
 * negative. Unknown keys are warned about (to a memory stream, so
 * their text is exercised). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_config: invariant failed: %s:%d: %s\n", __FILE__, __LINE__,     \
                    #c);                                                                           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The name messages give the input. */
static const char path[] = "fuzz.conf";

/* Is v somewhere in text (n bytes) followed by what ends a value? */
static bool stands_whole(const char *text, size_t n, const char *v)
{
    size_t k = strlen(v);
    if (k == 0) return true;
    for (const char *p = text; p + k <= text + n; p++) {
        p = memchr(p, v[0], (size_t)(text + n - p));
        if (!p || p + k > text + n) return false;
        if (memcmp(p, v, k) != 0) continue;
        if (p + k == text + n) return true;
        char c = p[k];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f' || c == '#')
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* fmemopen refuses an empty buffer: an empty file is a 1-byte buffer
     * read from its end. */
    FILE *f = fmemopen(size ? (void *)data : (void *)"", size ? size : 1, "r");
    CHECK(f != NULL);
    if (!size) fgetc(f);

    cw_config_t c, def;
    CHECK(cw_config_init(&c) == 0 && cw_config_init(&def) == 0);
    char *warnings = NULL;
    size_t wlen = 0;
    FILE *warn = open_memstream(&warnings, &wlen);
    cw_diag_t d = {{0}};
    int rc = cw_config_load_stream(&c, f, path, warn, &d);
    fclose(f);
    if (warn) fclose(warn);
    free(warnings);
    if (rc == 0) {
        const char *text = (const char *)data;
        char *strs[] = {c.db,     c.source,      c.listen,   c.token,           c.access_log,
                        c.web_root, c.log_level, c.images,   c.symbol_path,     c.alertmanager_url,
                        c.webhook_url, c.alert_exec, c.alert_log, c.external_url};
        char *defs[] = {def.db,     def.source,      def.listen,   def.token,       def.access_log,
                        def.web_root, def.log_level, def.images,   def.symbol_path,
                        def.alertmanager_url, def.webhook_url, def.alert_exec, def.alert_log,
                        def.external_url};
        for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
            if (strs[i] && !(defs[i] && strcmp(strs[i], defs[i]) == 0))
                CHECK(stands_whole(text, size, strs[i]));
        for (size_t i = 0; i < c.nstacktags; i++) CHECK(stands_whole(text, size, c.stacktags[i]));
        for (size_t i = 0; i < c.nalert_rules; i++)
            CHECK(stands_whole(text, size, c.alert_rules[i]));
        for (int t = 0; t < 3; t++) CHECK(c.store.retention_ns[t] >= 0);
        CHECK(c.fold_lifetime_ns >= 0 && c.alert_interval_ns >= 0 && c.alert_step_ns >= 0);
        CHECK(c.alert_resend_ns >= 0 && c.alert_repeat_ns >= 0 && c.alert_exec_timeout_ns >= 0);
    } else {
        CHECK(rc == CW_EPARSE);
        CHECK(strncmp(d.msg, path, strlen(path)) == 0 && d.msg[strlen(path)] == ':');
    }
    cw_config_free(&c);
    cw_config_free(&def);
    return 0;
}
