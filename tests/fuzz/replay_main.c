/* replay_main.c - runs a libFuzzer target's committed corpus once, without
 * libFuzzer: the fast test tier's fuzz step (docs/TESTING.md). Linked with
 * one fuzz_*.c harness into fuzz_<name>_replay in the ordinary (ASan +
 * UBSan) build, so replaying the seeds needs no clang build; exploring
 * new inputs is the full tier's (tests/fuzz/run_fuzz.sh, libFuzzer).
 *
 *   fuzz_<name>_replay [-max_len=N] [-flag=value ...] FILE|DIR...
 *
 * Every regular file under each DIR (recursively, in name order) and each
 * FILE is read and passed to LLVMFuzzerTestOneInput once, cut to max_len
 * bytes as libFuzzer cuts it. Other -flag=value arguments are libFuzzer's
 * (-dict, -detect_leaks) and are ignored. An input that breaks an
 * invariant aborts (the harness's CHECK) or is reported by a sanitizer;
 * a replay of no input at all fails: it would prove nothing. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static size_t max_len = SIZE_MAX;
static unsigned long replayed;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    int failed = ferror(f) || !buf;
    fclose(f);
    if (failed) {
        fprintf(stderr, "replay: %s: cannot read it\n", path);
        free(buf);
        return -1;
    }
    /* A copy of exactly the input's bytes, so a read past it is caught. */
    size_t len = n < max_len ? n : max_len;
    uint8_t *in = malloc(len ? len : 1);
    if (!in) {
        free(buf);
        return -1;
    }
    memcpy(in, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(in, len);
    free(in);
    replayed++;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) return S_ISREG(st.st_mode) ? replay_file(path) : 0;
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **more = realloc(names, cap * sizeof *names);
            if (!more) {
                rc = -1;
                break;
            }
            names = more;
        }
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            rc = -1;
            break;
        }
        snprintf(names[n++], len, "%s/%s", path, e->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0) rc = replay_path(names[i]);
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int paths = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            if (!strncmp(argv[i], "-max_len=", 9)) max_len = strtoull(argv[i] + 9, NULL, 10);
            continue;
        }
        paths++;
        if (replay_path(argv[i]) != 0) return 1;
    }
    if (!replayed) {
        fprintf(stderr, "replay: FAIL: no input under %d path(s): an empty corpus proves nothing\n",
                paths);
        return 1;
    }
    printf("replay: %lu inputs ran\n", replayed);
    return 0;
}
