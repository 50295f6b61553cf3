/* smaps.c - what /proc says about a process's memory: its VMAs with the
 * flags that decide the commit charge (smaps VmFlags ac, wr, sh, nr, ht),
 * its executable file mappings, its break, its names.
 *
 * Used for the rundown when tracing starts, after each exec (the kernel
 * maps the new image without mmap calls), after lost events (resync), and
 * for the question of mprotect removing write (shadow.c; hundreds a second
 * from some programs: read up to the range only, and reused,
 * cw_perf__acct_cache_t). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "commitwatch/error.h"
#include "commitwatch/platform.h"
#include "sources/perf/perf_types.h"

/* A teardown list, alike to other destroy functions (store_pool.c's) in form only. */
void cw_perf__snapshot_free(cw_perf__snapshot_t *snap)
{
    if (!snap) return;
    for (size_t i = 0; i < snap->nx; i++)
        free(snap->x[i].path);
    free(snap->seg);
    free(snap->x);
    memset(snap, 0, sizeof *snap);
}

/* start_brk, field 47 of /proc/PID/stat (after the ")" of comm). */
static uint64_t start_brk(uint32_t pid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return 0;
    p++;
    /* Field 3 follows ")"; walk to field 47. */
    for (int field = 2; field < 46 && p; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* Whether an smaps line is a VMA's header ("start-end perms ..."): hex
 * digits then '-'. The other lines ("Anonymous:", "AnonHugePages:",
 * "FilePmdMapped:" start with hex letters too) are told apart without
 * sscanf, which was a tenth of the perf thread's time. */
static bool is_header(const char *line)
{
    size_t i = 0;
    while (isxdigit((unsigned char)line[i]))
        i++;
    return i > 0 && line[i] == '-';
}

/* Parses one smaps header "start-end perms offset maj:min inode path". */
static int header(const char *line, cw_perf__seg_t *g, char *perms, uint64_t *pgoff, unsigned *maj,
                  unsigned *min, uint64_t *ino, const char **path)
{
    int used = 0;
    uint64_t a, b;
    if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 "%n", &a, &b, perms,
               pgoff, maj, min, ino, &used) != 7)
        return 0;
    const char *p = line + used;
    while (*p == ' ' || *p == '\t')
        p++;
    *path = p;
    g->start = a;
    g->end = b;
    g->flags = 0;
    g->stack_id = 0;
    return 1;
}

/* Reads /proc/PID/smaps into snap up to the first VMA starting at or
 * after stop (UINT64_MAX: all of it): the kernel writes smaps as it is
 * read, walking each VMA's pages, so what is not read is not computed.
 * full: also the executable mappings and the break. *cut is set when it
 * stopped before the end. */
static int smaps_scan(uint32_t pid, cw_perf__snapshot_t *snap, uint64_t stop, bool full, bool *cut)
{
    char path[64];
    cw_perf__snapshot_free(snap);
    snprintf(path, sizeof path, "/proc/%u/smaps", pid);
    FILE *f = fopen(path, "re");
    if (!f) return errno == EACCES || errno == EPERM ? CW_EPERM : CW_ENOENT;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    int rc = 0;
    cw_perf__seg_t *cur = NULL;
    uint64_t heap_end = 0;
    while ((len = getline(&line, &lcap, f)) > 0) {
        if (line[len - 1] == '\n') line[--len] = 0;
        cw_perf__seg_t g;
        char perms[8] = {0};
        uint64_t pgoff, ino;
        unsigned maj, min;
        const char *p;
        if (is_header(line) && header(line, &g, perms, &pgoff, &maj, &min, &ino, &p)) {
            if (g.start >= stop) {
                *cut = true;
                break;
            }
            if ((rc = CW_RESERVE(snap->seg, snap->cap, snap->n + 1))) break;
            if (perms[1] == 'w') g.flags |= CW__SEG_WRITE;
            if (perms[3] == 's') g.flags |= CW__SEG_SHARED;
            if (p[0] != '/') g.flags |= CW__SEG_ANON;
            if (strcmp(p, "[stack]") == 0) g.flags |= CW__SEG_STACK;
            if (strcmp(p, "[heap]") == 0) {
                g.flags |= CW__SEG_HEAP;
                heap_end = g.end;
            }
            snap->seg[snap->n] = g;
            cur = &snap->seg[snap->n++];
            if (full && perms[2] == 'x' && p[0] == '/') {
                if ((rc = CW_RESERVE(snap->x, snap->xcap, snap->nx + 1))) break;
                cw_perf__xmap_t *x = &snap->x[snap->nx];
                x->start = g.start;
                x->end = g.end;
                x->pgoff = pgoff;
                x->dev = makedev(maj, min);
                x->ino = ino;
                x->path = strdup(p);
                if (!x->path) {
                    rc = CW_ENOMEM;
                    break;
                }
                snap->nx++;
            }
            continue;
        }
        if (cur && strncmp(line, "VmFlags:", 8) == 0) {
            /* Two-letter flags separated by spaces. */
            for (char *t = line + 8; *t; t++) {
                if (t[0] == ' ' || !t[1]) continue;
                if (t[2] && t[2] != ' ') continue;
                if (t[0] == 'a' && t[1] == 'c')
                    cur->flags |= CW__SEG_ACCT;
                else if (t[0] == 'n' && t[1] == 'r')
                    cur->flags |= CW__SEG_NORES;
                else if (t[0] == 'h' && t[1] == 't')
                    cur->flags |= CW__SEG_HUGE;
                /* wr and sh also come from perms; VmFlags is the kernel's word. */
                else if (t[0] == 'w' && t[1] == 'r')
                    cur->flags |= CW__SEG_WRITE;
                else if (t[0] == 's' && t[1] == 'h')
                    cur->flags |= CW__SEG_SHARED;
                t++;
            }
        }
    }
    free(line);
    fclose(f);
    if (rc) {
        cw_perf__snapshot_free(snap);
        return rc;
    }
    if (snap->n == 0) return CW_ENOENT; /* kernel thread, zombie, or gone */
    if (full) snap->brk = heap_end ? heap_end : CW__PAGE_UP(start_brk(pid));
    return 0;
}

int cw_perf__smaps_read(uint32_t pid, cw_perf__snapshot_t *snap)
{
    bool cut = false;
    return smaps_scan(pid, snap, UINT64_MAX, true, &cut);
}

/* Asked for every mprotect that removes write from a charged anonymous
 * range (the soak's churners: hundreds a second, each read of smaps
 * walking the pages of every VMA), so only the VMAs up to the range are
 * read, and a read serves the later queries it can answer
 * (cw_perf__acct_cache_t). */
int cw_perf__smaps_query_acct(cw_perf__acct_cache_t *c, uint32_t pid, int64_t call_ts,
                              uint64_t addr, uint64_t len)
{
    c->queries++;
    size_t k = 0, same = CW_PERF__ACCT_READS;
    for (size_t i = 0; i < CW_PERF__ACCT_READS; i++) {
        if (c->e[i].at && c->e[i].pid == pid) {
            if (c->e[i].at > call_ts && addr + len <= c->e[i].upto) {
                k = i;
                goto answer;
            }
            same = i;
        }
        if (c->e[i].at < c->e[k].at) k = i; /* the least recent (or an empty one) */
    }
    if (same < CW_PERF__ACCT_READS) k = same; /* one read per process */
    bool cut = false;
    c->reads++;
    c->e[k].pid = pid;
    c->e[k].at = cw_plat_mono_ns();
    if (smaps_scan(pid, &c->e[k].snap, addr + len, false, &cut) != 0) {
        c->e[k].at = 0;
        cw_perf__snapshot_free(&c->e[k].snap);
        return -1;
    }
    c->e[k].upto = cut ? addr + len : UINT64_MAX;
answer:;
    int ans = -1;
    const cw_perf__snapshot_t *s = &c->e[k].snap;
    for (size_t i = 0; i < s->n; i++) {
        const cw_perf__seg_t *g = &s->seg[i];
        if (g->start <= addr && addr + len <= g->end) {
            ans = (g->flags & CW__SEG_ACCT) ? 1 : 0;
            break;
        }
    }
    return ans;
}

void cw_perf__acct_cache_free(cw_perf__acct_cache_t *c)
{
    for (size_t i = 0; i < CW_PERF__ACCT_READS; i++) {
        cw_perf__snapshot_free(&c->e[i].snap);
        c->e[i].at = 0;
    }
}

void cw_perf__proc_names(uint32_t pid, char *name, size_t nsize, char *cmdline, size_t csize)
{
    char path[64];
    name[0] = 0;
    if (cmdline && csize) cmdline[0] = 0;
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    FILE *f = fopen(path, "re");
    if (f) {
        if (fgets(name, (int)nsize, f)) name[strcspn(name, "\n")] = 0;
        fclose(f);
    }
    if (!cmdline || csize < 2) return;
    snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
    f = fopen(path, "re");
    if (!f) return;
    size_t n = fread(cmdline, 1, csize - 1, f);
    fclose(f);
    while (n && cmdline[n - 1] == 0)
        n--;
    for (size_t i = 0; i < n; i++)
        if (cmdline[i] == 0) cmdline[i] = ' ';
    cmdline[n] = 0;
}
