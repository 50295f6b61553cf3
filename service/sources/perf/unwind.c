/* unwind.c - user stacks from perf samples: unwinding with elfutils libdw
 * (CFI from .eh_frame / .debug_frame, so code without frame pointers,
 * like Debian's glibc, unwinds right) and symbolization to
 * "module!function" ("module!0xOFFSET" without a symbol), interned.
 *
 * Per process, an address space (cw_perf__aspace) holds the executable file
 * mappings the kernel reported (mmap2 records, smaps), so a process that
 * has exited by the time its samples are processed is still symbolized.
 * Its Dwfl is made on the first sample that needs it and re-reported only
 * when its mappings changed. Modules are shared by every process (one
 * entry per file: device + inode, else path), and the frame of each
 * (module, offset) is looked up once and cached for all processes.
 * A module's file is opened and mapped once (libelf's Elf, reference
 * counted): every Dwfl that reports it, the per-process ones and the
 * module's symbols, gets that Elf from the find_elf callback, so 16 Dwfls
 * of python3 processes map libpython once, not 16 times.
 *
 * Memory (docs/DESIGN.md, "Memory"): a process's Dwfl holds libdw's
 * parsed CFI of the modules it unwound through (about 70 KiB for a
 * python3 process; the files are the modules'); only the max_live most
 * recently used are kept (the others are made again when their process
 * samples again, which reads no file), so 1,000 live processes cost what
 * max_live do. A module's symbol table and file are dropped when no
 * address space maps it any more (its frames stay in the frame cache).
 *
 * Thread: the core thread only. */
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commitwatch/error.h"
#include "sources/perf/perf_types.h"

#define MAX_FRAMES 96

typedef struct module {
    uint64_t dev, ino;
    char *path;       /* as the process saw it; opened by libdw */
    const char *name; /* basename of path */
    /* The file, opened on the first report of the module: our reference
     * to the Elf each Dwfl shares (elf_begin on it counts one more). */
    Elf *elf;
    bool elf_tried, elf_exec;    /* elf_exec: ET_EXEC, at its link address */
    uint64_t elf_vaddr, elf_end; /* first PT_LOAD's page, last PT_LOAD's end */
    /* Symbols: one Dwfl per module, shared by every process, loaded on
     * the first frame that needs it (with its separate debuginfo). */
    Dwfl *sym;
    Dwfl_Module *sym_mod;
    bool sym_tried;
    struct fsym *fsyms;       /* functions sorted by address (libdw's lookup is linear) */
    size_t nfsyms;
    size_t refs; /* mappings of live address spaces */
} module_t;

/* Past this many modules, those no process maps any more are forgotten
 * (a build machine maps new test binaries all day). */
#define MOD_SWEEP 1024

typedef struct fsym {
    uint64_t addr, size;
    const char *name; /* borrowed from the module's Dwfl */
    uint32_t rank;    /* among aliases at one address, the lowest is shown */
} fsym_t;

#define SYM_BASE 0x10000000ull /* where a shared object is placed in its Dwfl */

typedef struct amap {
    uint64_t start, end, pgoff;
    module_t *mod;
} amap_t;

struct cw_perf__aspace {
    uint32_t pid;
    amap_t *m;
    size_t n, cap;
    Dwfl *dwfl;
    bool dirty, attached;
    /* While dwfl is set: in the unwinder's list of live Dwfls, most
     * recently used first. */
    cw_perf__unwinder_t *lru;
    cw_perf__aspace_t *prev, *next;
    /* The sample being unwound (valid during cw_perf__unwind only). */
    const uint64_t *regs;
    uint32_t nregs;
    const uint8_t *stack;
    uint64_t stack_size, sp;
    uint32_t tid;
};

typedef struct fcache_ent {
    const module_t *mod; /* NULL = empty slot */
    uint64_t off;
    uint32_t frame;
} fcache_ent_t;

struct cw_perf__unwinder {
    cw_stacks_t *stacks;
    int self_fd;
    Elf *self_elf; /* our own executable: tells libdw the architecture */
    module_t **mods;
    size_t nmods, mcap;
    fcache_ent_t *fc; /* open addressing, power of two */
    size_t fcap, fn;
    cw_perf__aspace_t *head, *tail; /* address spaces with a Dwfl, by last use */
    size_t nlive, max_live;
};

static char *debuginfo_path;

/* libdwfl asks for a module's file on first use: the module's own Elf,
 * one reference more (libdwfl ends it with the Dwfl). userdata is the
 * module_t, set by report_module. */
static int shared_elf(Dwfl_Module *dm, void **userdata, const char *modname, Dwarf_Addr base,
                      char **file_name, Elf **elfp)
{
    (void)dm, (void)modname, (void)base;
    const module_t *m = *userdata;
    if (!m || !m->elf) return -1;
    *file_name = strdup(m->path);
    if (!*file_name) return -1;
    *elfp = elf_begin(-1, ELF_C_READ_MMAP, m->elf);
    return -1;
}

/* Unwinding uses .eh_frame (and .debug_frame of the file itself): never
 * the separate debuginfo, which would be loaded again for every process. */
static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                        const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
                        char **debuginfo_file_name)
{
    (void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
    (void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
    return -1;
}

static const Dwfl_Callbacks dwfl_cbs = {
    .find_elf = shared_elf,
    .find_debuginfo = no_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

/* Symbols: separate debuginfo (e.g. libc6-dbg's) welcome. */
static const Dwfl_Callbacks sym_cbs = {
    .find_elf = shared_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

int cw_perf__unwinder_create(cw_stacks_t *stacks, size_t max_live, cw_perf__unwinder_t **out)
{
    cw_perf__unwinder_t *u = calloc(1, sizeof *u);
    if (!u) return CW_ENOMEM;
    u->stacks = stacks;
    u->max_live = max_live ? max_live : 1;
    elf_version(EV_CURRENT);
    u->self_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    u->self_elf = u->self_fd >= 0 ? elf_begin(u->self_fd, ELF_C_READ_MMAP, NULL) : NULL;
    u->fcap = 4096;
    u->fc = calloc(u->fcap, sizeof *u->fc);
    if (!u->fc) {
        free(u);
        return CW_ENOMEM;
    }
    *out = u;
    return 0;
}

/* Drops the module's symbols (loaded again on a frame not yet cached). */
static void module_drop_syms(module_t *m)
{
    if (m->sym) dwfl_end(m->sym);
    free(m->fsyms);
    m->sym = NULL;
    m->sym_mod = NULL;
    m->fsyms = NULL;
    m->nfsyms = 0;
    m->sym_tried = false;
}

/* Opens the module's file once (until no process maps it): mapped by
 * libelf, the fd closed. NULL when it is not a regular ELF file with
 * program headers (deleted, a device, another architecture's). Like
 * dwfl_linux_proc_find_elf, only a regular file is opened: a device might
 * hang on open. */
static Elf *module_elf(module_t *m)
{
    if (m->elf_tried) return m->elf;
    m->elf_tried = true;
    struct stat st;
    if (stat(m->path, &st) != 0 || !S_ISREG(st.st_mode)) return NULL;
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (e) elf_cntl(e, ELF_C_FDDONE); /* all of it is mapped */
    close(fd);
    GElf_Ehdr eh;
    size_t phnum;
    if (!e || !gelf_getehdr(e, &eh) || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) ||
        elf_getphdrnum(e, &phnum) != 0)
        goto bad;
    /* The module's extent as dwfl_report_elf computes it: from the first
     * PT_LOAD's page to the end of the last PT_LOAD. */
    bool first = true;
    m->elf_end = 0;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph)) goto bad;
        if (ph.p_type != PT_LOAD) continue;
        if (first) m->elf_vaddr = ph.p_vaddr & -ph.p_align;
        first = false;
        if (ph.p_vaddr + ph.p_memsz > 0) m->elf_end = ph.p_vaddr + ph.p_memsz;
    }
    if (first || m->elf_end <= m->elf_vaddr) goto bad;
    m->elf_exec = eh.e_type == ET_EXEC;
    m->elf = e;
    return e;
bad:
    if (e) elf_end(e);
    return NULL;
}

static void module_drop_elf(module_t *m)
{
    if (m->elf) elf_end(m->elf);
    m->elf = NULL;
    m->elf_tried = false;
}

/* Reports m to d as loaded at base (its load bias; an ET_EXEC file is at
 * its link address whatever base says), as dwfl_report_elf would, with
 * the module's shared Elf (shared_elf). */
static Dwfl_Module *report_module(Dwfl *d, module_t *m, uint64_t base)
{
    if (!module_elf(m)) return NULL;
    uint64_t start = m->elf_exec ? m->elf_vaddr : base;
    uint64_t bias = m->elf_exec ? 0 : base - m->elf_vaddr;
    Dwfl_Module *dm = dwfl_report_module(d, m->name, start, bias + m->elf_end);
    void **ud;
    if (dm && dwfl_module_info(dm, &ud, NULL, NULL, NULL, NULL, NULL, NULL)) *ud = m;
    return dm;
}

static void module_free(module_t *m)
{
    module_drop_syms(m);
    module_drop_elf(m);
    free(m->path);
    free(m);
}

/* One mapping of m less; its symbols go with the last. */
static void module_unref(module_t *m)
{
    if (--m->refs == 0) {
        module_drop_syms(m);
        module_drop_elf(m);
    }
}

/* ---- the live Dwfls, by last use -------------------------------------- */

static void lru_unlink(cw_perf__aspace_t *as)
{
    cw_perf__unwinder_t *u = as->lru;
    if (!u) return;
    if (as->prev) as->prev->next = as->next;
    else u->head = as->next;
    if (as->next) as->next->prev = as->prev;
    else u->tail = as->prev;
    as->prev = as->next = NULL;
    as->lru = NULL;
    u->nlive--;
}

static void lru_front(cw_perf__unwinder_t *u, cw_perf__aspace_t *as)
{
    if (u->head == as) return;
    lru_unlink(as);
    as->next = u->head;
    if (u->head) u->head->prev = as;
    u->head = as;
    if (!u->tail) u->tail = as;
    as->lru = u;
    u->nlive++;
}

static void dwfl_drop(cw_perf__aspace_t *as)
{
    lru_unlink(as);
    if (as->dwfl) dwfl_end(as->dwfl);
    as->dwfl = NULL;
    as->attached = false;
    as->dirty = true;
}

/* A teardown list, alike to store_pool.c's in form only. */
void cw_perf__unwinder_destroy(cw_perf__unwinder_t *u)
{
    if (!u) return;
    for (size_t i = 0; i < u->nmods; i++)
        module_free(u->mods[i]);
    free(u->mods);
    free(u->fc);
    if (u->self_elf) elf_end(u->self_elf);
    if (u->self_fd >= 0) close(u->self_fd);
    free(u);
}

/* Forgets unmapped modules; the frame cache (keyed by module) starts over. */
static void module_sweep(cw_perf__unwinder_t *u)
{
    size_t w = 0;
    for (size_t i = 0; i < u->nmods; i++) {
        if (u->mods[i]->refs)
            u->mods[w++] = u->mods[i];
        else
            module_free(u->mods[i]);
    }
    u->nmods = w;
    memset(u->fc, 0, u->fcap * sizeof *u->fc);
    u->fn = 0;
}

static module_t *module_get(cw_perf__unwinder_t *u, uint64_t dev, uint64_t ino, const char *path)
{
    for (size_t i = 0; i < u->nmods; i++) {
        module_t *m = u->mods[i];
        if (ino ? (m->dev == dev && m->ino == ino) : strcmp(m->path, path) == 0) return m;
    }
    if (CW_RESERVE(u->mods, u->mcap, u->nmods + 1)) return NULL;
    module_t *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return NULL;
    }
    m->dev = dev;
    m->ino = ino;
    /* " (deleted)" stays in the path (libdw then fails to open it and the
     * frames fall back to offsets); the name drops it. */
    const char *slash = strrchr(m->path, '/');
    m->name = slash ? slash + 1 : m->path;
    u->mods[u->nmods++] = m;
    return m;
}

cw_perf__aspace_t *cw_perf__aspace_new(uint32_t pid)
{
    cw_perf__aspace_t *as = calloc(1, sizeof *as);
    if (as) as->pid = pid;
    return as;
}

void cw_perf__aspace_free(cw_perf__aspace_t *as)
{
    if (!as) return;
    for (size_t i = 0; i < as->n; i++)
        module_unref(as->m[i].mod);
    dwfl_drop(as);
    free(as->m);
    free(as);
}

void cw_perf__aspace_unmap(cw_perf__aspace_t *as, uint64_t a, uint64_t b)
{
    size_t i = 0;
    while (i < as->n && as->m[i].end <= a)
        i++;
    if (i == as->n || as->m[i].start >= b) return; /* the common case: no code there */
    /* Rebuild: keep what lies outside [a, b), pieces of cut mappings too. */
    size_t cap = as->n + 1;
    amap_t *out = malloc(cap * sizeof *out);
    if (!out) return; /* keeping a stale mapping only costs symbols */
    size_t w = 0;
    for (i = 0; i < as->n; i++) {
        amap_t m = as->m[i];
        if (m.end <= a || m.start >= b) {
            out[w++] = m;
            continue;
        }
        if (m.start < a) {
            out[w++] = (amap_t){m.start, a, m.pgoff, m.mod};
            m.mod->refs++;
        }
        if (m.end > b) {
            out[w++] = (amap_t){b, m.end, m.pgoff + (b - m.start), m.mod};
            m.mod->refs++;
        }
        module_unref(m.mod);
    }
    free(as->m);
    as->m = out;
    as->n = w;
    as->cap = cap;
    as->dirty = true;
}

void cw_perf__aspace_clear(cw_perf__aspace_t *as)
{
    for (size_t i = 0; i < as->n; i++)
        module_unref(as->m[i].mod);
    as->n = 0;
    as->dirty = true;
}

int cw_perf__aspace_map(cw_perf__unwinder_t *u, cw_perf__aspace_t *as, uint64_t start, uint64_t len,
                        uint64_t pgoff, uint64_t dev, uint64_t ino, const char *path)
{
    if (!path || path[0] != '/' || len == 0) return 0;
    cw_perf__aspace_unmap(as, start, start + len);
    if (u->nmods >= MOD_SWEEP) module_sweep(u);
    module_t *mod = module_get(u, dev, ino, path);
    if (!mod) return CW_ENOMEM;
    if (CW_RESERVE(as->m, as->cap, as->n + 1)) return CW_ENOMEM;
    size_t i = as->n;
    while (i > 0 && as->m[i - 1].start > start) {
        as->m[i] = as->m[i - 1];
        i--;
    }
    as->m[i] = (amap_t){start, start + len, pgoff, mod};
    as->n++;
    mod->refs++;
    as->dirty = true;
    return 0;
}

int cw_perf__aspace_copy(cw_perf__aspace_t *dst, const cw_perf__aspace_t *src)
{
    /* src's references are held across the clear: a module both map keeps
     * its symbols. */
    for (size_t i = 0; i < src->n; i++)
        src->m[i].mod->refs++;
    cw_perf__aspace_clear(dst);
    if (CW_RESERVE(dst->m, dst->cap, src->n)) return CW_ENOMEM;
    if (src->n) memcpy(dst->m, src->m, src->n * sizeof *src->m);
    dst->n = src->n;
    dst->dirty = true;
    return 0;
}

static const amap_t *find_map(const cw_perf__aspace_t *as, uint64_t pc)
{
    size_t i = cw_perf__lower_end(as->m, as->n, sizeof *as->m, offsetof(amap_t, end), pc);
    return i < as->n && as->m[i].start <= pc ? &as->m[i] : NULL;
}

/* ---- libdw thread callbacks: one frozen thread, the sample ---------------- */

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
    (void)dwfl;
    cw_perf__aspace_t *as = arg;
    if (*thread_argp) return 0;
    *thread_argp = as;
    return (pid_t)as->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
    (void)dwfl;
    (void)tid;
    *thread_argp = arg;
    return true;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    (void)dwfl;
    cw_perf__aspace_t *as = arg;
    if (addr < as->sp || addr - as->sp + sizeof(uint64_t) > as->stack_size) return false;
    memcpy(result, as->stack + (addr - as->sp), sizeof(uint64_t));
    return true;
}

#if defined(__x86_64__)
/* perf_event_x86_regs: AX BX CX DX SI DI BP SP IP (0-8), R8-R15 (16-23). */
uint64_t cw_perf__unwind_regs_mask(void)
{
    return 0x1ffull | (0xffull << 16);
}
static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
    cw_perf__aspace_t *as = arg;
    const uint64_t *r = as->regs;
    if (as->nregs < 17) return false;
    /* DWARF x86-64 order: rax rdx rcx rbx rsi rdi rbp rsp r8..r15. */
    Dwarf_Word d[16] = {r[0], r[3],  r[2],  r[1],  r[4],  r[5],  r[6],  r[7],
                        r[9], r[10], r[11], r[12], r[13], r[14], r[15], r[16]};
    if (!dwfl_thread_state_registers(thread, 0, 16, d)) return false;
    dwfl_thread_state_register_pc(thread, r[8]);
    return true;
}
static uint64_t sample_sp(const uint64_t *r)
{
    return r[7];
}
static uint64_t sample_ip(const uint64_t *r)
{
    return r[8];
}
#elif defined(__aarch64__)
/* perf_event_arm64_regs: X0-X30, SP (31), PC (32). */
uint64_t cw_perf__unwind_regs_mask(void)
{
    return (1ull << 33) - 1;
}
static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
    cw_perf__aspace_t *as = arg;
    if (as->nregs < 33) return false;
    Dwarf_Word d[32];
    for (int i = 0; i < 32; i++)
        d[i] = as->regs[i];
    if (!dwfl_thread_state_registers(thread, 0, 32, d)) return false;
    dwfl_thread_state_register_pc(thread, as->regs[32]);
    return true;
}
static uint64_t sample_sp(const uint64_t *r)
{
    return r[31];
}
static uint64_t sample_ip(const uint64_t *r)
{
    return r[32];
}
#else
#error "the perf source supports x86_64 and aarch64"
#endif

static const Dwfl_Thread_Callbacks thread_cbs = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
};

/* (Re)reports the process's modules to its Dwfl; false if none usable. */
static bool refresh(cw_perf__unwinder_t *u, cw_perf__aspace_t *as)
{
    /* libdw (0.188) does not unwind through modules reported after the
     * thread state was attached: a changed address space gets a new Dwfl. */
    if (as->dirty && as->dwfl && as->attached) dwfl_drop(as);
    if (!as->dwfl) {
        while (u->nlive >= u->max_live && u->tail)
            dwfl_drop(u->tail);
        as->dwfl = dwfl_begin(&dwfl_cbs);
        if (!as->dwfl) return false;
        as->dirty = true;
    }
    lru_front(u, as);
    if (as->dirty) {
        dwfl_report_begin(as->dwfl);
        for (size_t i = 0; i < as->n; i++) {
            const amap_t *m = &as->m[i];
            /* A file mapped in several pieces is one module, reported once. */
            if (i > 0 && as->m[i - 1].mod == m->mod &&
                as->m[i - 1].start - as->m[i - 1].pgoff == m->start - m->pgoff)
                continue;
            report_module(as->dwfl, m->mod, m->start - m->pgoff);
        }
        dwfl_report_end(as->dwfl, NULL, NULL);
        as->dirty = false;
    }
    if (!as->attached)
        as->attached = u->self_elf &&
                       dwfl_attach_state(as->dwfl, u->self_elf, (pid_t)as->pid, &thread_cbs, as);
    return as->attached;
}

typedef struct walk {
    uint64_t pc[MAX_FRAMES];
    int n;
} walk_t;

static int frame_cb(Dwfl_Frame *state, void *arg)
{
    walk_t *w = arg;
    Dwarf_Addr pc;
    bool activation;
    if (!dwfl_frame_pc(state, &pc, &activation)) return DWARF_CB_ABORT;
    if (pc == 0) return DWARF_CB_ABORT;
    /* A return address points after the call: look up the call itself. */
    w->pc[w->n++] = activation ? pc : pc - 1;
    return w->n < MAX_FRAMES ? DWARF_CB_OK : DWARF_CB_ABORT;
}

static size_t fc_hash(const module_t *m, uint64_t off)
{
    uint64_t h = (uint64_t)(uintptr_t)m * 0x9e3779b97f4a7c15ull ^ off * 0xff51afd7ed558ccdull;
    return (size_t)(h ^ (h >> 29));
}

static int fc_put(cw_perf__unwinder_t *u, const module_t *m, uint64_t off, uint32_t frame);

static int fc_grow(cw_perf__unwinder_t *u)
{
    fcache_ent_t *old = u->fc;
    size_t ocap = u->fcap;
    u->fc = calloc(ocap * 2, sizeof *u->fc);
    if (!u->fc) {
        u->fc = old;
        return CW_ENOMEM;
    }
    u->fcap = ocap * 2;
    u->fn = 0;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].mod) fc_put(u, old[i].mod, old[i].off, old[i].frame);
    free(old);
    return 0;
}

static int fc_put(cw_perf__unwinder_t *u, const module_t *m, uint64_t off, uint32_t frame)
{
    if ((u->fn + 1) * 2 > u->fcap) {
        int rc = fc_grow(u);
        if (rc) return rc;
    }
    size_t i = fc_hash(m, off) & (u->fcap - 1);
    while (u->fc[i].mod)
        i = (i + 1) & (u->fcap - 1);
    u->fc[i] = (fcache_ent_t){m, off, frame};
    u->fn++;
    return 0;
}

static uint32_t fc_get(const cw_perf__unwinder_t *u, const module_t *m, uint64_t off)
{
    size_t i = fc_hash(m, off) & (u->fcap - 1);
    while (u->fc[i].mod) {
        if (u->fc[i].mod == m && u->fc[i].off == off) return u->fc[i].frame;
        i = (i + 1) & (u->fcap - 1);
    }
    return 0;
}

static int fsym_cmp(const void *a, const void *b)
{
    const fsym_t *x = a, *y = b;
    if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Reads the module's function symbols once (symtab from its debuginfo when
 * there is one, else dynsym), sorted for binary search. */
static void load_fsyms(module_t *mod)
{
    int n = dwfl_module_getsymtab(mod->sym_mod);
    if (n <= 0) return;
    mod->fsyms = malloc((size_t)n * sizeof *mod->fsyms);
    if (!mod->fsyms) return;
    size_t k = 0;
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *name = dwfl_module_getsym_info(mod->sym_mod, i, &sym, &addr, NULL, NULL, NULL);
        int type = GELF_ST_TYPE(sym.st_info);
        if (!name || !*name || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
            sym.st_shndx == SHN_UNDEF)
            continue;
        /* Of aliases ("__GI___mmap64", "__mmap", "mmap"), show the public
         * name: sized, not local, fewest leading underscores, shortest. */
        uint32_t under = (uint32_t)strspn(name, "_");
        uint32_t rank = (sym.st_size ? 0 : 1u << 30) +
                        (GELF_ST_BIND(sym.st_info) == STB_LOCAL ? 1u << 20 : 0) + (under << 12) +
                        (uint32_t)(strlen(name) & 0xfff);
        mod->fsyms[k++] = (fsym_t){addr, sym.st_size, name, rank};
    }
    qsort(mod->fsyms, k, sizeof *mod->fsyms, fsym_cmp);
    /* Aliases at one address: keep the best ranked (sorted first). */
    size_t w = 0;
    for (size_t i = 0; i < k; i++)
        if (w == 0 || mod->fsyms[w - 1].addr != mod->fsyms[i].addr) mod->fsyms[w++] = mod->fsyms[i];
    mod->nfsyms = w;
}

/* The interned frame of pc in as. */
static int symbolize(cw_perf__unwinder_t *u, cw_perf__aspace_t *as, uint64_t pc, uint32_t *frame)
{
    char buf[512];
    const amap_t *m = find_map(as, pc);
    if (!m) {
        int n = snprintf(buf, sizeof buf, "[unknown]!0x%llx", (unsigned long long)pc);
        return cw_stacks_intern_frame(u->stacks, buf, (size_t)n, frame);
    }
    uint64_t base = m->start - m->pgoff;
    uint64_t off = pc - base;
    if ((*frame = fc_get(u, m->mod, off))) return 0;
    const char *fn = NULL;
    module_t *mod = m->mod;
    if (!mod->sym_tried) {
        mod->sym_tried = true;
        mod->sym = dwfl_begin(&sym_cbs);
        if (mod->sym) {
            dwfl_report_begin(mod->sym);
            mod->sym_mod = report_module(mod->sym, mod, SYM_BASE);
            dwfl_report_end(mod->sym, NULL, NULL);
            load_fsyms(mod);
        }
    }
    if (mod->nfsyms) {
        /* The same place in the module, wherever this process loaded it. */
        uint64_t addr = (mod->elf_exec ? base : SYM_BASE) + off;
        size_t lo = 0, hi = mod->nfsyms;
        while (lo < hi) { /* first symbol above addr */
            size_t mid = lo + (hi - lo) / 2;
            if (mod->fsyms[mid].addr <= addr)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0) {
            const fsym_t *f = &mod->fsyms[lo - 1];
            if (addr < f->addr + (f->size ? f->size : 1)) fn = f->name;
        }
    }
    /* Versioned names ("__sbrk@GLIBC_2.2.5") are shown bare. */
    int fnlen = fn ? (int)strcspn(fn, "@") : 0;
    int n = fnlen ? snprintf(buf, sizeof buf, "%s!%.*s", m->mod->name, fnlen, fn)
                  : snprintf(buf, sizeof buf, "%s!0x%llx", m->mod->name, (unsigned long long)off);
    if (n >= (int)sizeof buf) n = (int)sizeof buf - 1;
    int rc = cw_stacks_intern_frame(u->stacks, buf, (size_t)n, frame);
    if (!rc) rc = fc_put(u, m->mod, off, *frame);
    return rc;
}

int cw_perf__unwind(cw_perf__unwinder_t *u, cw_perf__aspace_t *as, uint32_t tid,
                    const uint64_t *regs, uint32_t nregs, const uint8_t *stack, uint64_t stack_size,
                    uint32_t *stack_id)
{
    walk_t w;
    w.n = 0;
    *stack_id = 0;
    as->regs = regs;
    as->nregs = nregs;
    as->stack = stack;
    as->stack_size = stack_size;
    as->sp = sample_sp(regs);
    as->tid = tid;
    if (refresh(u, as)) dwfl_getthread_frames(as->dwfl, (pid_t)tid, frame_cb, &w);
    if (w.n == 0) w.pc[w.n++] = sample_ip(regs); /* at least where the call was made */
    uint32_t frames[MAX_FRAMES];
    /* libdw walks innermost first; stacks are stored outermost first. */
    for (int i = 0; i < w.n; i++) {
        int rc = symbolize(u, as, w.pc[i], &frames[w.n - 1 - i]);
        if (rc) return rc;
    }
    as->stack = NULL;
    return cw_stacks_intern(u->stacks, frames, (uint32_t)w.n, stack_id);
}

int cw_perf__symbolize(cw_perf__unwinder_t *u, cw_perf__aspace_t *as, const uint64_t *pc,
                       uint32_t n, uint32_t *stack_id, uint32_t *unmapped)
{
    uint32_t frames[MAX_FRAMES];
    if (n > MAX_FRAMES) n = MAX_FRAMES;
    *unmapped = 0;
    for (uint32_t i = 0; i < n; i++) {
        /* A return address: its call is the instruction before it (a call
         * that ends a function would otherwise name the next one). */
        uint64_t at = pc[i] ? pc[i] - 1 : 0;
        if (!find_map(as, at)) ++*unmapped;
        int rc = symbolize(u, as, at, &frames[n - 1 - i]);
        if (rc) return rc;
    }
    return cw_stacks_intern(u->stacks, frames, n, stack_id);
}

size_t cw_perf__aspace_bytes(const cw_perf__aspace_t *as)
{
    return as ? sizeof *as + as->cap * sizeof *as->m : 0;
}

size_t cw_perf__unwinder_bytes(const cw_perf__unwinder_t *u)
{
    size_t b = sizeof *u + u->fcap * sizeof *u->fc + u->mcap * sizeof *u->mods;
    for (size_t i = 0; i < u->nmods; i++)
        b += sizeof *u->mods[i] + strlen(u->mods[i]->path) + 1 +
             u->mods[i]->nfsyms * sizeof *u->mods[i]->fsyms;
    return b;
}

size_t cw_perf__unwinder_live(const cw_perf__unwinder_t *u)
{
    return u->nlive;
}
