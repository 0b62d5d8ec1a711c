/* test_coro.c — tests of the stackful coroutines (engine/coro.c) */
#include "coro.h"
#include "test.h"

#include <fenv.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(TEST_ASAN)
#define TEST_ASAN 1
#endif

#define STACK_SIZE (64 * 1024)

static size_t page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

/* ---- pools owned by the test ------------------------------------------
 * Under the failalloc shim a test may stop at any allocation. The harness
 * then puts back the stacks it has out and releases its pool (pool_free):
 * neither they nor their guard pages (a budget of the whole process) may
 * leak into the next run. */

#define MAX_OUT 40000
static struct coro_stack *outstanding[MAX_OUT]; /* [out_head, n_out) */
static size_t out_head, n_out;

static struct coro_stack *sget(struct coro_pool *pool, size_t size, bool guard)
{
    struct coro_stack *st = coro_stack_get(pool, size, guard);
    if (st && n_out < MAX_OUT)
        outstanding[n_out++] = st;
    return st;
}

static void sput(struct coro_pool *pool, struct coro_stack *st)
{
    /* put back oldest or newest first, as the tests do: O(1) */
    if (out_head < n_out && outstanding[out_head] == st) {
        out_head++;
    } else if (out_head < n_out && outstanding[n_out - 1] == st) {
        n_out--;
    } else {
        for (size_t i = out_head; i < n_out; i++)
            if (outstanding[i] == st) {
                memmove(&outstanding[i], &outstanding[i + 1],
                        (n_out - i - 1) * sizeof outstanding[0]);
                n_out--;
                break;
            }
    }
    if (out_head == n_out)
        out_head = n_out = 0;
    coro_stack_put(pool, st);
}

static void pool_free(struct coro_pool *pool)
{
    while (n_out > out_head)
        coro_stack_put(pool, outstanding[--n_out]);
    out_head = n_out = 0;
    coro_pool_release(pool);
    coro_set_guard_limit(0);
    free(pool);
}

static struct coro_pool *pool_new(void)
{
    struct coro_pool *pool = T_OWN(calloc(1, sizeof *pool), pool_free);
    if (pool)
        coro_pool_init(pool);
    return pool;
}

/* ---- ping-pong ------------------------------------------------------- */

struct pingpong {
    struct coro main, co;
    long value;
    long rounds;
};

static void pingpong_entry(void *arg)
{
    struct pingpong *pp = arg;
    for (long i = 0; i < pp->rounds; i++) {
        pp->value = pp->value * 2 + 1;
        coro_switch(&pp->co, &pp->main);
    }
    pp->value = -1;
    coro_exit(&pp->co, &pp->main);
}

static void run_pingpong(struct coro_stack *st, long rounds, long *bad_round)
{
    struct pingpong pp = {.rounds = rounds};
    coro_init_main(&pp.main);
    coro_init(&pp.co, st, "pingpong", pingpong_entry, &pp);
    *bad_round = -1;
    for (long i = 0; i < rounds; i++) {
        pp.value = i;
        coro_switch(&pp.main, &pp.co);
        if (pp.value != 2 * i + 1 && *bad_round < 0)
            *bad_round = i;
    }
    coro_switch(&pp.main, &pp.co);
    if (pp.value != -1 && *bad_round < 0)
        *bad_round = rounds;
}

TEST(ping_pong)
{
    struct coro_pool *pool = pool_new();
    ASSERT_TRUE(pool);
    struct coro_stack *st = sget(pool, STACK_SIZE, true);
    ASSERT_TRUE(st != NULL);
    long bad_round;
    run_pingpong(st, 100000, &bad_round);
    ASSERT_EQ(bad_round, -1);
    sput(pool, st);
    coro_pool_release(pool);
    ASSERT_EQ(pool->mapped_bytes, 0);
}

/* ---- a chain: each coroutine switches to the next, the last to main --- */

#define CHAIN_LEN 16
#define CHAIN_ROUNDS 1000

struct chain {
    struct coro main, co[CHAIN_LEN];
    uint64_t token;
    int visits[CHAIN_LEN];
};

struct chain_link {
    struct chain *ch;
    int idx;
};

static void chain_entry(void *arg)
{
    struct chain_link *l = arg;
    struct chain *ch = l->ch;
    int i = l->idx;
    struct coro *next = i + 1 < CHAIN_LEN ? &ch->co[i + 1] : &ch->main;
    for (int r = 0; r < CHAIN_ROUNDS; r++) {
        ch->token = ch->token * 31 + (uint64_t)i;
        ch->visits[i]++;
        coro_switch(&ch->co[i], next);
    }
    coro_exit(&ch->co[i], next);
}

TEST(chain)
{
    struct coro_pool *pool = pool_new();
    ASSERT_TRUE(pool);
    struct chain ch = {.token = 1};
    struct chain_link links[CHAIN_LEN];
    struct coro_stack *stacks[CHAIN_LEN];
    coro_init_main(&ch.main);
    for (int i = 0; i < CHAIN_LEN; i++) {
        stacks[i] = sget(pool, STACK_SIZE, true);
        ASSERT_TRUE(stacks[i] != NULL);
        links[i] = (struct chain_link){&ch, i};
        coro_init(&ch.co[i], stacks[i], "chain", chain_entry, &links[i]);
    }
    uint64_t expect = 1;
    for (int r = 0; r < CHAIN_ROUNDS; r++) {
        coro_switch(&ch.main, &ch.co[0]);
        for (int i = 0; i < CHAIN_LEN; i++)
            expect = expect * 31 + (uint64_t)i;
        ASSERT_U64_EQ(ch.token, expect);
    }
    /* one more pass: every coroutine ends, handing on to the next */
    coro_switch(&ch.main, &ch.co[0]);
    ASSERT_U64_EQ(ch.token, expect);
    for (int i = 0; i < CHAIN_LEN; i++) {
        ASSERT_EQ(ch.visits[i], CHAIN_ROUNDS);
        sput(pool, stacks[i]);
    }
    coro_pool_release(pool);
    ASSERT_EQ(pool->mapped_bytes, 0);
}

/* ---- callee-saved registers and floating point ---------------------- */

/* Overwrites every callee-saved register the compiler lets us name (not
 * the frame pointer), so that the other side of a switch only sees its own
 * values if the switch saved and restored them. */
static void scramble_callee_saved(void)
{
#if defined(__x86_64__)
    __asm__ volatile("movq $-1, %%rbx\n\t"
                     "movq $-2, %%r12\n\t"
                     "movq $-3, %%r13\n\t"
                     "movq $-4, %%r14\n\t"
                     "movq $-5, %%r15\n\t"
                     ::: "rbx", "r12", "r13", "r14", "r15");
#elif defined(__aarch64__)
    __asm__ volatile("mov x19, #-1\n\tmov x20, #-2\n\tmov x21, #-3\n\t"
                     "mov x22, #-4\n\tmov x23, #-5\n\tmov x24, #-6\n\t"
                     "mov x25, #-7\n\tmov x26, #-8\n\tmov x27, #-9\n\t"
                     "mov x28, #-10\n\t"
                     "fmov d8, #-1.0\n\tfmov d9, #-2.0\n\tfmov d10, #-3.0\n\t"
                     "fmov d11, #-4.0\n\tfmov d12, #-5.0\n\tfmov d13, #-6.0\n\t"
                     "fmov d14, #-7.0\n\tfmov d15, #-8.0\n\t"
                     ::: "x19", "x20", "x21", "x22", "x23", "x24", "x25",
                         "x26", "x27", "x28", "d8", "d9", "d10", "d11",
                         "d12", "d13", "d14", "d15");
#endif
}

struct regs {
    struct coro main, co;
    int rounds;
    int bad_rounding; /* rounds on which the coroutine lost FE_UPWARD */
};

/* The x86-64 assembly switch leaves the floating-point environment to the
 * OS thread (decision 0001); the other backends keep one per coroutine. */
#if defined(__x86_64__) && !defined(KBSIM_CORO_UCONTEXT)
#define FPENV_PER_CORO 0
#else
#define FPENV_PER_CORO 1
#endif

static void regs_entry(void *arg)
{
    struct regs *r = arg;
    if (FPENV_PER_CORO)
        fesetround(FE_UPWARD);
    for (int i = 0; i < r->rounds; i++) {
        if (FPENV_PER_CORO && fegetround() != FE_UPWARD)
            r->bad_rounding++;
        scramble_callee_saved();
        coro_switch(&r->co, &r->main);
    }
    coro_exit(&r->co, &r->main);
}

TEST(registers_and_fp_preserved)
{
    struct coro_pool *pool = pool_new();
    ASSERT_TRUE(pool);
    struct coro_stack *st = sget(pool, STACK_SIZE, true);
    ASSERT_TRUE(st != NULL);
    struct regs r = {.rounds = 1000};
    coro_init_main(&r.main);
    coro_init(&r.co, st, "regs", regs_entry, &r);

    /* More values live across the switch than there are callee-saved
     * registers, so the compiler keeps some of them there. */
    volatile long seed = 12345;
    long a = seed, b = seed * 3, c = seed * 5, d = seed * 7, e = seed * 11,
         f = seed * 13, g = seed * 17, h = seed * 19;
    double x = (double)seed * 0.5, y = (double)seed * 0.25,
           z = (double)seed * 0.125, w = (double)seed * 2.0,
           u = (double)seed * 4.0, v = (double)seed * 8.0,
           p = (double)seed * 16.0, q = (double)seed * 32.0;
    volatile double one = 1.0, three = 3.0;
    double third_nearest = one / three;
    int bad = -1;
    for (int i = 0; i < r.rounds; i++) {
        coro_switch(&r.main, &r.co);
        long s = seed;
        if (a != s + i || b != s * 3 + 2L * i || c != s * 5 + 3L * i ||
            d != s * 7 + 4L * i || e != s * 11 + 5L * i ||
            f != s * 13 + 6L * i || g != s * 17 + 7L * i ||
            h != s * 19 + 8L * i || x != (double)s * 0.5 + i ||
            y != (double)s * 0.25 + i || z != (double)s * 0.125 + i ||
            w != (double)s * 2.0 + i || u != (double)s * 4.0 + i ||
            v != (double)s * 8.0 + i || p != (double)s * 16.0 + i ||
            q != (double)s * 32.0 + i || fegetround() != FE_TONEAREST ||
            one / three != third_nearest) {
            bad = i;
            break;
        }
        a += 1, b += 2, c += 3, d += 4, e += 5, f += 6, g += 7, h += 8;
        x += 1, y += 1, z += 1, w += 1, u += 1, v += 1, p += 1, q += 1;
    }
    ASSERT_EQ(bad, -1);
    ASSERT_EQ(r.bad_rounding, 0);
    coro_switch(&r.main, &r.co);
    sput(pool, st);
    coro_pool_release(pool);
}

/* ---- 10,000 coroutines alive at once -------------------------------- */

#define MANY 10000

struct many {
    struct coro *main;
    struct coro co;
    long value;
};

static void many_entry(void *arg)
{
    struct many *m = arg;
    volatile char scratch[1024];
    scratch[0] = (char)m->value;
    m->value += 1;
    coro_switch(&m->co, m->main);
    m->value += scratch[0] == (char)(m->value - 1) ? 10 : 1000;
    coro_exit(&m->co, m->main);
}

static long resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (long)page();
}

TEST(ten_thousand_coroutines)
{
    struct coro_pool *pool = pool_new();
    ASSERT_TRUE(pool);
    struct coro main;
    coro_init_main(&main);
    /* 1,000 under the failalloc shim: the same call sites, a tenth of
     * the work for each of its hundreds of runs */
    int many = test_failalloc_mode ? MANY / 10 : MANY;
    struct many *m = T_OWN(calloc(MANY, sizeof *m), free);
    ASSERT_TRUE(m);
    struct coro_stack **st = T_OWN(calloc(MANY, sizeof *st), free);
    ASSERT_TRUE(st);
    ASSERT_TRUE(m && st);
    long rss_before = resident_bytes();
    ASSERT_TRUE(rss_before > 0);
    for (int i = 0; i < many; i++) {
        st[i] = sget(pool, STACK_SIZE, true);
        ASSERT_TRUE(st[i] != NULL);
        m[i].main = &main;
        m[i].value = i;
        coro_init(&m[i].co, st[i], "many", many_entry, &m[i]);
        coro_switch(&main, &m[i].co);
        ASSERT_EQ(m[i].value, i + 1);
    }
    /* each: the stack, a colour page, a guard page */
    ASSERT_U64_EQ(pool->mapped_bytes,
                  (uint64_t)many * (STACK_SIZE + 2 * page()));
    long grown = resident_bytes() - rss_before;
    int bad = -1;
    for (int i = 0; i < many; i++) {
        coro_switch(&main, &m[i].co);
        if (m[i].value != i + 11 && bad < 0)
            bad = i;
        sput(pool, st[i]);
    }
    coro_pool_release(pool);
    T_FREE(free, st);
    T_FREE(free, m);
    ASSERT_EQ(pool->mapped_bytes, 0);
    ASSERT_EQ(bad, -1);
#ifndef TEST_ASAN
    /* Only the pages a coroutine touched are resident (under ASan or
     * valgrind, their shadow memory adds its own). */
    if (!RUNNING_ON_VALGRIND)
        ASSERT_TRUE(grown < 200L * 1024 * 1024);
#else
    (void)grown;
#endif
}

/* ---- pool ----------------------------------------------------------- */

TEST(pool_reuse)
{
    struct coro_pool *pool = pool_new();
    ASSERT_TRUE(pool);
    size_t ps = page();

    struct coro_stack *a = sget(pool, 1000, true);
    ASSERT_TRUE(a != NULL);
    ASSERT_EQ(a->size, ps);
    ASSERT_EQ(a->map_size, 3 * ps); /* guard, stack, colour page */
    ASSERT_TRUE(a->guard);
    ASSERT_TRUE((char *)a->lo == (char *)a->map + ps);
    ASSERT_TRUE((char *)a->top - (char *)a->lo > (ptrdiff_t)a->size);
    ASSERT_EQ(pool->mapped_bytes, 3 * ps);

    /* a released stack is handed out again, run a coroutine and all */
    long bad_round;
    struct coro_stack *big = sget(pool, STACK_SIZE, true);
    ASSERT_TRUE(big != NULL);
    run_pingpong(big, 10, &bad_round);
    ASSERT_EQ(bad_round, -1);
    sput(pool, big);
    struct coro_stack *again = sget(pool, STACK_SIZE - 100, true);
    ASSERT_TRUE(again == big);
    run_pingpong(again, 10, &bad_round);
    ASSERT_EQ(bad_round, -1);
    sput(pool, again);

    /* only a stack of the same size and guard fits */
    sput(pool, a);
    struct coro_stack *unguarded = sget(pool, ps, false);
    ASSERT_TRUE(unguarded != NULL && unguarded != a && unguarded != big);
    struct coro_stack *larger = sget(pool, 2 * ps, true);
    ASSERT_TRUE(larger != NULL && larger != a && larger != big);
    struct coro_stack *same = sget(pool, ps, true);
    ASSERT_TRUE(same == a);
    /* a, big, unguarded, larger: each with one colour page */
    ASSERT_EQ(pool->mapped_bytes, 3 * ps + (STACK_SIZE + 2 * ps) + 2 * ps +
                                     4 * ps);

    sput(pool, same);
    sput(pool, unguarded);
    sput(pool, larger);
    coro_pool_release(pool);
    ASSERT_EQ(pool->mapped_bytes, 0);
    ASSERT_TRUE(pool->free_list == NULL);
}

/* ---- stacks without a guard page ------------------------------------ */

static int recurse(int depth)
{
    volatile char pad[512];
    pad[0] = (char)depth;
    if (depth == 0)
        return pad[0];
    return recurse(depth - 1) + pad[0];
}

struct deep {
    struct coro main, co;
    int depth;
    int result;
};

static void deep_entry(void *arg)
{
    struct deep *d = arg;
    d->result = recurse(d->depth);
    coro_exit(&d->co, &d->main);
}

TEST(unguarded_stack)
{
    struct coro_pool *pool = pool_new();
    ASSERT_TRUE(pool);
    struct coro_stack *st = sget(pool, STACK_SIZE, false);
    ASSERT_TRUE(st != NULL);
    ASSERT_TRUE(!st->guard);
    ASSERT_TRUE(st->lo == st->map);
    ASSERT_EQ(st->map_size, STACK_SIZE + page());
    long bad_round;
    run_pingpong(st, 1000, &bad_round);
    ASSERT_EQ(bad_round, -1);

    /* about half of the stack: 60 frames of over 512 bytes */
    struct deep d = {.depth = 60};
    coro_init_main(&d.main);
    coro_init(&d.co, st, "deep", deep_entry, &d);
    coro_switch(&d.main, &d.co);
    int expect = 0;
    for (int i = 0; i <= 60; i++)
        expect += (char)i;
    ASSERT_EQ(d.result, expect);
    sput(pool, st);
    coro_pool_release(pool);
}

/* ---- stack overflow report ------------------------------------------ */

#ifndef TEST_ASAN
static void overflow_child(int err_fd)
{
    dup2(err_fd, STDERR_FILENO);
    coro_overflow_guard_install();
    struct coro_pool pool;
    coro_pool_init(&pool);
    struct coro_stack *st = coro_stack_get(&pool, STACK_SIZE, true);
    if (!st)
        _exit(3);
    struct deep d = {.depth = 1 << 20};
    coro_init_main(&d.main);
    coro_init(&d.co, st, "deep_thought", deep_entry, &d);
    coro_switch(&d.main, &d.co);
    _exit(0);
}
#endif

TEST(stack_overflow_report)
{
#ifdef TEST_ASAN
    printf("note: stack_overflow_report skipped: AddressSanitizer owns "
           "SIGSEGV\n");
#else
    /* its allocations are the forked child's, which the shim's count in
     * this process does not see */
    if (test_failalloc_mode)
        return;
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        overflow_child(fds[1]);
    }
    close(fds[1]);
    static char err[1 << 16];
    size_t n = 0;
    ssize_t r;
    while (n + 1 < sizeof err &&
           (r = read(fds[0], err + n, sizeof err - 1 - n)) > 0)
        n += (size_t)r;
    err[n] = 0;
    close(fds[0]);
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status));
    ASSERT_EQ(WTERMSIG(status), SIGSEGV);
    ASSERT_CONTAINS(err, "kbsim: stack overflow in thread process "
                         "'deep_thought' (stack 65536 bytes); give it a "
                         "larger stack_size\n");
#endif
}

/* ---- memory maps: stacks at scale ---------------------------------- */

static long maps_now(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    long n = 0;
    int c;
    if (!f)
        return -1;
    while ((c = getc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

#define SCALE 40000

/* 40,000 stacks asked with guards: the guards stop at the budget (a
 * quarter of vm.max_map_count), the rest share their chunks' maps, and
 * every stack is usable from its bottom to its top. Valgrind cannot track
 * that many maps: under it (and under --failalloc), 4,000 stacks with a
 * budget of 1,000. */
TEST(forty_thousand_stacks_few_maps)
{
    /* and so under the failalloc shim, which runs it hundreds of times */
    bool small = RUNNING_ON_VALGRIND || test_failalloc_mode;
    int scale = small ? SCALE / 10 : SCALE;
    if (small)
        coro_set_guard_limit(1000);
    struct coro_pool *pool = pool_new();
    ASSERT_TRUE(pool);
    struct coro_stack **st = T_OWN(calloc(SCALE, sizeof *st), free);
    ASSERT_TRUE(st);
    ASSERT_TRUE(st != NULL);
    long before = maps_now();
    ASSERT_TRUE(before > 0);
    int guarded = 0;
    for (int i = 0; i < scale; i++) {
        st[i] = sget(pool, 4096, true);
        ASSERT_TRUE(st[i] != NULL);
        ((volatile char *)st[i]->lo)[0] = 1;
        ((volatile char *)st[i]->top)[-1] = 1;
        guarded += st[i]->guard;
    }
    long grown = maps_now() - before;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    long limit = 65530;
    if (f) {
        ASSERT_EQ(fscanf(f, "%ld", &limit), 1);
        fclose(f);
    }
    for (int i = 0; i < scale; i++)
        sput(pool, st[i]);
    coro_pool_release(pool);
    T_FREE(free, st);
    coro_set_guard_limit(0);
    ASSERT_TRUE(guarded > 0 && guarded <= limit / 4 && guarded < scale);
    /* two maps a guarded stack, a few for the chunks */
    ASSERT_TRUE(grown <= 2L * guarded + 64);
    ASSERT_TRUE(grown < limit * 2 / 3);
    ASSERT_TRUE(maps_now() <= before + 2); /* all unmapped again */
}

/* Past the guard budget stacks come without a guard; released, the
 * guards are given again, and a free guarded stack is always reused. */
TEST(guard_budget)
{
    struct coro_pool *pool = pool_new();
    ASSERT_TRUE(pool);
    coro_set_guard_limit(3);
    struct coro_stack *st[5];
    for (int i = 0; i < 5; i++) {
        st[i] = sget(pool, 4096, true);
        ASSERT_TRUE(st[i] != NULL);
        ASSERT_EQ(st[i]->guard, i < 3);
    }
    for (int i = 0; i < 5; i++)
        sput(pool, st[i]);
    /* the budget is spent, but a free guarded stack is handed out again */
    struct coro_stack *reused = sget(pool, 4096, true);
    ASSERT_TRUE(reused != NULL && reused->guard);
    sput(pool, reused);
    coro_pool_release(pool);
    struct coro_stack *again = sget(pool, 4096, true);
    ASSERT_TRUE(again != NULL && again->guard);
    sput(pool, again);
    coro_pool_release(pool);
    coro_set_guard_limit(0);
}

/* ---- the process's chunk cache -------------------------------------- */

/* A retired pool's chunks, stacks as carved and guards as made, serve the
 * next pool: the same stacks (so no new maps, no page faults on what was
 * touched), counted in its mapped_bytes as stacks it carved would be. */
TEST(retired_chunks_serve_the_next_pool)
{
    coro_cache_drop();
    struct coro_cache_stats c0, c1, c2;
    coro_cache_stats(&c0);
    ASSERT_EQ(c0.chunks, 0);
    enum { N = 24 };
    struct coro_pool *a = pool_new();
    ASSERT_TRUE(a);
    struct coro_stack *st[N];
    void *tops[N];
    long maps0 = maps_now();
    ASSERT_TRUE(maps0 > 0);
    for (int i = 0; i < N; i++) {
        st[i] = sget(a, STACK_SIZE, true);
        ASSERT_TRUE(st[i] != NULL);
        tops[i] = st[i]->top;
        ((volatile char *)st[i]->top)[-1] = 1; /* a touched page each */
    }
    size_t mapped = a->mapped_bytes;
    bool guarded = st[0]->guard;
    for (int i = 0; i < N; i++)
        sput(a, st[i]);
    coro_pool_retire(a);
    ASSERT_EQ(a->mapped_bytes, 0);
    ASSERT_TRUE(a->chunks == NULL && a->free_list == NULL);
    coro_cache_stats(&c1);
    ASSERT_EQ(c1.chunks, 1);
    ASSERT_EQ(c1.stacks, N);
    ASSERT_TRUE(c1.resident_bytes >= N * page());
    long maps1 = maps_now();

    /* another size is not served from the cache, and leaves it as it is */
    struct coro_pool *b = pool_new();
    ASSERT_TRUE(b);
    struct coro_stack *other = sget(b, 2 * STACK_SIZE, true);
    ASSERT_TRUE(other != NULL);
    coro_cache_stats(&c2);
    ASSERT_EQ(c2.chunks, 1);
    ASSERT_EQ(c2.adopted_chunks, c1.adopted_chunks);
    sput(b, other);
    coro_pool_release(b);

    /* the same size and guard: the very stacks, no new map */
    for (int i = 0; i < N; i++) {
        st[i] = sget(b, STACK_SIZE, true);
        ASSERT_TRUE(st[i] != NULL);
        ASSERT_EQ(st[i]->guard, guarded);
        bool known = false;
        for (int j = 0; j < N; j++)
            known |= st[i]->top == tops[j];
        ASSERT_TRUE(known);
        for (int j = 0; j < i; j++)
            ASSERT_TRUE(st[j] != st[i]);
    }
    ASSERT_EQ(b->mapped_bytes, mapped);
    ASSERT_TRUE(maps_now() <= maps1);
    coro_cache_stats(&c2);
    ASSERT_EQ(c2.chunks, 0);
    ASSERT_EQ(c2.adopted_chunks, c1.adopted_chunks + 1);
    ASSERT_EQ(c2.reused_stacks, c1.reused_stacks + N);
    /* each runs a coroutine as a new stack does */
    long bad_round;
    run_pingpong(st[N - 1], 10, &bad_round);
    ASSERT_EQ(bad_round, -1);
    /* one more is carved, from the adopted chunk's room */
    struct coro_stack *more = sget(b, STACK_SIZE, true);
    ASSERT_TRUE(more != NULL);
    ASSERT_EQ(b->mapped_bytes, mapped + more->map_size);
    sput(b, more);
    for (int i = 0; i < N; i++)
        sput(b, st[i]);
    coro_pool_release(b); /* release unmaps; only retire caches */
    coro_cache_stats(&c2);
    ASSERT_EQ(c2.chunks, 0);
    ASSERT_TRUE(maps_now() <= maps0 + 2);
}

/* What the cache holds is bounded: a chunk over the stack or resident
 * bounds is unmapped as before, and coro_cache_drop empties it. */
TEST(chunk_cache_bounds)
{
    coro_cache_drop();
    struct coro_cache_stats c;
    struct coro_pool *pool = pool_new();
    ASSERT_TRUE(pool);
    enum { N = 8 };
    struct coro_stack *st[N];
    /* over the stack bound */
    coro_cache_set_limits(N - 1, 0);
    for (int i = 0; i < N; i++) {
        st[i] = sget(pool, 4096, false);
        ASSERT_TRUE(st[i] != NULL);
    }
    for (int i = 0; i < N; i++)
        sput(pool, st[i]);
    coro_pool_retire(pool);
    coro_cache_stats(&c);
    ASSERT_EQ(c.chunks, 0);
    /* over the resident bound: each stack touches 4 pages */
    coro_cache_set_limits(0, 3 * N * page());
    for (int i = 0; i < N; i++) {
        st[i] = sget(pool, 4 * page(), false);
        ASSERT_TRUE(st[i] != NULL);
        memset(st[i]->lo, 1, 4 * page());
    }
    for (int i = 0; i < N; i++)
        sput(pool, st[i]);
    coro_pool_retire(pool);
    coro_cache_stats(&c);
    ASSERT_EQ(c.chunks, 0);
    /* within both: kept, until dropped */
    coro_cache_set_limits(N, 8 * N * page());
    for (int i = 0; i < N; i++) {
        st[i] = sget(pool, 4 * page(), false);
        ASSERT_TRUE(st[i] != NULL);
        memset(st[i]->lo, 1, 4 * page());
    }
    for (int i = 0; i < N; i++)
        sput(pool, st[i]);
    coro_pool_retire(pool);
    coro_cache_set_limits(0, 0);
    coro_cache_stats(&c);
    ASSERT_EQ(c.chunks, 1);
    ASSERT_EQ(c.stacks, N);
    ASSERT_TRUE(c.resident_bytes >= 4 * N * page());
    ASSERT_EQ(coro_cache_drop(), 1);
    coro_cache_stats(&c);
    ASSERT_EQ(c.chunks, 0);
    ASSERT_EQ(c.stacks, 0);
    ASSERT_EQ(c.resident_bytes, 0);
}

/* Guards held by cached chunks go back to the budget before a stack is
 * refused one. */
TEST(guard_budget_takes_back_cached_guards)
{
    coro_cache_drop();
    struct coro_pool *pool = pool_new();
    ASSERT_TRUE(pool);
    coro_set_guard_limit(2);
    struct coro_stack *st[2];
    for (int i = 0; i < 2; i++) {
        st[i] = sget(pool, 4096, true);
        ASSERT_TRUE(st[i] != NULL && st[i]->guard);
    }
    for (int i = 0; i < 2; i++)
        sput(pool, st[i]);
    coro_pool_retire(pool);
    struct coro_cache_stats c;
    coro_cache_stats(&c);
    ASSERT_EQ(c.chunks, 1);
    /* another size: not in the cache, and the budget is held by it */
    struct coro_stack *big = sget(pool, 8192, true);
    ASSERT_TRUE(big != NULL);
    ASSERT_TRUE(big->guard);
    coro_cache_stats(&c);
    ASSERT_EQ(c.chunks, 0);
    sput(pool, big);
    coro_pool_release(pool);
    coro_set_guard_limit(0);
}

TEST_MAIN(ping_pong, chain, registers_and_fp_preserved, ten_thousand_coroutines,
          pool_reuse, unguarded_stack, stack_overflow_report,
          forty_thousand_stacks_few_maps, guard_budget,
          retired_chunks_serve_the_next_pool, chunk_cache_bounds,
          guard_budget_takes_back_cached_guards)
