/* test_sweep.c — tests of the parallel sweep runner (sim_sweep_run) */
#include <signal.h>
#include <stdatomic.h>
#include <uv.h>

#include "sim.h"
#include "sim_uv.h"
/* --failalloc: the allocations come from a dozen call sites, repeated per
 * point; each site's first still fails (tests/failalloc/README.md) */
#define TEST_FAILALLOC_ALL 40
#include "test.h"

#define N_POINTS 20

/* Point i: a few method processes with LCG delays seeded from i, so that
 * every point ends at a different, point-dependent time. */
struct lcg_proc {
    uint64_t x;
    int left;
    uint64_t *fired;
};

static sim_time lcg_draw(uint64_t *x)
{
    *x = *x * 6364136223846793005u + 1442695040888963407u;
    return (1 + (*x >> 33) % 1000) * SIM_NS;
}

static void lcg_method(struct sim *s, void *arg)
{
    struct lcg_proc *p = arg;
    if (p->left-- == 0)
        return;
    (*p->fired)++;
    sim_next_trigger(s, lcg_draw(&p->x));
}

struct result {
    uint64_t end_ns;
    uint64_t fired;
    uint64_t activations;
};

struct sweep_ctx {
    struct result res[N_POINTS];
    size_t finite;             /* points >= finite run for ever */
    atomic_bool started[N_POINTS];
    size_t stop_at;            /* progress stops the sweep at this count */
    bool raise_in_point;       /* the first endless point sends SIGINT */
    int fail_point;            /* this point fails (-1: none) */
    atomic_bool nomem[N_POINTS]; /* the point failed: out of memory (--failalloc) */
    size_t progress_calls;
    size_t last_done;
    bool progress_order_ok;
    uv_thread_t loop_thread;
    bool progress_thread_ok;
};

static void endless(struct sim *s, void *arg)
{
    struct sweep_ctx *c = arg;
    for (;;) {
        sim_wait(s, SIM_NS);
        if (c && sim_now(s) == 100 * SIM_NS)
            uv_kill(uv_os_getpid(), SIGINT);
    }
}

/* A point that failed because an allocation failed (under --failalloc):
 * the error it owed, noted for the test body. */
static int nomem(struct sweep_ctx *c, size_t i, struct sim *s)
{
    if (i < N_POINTS)
        atomic_store(&c->nomem[i], true);
    sim_free(s);
    /* the point that was to send SIGINT: the endless ones after it would
     * run for ever */
    if (c->raise_in_point && i == c->finite)
        uv_kill(uv_os_getpid(), SIGINT);
    return -1;
}

static int run_point(struct sim_sweep_point *pt, size_t i, void *ud)
{
    struct sweep_ctx *c = ud;
    /* runs on the sweep's worker threads: plain sim_free, not the test
     * harness's owner list (T_OWN), which is one thread's */
    struct sim *s = sim_new(NULL);
    struct lcg_proc procs[5];
    uint64_t fired = 0;
    int n = 1 + (int)(i % 5);

    if (!s)
        return nomem(c, i, NULL);
    if ((int)i == c->fail_point) {
        sim_free(s);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        procs[k] = (struct lcg_proc){.x = i * 31 + (uint64_t)k,
                                     .left = 10 + (int)i, .fired = &fired};
        if (!sim_method(s, "lcg", lcg_method, &procs[k], false))
            return nomem(c, i, s);
    }
    if (pt && i >= c->finite) {
        struct sim_proc *p = sim_thread(
            s, "endless", endless,
            c->raise_in_point && i == c->finite ? c : NULL, 0);
        if (!p)
            return nomem(c, i, s);
        sim_proc_set_daemon(p, true);
    }
    if (pt)
        sim_sweep_point_attach(pt, s);
    if (i < N_POINTS)
        atomic_store(&c->started[i], true);
    int rc = sim_run(s, SIM_FOREVER);
    if (pt)
        sim_sweep_point_attach(pt, NULL);
    if (rc == SIM_ENOMEM)
        return nomem(c, i, s);
    struct sim_stats st;
    sim_get_stats(s, &st);
    c->res[i] = (struct result){sim_now(s) / SIM_NS, fired, st.activations};
    sim_free(s);
    return rc == SIM_DONE ? 0 : -1;
}

/* Under --failalloc: a point that ran out of memory (none otherwise) must
 * not be reported done; it is the error the case owed, which stops it. */
#define ASSERT_NOMEM_REPORTED(c, st, n)                                   \
    do {                                                                  \
        for (size_t test__i = 0; test__i < (n); test__i++)                \
            if (atomic_load(&(c)->nomem[test__i])) {                      \
                ASSERT_TRUE((st)[test__i] != SIM_SWEEP_DONE);             \
                ASSERT_EQ(SIM_ENOMEM, 0);                                 \
            }                                                             \
    } while (0)

static bool on_progress(size_t done, size_t total, void *ud)
{
    struct sweep_ctx *c = ud;
    c->progress_calls++;
    if (done != c->last_done + 1 || total != N_POINTS)
        c->progress_order_ok = false;
    c->last_done = done;
    uv_thread_t self = uv_thread_self();
    if (!uv_thread_equal(&self, &c->loop_thread))
        c->progress_thread_ok = false;
    if (done == c->stop_at) {
        /* Stop only once the first endless point is inside its run, so
         * that it is stopped rather than cancelled, every time. */
        if (c->finite < N_POINTS)
            while (!atomic_load(&c->started[c->finite]) && !atomic_load(&c->nomem[c->finite]))
                uv_sleep(1);
        return true;
    }
    return false;
}

static void ctx_init(struct sweep_ctx *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < N_POINTS; i++) {
        atomic_init(&c->started[i], false);
        atomic_init(&c->nomem[i], false);
    }
    c->finite = N_POINTS;
    c->stop_at = (size_t)-1;
    c->fail_point = -1;
    c->progress_order_ok = true;
    c->progress_thread_ok = true;
    c->loop_thread = uv_thread_self();
}

/* The results of running every point in this thread, one after another;
 * false if one ran out of memory. */
static bool reference(struct sweep_ctx *ref)
{
    ctx_init(ref);
    for (size_t i = 0; i < N_POINTS; i++)
        if (run_point(NULL, i, ref) != 0)
            return false;
    return true;
}

static bool same_result(const struct result *a, const struct result *b)
{
    return a->end_ns == b->end_ns && a->fired == b->fired &&
           a->activations == b->activations;
}

static struct sweep_ctx ref, c1, c2, c8;

TEST(sweep_results_in_input_order)
{
    unsigned char st1[N_POINTS], st2[N_POINTS], st8[N_POINTS];
    struct sim_sweep_opts o = {.progress = on_progress};

    ASSERT_TRUE(reference(&ref));
    /* Point-dependent results: no two neighbours alike. */
    for (size_t i = 1; i < N_POINTS; i++)
        ASSERT_TRUE(!same_result(&ref.res[i], &ref.res[i - 1]));
    ASSERT_U64_EQ(ref.res[0].fired, 10);

    ctx_init(&c1);
    o.jobs = 1;
    ASSERT_EQ(sim_sweep_run(N_POINTS, run_point, &c1, &o, st1), 0);
    ASSERT_NOMEM_REPORTED(&c1, st1, N_POINTS);
    ctx_init(&c2);
    o.jobs = 2;
    ASSERT_EQ(sim_sweep_run(N_POINTS, run_point, &c2, &o, st2), 0);
    ASSERT_NOMEM_REPORTED(&c2, st2, N_POINTS);
    ctx_init(&c8);
    o.jobs = 8;
    ASSERT_EQ(sim_sweep_run(N_POINTS, run_point, &c8, &o, st8), 0);
    ASSERT_NOMEM_REPORTED(&c8, st8, N_POINTS);

    for (size_t i = 0; i < N_POINTS; i++) {
        ASSERT_EQ(st1[i], SIM_SWEEP_DONE);
        ASSERT_EQ(st2[i], SIM_SWEEP_DONE);
        ASSERT_EQ(st8[i], SIM_SWEEP_DONE);
        ASSERT_TRUE(same_result(&c1.res[i], &ref.res[i]));
        ASSERT_TRUE(same_result(&c2.res[i], &ref.res[i]));
        ASSERT_TRUE(same_result(&c8.res[i], &ref.res[i]));
    }
    ASSERT_EQ(c1.progress_calls, N_POINTS);
    ASSERT_EQ(c2.progress_calls, N_POINTS);
    ASSERT_TRUE(c1.progress_order_ok && c2.progress_order_ok);
    ASSERT_TRUE(c1.progress_thread_ok && c2.progress_thread_ok &&
                c8.progress_thread_ok);
}

/* jobs = 1: nothing runs while the progress callback asks for the stop. */
TEST(sweep_stop_from_progress_keeps_finished)
{
    unsigned char st[N_POINTS];
    struct sim_sweep_opts o = {.jobs = 1, .progress = on_progress};

    ASSERT_TRUE(reference(&ref));
    ctx_init(&c1);
    c1.stop_at = 5;
    ASSERT_EQ(sim_sweep_run(N_POINTS, run_point, &c1, &o, st), SIM_STOPPED);
    ASSERT_NOMEM_REPORTED(&c1, st, N_POINTS);
    for (size_t i = 0; i < N_POINTS; i++) {
        if (i < 5) {
            ASSERT_EQ(st[i], SIM_SWEEP_DONE);
            ASSERT_TRUE(same_result(&c1.res[i], &ref.res[i]));
        } else {
            ASSERT_EQ(st[i], SIM_SWEEP_NOT_RUN);
            ASSERT_U64_EQ(c1.res[i].fired, 0);
        }
    }
    ASSERT_EQ(c1.progress_calls, 5);
}

/* jobs = 2: points from 8 on never end by themselves; the stop must reach
 * the running one through its attached simulation. */
TEST(sweep_stop_reaches_running_point)
{
    unsigned char st[N_POINTS];
    struct sim_sweep_opts o = {.jobs = 2, .progress = on_progress};

    ASSERT_TRUE(reference(&ref));
    ctx_init(&c2);
    c2.finite = 8;
    c2.stop_at = 8;
    ASSERT_EQ(sim_sweep_run(N_POINTS, run_point, &c2, &o, st), SIM_STOPPED);
    ASSERT_NOMEM_REPORTED(&c2, st, N_POINTS);
    for (size_t i = 0; i < 8; i++) {
        ASSERT_EQ(st[i], SIM_SWEEP_DONE);
        ASSERT_TRUE(same_result(&c2.res[i], &ref.res[i]));
    }
    ASSERT_EQ(st[8], SIM_SWEEP_STOPPED);
    for (size_t i = 9; i < N_POINTS; i++)
        ASSERT_EQ(st[i], SIM_SWEEP_NOT_RUN);
}

/* A real SIGINT, sent by the first endless point itself once it runs, so
 * that which points finished is known in advance. */
TEST(sweep_sigint)
{
    unsigned char st[N_POINTS];
    struct sim_sweep_opts o = {.jobs = 1, .catch_sigint = true,
                               .progress = on_progress};

    ASSERT_TRUE(reference(&ref));
    ctx_init(&c1);
    c1.finite = 6;
    c1.raise_in_point = true;
    ASSERT_EQ(sim_sweep_run(N_POINTS, run_point, &c1, &o, st), SIM_STOPPED);
    ASSERT_NOMEM_REPORTED(&c1, st, N_POINTS);
    for (size_t i = 0; i < 6; i++) {
        ASSERT_EQ(st[i], SIM_SWEEP_DONE);
        ASSERT_TRUE(same_result(&c1.res[i], &ref.res[i]));
    }
    ASSERT_EQ(st[6], SIM_SWEEP_STOPPED);
    ASSERT_TRUE(c1.res[6].end_ns >= 100);
    for (size_t i = 7; i < N_POINTS; i++)
        ASSERT_EQ(st[i], SIM_SWEEP_NOT_RUN);
    struct sigaction sa;
    ASSERT_EQ(sigaction(SIGINT, NULL, &sa), 0);
    ASSERT_TRUE(sa.sa_handler == SIG_DFL);
}

/* A failing point is recorded; the others finish. */
TEST(sweep_failed_point_isolated)
{
    unsigned char st[N_POINTS];
    struct sim_sweep_opts o = {.jobs = 2};

    ASSERT_TRUE(reference(&ref));
    ctx_init(&c2);
    c2.fail_point = 3;
    ASSERT_EQ(sim_sweep_run(N_POINTS, run_point, &c2, &o, st), SIM_EPROC);
    ASSERT_NOMEM_REPORTED(&c2, st, N_POINTS);
    for (size_t i = 0; i < N_POINTS; i++) {
        if (i == 3) {
            ASSERT_EQ(st[i], SIM_SWEEP_FAILED);
        } else {
            ASSERT_EQ(st[i], SIM_SWEEP_DONE);
            ASSERT_TRUE(same_result(&c2.res[i], &ref.res[i]));
        }
    }
}

/* A loop of the test's, closed by the harness after an early return. */
static void loop_free(uv_loop_t *loop)
{
    uv_loop_close(loop);
    free(loop);
}

/* On the caller's loop, which must be left closable. */
TEST(sweep_on_caller_loop)
{
    uv_loop_t *loop = T_OWN(malloc(sizeof *loop), free);
    unsigned char st[N_POINTS];
    ASSERT_TRUE(loop);
    ASSERT_EQ(uv_loop_init(loop), 0);
    test_disown(loop);
    T_OWN(loop, loop_free);
    struct sim_sweep_opts o = {.jobs = 3, .loop = loop,
                               .catch_sigint = true};
    ASSERT_TRUE(reference(&ref));
    ctx_init(&c2);
    ASSERT_EQ(sim_sweep_run(N_POINTS, run_point, &c2, &o, st), 0);
    ASSERT_NOMEM_REPORTED(&c2, st, N_POINTS);
    for (size_t i = 0; i < N_POINTS; i++)
        ASSERT_TRUE(same_result(&c2.res[i], &ref.res[i]));
    test_disown(loop);
    int closed = uv_loop_close(loop);
    T_OWN(loop, free);
    ASSERT_EQ(closed, 0);
    ASSERT_EQ(sim_sweep_run(0, run_point, &c2, &o, NULL), 0);
    ASSERT_EQ(sim_sweep_run(3, NULL, &c2, &o, NULL), SIM_EINVAL);
    T_FREE(free, loop);
}

/* Points that obey or ignore a stop request. For the timeout: point 1
 * obeys (returns once asked to stop), point 2 ignores it until `release`
 * (a point stuck in C). With `interrupt`: point 3 sends SIGINT, waits
 * until the sweep asked it to stop, sends a second SIGINT, and ignores
 * both until `release`. Other points return at once. */
static atomic_bool release, interrupt;
static atomic_int finished_after_release, released;

static void on_release(void *ud)
{
    (void)ud;
    atomic_fetch_add(&released, 1);
}

static int run_ignoring_stop(struct sim_sweep_point *pt, size_t i, void *ud)
{
    (void)ud;
    if (atomic_load(&interrupt)) {
        if (i != 3)
            return 0;
        uv_kill(uv_os_getpid(), SIGINT);
        while (!sim_sweep_point_stopping(pt))
            uv_sleep(1);
        uv_kill(uv_os_getpid(), SIGINT);
    } else if (i == 1) {
        while (!sim_sweep_point_stopping(pt))
            uv_sleep(1);
        return -1;
    } else if (i != 2) {
        return 0;
    }
    while (!atomic_load(&release))
        uv_sleep(1);
    atomic_fetch_add(&finished_after_release, 1);
    return -1;
}

/* A point past its timeout is asked to stop; one that does not stop is
 * abandoned and the sweep goes on without it. */
TEST(sweep_timeout_abandons_stuck_point)
{
    unsigned char st[6];
    struct sim_sweep_opts o = {.jobs = 2, .timeout = 0.05, .release = on_release};
    atomic_store(&release, false);
    atomic_store(&interrupt, false);
    atomic_store(&finished_after_release, 0);
    atomic_store(&released, 0);
    ASSERT_EQ(sim_sweep_run(6, run_ignoring_stop, NULL, &o, st), SIM_EPROC);
    ASSERT_EQ(st[0], SIM_SWEEP_DONE);
    ASSERT_EQ(st[1], SIM_SWEEP_TIMED_OUT);
    ASSERT_EQ(st[2], SIM_SWEEP_TIMEOUT_ABANDONED);
    ASSERT_TRUE(sim_sweep_abandoned(st[2]));
    for (size_t i = 3; i < 6; i++)
        ASSERT_EQ(st[i], SIM_SWEEP_DONE);
    /* the abandoned thread still runs, and may end later on its own */
    /* released by the abandoned thread, once it ends, not before */
    ASSERT_EQ(atomic_load(&released), 0);
    atomic_store(&release, true);
    while (atomic_load(&released) < 1)
        uv_sleep(1);
    ASSERT_EQ(atomic_load(&finished_after_release), 1);
}

/* A second SIGINT abandons the point that did not stop, at once. */
TEST(sweep_second_sigint_abandons)
{
    unsigned char st[6];
    struct sim_sweep_opts o = {.jobs = 1, .catch_sigint = true, .release = on_release};
    atomic_store(&release, false);
    atomic_store(&interrupt, true);
    atomic_store(&finished_after_release, 0);
    atomic_store(&released, 0);
    ASSERT_EQ(sim_sweep_run(6, run_ignoring_stop, NULL, &o, st), SIM_STOPPED);
    for (size_t i = 0; i < 3; i++)
        ASSERT_EQ(st[i], SIM_SWEEP_DONE);
    ASSERT_EQ(st[3], SIM_SWEEP_STOP_ABANDONED);
    ASSERT_EQ(st[4], SIM_SWEEP_NOT_RUN);
    ASSERT_EQ(st[5], SIM_SWEEP_NOT_RUN);
    struct sigaction sa;
    ASSERT_EQ(sigaction(SIGINT, NULL, &sa), 0);
    ASSERT_TRUE(sa.sa_handler == SIG_DFL);
    /* released by the abandoned thread, once it ends, not before */
    ASSERT_EQ(atomic_load(&released), 0);
    atomic_store(&release, true);
    while (atomic_load(&released) < 1)
        uv_sleep(1);
    ASSERT_EQ(atomic_load(&finished_after_release), 1);
}

TEST_MAIN(sweep_results_in_input_order,
          sweep_stop_from_progress_keeps_finished,
          sweep_stop_reaches_running_point, sweep_sigint,
          sweep_failed_point_isolated, sweep_on_caller_loop,
          sweep_timeout_abandons_stuck_point, sweep_second_sigint_abandons)
