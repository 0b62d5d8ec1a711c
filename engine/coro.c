/* coro.c — stackful coroutines: stack pool, context switch, overflow report */
#include "coro.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORO_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(CORO_ASAN)
#define CORO_ASAN 1
#endif
#ifdef CORO_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define CORO_VALGRIND 1
#endif
#endif

/* The coroutine running on this OS thread: read by the SIGSEGV handler to
 * tell a guard-page hit from any other fault, and by a new coroutine's
 * trampoline to find itself. */
static _Thread_local struct coro *tl_current;
#ifdef CORO_ASAN
/* The coroutine that switched to the one now resuming; ASan tells it the
 * bounds of the stack it left, which is how the main stack's become known. */
static _Thread_local struct coro *tl_prev;
#endif

/* ---- stack pool ------------------------------------------------------ */

static size_t page_size(void)
{
    static _Thread_local size_t ps;
    if (!ps)
        ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

void coro_pool_init(struct coro_pool *pool)
{
    pool->free_list = NULL;
    pool->adopted = NULL;
    pool->chunks = NULL;
    pool->mapped_bytes = 0;
    pool->next_color = 0;
}

/* ---- guard budget ----------------------------------------------------
 * A guard page splits its chunk's mapping: a guarded stack costs two of
 * the process's memory maps, which Linux limits to vm.max_map_count
 * (65530 by default). Guards are given, process-wide (sweep points run
 * simulations in parallel), to at most a quarter of that many stacks;
 * the stacks past it have none, and a one-line notice says so. */

static atomic_size_t guarded_stacks; /* guarded stacks mapped, all pools */
static atomic_bool guard_notice_done;
static atomic_size_t guard_limit_override; /* set by tests, read by sweep threads */

static long max_map_count(void)
{
    long n = 65530; /* Linux's default */
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (f) {
        if (fscanf(f, "%ld", &n) != 1 || n <= 0)
            n = 65530;
        fclose(f);
    }
    return n;
}

static size_t guard_limit(void)
{
    static atomic_size_t limit;
    if (guard_limit_override)
        return guard_limit_override;
    size_t l = atomic_load(&limit);
    if (!l) {
        l = (size_t)max_map_count() / 4;
        atomic_store(&limit, l);
    }
    return l;
}

void coro_set_guard_limit(size_t n) { guard_limit_override = n; }

/* Takes one guard from the budget; false when it is spent. */
static bool guard_take(void)
{
    size_t n = atomic_fetch_add(&guarded_stacks, 1);
    if (n < guard_limit())
        return true;
    atomic_fetch_sub(&guarded_stacks, 1);
    return false;
}

static void guard_notice(void)
{
    if (atomic_exchange(&guard_notice_done, true))
        return;
    fprintf(stderr,
            "kbsim: note: %zu thread-process stacks have a guard page; the "
            "others have none, to stay within vm.max_map_count (%ld), so an "
            "overflow there is not caught\n",
            (size_t)atomic_load(&guarded_stacks), max_map_count());
}

/* ---- chunks ----------------------------------------------------------
 * Stacks are carved from chunks of at least CHUNK_BYTES, one mapping
 * each: unguarded stacks share their chunk's single memory map. */

#define CHUNK_BYTES ((size_t)64 << 20)

/* A stack's record lives in its top page, above its top: one line. */
#define CORO_STACK_RECORD 64
_Static_assert(sizeof(struct coro_stack) <= CORO_STACK_RECORD,
               "a stack's record fits the line above its top");

struct coro_chunk {
    struct coro_chunk *next;
    char *base;
    size_t size, used;
    size_t n_stacks;   /* carved from it */
    /* while it is in the process's cache (or being put there): */
    struct coro_stack *stacks; /* all of them, free */
    size_t n_free;
    size_t resident;   /* bytes of it in memory when cached */
    size_t cls_size;   /* the size and guard of its stacks, when they */
    bool cls_guard;    /* all have one (mixed false), as is usual */
    bool mixed;
};

/* NULL, errno set, when out of memory; *map_failed says whether mmap
 * was what failed. */
static void *chunk_carve(struct coro_pool *pool, size_t bytes, bool *map_failed)
{
    struct coro_chunk *c = pool->chunks;
    *map_failed = false;
    if (!c || c->size - c->used < bytes) {
        c = calloc(1, sizeof *c);
        if (!c)
            return NULL;
        c->size = bytes > CHUNK_BYTES ? bytes : CHUNK_BYTES;
        c->used = 0;
        /* MAP_NORESERVE: a stack costs only the pages a coroutine
         * touches, so thousands of generously sized stacks do not exhaust
         * the commit limit. */
        c->base = mmap(NULL, c->size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                       -1, 0);
        if (c->base == MAP_FAILED) {
            int err = errno;
            free(c);
            errno = err;
            *map_failed = true;
            return NULL;
        }
        c->next = pool->chunks;
        pool->chunks = c;
    }
    void *p = c->base + c->used;
    c->used += bytes;
    return p;
}

/* Forgets a stack whose chunk is being unmapped (its record is in the
 * chunk: see coro_stack_get). */
static void stack_destroy(struct coro_stack *st)
{
#ifdef CORO_VALGRIND
    if (st->vg_id)
        VALGRIND_STACK_DEREGISTER(st->vg_id);
#endif
    if (st->guard)
        atomic_fetch_sub(&guarded_stacks, 1);
}

static void chunk_unmap(struct coro_chunk *c)
{
    for (struct coro_stack *st = c->stacks, *n; st; st = n) {
        n = st->next_free;
        stack_destroy(st);
    }
    munmap(c->base, c->size);
    free(c);
}

/* ---- the process's chunk cache ---------------------------------------
 * A simulation's stacks were unmapped with it, so the next one (a sweep
 * runs hundreds, a script may make one kb.sim after another) took a page
 * fault on every stack page its threads touched, and mapped its guard
 * pages again. A retired pool offers its chunks here instead, with their
 * stacks as they were carved, guards and all; a pool that needs a stack
 * of a size and guard a cached chunk holds adopts the whole chunk. The
 * bounds keep what the cache holds small: memory maps (a guarded stack
 * costs two; CORO_CACHE_STACKS of them is an eighth of Linux's default
 * limit), and resident pages (counted with mincore when a chunk comes in). */

#define CORO_CACHE_CHUNKS 32
#define CORO_CACHE_STACKS 4096
#define CORO_CACHE_RESIDENT ((size_t)128 << 20)

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct coro_chunk *cache_list;      /* under cache_mu */
static struct coro_cache_stats cache_st;   /* held now: under cache_mu */
static atomic_size_t cache_chunks;         /* cache_st.chunks, read unlocked */
static atomic_size_t cache_adopted, cache_reused;
static size_t cache_max_stacks = CORO_CACHE_STACKS;     /* under cache_mu */
static size_t cache_max_resident = CORO_CACHE_RESIDENT; /* under cache_mu */

void coro_cache_set_limits(size_t stacks, size_t resident_bytes)
{
    pthread_mutex_lock(&cache_mu);
    cache_max_stacks = stacks ? stacks : CORO_CACHE_STACKS;
    cache_max_resident = resident_bytes ? resident_bytes : CORO_CACHE_RESIDENT;
    pthread_mutex_unlock(&cache_mu);
}

/* Bytes of c's carved part in memory (mincore, a window at a time: no
 * allocation); SIZE_MAX when it cannot be told. */
static size_t chunk_resident(const struct coro_chunk *c)
{
    size_t ps = page_size(), pages = (c->used + ps - 1) / ps, n = 0;
    unsigned char vec[1024];
    for (size_t at = 0; at < pages; at += sizeof vec) {
        size_t k = pages - at < sizeof vec ? pages - at : sizeof vec;
        if (mincore(c->base + at * ps, k * ps, vec) != 0)
            return SIZE_MAX;
        for (size_t i = 0; i < k; i++)
            n += vec[i] & 1;
    }
    return n * ps;
}

/* Takes c (every stack of it free, on c->stacks) into the cache if it
 * fits the bounds; false, with nothing changed, if not. */
static bool cache_offer(struct coro_chunk *c)
{
    if (c->n_free != c->n_stacks || !c->n_stacks)
        return false;
    c->mixed = false;
    c->cls_size = c->stacks->size;
    c->cls_guard = c->stacks->guard;
    for (struct coro_stack *st = c->stacks; st; st = st->next_free)
        if (st->size != c->cls_size || st->guard != c->cls_guard)
            c->mixed = true;
    pthread_mutex_lock(&cache_mu);
    bool room = cache_st.chunks < CORO_CACHE_CHUNKS &&
                cache_st.stacks + c->n_stacks <= cache_max_stacks;
    pthread_mutex_unlock(&cache_mu);
    if (!room)
        return false;
    c->resident = chunk_resident(c); /* a system call: outside the lock */
    pthread_mutex_lock(&cache_mu);
    room = cache_st.chunks < CORO_CACHE_CHUNKS &&
           cache_st.stacks + c->n_stacks <= cache_max_stacks &&
           cache_st.resident_bytes <= cache_max_resident &&
           c->resident <= cache_max_resident - cache_st.resident_bytes;
    if (room) {
        c->next = cache_list;
        cache_list = c;
        cache_st.chunks++;
        atomic_store(&cache_chunks, cache_st.chunks);
        cache_st.stacks += c->n_stacks;
        cache_st.resident_bytes += c->resident;
    }
    pthread_mutex_unlock(&cache_mu);
    return room;
}

static bool chunk_has(const struct coro_chunk *c, size_t size, bool guard)
{
    if (!c->mixed)
        return c->cls_size == size && c->cls_guard == guard;
    for (const struct coro_stack *st = c->stacks; st; st = st->next_free)
        if (st->size == size && st->guard == guard)
            return true;
    return false;
}

/* Moves a cached chunk holding a stack of this size and guard into the
 * pool: it becomes the chunk new stacks are carved from, and its stacks
 * join pool->adopted. False when the cache holds none. */
static bool cache_adopt(struct coro_pool *pool, size_t size, bool guard)
{
    if (!atomic_load_explicit(&cache_chunks, memory_order_relaxed))
        return false; /* the usual case: nothing cached, no lock taken */
    pthread_mutex_lock(&cache_mu);
    struct coro_chunk **pp = &cache_list, *c;
    while ((c = *pp) && !chunk_has(c, size, guard))
        pp = &c->next;
    if (c) {
        *pp = c->next;
        cache_st.chunks--;
        atomic_store(&cache_chunks, cache_st.chunks);
        cache_st.stacks -= c->n_stacks;
        cache_st.resident_bytes -= c->resident;
    }
    pthread_mutex_unlock(&cache_mu);
    if (!c)
        return false;
    atomic_fetch_add(&cache_adopted, 1);
    struct coro_stack *last = c->stacks;
    while (last->next_free)
        last = last->next_free;
    last->next_free = pool->adopted;
    pool->adopted = c->stacks;
    c->stacks = NULL;
    c->n_free = 0;
    c->next = pool->chunks;
    pool->chunks = c;
    return true;
}

void coro_cache_stats(struct coro_cache_stats *out)
{
    pthread_mutex_lock(&cache_mu);
    *out = cache_st;
    pthread_mutex_unlock(&cache_mu);
    out->adopted_chunks = atomic_load(&cache_adopted);
    out->reused_stacks = atomic_load(&cache_reused);
}

size_t coro_cache_drop(void)
{
    pthread_mutex_lock(&cache_mu);
    struct coro_chunk *c = cache_list;
    cache_list = NULL;
    cache_st.chunks = cache_st.stacks = cache_st.resident_bytes = 0;
    atomic_store(&cache_chunks, 0);
    pthread_mutex_unlock(&cache_mu);
    size_t n = 0;
    while (c) {
        struct coro_chunk *next = c->next;
        chunk_unmap(c);
        c = next;
        n++;
    }
    return n;
}

/* ---- pools ------------------------------------------------------------ */

/* Hands every stack of the pool to its chunk's list (the free ones were
 * counted in mapped_bytes, the adopted ones were not) and detaches the
 * chunks; returns them. */
static struct coro_chunk *pool_collect(struct coro_pool *pool)
{
    for (struct coro_chunk *c = pool->chunks; c; c = c->next) {
        c->stacks = NULL;
        c->n_free = 0;
    }
    for (int list = 0; list < 2; list++) {
        struct coro_stack *st = list ? pool->adopted : pool->free_list;
        while (st) {
            struct coro_stack *next = st->next_free;
            if (!list)
                pool->mapped_bytes -= st->map_size;
            st->next_free = st->chunk->stacks;
            st->chunk->stacks = st;
            st->chunk->n_free++;
            st = next;
        }
    }
    pool->free_list = pool->adopted = NULL;
    struct coro_chunk *c = pool->chunks;
    pool->chunks = NULL;
    return c;
}

void coro_pool_release(struct coro_pool *pool)
{
    struct coro_chunk *c = pool_collect(pool);
    while (c) {
        struct coro_chunk *next = c->next;
        chunk_unmap(c);
        c = next;
    }
}

void coro_pool_retire(struct coro_pool *pool)
{
    struct coro_chunk *c = pool_collect(pool);
    while (c) {
        struct coro_chunk *next = c->next;
        if (!cache_offer(c))
            chunk_unmap(c);
        c = next;
    }
}

/* Unlinks the first stack of *list of this size and guard; NULL if none. */
static struct coro_stack *list_take(struct coro_stack **list, size_t size,
                                    bool guard)
{
    for (struct coro_stack **p = list; *p; p = &(*p)->next_free) {
        struct coro_stack *st = *p;
        if (st->size == size && st->guard == guard) {
            *p = st->next_free;
            st->next_free = NULL;
            return st;
        }
    }
    return NULL;
}

/* pool_take when the last stack put back does not fit */
static __attribute__((noinline)) struct coro_stack *
pool_take_slow(struct coro_pool *pool, size_t size, bool guard)
{
    struct coro_stack *st = list_take(&pool->free_list, size, guard);
    if (st)
        return st;
    if (!(st = list_take(&pool->adopted, size, guard)) &&
        cache_adopt(pool, size, guard))
        st = list_take(&pool->adopted, size, guard);
    if (st) {
        pool->mapped_bytes += st->map_size;
        atomic_fetch_add_explicit(&cache_reused, 1, memory_order_relaxed);
    }
    return st;
}

/* A free stack of the pool of this size and guard: one put back, else one
 * of an adopted chunk (counted now), else one of a chunk adopted now from
 * the process's cache; NULL if none. The usual case inline: the last one
 * put back fits (a thread restarted takes the stack of one just ended). */
static inline struct coro_stack *pool_take(struct coro_pool *pool,
                                           size_t size, bool guard)
{
    struct coro_stack *st = pool->free_list;
    if (st && st->size == size && st->guard == guard) {
        pool->free_list = st->next_free;
        st->next_free = NULL;
        return st;
    }
    return pool_take_slow(pool, size, guard);
}

struct coro_stack *coro_stack_get(struct coro_pool *pool, size_t size,
                                  bool guard)
{
    size_t ps = page_size();
    size = size ? (size + ps - 1) / ps * ps : ps;
    struct coro_stack *st = pool_take(pool, size, guard);
    if (st)
        return st;
    /* guards held by cached chunks go back to the budget before it is
     * declared spent */
    if (guard && !guard_take() && !(coro_cache_drop() && guard_take())) {
        guard = false;
        guard_notice();
        if ((st = pool_take(pool, size, false)))
            return st;
    }

    /* One page more than asked: each stack starts at a different 64-byte
     * line within its top page. Aligned tops would all fall in the same few
     * sets of a virtually indexed L1 cache, so with hundreds of coroutines
     * every switch would miss; staggered, they spread over all sets (this
     * doubled W1 and W3 throughput at 1000 processes). */
    size_t span = size + ps;
    size_t guard_size = guard ? ps : 0;
    bool map_failed = false;
    void *map = chunk_carve(pool, span + guard_size, &map_failed);
    /* the map limit, perhaps, with maps held by the cache: free them */
    if (map_failed && coro_cache_drop())
        map = chunk_carve(pool, span + guard_size, &map_failed);
    if (!map) {
        int err = errno;
        if (guard)
            atomic_fetch_sub(&guarded_stacks, 1);
        errno = err;
        return NULL;
    }
    /* A guard that cannot be made (the map limit reached all the same)
     * is dropped; its page stays unused below the stack. */
    if (guard && mprotect(map, ps, PROT_NONE) != 0) {
        atomic_fetch_sub(&guarded_stacks, 1);
        guard = false;
        guard_notice();
    }
    /* The stack's record is the line just above its top, next to the
     * frame coro_init writes below the top: taking a stack from the pool
     * and starting a coroutine on it touch one page, mostly two adjacent
     * lines, where a record of its own was a third cold line on another
     * page (with a thread restarted a step, as a receive is, both missed).
     * The usable part, top - lo, is still at least size. */
    size_t color = (size_t)(pool->next_color++ % (ps / 64)) * 64;
    char *lo = (char *)map + guard_size;
    char *top = lo + span - color - CORO_STACK_RECORD;
    st = (struct coro_stack *)top;
    st->map = map;
    st->map_size = span + guard_size;
    st->lo = lo;
    st->size = size;
    st->top = top;
    st->guard = guard;
    st->vg_id = 0;
#ifdef CORO_VALGRIND
    st->vg_id = VALGRIND_STACK_REGISTER(st->lo, (char *)st->lo + span);
#endif
    st->next_free = NULL;
    st->chunk = pool->chunks;
    st->chunk->n_stacks++;
    pool->mapped_bytes += st->map_size;
    return st;
}

/* Counts the lines of /proc/self/maps: the process's memory maps. */
static long map_count(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    long n = 0;
    int c;
    while ((c = getc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

const char *coro_stack_error(char *buf, size_t n, int err)
{
    long maps = map_count(), limit = max_map_count();
    if (err == ENOMEM && maps >= 0 && maps + 64 >= limit)
        snprintf(buf, n,
                 "the process has %ld memory maps and vm.max_map_count "
                 "allows %ld; raise it (sysctl -w vm.max_map_count=%ld, as "
                 "root) or run fewer processes",
                 maps, limit, 2 * limit);
    else
        snprintf(buf, n, "%s", err == ENOMEM ? "out of memory" : strerror(err));
    return buf;
}

void coro_stack_put(struct coro_pool *pool, struct coro_stack *st)
{
#ifdef CORO_ASAN
    /* A coroutine that never ended (its process was dropped with its
     * simulation, or a run stopped early) leaves the redzones of its
     * frames poisoned: the next coroutine on this stack, or a stack carved
     * later from the same addresses, would trip on them. */
    ASAN_UNPOISON_MEMORY_REGION(st->map, st->map_size);
#endif
    st->next_free = pool->free_list;
    pool->free_list = st;
}

/* ---- AddressSanitizer fiber hooks ------------------------------------ */

static inline void asan_start(struct coro *from, const struct coro *to)
{
#ifdef CORO_ASAN
    tl_prev = from;
    /* A NULL save slot tells ASan the fiber is gone: it frees its fake
     * stack instead of keeping it for a resume. */
    __sanitizer_start_switch_fiber(from ? &from->asan_fake_stack : NULL,
                                   to->asan_bottom, to->asan_size);
#else
    (void)from;
    (void)to;
#endif
}

static inline void asan_finish(struct coro *self)
{
#ifdef CORO_ASAN
    struct coro *prev = tl_prev;
    __sanitizer_finish_switch_fiber(self->asan_fake_stack,
                                    prev ? &prev->asan_bottom : NULL,
                                    prev ? &prev->asan_size : NULL);
#else
    (void)self;
#endif
}

/* ---- contexts -------------------------------------------------------- */

static void coro_init_common(struct coro *c, struct coro_stack *st,
                             const char *name, void (*entry)(void *arg),
                             void *arg)
{
    c->stack = st;
    c->entry = entry;
    c->arg = arg;
    c->name = name;
    c->asan_fake_stack = NULL;
    c->asan_bottom = st ? st->lo : NULL;
    c->asan_size = st ? (size_t)((char *)st->top - (char *)st->lo) : 0;
#ifdef CORO_ASAN
    /* A reused stack still holds the poisoned frames of a coroutine that
     * ended by switching away, never running their epilogues. */
    if (st)
        __asan_unpoison_memory_region(st->lo, (size_t)((char *)st->top -
                                                       (char *)st->lo));
#endif
}

void coro_init_main(struct coro *c)
{
    coro_init_common(c, NULL, "main", NULL, NULL);
#ifndef KBSIM_CORO_USE_UCONTEXT
    c->sp = NULL;
#endif
    tl_current = c;
}

/* First code a coroutine runs, entered from its first coro_switch. */
static void coro_trampoline(void)
{
    struct coro *self = tl_current;
    asan_finish(self);
    self->entry(self->arg);
    fprintf(stderr, "kbsim: coroutine '%s' returned from its entry function\n",
            self->name ? self->name : "?");
    abort();
}

#ifdef KBSIM_CORO_USE_UCONTEXT

void coro_init(struct coro *c, struct coro_stack *st, const char *name,
               void (*entry)(void *arg), void *arg)
{
    coro_init_common(c, st, name, entry, arg);
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = st->lo;
    c->uc.uc_stack.ss_size = (size_t)((char *)st->top - (char *)st->lo);
    c->uc.uc_link = NULL;
    makecontext(&c->uc, coro_trampoline, 0);
}

static inline void backend_switch(struct coro *from, struct coro *to)
{
    swapcontext(&from->uc, &to->uc);
}

static inline void backend_exit(struct coro *from, struct coro *to)
{
    (void)from;
    setcontext(&to->uc);
}

#else

void coro__swap(void **save_sp, void *load_sp);

void coro_init(struct coro *c, struct coro_stack *st, const char *name,
               void (*entry)(void *arg), void *arg)
{
    coro_init_common(c, st, name, entry, arg);
    uintptr_t top = (uintptr_t)st->top & ~(uintptr_t)15;
#if defined(__x86_64__)
    /* The frame coro__swap pops (see coro_switch_x86_64.S), below a zero
     * return address for the trampoline: after the final jump the
     * trampoline sees sp = 8 mod 16, as after a call. rbp = 0 ends
     * frame-pointer walks. */
    uint64_t *sp = (uint64_t *)top - 8;
    memset(sp, 0, 8 * sizeof *sp);
    sp[6] = (uint64_t)(uintptr_t)coro_trampoline;
#elif defined(__aarch64__)
    /* The frame coro__swap loads (see coro_switch_aarch64.S): x30 is the
     * trampoline, x29 = 0 ends frame-pointer walks, FPCR the creator's. */
    uint64_t *sp = (uint64_t *)(top - 176);
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    memset(sp, 0, 176);
    sp[11] = (uint64_t)(uintptr_t)coro_trampoline;
    sp[20] = fpcr;
#endif
    c->sp = sp;
}

static inline void backend_switch(struct coro *from, struct coro *to)
{
    coro__swap(&from->sp, to->sp);
}

/* The registers saved on the finished stack are never loaded again. */
static inline void backend_exit(struct coro *from, struct coro *to)
{
    coro__swap(&from->sp, to->sp);
}

#endif

void coro_switch(struct coro *from, struct coro *to)
{
    tl_current = to;
    asan_start(from, to);
    backend_switch(from, to);
    asan_finish(from);
}

void coro_exit(struct coro *from, struct coro *to)
{
    tl_current = to;
    asan_start(NULL, to);
    backend_exit(from, to);
    __builtin_unreachable();
}

/* ---- stack-overflow report ------------------------------------------- */

static struct sigaction overflow_prev;
static pthread_once_t overflow_once = PTHREAD_ONCE_INIT;
static pthread_key_t overflow_altstack_key;
static _Thread_local bool tl_altstack_done;

#define ALTSTACK_SIZE (64 * 1024)

static void write_str(char *buf, size_t *n, size_t cap, const char *s)
{
    while (*s && *n < cap)
        buf[(*n)++] = *s++;
}

/* Async-signal-safe: no stdio, no allocation. */
static void report_overflow(const struct coro *c)
{
    char buf[512], num[24];
    size_t n = 0, i = sizeof num - 1;
    num[i] = 0;
    size_t size = c->stack->size;
    do {
        num[--i] = (char)('0' + size % 10);
        size /= 10;
    } while (size);

    write_str(buf, &n, sizeof buf, "kbsim: stack overflow in thread process '");
    write_str(buf, &n, sizeof buf, c->name ? c->name : "?");
    write_str(buf, &n, sizeof buf, "' (stack ");
    write_str(buf, &n, sizeof buf, num + i);
    write_str(buf, &n, sizeof buf, " bytes); give it a larger stack_size\n");
    for (size_t off = 0; off < n;) {
        ssize_t w = write(STDERR_FILENO, buf + off, n - off);
        if (w <= 0 && errno != EINTR)
            break;
        if (w > 0)
            off += (size_t)w;
    }
}

static void overflow_handler(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    int saved_errno = errno;
    const struct coro *c = tl_current;
    const struct coro_stack *st = c ? c->stack : NULL;
    const char *addr = si->si_addr;
    if (si->si_code > 0 && st && st->guard && addr >= (const char *)st->map &&
        addr < (const char *)st->lo)
        report_overflow(c);
    /* Hand the fault to whoever owned SIGSEGV before us (normally the
     * default action): a hardware fault repeats when we return, a signal
     * sent by kill() has to be raised again. */
    sigaction(SIGSEGV, &overflow_prev, NULL);
    if (si->si_code <= 0)
        raise(sig);
    errno = saved_errno;
}

static void altstack_free(void *map)
{
    stack_t ss = {.ss_flags = SS_DISABLE};
    sigaltstack(&ss, NULL);
    munmap(map, ALTSTACK_SIZE);
}

static void overflow_install_once(void)
{
    pthread_key_create(&overflow_altstack_key, altstack_free);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = overflow_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &overflow_prev);
}

void coro_overflow_guard_install(void)
{
    pthread_once(&overflow_once, overflow_install_once);
    if (tl_altstack_done)
        return;
    tl_altstack_done = true;

    /* Keep an alternate stack someone else (a sanitizer, the embedding
     * program) already gave this thread. */
    stack_t old;
    if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE))
        return;
    void *map = mmap(NULL, ALTSTACK_SIZE, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (map == MAP_FAILED)
        return;
    stack_t ss = {.ss_sp = map, .ss_size = ALTSTACK_SIZE, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        munmap(map, ALTSTACK_SIZE);
        return;
    }
    /* Freed when the thread exits (sweep worker threads come and go). */
    pthread_setspecific(overflow_altstack_key, map);
}
