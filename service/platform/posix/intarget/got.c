/* got.c - rewriting GOT slots of every loaded object so that their calls
 * of named functions reach hooks (got.h; the heap interposer's attach
 * mode).
 *
 * dl_iterate_phdr gives each object's load address and program headers;
 * its dynamic section gives the symbol and string tables and the two
 * relocation tables (DT_JMPREL: the PLT's JUMP_SLOT relocations; DT_RELA
 * or DT_REL: among others the GLOB_DAT ones of code built with -fno-plt
 * or taking a function's address). glibc stores the dynamic section's
 * pointers relocated in place, other loaders do not: a value below the
 * load address is taken as relative to it. A slot in PT_GNU_RELRO (all of
 * them in a program linked with -z now) is read-only: the page is made
 * writable for the store and read-only again after. */
#define _GNU_SOURCE
#include "platform/posix/intarget/got.h"

#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#define R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define R_GLOB_DAT R_AARCH64_GLOB_DAT
#else
#error "got.c: x86-64 and AArch64 only"
#endif

/* What cwh_got_hook rewrote, for cwh_got_unhook. Touched only by the
 * thread that hooks or unhooks. */
static struct {
    void **slot;
    void *old, *hook;
    bool relro;
} saved[CWH_GOT_MAX_SLOTS];
static size_t nsaved;

typedef struct walk {
    const cwh_hook_t *hooks;
    size_t n;
    const void *self;
    int rewritten;
    size_t skipped;
    long page;
} walk_t;

static bool skip_object(const struct dl_phdr_info *info, const void *self)
{
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (!strncmp(base, "ld-linux", 8) || !strncmp(base, "ld64.so", 7) ||
        !strncmp(base, "linux-vdso", 10) || !strncmp(base, "linux-gate", 10))
        return true;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (uintptr_t)self >= lo && (uintptr_t)self < lo + ph->p_memsz)
            return true;
    }
    return false;
}

static uintptr_t fix(uintptr_t v, uintptr_t base)
{
    return v < base ? base + v : v;
}

static bool set_prot(uintptr_t addr, long page, int prot)
{
    uintptr_t lo = addr & ~((uintptr_t)page - 1);
    return mprotect((void *)lo, (size_t)page, prot) == 0;
}

/* One slot: rewritten when its symbol is hooked. */
static void consider(walk_t *w, uintptr_t base, const ElfW(Sym) * symtab, const char *strtab,
                     size_t strsz, uintptr_t r_offset, size_t sym, uintptr_t relro_lo,
                     uintptr_t relro_hi)
{
    if (!sym) return;
    size_t off = symtab[sym].st_name;
    if (off >= strsz) return;
    const char *name = strtab + off;
    for (size_t h = 0; h < w->n; h++) {
        if (strcmp(name, w->hooks[h].name) != 0) continue;
        void **slot = (void **)(base + r_offset);
        if (*slot == w->hooks[h].hook) return; /* already ours */
        if (nsaved == CWH_GOT_MAX_SLOTS) {
            w->skipped++;
            return;
        }
        bool relro = (uintptr_t)slot >= relro_lo && (uintptr_t)slot < relro_hi;
        if (relro && !set_prot((uintptr_t)slot, w->page, PROT_READ | PROT_WRITE)) {
            w->skipped++;
            return;
        }
        saved[nsaved].slot = slot;
        saved[nsaved].old = *slot;
        saved[nsaved].hook = w->hooks[h].hook;
        saved[nsaved].relro = relro;
        nsaved++;
        __atomic_store_n(slot, w->hooks[h].hook, __ATOMIC_RELEASE);
        if (relro) set_prot((uintptr_t)slot, w->page, PROT_READ);
        w->rewritten++;
        return;
    }
}

static int each_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    walk_t *w = arg;
    if (skip_object(info, w->self)) return 0;
    uintptr_t base = info->dlpi_addr, relro_lo = 0, relro_hi = 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(base + ph->p_vaddr);
        if (ph->p_type == PT_GNU_RELRO)
            relro_lo = base + ph->p_vaddr, relro_hi = relro_lo + ph->p_memsz;
    }
    if (!dyn) return 0;
    /* The dynamic entries this needs, by a table: an address is relocated
     * (fix), a size or kind read as it is. */
    enum { SYMTAB, STRTAB, STRSZ, JMPREL, PLTRELSZ, PLTREL, RELA, RELASZ, REL, RELSZ, NDYN };
    static const struct {
        ElfW(Sxword) tag;
        bool addr;
    } want[NDYN] = {
        [SYMTAB] = {DT_SYMTAB, true},
        [STRTAB] = {DT_STRTAB, true},
        [STRSZ] = {DT_STRSZ, false},
        [JMPREL] = {DT_JMPREL, true},
        [PLTRELSZ] = {DT_PLTRELSZ, false},
        [PLTREL] = {DT_PLTREL, false},
        [RELA] = {DT_RELA, true},
        [RELASZ] = {DT_RELASZ, false},
        [REL] = {DT_REL, true},
        [RELSZ] = {DT_RELSZ, false},
    };
    uintptr_t v[NDYN] = {[PLTREL] = DT_RELA};
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
        for (int k = 0; k < NDYN; k++)
            if (d->d_tag == want[k].tag)
                v[k] = want[k].addr ? fix(d->d_un.d_ptr, base) : (uintptr_t)d->d_un.d_val;
    uintptr_t symtab = v[SYMTAB], strtab = v[STRTAB], jmprel = v[JMPREL], rela = v[RELA],
              rel = v[REL];
    size_t strsz = v[STRSZ], pltrelsz = v[PLTRELSZ], relasz = v[RELASZ], relsz = v[RELSZ];
    long pltrel = (long)v[PLTREL];
    if (!symtab || !strtab) return 0;
    const ElfW(Sym) *syms = (const ElfW(Sym) *)symtab;
    const char *strs = (const char *)strtab;
#define SCAN(TYPE, table, bytes)                                                                   \
    for (const TYPE *r = (const TYPE *)(table);                                                    \
         (table) && (uintptr_t)(r + 1) <= (table) + (bytes); r++) {                                \
        unsigned long t = ELF64_R_TYPE(r->r_info);                                                 \
        if (t == R_JUMP_SLOT || t == R_GLOB_DAT)                                                   \
            consider(w, base, syms, strs, strsz, r->r_offset, ELF64_R_SYM(r->r_info), relro_lo,    \
                     relro_hi);                                                                    \
    }
    if (pltrel == DT_RELA) {
        SCAN(ElfW(Rela), jmprel, pltrelsz)
    } else {
        SCAN(ElfW(Rel), jmprel, pltrelsz)
    }
    SCAN(ElfW(Rela), rela, relasz)
    SCAN(ElfW(Rel), rel, relsz)
#undef SCAN
    return 0;
}

int cwh_got_hook(const cwh_hook_t *hooks, size_t n, const void *self, size_t *skipped)
{
    walk_t w = {.hooks = hooks, .n = n, .self = self, .page = sysconf(_SC_PAGESIZE)};
    if (w.page <= 0) w.page = 4096;
    dl_iterate_phdr(each_object, &w);
    if (skipped) *skipped = w.skipped;
    return w.rewritten;
}

int cwh_got_unhook(void)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    int back = 0;
    for (size_t i = nsaved; i-- > 0;) {
        void **slot = saved[i].slot;
        if (*slot != saved[i].hook) continue; /* rebound since: leave it */
        if (saved[i].relro && !set_prot((uintptr_t)slot, page, PROT_READ | PROT_WRITE)) continue;
        __atomic_store_n(slot, saved[i].old, __ATOMIC_RELEASE);
        if (saved[i].relro) set_prot((uintptr_t)slot, page, PROT_READ);
        back++;
    }
    nsaved = 0;
    return back;
}
