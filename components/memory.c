/* memory.c — kb_mem: sparse byte store, first-fit allocator, channel timing
 * (the timing formula is stated in memory.h, where users read it) */
#include "memory.h"

#include "kb_err.h"
#include "kb_port.h"

#include <inttypes.h>
#include <sys/mman.h>
#include <pthread.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_SHIFT 11 /* 2 KiB pages: a tile of 1024 f16 is one (decision 0063) */
#define PAGE_SIZE ((uint64_t)1 << PAGE_SHIFT)
_Static_assert(PAGE_SIZE == KB_MEM_PAGE_BYTES, "memory.h names the page size");

struct block {
    uint64_t addr, size;
};

#define YOUNG 4     /* the newest live blocks, kept beside the hot fields */
#define FL_INLINE 4 /* free blocks kept in the struct while the list is short */

/* The allocator's state is laid out for a system of thousands of memories
 * whose state is cold in cache when a kernel allocates or frees (issue
 * #12): the fields every allocation, free, read and write reads first fill
 * one cache line; the YOUNG newest live blocks fill the next, so that a
 * block freed soon after it was made (a kernel's scratch tile, a ring
 * step's chunk) never touches the hash table of the older live blocks; and
 * a short free list (a TCM holding tiles has one to a few free blocks) is
 * the third. Decision 0050. */
struct kb_mem {
    /* line 0 */
    _Alignas(64) struct block *fl; /* the free list, sorted by address: fl_in or the heap */
    uint32_t fl_n, fl_cap;
    /* The older live blocks, by address: an open-addressed hash table
     * (linear probing, size 0 marks an empty entry, deletion shifts back),
     * at most half full, so that an allocation and a free cost the same
     * however many blocks are live. A sorted array of live blocks here
     * cost a memmove of half of it on every allocation and free (a ring of
     * N chunks keeps N handles live). */
    struct block *used;
    uint32_t used_n;
    uint8_t used_log2;  /* the table has 1 << used_log2 entries (none if NULL) */
    uint8_t used_shift; /* see used_slot */
    uint8_t top_shift;  /* NODE_SHIFT * levels: a page's index >> it is its top entry */
    uint64_t capacity, free_bytes, peak;
    /* the top of the page tables (see pte), NULL until written */
    uintptr_t *top;

    /* line 1: the live blocks not in `used`, oldest first, packed at the
     * front (size 0: no block); the oldest moves to `used` when a new one
     * needs its place */
    struct block young[YOUNG];
    /* line 2: the free list while it has at most FL_INLINE blocks */
    struct block fl_in[FL_INLINE];

    /* line 3: what timing an access reads (kb_mem_schedule) */
    struct sim *sim;
    double ps_per_byte;
    sim_time setup_ps;
    sim_time *busy_until; /* per channel: &busy0 for one */
    uint32_t n_channels, burst_shift;
    sim_time busy0;
    uint32_t n_top, levels; /* the page tables' shape */
    uint64_t n_pages;
    /* line 4: the counters an access adds to */
    struct kb_mem_stats st; /* (its peak_alloc_bytes is `peak`) */
    int node;  /* the fabric node it hangs off, -1: none */
    struct mem_export *exp; /* its port, made on first use */

    char *name;
    struct kb_mem_params p;
    char *err; /* ERR_LEN bytes, made on the first error: a system has many */
};
_Static_assert(offsetof(struct kb_mem, young) == 64 &&
                   offsetof(struct kb_mem, fl_in) == 128 &&
                   offsetof(struct kb_mem, sim) == 192 &&
                   offsetof(struct kb_mem, st) == 256,
               "the hot fields are one cache line, young the next, ...");

struct mem_export {
    struct sim_port *port;
    struct kb_mem_if iface;
};

#define ERR_LEN 256

/* ---- the page pool ------------------------------------------------------
 *
 * Every memory's 2 KiB pages come from one pool shared by the process:
 * pages are carved from chunks of POOL_CHUNK_PAGES and a page a memory
 * gives back (its block freed, the memory freed) goes on a free list for
 * the next page any memory makes, last in first out, so a system whose
 * kernels allocate and free tiles reuses the same hot pages instead of
 * growing. malloc per page cost ~20 % of a values run at system scale
 * (decision 0034). The chunks go back to the C library when no page is in
 * use (every memory freed, e.g. between the points of a sweep). The lock
 * lets sweep threads run simulations side by side.
 *
 * A chunk is aligned to its size, and its first pages (HEADER_PAGES) hold
 * the reference counts of its pages (page_refs): a page two memories share after a copy
 * (decision 0053). Each chunk asks for transparent huge pages (madvise):
 * its pages are handed out in order, so a huge page is all used, and a
 * values run takes a third of the faults and ~0.75x the CPU where a fault
 * is dear (decision 0071, which reverses 0058's measurement).
 *
 * Chunks are carved in order from extents of 1, 2, 4 and then
 * EXTENT_CHUNKS chunks, each one aligned_alloc: aligning a block to 2 MiB
 * leaves a free hole of up to 2 MiB in the heap before it, which small
 * blocks fill later a few pages at a time. With a chunk a block, lrab on
 * 1024 SIPs left 1.6 GB of such holes; on huge pages (kbsim's default,
 * decision 0073) each hole's touched corners made whole 2 MiB resident:
 * 1.5x the memory. An extent of 8 chunks (16 MiB, below malloc's mmap
 * threshold of decision 0044, so from the heap and kept when freed) has
 * one hole per 8 chunks. */
#define POOL_CHUNK_PAGES 1024 /* 2 MiB */
#define HEADER_PAGES ((POOL_CHUNK_PAGES * sizeof(uint32_t) + PAGE_SIZE - 1) / PAGE_SIZE)
#define CHUNK_BYTES (POOL_CHUNK_PAGES * PAGE_SIZE)
#define EXTENT_CHUNKS 8

struct free_page {
    struct free_page *next;
};

struct extent {
    unsigned char *base;
    size_t chunks, carved;
};

static struct {
    pthread_mutex_t lock;
    struct free_page *free; /* pages given back */
    struct extent *ext;     /* the newest last */
    size_t n_ext, cap_ext;
    size_t fresh; /* pages of the newest chunk not handed out yet */
    unsigned char *chunk; /* the newest chunk */
    uint64_t in_use;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A new chunk, its counts zero; NULL when out of memory. */
static unsigned char *chunk_new(void)
{
    struct extent *e = pool.n_ext ? &pool.ext[pool.n_ext - 1] : NULL;
    if (!e || e->carved == e->chunks) {
        if (pool.n_ext == pool.cap_ext) {
            size_t cap = pool.cap_ext ? 2 * pool.cap_ext : 16;
            struct extent *a = realloc(pool.ext, cap * sizeof *a);
            if (!a)
                return NULL;
            pool.ext = a;
            pool.cap_ext = cap;
        }
        size_t n = e ? 2 * e->chunks : 1;
        if (n > EXTENT_CHUNKS)
            n = EXTENT_CHUNKS;
        unsigned char *b = aligned_alloc(CHUNK_BYTES, n * CHUNK_BYTES);
        if (!b)
            return NULL;
#ifdef MADV_HUGEPAGE
        /* one fault a chunk, not 1024 (decision 0071); a kernel without
         * transparent huge pages ignores it, and so do we */
        (void)madvise(b, n * CHUNK_BYTES, MADV_HUGEPAGE);
#endif
        e = &pool.ext[pool.n_ext++];
        *e = (struct extent){.base = b, .chunks = n};
    }
    unsigned char *c = e->base + e->carved++ * CHUNK_BYTES;
    memset(c, 0, POOL_CHUNK_PAGES * sizeof(uint32_t)); /* the counts */
    return c;
}

/* The count of the page at p beyond its first owner (0: one owner), in the
 * header of its chunk. A page is shared only by memories of one Lua state
 * (a system's, or two systems' of one script), so of one thread: its
 * count needs no lock. */
static uint32_t *page_refs(const unsigned char *p)
{
    uintptr_t base = (uintptr_t)p & ~(uintptr_t)(CHUNK_BYTES - 1);
    return (uint32_t *)base + (((uintptr_t)p - base) >> PAGE_SHIFT);
}

/* A page (its bytes whatever they were, one owner); NULL when out of
 * memory. */
static unsigned char *pool_get(void)
{
    pthread_mutex_lock(&pool.lock);
    unsigned char *p = NULL;
    if (pool.free) {
        p = (unsigned char *)pool.free;
        pool.free = pool.free->next;
    } else {
        if (!pool.fresh) {
            unsigned char *c = chunk_new();
            if (!c)
                goto out;
            pool.chunk = c;
            pool.fresh = POOL_CHUNK_PAGES - HEADER_PAGES; /* the first pages hold the counts */
        }
        p = pool.chunk + (POOL_CHUNK_PAGES - pool.fresh--) * PAGE_SIZE;
    }
    pool.in_use++;
out:
    pthread_mutex_unlock(&pool.lock);
    return p;
}

/* Takes back a page whose count is 0. */
static void pool_put(unsigned char *p)
{
    pthread_mutex_lock(&pool.lock);
    struct free_page *f = (struct free_page *)(void *)p;
    f->next = pool.free;
    pool.free = f;
    if (!--pool.in_use) { /* nothing in use: the extents go back */
        for (size_t i = 0; i < pool.n_ext; i++)
            free(pool.ext[i].base);
        free(pool.ext);
        pool.ext = NULL;
        pool.n_ext = pool.cap_ext = pool.fresh = 0;
        pool.chunk = NULL;
        pool.free = NULL;
    }
    pthread_mutex_unlock(&pool.lock);
}

uint64_t kb_mem_pool_pages(void)
{
    pthread_mutex_lock(&pool.lock);
    uint64_t n = pool.in_use;
    pthread_mutex_unlock(&pool.lock);
    return n;
}

/* ---- page tables --------------------------------------------------------
 *
 * A memory finds its pages through a radix tree: the top table (n_top
 * entries, made on the first write) and `levels` levels of nodes of
 * NODE_SIZE entries below it, made as writes reach them; an entry of the
 * last level is a pte: the page's address, with PTE_SHARED set when the
 * page may have another owner (see page_refs), 0 for a page never written.
 * levels is the fewest that keep the top at most TOP_MAX entries, so that
 * a memory holding a tile costs ~1 KiB of tables, not the 12 KiB a 2 GiB
 * HBM's table of 2 MiB directories did (issue #12: 16 K participants). */
#define NODE_SHIFT 6
#define NODE_SIZE ((uint64_t)1 << NODE_SHIFT) /* 512 bytes of entries */
#define TOP_MAX 512
#define PTE_SHARED ((uintptr_t)1)

typedef uintptr_t pte;

static unsigned char *pte_page(pte e) { return (unsigned char *)(e & ~PTE_SHARED); }

/* Drops one owner of the page of e: the page goes back to the pool with
 * its last. */
static void page_unref(pte e)
{
    unsigned char *p = pte_page(e);
    if (e & PTE_SHARED) {
        uint32_t *r = page_refs(p);
        if (*r) {
            (*r)--;
            return;
        }
    }
    pool_put(p);
}

/* Frees an entry of a table `levels` above the ptes and all below it. */
static void table_free(pte e, uint32_t levels)
{
    if (!e)
        return;
    if (!levels) {
        page_unref(e);
        return;
    }
    pte *node = (pte *)e;
    for (uint64_t i = 0; i < NODE_SIZE; i++)
        table_free(node[i], levels - 1);
    free(node);
}

static int seterr(struct kb_mem *m, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int seterr(struct kb_mem *m, int code, const char *fmt, ...)
{
    /* the buffer is made on the first error: a system has many memories */
    if (!m->err && !(m->err = malloc(ERR_LEN)))
        return code;
    va_list ap;
    va_start(ap, fmt);
    kb_verrc(m->err, ERR_LEN, code, fmt, ap);
    va_end(ap);
    return code;
}


/* ---- the module's export (kb_mem_if) ------------------------------------ */

static int if_access(void *ctx, uint64_t addr, uint64_t bytes, bool is_write)
{
    return kb_mem_access(ctx, addr, bytes, is_write);
}
static int if_read(void *ctx, uint64_t addr, void *dst, uint64_t bytes)
{
    return kb_mem_read(ctx, addr, dst, bytes);
}
static int if_write(void *ctx, uint64_t addr, const void *src, uint64_t bytes)
{
    return kb_mem_write(ctx, addr, src, bytes);
}
static int if_alloc(void *ctx, uint64_t bytes, uint64_t align, uint64_t *addr)
{
    return kb_mem_alloc(ctx, bytes, align, addr);
}
static int if_dealloc(void *ctx, uint64_t addr) { return kb_mem_dealloc(ctx, addr); }
static const char *if_errmsg(void *ctx) { return kb_mem_errmsg(ctx); }

void kb_mem_set_node(struct kb_mem *m, int node)
{
    m->node = node;
    if (m->exp)
        m->exp->iface.node = node;
}

int kb_mem_node(const struct kb_mem *m) { return m->node; }

struct sim_port *kb_mem_port(struct kb_mem *m)
{
    if (m->exp)
        return m->exp->port;
    struct mem_export *e = calloc(1, sizeof *e);
    if (!e) {
        seterr(m, SIM_ENOMEM, "%s of '%s': out of memory making its port",
               kb_mem_kind_name(m->p.kind), m->name);
        return NULL;
    }
    e->iface = (struct kb_mem_if){m,         m->node,  m,          if_access, if_read,
                                  if_write,  if_alloc, if_dealloc, if_errmsg};
    char err[256];
    e->port = kb_port_export(m->sim, m->name, kb_mem_kind_name(m->p.kind), KB_MEM_IF,
                             &e->iface, KB_PORT_MANY, err, sizeof err);
    if (!e->port) {
        free(e);
        seterr(m, SIM_ENOMEM, "%s", err);
        return NULL;
    }
    m->exp = e;
    return e->port;
}

const char *kb_mem_kind_name(enum kb_mem_kind k)
{
    switch (k) {
    case KB_MEM_TCM: return "tcm";
    case KB_MEM_SRAM: return "sram";
    case KB_MEM_HBM: return "hbm";
    }
    return "memory";
}

static int pow2(uint64_t v) { return v && !(v & (v - 1)); }

static int check(const struct kb_mem_params *p, const char *name, char *err,
                 size_t errlen)
{
    const char *k = kb_mem_kind_name(p->kind);
    if (p->kind != KB_MEM_TCM && p->kind != KB_MEM_SRAM && p->kind != KB_MEM_HBM)
        kb_errf(err, errlen, "memory of '%s': unknown kind %d", name, (int)p->kind);
    else if (p->capacity == 0)
        kb_errf(err, errlen, "%s of '%s': capacity must be > 0 bytes, got 0", k,
             name);
    else if (!(p->bw_gbps > 0) || isinf(p->bw_gbps))
        kb_errf(err, errlen, "%s of '%s': bandwidth must be a positive number of "
             "GB/s, got %g", k, name, p->bw_gbps);
    else if (!(p->setup_ns >= 0) || isinf(p->setup_ns))
        kb_errf(err, errlen, "%s of '%s': setup must be >= 0 ns, got %g", k, name,
             p->setup_ns);
    else if (p->n_channels > 1 && (!pow2(p->n_channels) ||
                                   p->n_channels > KB_MEM_MAX_CHANNELS))
        kb_errf(err, errlen, "%s of '%s': channels must be a power of two up to "
             "%d, got %" PRIu32, k, name, KB_MEM_MAX_CHANNELS, p->n_channels);
    else if (p->n_channels > 1 && !pow2(p->burst_bytes))
        kb_errf(err, errlen, "%s of '%s': burst must be a power of two bytes, "
             "got %" PRIu32, k, name, p->burst_bytes);
    else
        return 0;
    return SIM_EINVAL;
}

struct kb_mem *kb_mem_new(struct sim *s, const char *name,
                          const struct kb_mem_params *p, char *err,
                          size_t errlen)
{
    if (check(p, name, err, errlen) < 0)
        return NULL;
    /* 64-byte aligned, so that the hot fields are one cache line */
    struct kb_mem *m = aligned_alloc(_Alignof(struct kb_mem), sizeof *m);
    if (!m)
        goto oom;
    memset(m, 0, sizeof *m);
    m->sim = s;
    m->p = *p;
    m->node = -1;
    if (m->p.n_channels <= 1) {
        m->p.n_channels = 1;
        m->p.burst_bytes = m->p.burst_bytes ? m->p.burst_bytes : 1;
    }
    m->ps_per_byte = 1000.0 / p->bw_gbps;
    m->setup_ps = (sim_time)llround(p->setup_ns * 1000.0);
    while (((uint64_t)1 << m->burst_shift) < m->p.burst_bytes)
        m->burst_shift++;
    m->n_channels = m->p.n_channels;
    uint64_t pages = (p->capacity + PAGE_SIZE - 1) >> PAGE_SHIFT;
    uint64_t top = pages; /* the entries of the top, levels levels above the ptes */
    for (; top > TOP_MAX; m->levels++)
        top = (top + NODE_SIZE - 1) >> NODE_SHIFT;
    m->n_top = (uint32_t)top;
    m->top_shift = (uint8_t)(NODE_SHIFT * m->levels);
    m->name = strdup(name);
    m->busy_until = m->n_channels == 1 ? &m->busy0
                                       : calloc(m->n_channels, sizeof *m->busy_until);
    if (!m->name || !m->busy_until)
        goto oom;
    m->fl = m->fl_in;
    m->fl_cap = FL_INLINE;
    m->fl[0] = (struct block){0, p->capacity};
    m->fl_n = 1;
    m->capacity = m->free_bytes = p->capacity;
    return m;
oom:
    kb_errf(err, errlen, "%s of '%s': out of memory", kb_mem_kind_name(p->kind),
         name);
    kb_mem_free(m);
    return NULL;
}

void kb_mem_free(struct kb_mem *m)
{
    if (!m)
        return;
    if (m->top) {
        for (uint32_t i = 0; i < m->n_top; i++)
            table_free(m->top[i], m->levels);
        free(m->top);
    }
    free(m->exp);
    free(m->err);
    if (m->busy_until != &m->busy0)
        free(m->busy_until);
    if (m->fl != m->fl_in)
        free(m->fl);
    free(m->used);
    free(m->name);
    free(m);
}

const char *kb_mem_errmsg(const struct kb_mem *m)
{
    return m->err ? m->err : "out of memory";
}
const char *kb_mem_name(const struct kb_mem *m) { return m->name; }
const struct kb_mem_params *kb_mem_params(const struct kb_mem *m)
{
    return &m->p;
}

uint64_t kb_mem_capacity(const struct kb_mem *m) { return m->capacity; }

/* ---- allocation -------------------------------------------------------- */

/* ---- the free list: blocks sorted by address, in fl_in while short ---- */

static int fl_insert(struct kb_mem *m, uint32_t at, struct block b)
{
    if (m->fl_n == m->fl_cap) {
        if (m->fl_cap > UINT32_MAX / 2)
            return SIM_ENOMEM;
        uint32_t cap = 2 * m->fl_cap;
        struct block *nb = m->fl == m->fl_in ? malloc(cap * sizeof *nb)
                                             : realloc(m->fl, cap * sizeof *nb);
        if (!nb)
            return SIM_ENOMEM;
        if (m->fl == m->fl_in)
            memcpy(nb, m->fl_in, sizeof m->fl_in);
        m->fl = nb;
        m->fl_cap = cap;
    }
    memmove(m->fl + at + 1, m->fl + at, (m->fl_n - at) * sizeof *m->fl);
    m->fl[at] = b;
    m->fl_n++;
    return 0;
}

static void fl_remove(struct kb_mem *m, uint32_t at)
{
    memmove(m->fl + at, m->fl + at + 1, (m->fl_n - at - 1) * sizeof *m->fl);
    m->fl_n--;
    /* back into the struct once short again (at half the inline room, so
     * that a list around FL_INLINE blocks does not move at every change) */
    if (m->fl != m->fl_in && m->fl_n <= FL_INLINE / 2) {
        memcpy(m->fl_in, m->fl, m->fl_n * sizeof *m->fl);
        free(m->fl);
        m->fl = m->fl_in;
        m->fl_cap = FL_INLINE;
    }
}

/* The first index whose block starts at or after addr. */
static uint32_t fl_find(const struct kb_mem *m, uint64_t addr)
{
    uint32_t lo = 0, hi = m->fl_n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (m->fl[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- the live blocks: young, then the hash table `used` --------------- */

/* Where the table looks first for the block at addr. The key is addr >>
 * used_shift, where every address in the table is a multiple of 1 <<
 * used_shift, so that no two blocks share a key; consecutive keys come in
 * groups of USED_GROUP, one cache line of the table, and a group goes to a
 * pseudo-random place (Fibonacci hashing of its number). Blocks made or
 * freed one after the other (a tile's chunks, a ring's steps) then share
 * cache lines instead of touching one each, and strides still spread. */
#define USED_GROUP 4 /* 64 bytes of 16-byte entries */

static size_t used_cap(const struct kb_mem *m)
{
    return m->used ? (size_t)1 << m->used_log2 : 0;
}

static size_t used_slot(const struct kb_mem *m, uint64_t addr)
{
    uint64_t key = addr >> m->used_shift;
    uint64_t h = ((key / USED_GROUP) * 0x9E3779B97F4A7C15ull) >> 32;
    return (size_t)(h * USED_GROUP + key % USED_GROUP) & (used_cap(m) - 1);
}

/* The entry of the block at addr in the table, or NULL. */
static struct block *used_find(const struct kb_mem *m, uint64_t addr)
{
    if (!m->used)
        return NULL;
    for (size_t i = used_slot(m, addr);; i = (i + 1) & (used_cap(m) - 1)) {
        if (!m->used[i].size)
            return NULL;
        if (m->used[i].addr == addr)
            return &m->used[i];
    }
}

static void used_put(struct kb_mem *m, struct block b)
{
    size_t i = used_slot(m, b.addr);
    while (m->used[i].size)
        i = (i + 1) & (used_cap(m) - 1);
    m->used[i] = b;
    m->used_n++;
}

/* The largest shift (at most 32) that keeps addr a multiple of 1 << it. */
static unsigned addr_shift(uint64_t addr, unsigned max)
{
    unsigned s = addr ? (unsigned)__builtin_ctzll(addr) : 64;
    return s < max ? s : max;
}

/* Room in the table for one more block, at addr: the table grows to keep
 * at most half full, and is remade with a smaller shift when addr is not a
 * multiple of 1 << used_shift. */
static int used_reserve(struct kb_mem *m, uint64_t addr)
{
    size_t oldcap = used_cap(m);
    bool grow = 2 * ((uint64_t)m->used_n + 1) > oldcap;
    if (!grow && addr_shift(addr, m->used_shift) == m->used_shift)
        return 0; /* (sizes are never 0: kb_mem_alloc refuses 0 bytes) */
    if (grow && oldcap > UINT32_MAX / 2)
        return SIM_ENOMEM;
    unsigned log2 = !grow ? m->used_log2 : oldcap ? m->used_log2 + 1u : 4u;
    size_t cap = (size_t)1 << log2;
    struct block *old = m->used;
    /* line-aligned, so that a group of keys is one cache line */
    struct block *nb = aligned_alloc(64, cap * sizeof *nb);
    if (!nb)
        return SIM_ENOMEM;
    memset(nb, 0, cap * sizeof *nb);
    unsigned shift = addr_shift(addr, 32);
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].size)
            shift = addr_shift(old[i].addr, shift);
    m->used = nb;
    m->used_log2 = (uint8_t)log2;
    m->used_shift = (uint8_t)shift;
    m->used_n = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].size)
            used_put(m, old[i]);
    free(old);
    return 0;
}

/* Removes entry e, shifting back the entries of its probe run. */
static void used_remove(struct kb_mem *m, struct block *e)
{
    size_t mask = used_cap(m) - 1, i = (size_t)(e - m->used), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->used[j].size)
            break;
        size_t k = used_slot(m, m->used[j].addr);
        /* entry j may fill hole i unless its home k lies cyclically in (i, j] */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        m->used[i] = m->used[j];
        i = j;
    }
    m->used[i] = (struct block){0, 0};
    m->used_n--;
}

/* A new live block; when young is full its oldest moves to the table, for
 * which the caller has made room (used_reserve). */
static void live_add(struct kb_mem *m, struct block b)
{
    int i = 0;
    while (i < YOUNG && m->young[i].size)
        i++;
    if (i == YOUNG) {
        used_put(m, m->young[0]);
        for (i = 0; i < YOUNG - 1; i++)
            m->young[i] = m->young[i + 1];
    }
    m->young[i] = b;
}

/* kb_mem_alloc, and kb_mem_alloc_owned when !record: the same first fit,
 * but the block is not kept among the live blocks (its owner keeps it). */
static int alloc_block(struct kb_mem *m, uint64_t bytes, uint64_t align, uint64_t *addr,
                       bool record)
{
    if (!align)
        align = 1;
    if (!pow2(align))
        return seterr(m, SIM_EINVAL, "%s of '%s': alignment %" PRIu64 " is not "
                      "a power of two", kb_mem_kind_name(m->p.kind), m->name, align);
    if (!bytes)
        return seterr(m, SIM_EINVAL, "%s of '%s': allocation of 0 bytes",
                      kb_mem_kind_name(m->p.kind), m->name);
    for (uint32_t i = 0; i < m->fl_n; i++) {
        struct block b = m->fl[i];
        uint64_t a = (b.addr + align - 1) & ~(align - 1);
        if (a < b.addr || a - b.addr >= b.size || b.size - (a - b.addr) < bytes)
            continue;
        /* reserve room for the pieces first, so that failing changes
         * nothing */
        if (record && m->young[YOUNG - 1].size && used_reserve(m, m->young[0].addr) < 0)
            goto oom;
        uint64_t end = b.addr + b.size, tail = end - (a + bytes);
        if (a > b.addr && tail) {
            if (fl_insert(m, i + 1, (struct block){a + bytes, tail}) < 0)
                goto oom;
            m->fl[i].size = a - b.addr;
        } else if (a > b.addr) {
            m->fl[i].size = a - b.addr;
        } else if (tail) {
            m->fl[i] = (struct block){a + bytes, tail};
        } else {
            fl_remove(m, i);
        }
        if (record)
            live_add(m, (struct block){a, bytes});
        m->free_bytes -= bytes;
        if (m->capacity - m->free_bytes > m->peak)
            m->peak = m->capacity - m->free_bytes;
        *addr = a;
        return 0;
    }
    const char *k = kb_mem_kind_name(m->p.kind);
    if (m->free_bytes >= bytes)
        return seterr(m, SIM_ENOMEM, "%s of '%s' has no room for %" PRIu64
                      " bytes aligned to %" PRIu64 ": %" PRIu64 " bytes, %"
                      PRIu64 " free but fragmented in %" PRIu32 " blocks", k,
                      m->name, bytes, align, m->capacity, m->free_bytes,
                      m->fl_n);
    return seterr(m, SIM_ENOMEM, "%s of '%s' is full: %" PRIu64 " bytes, %"
                  PRIu64 " requested, %" PRIu64 " free", k, m->name,
                  m->capacity, bytes, m->free_bytes);
oom:
    return seterr(m, SIM_ENOMEM, "%s of '%s': out of memory",
                  kb_mem_kind_name(m->p.kind), m->name);
}

int kb_mem_alloc(struct kb_mem *m, uint64_t bytes, uint64_t align, uint64_t *addr)
{
    return alloc_block(m, bytes, align, addr, true);
}

int kb_mem_alloc_owned(struct kb_mem *m, uint64_t bytes, uint64_t align, uint64_t *addr)
{
    return alloc_block(m, bytes, align, addr, false);
}

static int clear_freed(struct kb_mem *m, struct block b, struct block joined);
static int give_back(struct kb_mem *m, struct block b, struct block *u, int y);

int kb_mem_dealloc(struct kb_mem *m, uint64_t addr)
{
    int y = 0;
    while (y < YOUNG && m->young[y].size && m->young[y].addr != addr)
        y++;
    struct block *u = NULL;
    if (y == YOUNG || !m->young[y].size) {
        if (!(u = used_find(m, addr)))
            return seterr(m, SIM_EINVAL, "%s of '%s': no block allocated at 0x%"
                          PRIx64, kb_mem_kind_name(m->p.kind), m->name, addr);
    }
    return give_back(m, u ? *u : m->young[y], u, y);
}

int kb_mem_dealloc_owned(struct kb_mem *m, uint64_t addr, uint64_t bytes)
{
    return give_back(m, (struct block){addr, bytes}, NULL, -1);
}

/* Frees live block b: recorded in the table at u, or young[y], or (u NULL
 * and y < 0) an owned block, which must lie between the free blocks
 * around it (a second free of it does not). */
static int give_back(struct kb_mem *m, struct block b, struct block *u, int y)
{
    uint64_t addr = b.addr;
    uint32_t i = fl_find(m, addr);
    struct block *prev = i ? &m->fl[i - 1] : NULL;
    struct block *next = i < m->fl_n ? &m->fl[i] : NULL;
    if (!u && y < 0 && (!b.size || b.addr > m->capacity || b.size > m->capacity - b.addr ||
                        (prev && prev->addr + prev->size > b.addr) ||
                        (next && b.addr + b.size > next->addr)))
        return seterr(m, SIM_EINVAL, "%s of '%s': no block of %" PRIu64 " bytes allocated at 0x%"
                      PRIx64, kb_mem_kind_name(m->p.kind), m->name, b.size, addr);
    int join_prev = prev && prev->addr + prev->size == b.addr;
    int join_next = next && b.addr + b.size == next->addr;
    struct block joined = b; /* the free block b ends up in */
    if (join_prev && join_next) {
        prev->size += b.size + next->size;
        joined = *prev;
        fl_remove(m, i);
    } else if (join_prev) {
        prev->size += b.size;
        joined = *prev;
    } else if (join_next) {
        next->addr = b.addr;
        next->size += b.size;
        joined = *next;
    } else if (fl_insert(m, i, b) < 0) {
        return seterr(m, SIM_ENOMEM, "%s of '%s': out of memory",
                      kb_mem_kind_name(m->p.kind), m->name);
    }
    if (u) {
        used_remove(m, u);
    } else if (y >= 0) {
        for (; y < YOUNG - 1; y++) /* (a loop of at most 3: no memmove call) */
            m->young[y] = m->young[y + 1];
        m->young[YOUNG - 1] = (struct block){0, 0};
    }
    m->free_bytes += b.size;
    /* the block is free either way; only its bytes may not read as zeros */
    if (clear_freed(m, b, joined) < 0)
        return seterr(m, SIM_ENOMEM, "%s of '%s': out of memory clearing the block freed "
                      "at 0x%" PRIx64, kb_mem_kind_name(m->p.kind), m->name, addr);
    return 0;
}

uint64_t kb_mem_free_bytes(const struct kb_mem *m) { return m->free_bytes; }

/* ---- contents ---------------------------------------------------------- */

static int in_range(struct kb_mem *m, const char *what, uint64_t addr,
                    uint64_t bytes)
{
    if (addr > m->capacity || bytes > m->capacity - addr)
        return seterr(m, SIM_EINVAL, "%s of %" PRIu64 " bytes at 0x%" PRIx64
                      " is beyond the %" PRIu64 " bytes of %s of '%s'", what,
                      bytes, addr, m->p.capacity, kb_mem_kind_name(m->p.kind),
                      m->name);
    return 0;
}

/* The pte of page pg, 0 if it was never written. */
static pte pte_get(const struct kb_mem *m, uint64_t pg)
{
    if (!m->top)
        return 0;
    unsigned sh = m->top_shift; /* (line 0: no second line a look-up) */
    pte e = m->top[pg >> sh];
    while (sh && e) {
        sh -= NODE_SHIFT;
        e = ((const pte *)e)[(pg >> sh) & (NODE_SIZE - 1)];
    }
    return e;
}

/* Where the pte of page pg is; NULL when its table was never made, with
 * *next the first page past what that table would hold. */
static pte *pte_find(const struct kb_mem *m, uint64_t pg, uint64_t *next)
{
    unsigned sh = m->top_shift; /* (line 0: no second line a look-up) */
    if (!m->top) {
        *next = UINT64_MAX;
        return NULL;
    }
    pte *e = &m->top[pg >> sh];
    while (sh) {
        if (!*e) {
            *next = ((pg >> sh) + 1) << sh;
            return NULL;
        }
        sh -= NODE_SHIFT;
        e = &((pte *)*e)[(pg >> sh) & (NODE_SIZE - 1)];
    }
    return e;
}

/* Where the pte of page pg is, making its tables (NULL: out of memory). */
static pte *pte_make(struct kb_mem *m, uint64_t pg)
{
    if (!m->top && !(m->top = calloc(m->n_top, sizeof *m->top)))
        return NULL;
    unsigned sh = m->top_shift; /* (line 0: no second line a look-up) */
    pte *e = &m->top[pg >> sh];
    while (sh) {
        if (!*e) {
            pte *node = calloc(NODE_SIZE, sizeof *node);
            if (!node)
                return NULL;
            *e = (pte)node;
        }
        sh -= NODE_SHIFT;
        e = &((pte *)*e)[(pg >> sh) & (NODE_SIZE - 1)];
    }
    return e;
}

/* The page holding addr, or NULL if it was never written. */
static const unsigned char *page(const struct kb_mem *m, uint64_t addr)
{
    return pte_page(pte_get(m, addr >> PAGE_SHIFT));
}

/* The page of *e made this memory's alone, for a caller about to write
 * bytes [lo, hi) of it (NULL: out of memory): a page with other owners is
 * copied first, outside [lo, hi) (copy on write). */
static unsigned char *page_own(pte *e, uint64_t lo, uint64_t hi)
{
    unsigned char *p = pte_page(*e);
    if (!(*e & PTE_SHARED))
        return p;
    uint32_t *r = page_refs(p);
    if (!*r) { /* the others let go: it is ours */
        *e = (pte)p;
        return p;
    }
    unsigned char *np = pool_get();
    if (!np)
        return NULL;
    if (lo)
        memcpy(np, p, lo);
    if (hi < PAGE_SIZE)
        memcpy(np + hi, p + hi, PAGE_SIZE - hi);
    (*r)--;
    *e = (pte)np;
    return np;
}

/* page_for_write when the page is missing or shared. */
static __attribute__((noinline)) unsigned char *
page_for_write_slow(struct kb_mem *m, uint64_t addr, uint64_t lo, uint64_t hi)
{
    pte *e = pte_make(m, addr >> PAGE_SHIFT);
    if (!e)
        return NULL;
    if (*e)
        return page_own(e, lo, hi);
    unsigned char *p = pool_get();
    if (!p)
        return NULL;
    *e = (pte)p;
    m->n_pages++;
    if (lo)
        memset(p, 0, lo);
    if (hi < PAGE_SIZE)
        memset(p + hi, 0, PAGE_SIZE - hi);
    return p;
}

/* The page holding addr, made or unshared if need be (NULL: out of
 * memory), for a caller about to write bytes [lo, hi) of it: a new page
 * is zero-filled outside them only. (A page of this memory's alone, the
 * usual case, is a look-up.) */
static inline unsigned char *page_for_write(struct kb_mem *m, uint64_t addr,
                                            uint64_t lo, uint64_t hi)
{
    pte e = pte_get(m, addr >> PAGE_SHIFT);
    if (e && !(e & PTE_SHARED))
        return (unsigned char *)e;
    return page_for_write_slow(m, addr, lo, hi);
}

/* Page entry e of m (a page) let go of: m reads zeros there again. */
static void page_drop(struct kb_mem *m, pte *e)
{
    page_unref(*e);
    *e = 0;
    m->n_pages--;
}

/* A freed block reads as zeros, as memory never written does: each page
 * that lies wholly in the free block it joined goes back to the pool (or
 * to its other owners), and the block's bytes in a page it shares with
 * allocated bytes are cleared. So a new block always starts as zeros, and
 * only allocated bytes (and page ends around them) hold storage. 0, or
 * SIM_ENOMEM when a page shared with another memory could not be copied
 * to clear its part (its bytes then keep their values). */
static int clear_freed(struct kb_mem *m, struct block b, struct block joined)
{
    if (!m->top)
        return 0;
    int rc = 0;
    uint64_t end = b.addr + b.size, jend = joined.addr + joined.size;
    uint64_t pg = b.addr >> PAGE_SHIFT, last = (end - 1) >> PAGE_SHIFT, next;
    while (pg <= last) {
        pte *e = pte_find(m, pg, &next);
        if (!e) { /* a whole table never written: skip past it */
            pg = next;
            continue;
        }
        uint64_t pa = pg++ << PAGE_SHIFT;
        if (!*e)
            continue;
        if (pa >= joined.addr && jend - pa >= PAGE_SIZE) {
            page_drop(m, e);
        } else {
            uint64_t lo = pa > b.addr ? pa : b.addr;
            uint64_t hi = pa + PAGE_SIZE < end ? pa + PAGE_SIZE : end;
            unsigned char *p = page_own(e, lo - pa, hi - pa);
            if (p)
                memset(p + (lo - pa), 0, hi - lo);
            else
                rc = SIM_ENOMEM; /* the rest is still cleared */
        }
    }
    return rc;
}

static uint64_t min3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a < b ? a : b;
    return m < c ? m : c;
}

static int oom(struct kb_mem *m)
{
    return seterr(m, SIM_ENOMEM, "%s of '%s': out of memory",
                  kb_mem_kind_name(m->p.kind), m->name);
}

int kb_mem_write(struct kb_mem *m, uint64_t addr, const void *src,
                 uint64_t bytes)
{
    int rc = in_range(m, "write", addr, bytes);
    if (rc < 0)
        return rc;
    const unsigned char *s = src;
    while (bytes) {
        uint64_t off = addr & (PAGE_SIZE - 1);
        uint64_t n = PAGE_SIZE - off < bytes ? PAGE_SIZE - off : bytes;
        unsigned char *p = page_for_write(m, addr, off, off + n);
        if (!p)
            return oom(m);
        memcpy(p + off, s, n);
        s += n;
        addr += n;
        bytes -= n;
    }
    return 0;
}

int kb_mem_read(struct kb_mem *m, uint64_t addr, void *dst, uint64_t bytes)
{
    int rc = in_range(m, "read", addr, bytes);
    if (rc < 0)
        return rc;
    unsigned char *d = dst;
    while (bytes) {
        uint64_t off = addr & (PAGE_SIZE - 1);
        uint64_t n = PAGE_SIZE - off < bytes ? PAGE_SIZE - off : bytes;
        const unsigned char *p = page(m, addr);
        if (p)
            memcpy(d, p + off, n);
        else
            memset(d, 0, n);
        d += n;
        addr += n;
        bytes -= n;
    }
    return 0;
}

int kb_mem_read_span(struct kb_mem *m, uint64_t addr, uint64_t bytes,
                     const unsigned char **p, uint64_t *len)
{
    int rc = in_range(m, "read", addr, bytes);
    if (rc < 0)
        return rc;
    uint64_t off = addr & (PAGE_SIZE - 1);
    const unsigned char *pg = page(m, addr);
    *len = PAGE_SIZE - off < bytes ? PAGE_SIZE - off : bytes;
    *p = pg ? pg + off : NULL;
    return 0;
}

int kb_mem_write_span(struct kb_mem *m, uint64_t addr, uint64_t bytes,
                      unsigned char **p, uint64_t *len)
{
    int rc = in_range(m, "write", addr, bytes);
    if (rc < 0)
        return rc;
    uint64_t off = addr & (PAGE_SIZE - 1);
    *len = PAGE_SIZE - off < bytes ? PAGE_SIZE - off : bytes;
    *p = NULL;
    if (!bytes) /* nothing to write: no page made */
        return 0;
    /* a span of a whole page is the caller's to fill; the page of any
     * other is zero-filled whole (the caller may write part of the span) */
    unsigned char *pg = *len == PAGE_SIZE ? page_for_write(m, addr, 0, PAGE_SIZE)
                                          : page_for_write(m, addr, 0, 0);
    if (!pg)
        return oom(m);
    *p = pg + off;
    return 0;
}

/* A whole page p (NULL: zeros, no page) given to page da of m as one more
 * owner (decision 0053): what a whole-page copy or a snapshot's whole
 * page leaves in the destination. */
static int page_share(struct kb_mem *m, uint64_t da, const unsigned char *p)
{
    uint64_t next;
    pte *de = pte_find(m, da >> PAGE_SHIFT, &next);
    if (!p) {
        if (de && *de)
            page_drop(m, de);
        return 0;
    }
    if (!de && !(de = pte_make(m, da >> PAGE_SHIFT)))
        return oom(m);
    if (*de && pte_page(*de) == p)
        return 0; /* the same page already */
    (*page_refs(p))++;
    if (*de)
        page_unref(*de);
    else
        m->n_pages++;
    *de = (pte)p | PTE_SHARED;
    return 0;
}

/* One piece of a copy, inside one source and one destination page. A
 * whole page between page boundaries is not copied: the destination takes
 * the source's page as a second owner (decision 0053), or, from a page
 * never written, reads as zeros again. */
static int copy_piece(struct kb_mem *dst, uint64_t da, struct kb_mem *src,
                      uint64_t sa, uint64_t n)
{
    if (n == PAGE_SIZE && !(da & (PAGE_SIZE - 1)) && !(sa & (PAGE_SIZE - 1)) &&
        (src != dst || sa != da)) {
        uint64_t next;
        pte *se = pte_find(src, sa >> PAGE_SHIFT, &next);
        unsigned char *p = se && *se ? pte_page(*se) : NULL;
        int rc = page_share(dst, da, p);
        if (!rc && p)
            *se |= PTE_SHARED; /* (the source is now an owner of a shared page) */
        return rc;
    }
    const unsigned char *s = page(src, sa);
    uint64_t off = da & (PAGE_SIZE - 1);
    unsigned char *d = page_for_write(dst, da, off, off + n);
    if (!d)
        return oom(dst);
    d += off;
    if (s)
        memmove(d, s + (sa & (PAGE_SIZE - 1)), n);
    else
        memset(d, 0, n);
    return 0;
}

int kb_mem_copy(struct kb_mem *dst, uint64_t dst_addr, struct kb_mem *src,
                uint64_t src_addr, uint64_t bytes)
{
    if (in_range(src, "read", src_addr, bytes) < 0) {
        if (src != dst)
            seterr(dst, SIM_EINVAL, "%s", kb_mem_errmsg(src));
        return SIM_EINVAL;
    }
    int rc = in_range(dst, "write", dst_addr, bytes);
    if (rc < 0)
        return rc;
    /* backwards when a forward copy would overwrite source bytes not yet
     * read (same memory, destination above the source) */
    if (src == dst && dst_addr > src_addr && dst_addr - src_addr < bytes) {
        uint64_t se = src_addr + bytes, de = dst_addr + bytes;
        while (bytes) {
            uint64_t n = min3(bytes, ((se - 1) & (PAGE_SIZE - 1)) + 1,
                              ((de - 1) & (PAGE_SIZE - 1)) + 1);
            se -= n;
            de -= n;
            bytes -= n;
            if ((rc = copy_piece(dst, de, src, se, n)) < 0)
                return rc;
        }
        return 0;
    }
    while (bytes) {
        uint64_t n = min3(bytes, PAGE_SIZE - (src_addr & (PAGE_SIZE - 1)),
                          PAGE_SIZE - (dst_addr & (PAGE_SIZE - 1)));
        if ((rc = copy_piece(dst, dst_addr, src, src_addr, n)) < 0)
            return rc;
        src_addr += n;
        dst_addr += n;
        bytes -= n;
    }
    return 0;
}

uint64_t kb_mem_pages(const struct kb_mem *m) { return m->n_pages; }

/* ---- snapshots ---------------------------------------------------------
 *
 * A snapshot is a list of pieces, each inside one page of its source: a
 * page held by reference (SNAP_REF: p points into a pool page, of which
 * the snapshot is one owner), bytes copied into a malloc'ed block
 * (SNAP_HEAP: a piece under KB_MEM_SNAP_REF_MIN bytes) or zeros
 * (SNAP_ZERO: p NULL). `at` is the piece's offset in the snapshot. */
enum { SNAP_ZERO, SNAP_REF, SNAP_HEAP };

struct kb_mem_snap_piece {
    const unsigned char *p;
    uint64_t at;
    uint32_t len, kind;
};

static void piece_drop(struct kb_mem_snap_piece *pc)
{
    if (pc->kind == SNAP_REF) {
        uintptr_t pg = (uintptr_t)pc->p & ~(uintptr_t)(PAGE_SIZE - 1);
        page_unref((pte)pg | PTE_SHARED);
    } else if (pc->kind == SNAP_HEAP) {
        free((void *)pc->p);
    }
}

void kb_mem_snap_clear(struct kb_mem_snap *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        piece_drop(&s->pc[i]);
    s->n = 0;
    s->bytes = 0;
}

void kb_mem_snap_free(struct kb_mem_snap *s)
{
    kb_mem_snap_clear(s);
    free(s->pc);
    memset(s, 0, sizeof *s);
}

/* Room in s for `pieces` more (false: out of memory, s unchanged). */
static bool snap_room(struct kb_mem_snap *s, uint64_t pieces)
{
    if (s->n + pieces <= s->cap)
        return true;
    uint64_t cap = s->cap ? 2 * (uint64_t)s->cap : 8;
    while (cap < s->n + pieces)
        cap *= 2;
    struct kb_mem_snap_piece *pc = cap <= UINT32_MAX ? realloc(s->pc, cap * sizeof *pc) : NULL;
    if (!pc)
        return false;
    s->pc = pc;
    s->cap = (uint32_t)cap;
    return true;
}

/* s back to its first n0 pieces (a failed append undone). */
static void snap_truncate(struct kb_mem_snap *s, uint32_t n0)
{
    while (s->n > n0)
        piece_drop(&s->pc[--s->n]);
}

/* A page of the pool holding a copy of n bytes at p, the snapshot's alone
 * (a SNAP_REF piece of one owner: it goes back to the pool with it). A
 * recently freed page: the pool hands out the last page given back. */
static const unsigned char *page_copy(const unsigned char *p, uint64_t n)
{
    unsigned char *pg = pool_get(); /* (a page of the pool counts no other owner) */
    return pg ? memcpy(pg, p, n) : NULL;
}

/* Piece q made a copy of the n bytes at p (n <= a page): a page of the
 * pool of its own from KB_MEM_SNAP_REF_MIN bytes, else a malloc'ed block.
 * False: out of memory (q then holds nothing to let go of). */
static bool piece_copy(struct kb_mem_snap_piece *q, const unsigned char *p, uint64_t n)
{
    bool page = n >= KB_MEM_SNAP_REF_MIN;
    unsigned char *b = page ? NULL : malloc(n);
    q->p = page ? page_copy(p, n) : b ? memcpy(b, p, n) : NULL;
    q->kind = q->p ? (page ? SNAP_REF : SNAP_HEAP) : SNAP_ZERO;
    return q->p != NULL;
}

int kb_mem_snap_take(struct kb_mem *m, uint64_t addr, uint64_t bytes, struct kb_mem_snap *s)
{
    int rc = in_range(m, "read", addr, bytes);
    if (rc < 0)
        return rc;
    uint64_t pieces = bytes ? ((addr + bytes - 1) >> PAGE_SHIFT) - (addr >> PAGE_SHIFT) + 1 : 0;
    if (!snap_room(s, pieces)) /* room first, so that failing changes nothing */
        return oom(m);
    uint32_t n0 = s->n;
    uint64_t at = s->bytes;
    while (bytes) {
        uint64_t off = addr & (PAGE_SIZE - 1);
        uint64_t len = PAGE_SIZE - off < bytes ? PAGE_SIZE - off : bytes;
        struct kb_mem_snap_piece *pc = &s->pc[s->n];
        *pc = (struct kb_mem_snap_piece){NULL, at, (uint32_t)len, SNAP_ZERO};
        uint64_t next;
        pte *e = pte_find(m, addr >> PAGE_SHIFT, &next);
        if (e && *e) {
            unsigned char *pg = pte_page(*e);
            if (len >= KB_MEM_SNAP_REF_MIN) {
                (*page_refs(pg))++;
                *e |= PTE_SHARED;
                pc->p = pg + off;
                pc->kind = SNAP_REF;
            } else {
                unsigned char *b = malloc(len);
                if (!b) {
                    snap_truncate(s, n0); /* back to what it was */
                    return oom(m);
                }
                memcpy(b, pg + off, len);
                pc->p = b;
                pc->kind = SNAP_HEAP;
            }
        }
        s->n++;
        at += len;
        addr += len;
        bytes -= len;
    }
    s->bytes = at;
    return 0;
}

/* The index of the piece holding offset off of s (off < s->bytes). */
static uint32_t snap_find(const struct kb_mem_snap *s, uint64_t off)
{
    uint32_t lo = 0, hi = s->n;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->pc[mid].at <= off)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

bool kb_mem_shared(const struct kb_mem *m, uint64_t addr, uint64_t bytes)
{
    if (!bytes || addr > m->capacity || bytes > m->capacity - addr)
        return false;
    for (uint64_t pg = addr >> PAGE_SHIFT, last = (addr + bytes - 1) >> PAGE_SHIFT; pg <= last;
         pg++) {
        pte e = pte_get(m, pg);
        if ((e & PTE_SHARED) && *page_refs(pte_page(e)))
            return true;
    }
    return false;
}

int kb_mem_snap_add(struct kb_mem_snap *d, const struct kb_mem_snap *s, uint64_t off,
                    uint64_t bytes)
{
    if (off > s->bytes || bytes > s->bytes - off)
        return SIM_EINVAL;
    if (!bytes)
        return 0;
    uint32_t i0 = snap_find(s, off), i1 = snap_find(s, off + bytes - 1);
    if (!snap_room(d, (uint64_t)i1 - i0 + 1))
        return SIM_ENOMEM;
    uint32_t n0 = d->n;
    uint64_t at = d->bytes;
    for (uint32_t i = i0; bytes; i++) {
        const struct kb_mem_snap_piece *pc = &s->pc[i];
        uint64_t in = off - pc->at, n = pc->len - in < bytes ? pc->len - in : bytes;
        struct kb_mem_snap_piece *q = &d->pc[d->n];
        *q = (struct kb_mem_snap_piece){pc->p ? pc->p + in : NULL, at, (uint32_t)n, pc->kind};
        if (pc->kind == SNAP_REF && n == PAGE_SIZE) { /* a whole page: one more owner */
            (*page_refs(pc->p))++;
        } else if (pc->p && !piece_copy(q, pc->p + in, n)) { /* a part: copied */
            snap_truncate(d, n0);
            return SIM_ENOMEM;
        }
        d->n++;
        at += n;
        off += n;
        bytes -= n;
    }
    d->bytes = at;
    return 0;
}

int kb_mem_snap_add_bytes(struct kb_mem_snap *d, const void *data, uint64_t bytes)
{
    if (!snap_room(d, (bytes + PAGE_SIZE - 1) / PAGE_SIZE))
        return SIM_ENOMEM;
    uint32_t n0 = d->n;
    uint64_t at = d->bytes;
    const unsigned char *p = data;
    while (bytes) {
        uint64_t n = bytes < PAGE_SIZE ? bytes : PAGE_SIZE;
        struct kb_mem_snap_piece *q = &d->pc[d->n];
        *q = (struct kb_mem_snap_piece){NULL, at, (uint32_t)n, SNAP_ZERO};
        if (p) {
            if (!piece_copy(q, p, n)) {
                snap_truncate(d, n0);
                return SIM_ENOMEM;
            }
            p += n;
        }
        d->n++;
        at += n;
        bytes -= n;
    }
    d->bytes = at;
    return 0;
}

int kb_mem_snap_move(struct kb_mem_snap *d, struct kb_mem_snap *s)
{
    if (!snap_room(d, s->n))
        return SIM_ENOMEM;
    for (uint32_t i = 0; i < s->n; i++) {
        d->pc[d->n] = s->pc[i];
        d->pc[d->n++].at += d->bytes;
    }
    d->bytes += s->bytes;
    s->n = 0;
    s->bytes = 0;
    return 0;
}

int kb_mem_snap_span(const struct kb_mem_snap *s, uint64_t off, uint64_t bytes,
                     const unsigned char **p, uint64_t *len)
{
    if (off > s->bytes || bytes > s->bytes - off)
        return SIM_EINVAL;
    *p = NULL;
    *len = 0;
    if (!bytes)
        return 0;
    const struct kb_mem_snap_piece *pc = &s->pc[snap_find(s, off)];
    uint64_t in = off - pc->at, n = pc->len - in;
    *len = n < bytes ? n : bytes;
    *p = pc->p ? pc->p + in : NULL;
    return 0;
}

int kb_mem_snap_read(const struct kb_mem_snap *s, uint64_t off, void *dst, uint64_t bytes)
{
    if (off > s->bytes || bytes > s->bytes - off)
        return SIM_EINVAL;
    unsigned char *d = dst;
    uint32_t i = bytes ? snap_find(s, off) : 0;
    while (bytes) {
        const struct kb_mem_snap_piece *pc = &s->pc[i++];
        uint64_t in = off - pc->at, n = pc->len - in < bytes ? pc->len - in : bytes;
        if (pc->p)
            memcpy(d, pc->p + in, n);
        else
            memset(d, 0, n);
        d += n;
        off += n;
        bytes -= n;
    }
    return 0;
}

int kb_mem_snap_write(struct kb_mem *m, uint64_t addr, const struct kb_mem_snap *s,
                      uint64_t off, uint64_t bytes)
{
    int rc = in_range(m, "write", addr, bytes);
    if (rc < 0)
        return rc;
    if (off > s->bytes || bytes > s->bytes - off)
        return seterr(m, SIM_EINVAL, "write of %" PRIu64 " bytes at %" PRIu64 " of a "
                      "snapshot of %" PRIu64 " bytes into %s of '%s'", bytes, off, s->bytes,
                      kb_mem_kind_name(m->p.kind), m->name);
    uint32_t i = bytes ? snap_find(s, off) : 0;
    while (bytes) {
        const struct kb_mem_snap_piece *pc = &s->pc[i];
        uint64_t in = off - pc->at;
        uint64_t doff = addr & (PAGE_SIZE - 1);
        uint64_t n = min3(bytes, pc->len - in, PAGE_SIZE - doff);
        if (n == PAGE_SIZE && !doff && (pc->kind == SNAP_REF || pc->kind == SNAP_ZERO)) {
            if ((rc = page_share(m, addr, pc->p)) < 0)
                return rc;
        } else {
            unsigned char *d = page_for_write(m, addr, doff, doff + n);
            if (!d)
                return oom(m);
            if (pc->p)
                memcpy(d + doff, pc->p + in, n);
            else
                memset(d + doff, 0, n);
        }
        if (in + n == pc->len)
            i++;
        off += n;
        addr += n;
        bytes -= n;
    }
    return 0;
}

/* ---- timing ------------------------------------------------------------ */

/* Bytes of [addr, addr + bytes) in each channel, into per[n_channels]. */
static void split(const struct kb_mem *m, uint64_t addr, uint64_t bytes,
                  uint64_t *per)
{
    uint32_t n = m->n_channels, sh = m->burst_shift;
    uint64_t burst = (uint64_t)1 << sh, mask = n - 1, end = addr + bytes;
    memset(per, 0, n * sizeof *per);
    if (n == 1) {
        per[0] = bytes;
        return;
    }
    if (addr & (burst - 1)) { /* the head, inside one burst */
        uint64_t e = (addr | (burst - 1)) + 1;
        if (e > end)
            e = end;
        per[(addr >> sh) & mask] += e - addr;
        addr = e;
    }
    uint64_t full = (end - addr) >> sh; /* whole bursts, round robin */
    if (full) {
        uint64_t first = addr >> sh;
        for (uint32_t c = 0; c < n; c++)
            per[c] += (full / n) << sh;
        for (uint64_t r = 0; r < full % n; r++)
            per[(first + r) & mask] += burst;
        addr += full << sh;
    }
    if (addr < end)
        per[(addr >> sh) & mask] += end - addr;
}

static sim_time ser(const struct kb_mem *m, uint64_t bytes)
{
    return sim_round_ps((double)bytes * m->ps_per_byte); /* llround, exactly */
}

sim_time kb_mem_time(const struct kb_mem *m, uint64_t addr, uint64_t bytes)
{
    if (m->n_channels == 1) /* a TCM: split's answer without the split */
        return m->setup_ps + ser(m, bytes);
    uint64_t per[KB_MEM_MAX_CHANNELS];
    split(m, addr, bytes, per);
    sim_time worst = 0;
    for (uint32_t c = 0; c < m->n_channels; c++) {
        sim_time t = ser(m, per[c]);
        if (t > worst)
            worst = t;
    }
    return m->setup_ps + worst;
}

sim_time kb_mem_schedule(struct kb_mem *m, uint64_t addr, uint64_t bytes,
                         bool is_write)
{
    if (in_range(m, is_write ? "write" : "read", addr, bytes) < 0)
        return SIM_FOREVER;
    uint64_t per[KB_MEM_MAX_CHANNELS];
    if (m->n_channels == 1) /* a TCM: split's answer without the split */
        per[0] = bytes;
    else
        split(m, addr, bytes, per);
    sim_time ready = sim_now(m->sim) + m->setup_ps, done = ready;
    for (uint32_t c = 0; c < m->n_channels; c++) {
        if (!per[c])
            continue;
        sim_time d = ser(m, per[c]);
        sim_time start = m->busy_until[c] > ready ? m->busy_until[c] : ready;
        m->busy_until[c] = start + d;
        m->st.busy_ps += d;
        if (start + d > done)
            done = start + d;
    }
    if (is_write) {
        m->st.writes++;
        m->st.bytes_written += bytes;
    } else {
        m->st.reads++;
        m->st.bytes_read += bytes;
    }
    return done;
}

int kb_mem_access(struct kb_mem *m, uint64_t addr, uint64_t bytes,
                  bool is_write)
{
    if (!sim_current(m->sim))
        return seterr(m, SIM_EPERM, "access to %s of '%s': not called from a "
                      "thread process", kb_mem_kind_name(m->p.kind), m->name);
    sim_time done = kb_mem_schedule(m, addr, bytes, is_write);
    if (done == SIM_FOREVER)
        return SIM_EINVAL;
    int rc = sim_wait(m->sim, done - sim_now(m->sim));
    if (rc < 0)
        return seterr(m, rc, "access to %s of '%s': not called from a "
                      "thread process", kb_mem_kind_name(m->p.kind), m->name);
    return 0;
}

void kb_mem_get_stats(const struct kb_mem *m, struct kb_mem_stats *out)
{
    *out = m->st;
    out->peak_alloc_bytes = m->peak;
}

double kb_mem_utilisation(const struct kb_mem *m, sim_time elapsed)
{
    if (!elapsed)
        elapsed = sim_now(m->sim);
    return elapsed ? (double)m->st.busy_ps /
                         ((double)elapsed * m->p.n_channels)
                   : 0.0;
}
