/* test_sim_uv.c — tests of the batched libuv driver (sim_run_uv) */
#include <signal.h>
#include <uv.h>

#include "sim.h"
#include "sim_uv.h"
#include "test.h"

/* A small model mixing timed waits, a fifo pair and a method process, so
 * that batches end in every phase. */
struct model {
    struct sim_fifo *a2b, *b2a;
    struct sim_event *tick;
    int sum;
    int method_runs;
};

static void m_timed(struct sim *s, void *arg)
{
    for (int k = 0; k < 50; k++) {
        sim_wait(s, (sim_time)(3 + (uintptr_t)arg) * SIM_NS);
    }
}

static void m_ping(struct sim *s, void *arg)
{
    struct model *m = arg;
    for (int k = 0; k < 40; k++) {
        int v;
        sim_fifo_write(m->a2b, &k);
        sim_fifo_read(m->b2a, &v);
        m->sum += v;
        sim_wait(s, 2 * SIM_NS);
        sim_notify(m->tick);
    }
}

static void m_pong(struct sim *s, void *arg)
{
    struct model *m = arg;
    for (int k = 0; k < 40; k++) {
        int v;
        sim_fifo_read(m->a2b, &v);
        v *= 2;
        sim_fifo_write(m->b2a, &v);
    }
}

static void m_method(struct sim *s, void *arg)
{
    struct model *m = arg;
    m->method_runs++;
}

static struct sim *model_new(struct model *m)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    if (!s)
        return NULL;
    memset(m, 0, sizeof *m);
    m->a2b = sim_fifo_new(s, "a2b", sizeof(int), 1);
    if (!m->a2b)
        return NULL;
    m->b2a = sim_fifo_new(s, "b2a", sizeof(int), 1);
    if (!m->b2a)
        return NULL;
    m->tick = sim_event_new(s, "tick");
    if (!m->tick)
        return NULL;
    for (uintptr_t i = 0; i < 3; i++)
        if (!sim_thread(s, "timed", m_timed, (void *)i, 0))
            return NULL;
    if (!sim_thread(s, "ping", m_ping, m, 0) ||
        !sim_thread(s, "pong", m_pong, m, 0))
        return NULL;
    struct sim_proc *p = sim_method(s, "method", m_method, m, true);
    if (!p || sim_sensitive(p, m->tick) < 0)
        return NULL;
    return s;
}

/* A loop with its handles on the heap, so that the harness can close it
 * after a test stops early (test.h, T_OWN). */
struct uvbox {
    uv_loop_t loop;
    uv_check_t check;
    uv_timer_t timer;
};

static void close_handle(uv_handle_t *h, void *unused)
{
    (void)unused;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void uvbox_free(struct uvbox *b)
{
    uv_walk(&b->loop, close_handle, NULL);
    uv_run(&b->loop, UV_RUN_DEFAULT);
    uv_loop_close(&b->loop);
    free(b);
}

static struct uvbox *uvbox_new(void)
{
    struct uvbox *b = calloc(1, sizeof *b);
    if (b && uv_loop_init(&b->loop) != 0) {
        free(b);
        return NULL;
    }
    return b;
}

static int check_calls;
static void count_check(uv_check_t *h) { check_calls++; }

TEST(uv_matches_sim_run)
{
    struct model m1, m2;
    struct sim *ref = model_new(&m1);
    ASSERT_TRUE(ref);
    ASSERT_EQ(sim_run(ref, SIM_FOREVER), SIM_DONE);

    struct uvbox *box = T_OWN(uvbox_new(), uvbox_free);
    ASSERT_TRUE(box);
    uv_check_init(&box->loop, &box->check);
    uv_check_start(&box->check, count_check);
    check_calls = 0;
    struct sim *s = model_new(&m2);
    ASSERT_TRUE(s);
    ASSERT_EQ(sim_run_uv(s, &box->loop, SIM_FOREVER, 7, 0), SIM_DONE);
    /* One loop iteration per batch: the idle callback ran many times. */
    ASSERT_TRUE(check_calls > 10);

    struct sim_stats a, b;
    sim_get_stats(ref, &a);
    sim_get_stats(s, &b);
    ASSERT_U64_EQ(sim_now(s), sim_now(ref));
    ASSERT_U64_EQ(b.activations, a.activations);
    ASSERT_U64_EQ(b.timed_events, a.timed_events);
    ASSERT_U64_EQ(b.deltas, a.deltas);
    /* Not switches: the kernel switches thread to thread directly, and a
     * batch boundary returns to the scheduler in between. */
    ASSERT_U64_EQ(b.notifications, a.notifications);
    ASSERT_EQ(m2.sum, m1.sum);
    ASSERT_EQ(m2.method_runs, m1.method_runs);
    ASSERT_EQ(m2.method_runs, 40);
    ASSERT_U64_EQ(sim_now(s), 250 * SIM_NS); /* 50 waits of 5 ns */

    T_FREE(sim_free, ref);
    T_FREE(sim_free, s);
    T_FREE(uvbox_free, box);
}

TEST(uv_private_loop_and_until)
{
    struct model m;
    struct sim *s = model_new(&m);
    ASSERT_TRUE(s);
    ASSERT_EQ(sim_run_uv(s, NULL, 40 * SIM_NS, 3, 0), SIM_UNTIL);
    ASSERT_U64_EQ(sim_now(s), 40 * SIM_NS);
    ASSERT_EQ(sim_run_uv(s, NULL, SIM_FOREVER, 0, 0), SIM_DONE);
    ASSERT_U64_EQ(sim_now(s), 250 * SIM_NS);
    T_FREE(sim_free, s);
}

static void bump_timer(uv_timer_t *t) { (*(int *)t->data)++; }

/* A repeating timer of the caller keeps the loop alive; the driver must
 * return anyway when the simulation ends. */
TEST(uv_shared_loop_with_timer)
{
    static int fired;
    fired = 0;
    struct uvbox *box = T_OWN(uvbox_new(), uvbox_free);
    ASSERT_TRUE(box);
    uv_timer_init(&box->loop, &box->timer);
    box->timer.data = &fired;
    uv_timer_start(&box->timer, bump_timer, 0, 1);
    struct model m;
    struct sim *s = model_new(&m);
    ASSERT_TRUE(s);
    ASSERT_EQ(sim_run_uv(s, &box->loop, SIM_FOREVER, 5, SIM_UV_SIGINT),
              SIM_DONE);
    ASSERT_U64_EQ(sim_now(s), 250 * SIM_NS);
    T_FREE(sim_free, s);
    T_FREE(uvbox_free, box);
}

/* Raises SIGINT at 100 ns, then keeps going for ever. */
static void forever_raise(struct sim *s, void *arg)
{
    for (;;) {
        sim_wait(s, SIM_NS);
        if (sim_now(s) == 100 * SIM_NS)
            uv_kill(uv_os_getpid(), SIGINT);
    }
}

TEST(uv_sigint_stops_cleanly)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct sim_proc *p = sim_thread(s, "forever", forever_raise, NULL, 0);
    ASSERT_TRUE(p);
    sim_proc_set_daemon(p, true);
    /* The signal is seen by the loop right after the batch that raised it,
     * so the stop comes within one batch (64 waits) of 100 ns. */
    ASSERT_EQ(sim_run_uv(s, NULL, SIM_FOREVER, 64, SIM_UV_SIGINT),
              SIM_STOPPED);
    ASSERT_TRUE(sim_now(s) >= 100 * SIM_NS);
    ASSERT_TRUE(sim_now(s) <= 170 * SIM_NS);
    /* The handler is gone again: SIGINT has its default action. */
    struct sigaction sa;
    ASSERT_EQ(sigaction(SIGINT, NULL, &sa), 0);
    ASSERT_TRUE(sa.sa_handler == SIG_DFL);
    /* A stopped simulation can be resumed. */
    ASSERT_EQ(sim_run(s, 1000 * SIM_NS), SIM_UNTIL);
    ASSERT_U64_EQ(sim_now(s), 1000 * SIM_NS);
    T_FREE(sim_free, s);
}

static void fails_at_10(struct sim *s, void *arg)
{
    sim_wait(s, 10 * SIM_NS);
    sim_fail(s, "broken at %d ns", 10);
}

TEST(uv_process_failure)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_TRUE(sim_thread(s, "bad", fails_at_10, NULL, 0));
    ASSERT_EQ(sim_run_uv(s, NULL, SIM_FOREVER, 1, 0), SIM_EPROC);
    ASSERT_CONTAINS(sim_errmsg(s), "broken at 10 ns");
    T_FREE(sim_free, s);
}

TEST_MAIN(uv_matches_sim_run, uv_private_loop_and_until,
          uv_shared_loop_with_timer, uv_sigint_stops_cleanly,
          uv_process_failure)
