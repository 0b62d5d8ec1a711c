/* coro.h — stackful coroutines for thread processes (engine-internal)
 *
 * One function switches contexts: coro_switch(from, to). The backend is
 * hand-written assembly on x86-64 and aarch64, or ucontext when built with
 * KBSIM_CORO_UCONTEXT (and on any other architecture). Stacks are carved
 * from large mmap'd chunks, optionally with a PROT_NONE guard page below
 * them (while the process-wide guard budget lasts: see coro.c), and pooled
 * per simulation. Switches are annotated for AddressSanitizer (fiber API) and
 * stacks are registered with valgrind when its headers are present.
 */
#ifndef KBSIM_CORO_H
#define KBSIM_CORO_H

#include <stdbool.h>
#include <stddef.h>

#if defined(KBSIM_CORO_UCONTEXT) || !(defined(__x86_64__) || defined(__aarch64__))
#define KBSIM_CORO_USE_UCONTEXT 1
#include <ucontext.h>
#endif

/* A stack's record: the 64 bytes above its top, in its own top page. */
struct coro_stack {
    void *map;        /* start of its region of a chunk (the guard page, if any) */
    size_t map_size;  /* whole region */
    void *lo;         /* lowest usable address */
    size_t size;      /* usable bytes requested (rounded to pages) */
    void *top;        /* where the stack starts: see coro_stack_get */
    bool guard;
    unsigned vg_id;   /* valgrind stack id, 0 if none */
    struct coro_stack *next_free; /* pool link */
    struct coro_chunk *chunk; /* the chunk it was carved from */
};

struct coro {
#ifdef KBSIM_CORO_USE_UCONTEXT
    ucontext_t uc;
#else
    void *sp;          /* saved stack pointer while suspended */
#endif
    struct coro_stack *stack; /* NULL for the thread's own (main) stack */
    void (*entry)(void *arg);
    void *arg;
    const char *name;  /* for the stack-overflow report */
    /* AddressSanitizer fiber bookkeeping */
    void *asan_fake_stack;
    const void *asan_bottom;
    size_t asan_size;
};

/* A pool of stacks, one per simulation. */
struct coro_chunk;
struct coro_pool {
    struct coro_stack *free_list;
    struct coro_stack *adopted; /* free stacks of chunks taken from the
                                   process's chunk cache, never handed out
                                   by this pool yet */
    struct coro_chunk *chunks; /* the mappings stacks are carved from */
    size_t mapped_bytes; /* all stacks this pool has handed out, in use or
                            free (carved by it or adopted) */
    unsigned next_color; /* cache colour of the next new stack */
};

void coro_pool_init(struct coro_pool *pool);
/* Unmaps every free stack; stacks still in use must be released first. */
void coro_pool_release(struct coro_pool *pool);

/* As coro_pool_release, but a chunk all of whose stacks are free is
 * offered to the process's chunk cache instead of being unmapped, while
 * the cache is under its bounds (CORO_CACHE_* in coro.c: chunks, stacks,
 * resident bytes). A later pool that needs a stack of a size and guard a
 * cached chunk holds adopts that chunk, stacks, guard pages, touched
 * pages and all: a simulation made after another (sweep points, one
 * kb.sim after another) then takes no page fault on the stacks' pages
 * the earlier one touched, and makes no new memory maps. Thread-safe
 * (sweep points run in parallel). */
void coro_pool_retire(struct coro_pool *pool);

/* The process's chunk cache: what it holds now, and the stacks pools
 * have taken from it since the process started. */
struct coro_cache_stats {
    size_t chunks, stacks;   /* held now */
    size_t resident_bytes;   /* their pages in memory when cached */
    size_t adopted_chunks;   /* chunks taken by pools, in all */
    size_t reused_stacks;    /* adopted stacks handed out, in all */
};
void coro_cache_stats(struct coro_cache_stats *out);

/* Unmaps every chunk the cache holds (its guard pages go back to the
 * budget); the number of chunks dropped. Done by coro_stack_get itself
 * when the guard budget is spent or a chunk cannot be mapped. */
size_t coro_cache_drop(void);

/* Tests only: the cache's bounds on stacks and resident bytes (0: the
 * defaults). */
void coro_cache_set_limits(size_t stacks, size_t resident_bytes);

/* A stack of at least `size` usable bytes (rounded up to pages), with a
 * guard page below it unless `guard` is false or the process's guard
 * budget (a quarter of vm.max_map_count stacks) is spent: then it has none,
 * and a one-line notice on stderr says so once. NULL, with errno set, if
 * mmap fails. */
struct coro_stack *coro_stack_get(struct coro_pool *pool, size_t size,
                                  bool guard);

/* What a failed coro_stack_get's errno means, in buf: the map limit and
 * how to raise it when that is the cause. */
const char *coro_stack_error(char *buf, size_t n, int err);

/* Tests only: guard at most n stacks process-wide (0: the default). */
void coro_set_guard_limit(size_t n);
void coro_stack_put(struct coro_pool *pool, struct coro_stack *st);

/* Makes `c` the context of the calling thread's own stack (the scheduler). */
void coro_init_main(struct coro *c);

/* Prepares `c` to run entry(arg) on `st` at its first coro_switch to it.
 * entry must not return: it ends with coro_exit(c, to). `c` must stay at
 * its address until then (a ucontext_t points into itself). */
void coro_init(struct coro *c, struct coro_stack *st, const char *name,
               void (*entry)(void *arg), void *arg);

/* Saves the current context in `from` and resumes `to`. */
void coro_switch(struct coro *from, struct coro *to);

/* Final switch of a finished coroutine; `from` is never resumed, its stack
 * may be released by `to`. */
void coro_exit(struct coro *from, struct coro *to) __attribute__((noreturn));

/* Hints the cache that `c` is about to be resumed: its saved frame is the
 * first thing the switch loads, and with many coroutines it is cold. The
 * frame (56 bytes on x86-64, 176 on aarch64) seldom starts a line, and the
 * resumed code goes on into its callers' frames above it (a blocking fifo
 * read returns through ~100 bytes of saved registers and locals): four
 * lines, which took W2 a tenth faster than two. A prefetch never faults,
 * so lines past the top of a fresh stack cost nothing. */
static inline __attribute__((always_inline)) void coro_prefetch(const struct coro *c)
{
#ifndef KBSIM_CORO_USE_UCONTEXT
    __builtin_prefetch(c->sp);
    __builtin_prefetch((const char *)c->sp + 64);
    __builtin_prefetch((const char *)c->sp + 128);
    __builtin_prefetch((const char *)c->sp + 192);
#else
    (void)c;
#endif
}

/* Installs (once per process) a SIGSEGV handler on an alternate stack, and
 * (once per OS thread) that alternate stack, so that a fault in a guard
 * page is reported as "stack overflow in thread process 'NAME'" before the
 * process dies. Call from every OS thread that runs coroutines. */
void coro_overflow_guard_install(void);

#endif
