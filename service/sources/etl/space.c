/* space.c - the address spaces a trace describes: per process, the images
 * loaded (Image load, DCStart; gone at unload or a new instance of the
 * pid), and per thread its process (Thread start, DCStart). Stack frames
 * are named from them: a kernel address by the system's images (pid 0,
 * where the kernel's and the drivers' load events go), any other by the
 * stack's process, as "module!+0xOFFSET" until a symbolizer names the
 * function. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/etl/etl_internal.h"

int cw_etl__space_init(cw_etl__space_t *s)
{
    memset(s, 0, sizeof *s);
    if (cw_keymap_init(&s->pids, 8) != 0 || cw_keymap_init(&s->tids, 10) != 0) {
        cw_etl__space_free(s);
        return CW_ENOMEM;
    }
    return 0;
}

void cw_etl__space_free(cw_etl__space_t *s)
{
    for (size_t i = 0; i < s->nprocs; i++) {
        cw_etl__proc_reset(&s->procs[i]);
        free(s->procs[i].mods);
    }
    free(s->procs);
    free(s->threads);
    cw_keymap_free(&s->pids);
    cw_keymap_free(&s->tids);
    memset(s, 0, sizeof *s);
}

cw_etl__proc_t *cw_etl__proc(cw_etl__space_t *s, uint32_t pid)
{
    int added = 0;
    uint32_t i = cw_keymap_get(&s->pids, pid, 0, &added);
    if (i == UINT32_MAX) return NULL;
    if (added) {
        if (CW_RESERVE(s->procs, s->pcap, (size_t)i + 1) != 0) return NULL;
        memset(&s->procs[i], 0, sizeof s->procs[i]);
        s->procs[i].pid = pid;
        s->nprocs = (size_t)i + 1;
    }
    return &s->procs[i];
}

cw_etl__thread_t *cw_etl__thread(cw_etl__space_t *s, uint32_t tid)
{
    int added = 0;
    uint32_t i = cw_keymap_get(&s->tids, tid, 0, &added);
    if (i == UINT32_MAX) return NULL;
    if (added) {
        if (CW_RESERVE(s->threads, s->tcap, (size_t)i + 1) != 0) return NULL;
        memset(&s->threads[i], 0, sizeof s->threads[i]);
        s->nthreads = (size_t)i + 1;
    }
    return &s->threads[i];
}

void cw_etl__proc_reset(cw_etl__proc_t *p)
{
    for (size_t i = 0; i < p->nmods; i++) free(p->mods[i].name);
    p->nmods = 0;
    p->info = 0;
}

/* Index of the first module whose base is >= base. */
static size_t lower_bound(const cw_etl__proc_t *p, uint64_t base)
{
    size_t lo = 0, hi = p->nmods;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->mods[mid].base < base) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The file name's last component, lowercased (ASCII letters only: the
 * stack-tag matcher compares module names without regard to case). */
static char *base_name(const uint8_t *path, size_t units)
{
    size_t start = 0;
    for (size_t i = 0; i < units; i++) {
        unsigned u = (unsigned)path[2 * i] | (unsigned)path[2 * i + 1] << 8;
        if (u == '\\' || u == '/') start = i + 1;
    }
    size_t cap = 3 * (units - start) + 1;
    char *s = malloc(cap);
    if (!s) return NULL;
    cw_etl_utf16_to_utf8(path + 2 * start, units - start, s, cap);
    for (char *c = s; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    return s;
}

int cw_etl__module_add(cw_etl__proc_t *p, uint64_t base, uint64_t size, const uint8_t *path,
                       size_t units, cw_etl__module_t **out)
{
    char *name = base_name(path, units);
    if (!name) return CW_ENOMEM;
    if (size > UINT64_MAX - base) size = UINT64_MAX - base;
    size_t i = lower_bound(p, base);
    if (i < p->nmods && p->mods[i].base == base) {
        /* The same image seen again (a rundown of what a load announced). */
        free(p->mods[i].name);
    } else {
        if (CW_RESERVE(p->mods, p->cap, p->nmods + 1) != 0) {
            free(name);
            return CW_ENOMEM;
        }
        memmove(&p->mods[i + 1], &p->mods[i], (p->nmods - i) * sizeof *p->mods);
        p->nmods++;
    }
    p->mods[i] = (cw_etl__module_t){base, size, name, 0};
    if (out) *out = &p->mods[i];
    return 0;
}

size_t cw_etl__module_remove(cw_etl__proc_t *p, uint64_t base)
{
    size_t i = lower_bound(p, base);
    if (i == p->nmods || p->mods[i].base != base) return 0;
    size_t info = p->mods[i].info;
    free(p->mods[i].name);
    memmove(&p->mods[i], &p->mods[i + 1], (p->nmods - i - 1) * sizeof *p->mods);
    p->nmods--;
    return info;
}

const cw_etl__module_t *cw_etl__module_find(const cw_etl__proc_t *p, uint64_t addr)
{
    /* The last module starting at or below addr, if addr is inside it
     * (images never overlap in one address space). */
    size_t i = lower_bound(p, addr);
    if (i < p->nmods && p->mods[i].base == addr) return &p->mods[i];
    if (i == 0) return NULL;
    const cw_etl__module_t *m = &p->mods[i - 1];
    return addr - m->base < m->size ? m : NULL;
}

const cw_etl__module_t *cw_etl__space_find(cw_etl__space_t *s, uint32_t pid, uint64_t addr,
                                           unsigned ptr_size)
{
    bool kernel = cw_etl_kernel_address(addr, ptr_size);
    cw_etl__proc_t *p = cw_etl__proc(s, kernel ? 0 : pid);
    const cw_etl__module_t *m = p ? cw_etl__module_find(p, addr) : NULL;
    if (!m && kernel && pid != 0 && (p = cw_etl__proc(s, pid)) != NULL)
        m = cw_etl__module_find(p, addr); /* a session driver announced in the process */
    return m;
}

size_t cw_etl__frame_text(const cw_etl__module_t *m, uint64_t addr, char *buf, size_t cap)
{
    int n = m ? snprintf(buf, cap, "%s!+0x%llx", m->name, (unsigned long long)(addr - m->base))
              : snprintf(buf, cap, "[unknown]!0x%llx", (unsigned long long)addr);
    if (n < 0) n = 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}
