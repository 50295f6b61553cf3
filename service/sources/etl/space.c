/* space.c - the address spaces a trace describes: per process, the images
 * loaded (Image load, DCStart; gone at unload or a new instance of the
 * pid), and per thread its process (Thread start, DCStart). Stack frames
 * are named from them: a kernel address by the system's images (pid 0,
 * where the kernel's and the drivers' load events go), any other by the
 * stack's process, as "module!+0xOFFSET", or "module!Function+0xNN" when
 * the space's symbolizer (images.c, DbgHelp) knows the function. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/hash.h"
#include "sources/etl/etl_internal.h"
#include "sources/etl/pe.h"

int cw_etl__space_init(cw_etl__space_t *s)
{
    memset(s, 0, sizeof *s);
    if (cw_keymap_init(&s->pids, 16) != 0 || cw_keymap_init(&s->tids, 16) != 0 ||
        cw_keymap_init(&s->names, 16) != 0 ||
        !(s->fcache = calloc((size_t)1 << CW_ETL__FCACHE_BITS, sizeof *s->fcache))) {
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
    free(s->fcache);
    for (size_t i = 0; i < s->nnames; i++) free(s->name_text[i]);
    free(s->name_text);
    free(s->name_size);
    cw_keymap_free(&s->names);
    cw_keymap_free(&s->pids);
    cw_keymap_free(&s->tids);
    memset(s, 0, sizeof *s);
}

/* The index of key's slot in a table the key map numbers densely (items:
 * the table, of *n elements of elem bytes): a new key's slot is added,
 * zeroed. UINT32_MAX on ENOMEM. */
static uint32_t slot(cw_keymap_t *map, uint32_t key, void *items, size_t *cap, size_t *n,
                     size_t elem)
{
    int added = 0;
    uint32_t i = cw_keymap_get(map, key, 0, &added);
    if (i == UINT32_MAX || !added) return i;
    char *table;
    if (cw_reserve(items, cap, (size_t)i + 1, elem) != 0) return UINT32_MAX;
    memcpy(&table, items, sizeof table);
    memset(table + (size_t)i * elem, 0, elem);
    *n = (size_t)i + 1;
    return i;
}

cw_etl__proc_t *cw_etl__proc(cw_etl__space_t *s, uint32_t pid)
{
    uint32_t i = slot(&s->pids, pid, &s->procs, &s->pcap, &s->nprocs, sizeof *s->procs);
    if (i == UINT32_MAX) return NULL;
    s->procs[i].pid = pid;
    return &s->procs[i];
}

cw_etl__thread_t *cw_etl__thread(cw_etl__space_t *s, uint32_t tid)
{
    uint32_t i = slot(&s->tids, tid, &s->threads, &s->tcap, &s->nthreads, sizeof *s->threads);
    return i == UINT32_MAX ? NULL : &s->threads[i];
}

/* A module's name is the space's (name_id != 0) or its own. */
static void module_free_name(cw_etl__module_t *m)
{
    if (!m->name_id) free(m->name);
}

void cw_etl__proc_reset(cw_etl__proc_t *p)
{
    for (size_t i = 0; i < p->nmods; i++) module_free_name(&p->mods[i]);
    p->nmods = 0;
    p->info = 0;
    p->fp = 0;
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

/* The units of the file name's last component: path[2 * *start ..) ; the
 * bytes its UTF-8 text takes with the NUL, at most. */
static size_t name_room(const uint8_t *path, size_t units, size_t *start)
{
    *start = 0;
    for (size_t i = 0; i < units; i++) {
        unsigned u = (unsigned)path[2 * i] | (unsigned)path[2 * i + 1] << 8;
        if (u == '\\' || u == '/') *start = i + 1;
    }
    return 3 * (units - *start) + 1;
}

/* That component lowercased (ASCII letters only: the stack-tag matcher
 * compares module names without regard to case) into s[cap]. */
static void name_text(const uint8_t *path, size_t units, size_t start, char *s, size_t cap)
{
    cw_etl_utf16_to_utf8(path + 2 * start, units - start, s, cap);
    for (char *c = s; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
}

char *cw_etl__image_name(const uint8_t *path, size_t units)
{
    size_t start, cap = name_room(path, units, &start);
    char *s = malloc(cap);
    if (s) name_text(path, units, start, s, cap);
    return s;
}

/* One image's part of its process's fingerprint. A name that shares its
 * number with no other (name_id 0) makes the image unique. */
static uint64_t module_fp(const cw_etl__module_t *m)
{
    uint64_t name = m->name_id ? m->name_id : (uint64_t)(uintptr_t)m->name;
    return cw_hash_u64(cw_hash_combine(cw_hash_combine(cw_hash_u64(m->base), m->size), name));
}

/* The number of an image name and size (1 up), the same for every image
 * of that name and size in any process; 0 when a different pair has the
 * same hash (the frame cache then passes that image by). The size tells
 * apart two files of one name, which a symbolizer names differently.
 * CW_ENOMEM as UINT32_MAX. */
static uint32_t name_id(cw_etl__space_t *s, const char *name, uint64_t size)
{
    size_t len = strlen(name);
    int added = 0;
    uint64_t h = cw_hash_combine(cw_hash_bytes(name, len), size);
    uint32_t i = cw_keymap_get(&s->names, h, len, &added);
    if (i == UINT32_MAX) return UINT32_MAX;
    if (added) {
        char *copy = malloc(len + 1);
        if (!copy || CW_RESERVE(s->name_text, s->name_cap, (size_t)i + 1) != 0 ||
            CW_RESERVE(s->name_size, s->size_cap, (size_t)i + 1) != 0) {
            free(copy);
            return UINT32_MAX;
        }
        memcpy(copy, name, len + 1);
        s->name_text[i] = copy;
        s->name_size[i] = size;
        s->nnames = (size_t)i + 1;
    }
    return strcmp(s->name_text[i], name) == 0 && s->name_size[i] == size ? i + 1 : 0;
}

int cw_etl__module_add(cw_etl__space_t *s, cw_etl__proc_t *p, uint64_t base, uint64_t size,
                       const uint8_t *path, size_t units, cw_etl__module_t **out)
{
    /* The name in place first: a name the space knows is shared, not
     * copied (a load is one event in twenty here). */
    char local[256];
    size_t start, cap = name_room(path, units, &start);
    char *name = cap <= sizeof local ? local : malloc(cap);
    if (!name) return CW_ENOMEM;
    name_text(path, units, start, name, cap);
    if (size > UINT64_MAX - base) size = UINT64_MAX - base;
    uint32_t id = name_id(s, name, size);
    if (id != 0 && id != UINT32_MAX) {
        if (name != local) free(name);
        name = s->name_text[id - 1];
    } else if (id == 0 && name == local) {
        name = strdup(local); /* one of its own (see module_fp) */
    }
    if (id == UINT32_MAX || !name) {
        if (name != local) free(name);
        return CW_ENOMEM;
    }
    size_t i = lower_bound(p, base);
    if (i < p->nmods && p->mods[i].base == base) {
        /* The same image seen again (a rundown of what a load announced). */
        p->fp ^= module_fp(&p->mods[i]);
        module_free_name(&p->mods[i]);
    } else {
        if (CW_RESERVE(p->mods, p->cap, p->nmods + 1) != 0) {
            if (!id) free(name);
            return CW_ENOMEM;
        }
        memmove(&p->mods[i + 1], &p->mods[i], (p->nmods - i) * sizeof *p->mods);
        p->nmods++;
    }
    p->mods[i] = (cw_etl__module_t){base, size, name, 0, id};
    p->fp ^= module_fp(&p->mods[i]);
    if (out) *out = &p->mods[i];
    return 0;
}

size_t cw_etl__module_remove(cw_etl__proc_t *p, uint64_t base)
{
    size_t i = lower_bound(p, base);
    if (i == p->nmods || p->mods[i].base != base) return 0;
    size_t info = p->mods[i].info;
    p->fp ^= module_fp(&p->mods[i]);
    module_free_name(&p->mods[i]);
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

size_t cw_etl__frame_text(const cw_etl__module_t *m, uint64_t addr, char *buf, size_t cap)
{
    int n = m ? snprintf(buf, cap, "%s!+0x%llx", m->name, (unsigned long long)(addr - m->base))
              : snprintf(buf, cap, "[unknown]!0x%llx", (unsigned long long)addr);
    if (n < 0) n = 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

int cw_etl__aspace(cw_etl__space_t *s, uint32_t pid, cw_etl__aspace_t *out)
{
    /* Creating the process's slot may move the system's: it is taken
     * again by its index (slots are never removed, so the index is kept
     * from the first time). One lookup: this runs for every stack. */
    if (!s->kernel_slot) {
        cw_etl__proc_t *k = cw_etl__proc(s, 0);
        if (!k) return CW_ENOMEM;
        s->kernel_slot = (size_t)(k - s->procs) + 1;
    }
    size_t ki = s->kernel_slot - 1;
    cw_etl__proc_t *u = pid == 0 ? &s->procs[ki] : cw_etl__proc(s, pid);
    if (!u) return CW_ENOMEM;
    out->kernel = &s->procs[ki];
    out->user = u;
    return 0;
}

int cw_etl__frame(cw_etl__space_t *s, const cw_etl__aspace_t *a, cw_stacks_t *stacks,
                  uint64_t addr, unsigned ptr_size, uint32_t *id, bool *in_module)
{
    bool kernel = cw_etl_kernel_address(addr, ptr_size);
    const cw_etl__module_t *m = cw_etl__module_find(kernel ? a->kernel : a->user, addr);
    if (!m && kernel && a->user != a->kernel)
        m = cw_etl__module_find(a->user, addr); /* a session driver announced in the process */
    *in_module = m != NULL;
    *id = 0;
    if (!stacks) return 0;
    uint32_t nid = m ? m->name_id : CW_ETL__NO_IMAGE;
    uint64_t off = m ? addr - m->base : addr;
    uint64_t h = cw_hash_combine(cw_hash_u64(off), nid);
    cw_etl__fslot_t *slot = &s->fcache[h >> (64 - CW_ETL__FCACHE_BITS)];
    if (nid && slot->frame && slot->off == off && slot->name_id == nid) {
        *id = slot->frame;
        return 0;
    }
    char text[CW_ETL__PE_NAME_MAX + 160];
    size_t len = 0;
    if (m && s->sym.name) {
        /* Named once per (image name, offset): the slot keeps the text's id. */
        char fn[CW_ETL__PE_NAME_MAX + 32];
        size_t k = s->sym.name(s->sym.ctx, m, off, fn, sizeof fn);
        if (k) {
            int n = snprintf(text, sizeof text, "%s!%.*s", m->name, (int)k, fn);
            len = n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1;
        }
    }
    if (!len) len = cw_etl__frame_text(m, addr, text, sizeof text);
    if (cw_stacks_intern_frame(stacks, text, len, id) != 0) return CW_ENOMEM;
    if (nid) *slot = (cw_etl__fslot_t){off, nid, *id};
    return 0;
}
