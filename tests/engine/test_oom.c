/* test_oom.c — allocation failure in the kernel: every allocation of a
 * scenario that uses all of it (threads past the run queue's first size,
 * methods, events with many waiters, fifos, signals, ports, delta and timed
 * notifications spread over the timed queue's wheel, radix heap and side
 * heap) fails in turn (failalloc.h). Each run must end in a correct result
 * or an "out of memory" error, never an abort, a crash or (under ASan or
 * valgrind) a leak. A spawn that fails is skipped and the run goes on, as
 * a script that catches the error would. */
#include "failalloc.h"
#include "sim.h"
#include "test.h"

#define NTHREADS 80 /* past the run queue's first 64 */
#define NEVENTS 4
#define ROUNDS 12

struct scen {
    struct sim_fifo *fifo;
    struct sim_event *ev[NEVENTS];
    struct sim_signal *sig;
    int spawned, finished, consumed, method_runs;
    uint64_t sum_written, sum_read;
};

static void producer(struct sim *s, void *arg)
{
    struct scen *c = arg;
    for (uint64_t i = 1; i <= ROUNDS * 4; i++) {
        if (sim_fifo_write(c->fifo, &i) < 0)
            return;
        c->sum_written += i;
        int v = (int)i;
        sim_signal_write(c->sig, &v);
        if (sim_notify_at(c->ev[i % NEVENTS], (i % 5) * SIM_NS) < 0)
            return;
    }
}

static void consumer(struct sim *s, void *arg)
{
    struct scen *c = arg;
    for (int i = 0; i < ROUNDS * 4; i++) {
        uint64_t v;
        if (sim_fifo_read(c->fifo, &v) < 0)
            return;
        c->sum_read += v;
        c->consumed++;
    }
}

/* Waits of many magnitudes: the wheel, the radix heap past it, and the
 * side heap for times earlier than the radix heap's floor. */
static void sleeper(struct sim *s, void *arg)
{
    struct scen *c = arg;
    uint64_t x = (uint64_t)(uintptr_t)sim_current(s);
    for (int i = 0; i < ROUNDS; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        sim_time d = (sim_time)((x >> 33) % 1000) << ((x >> 20) % 40);
        if (i % 3 == 0) {
            if (sim_wait_any(s, c->ev, NEVENTS, d) < -1)
                return;
        } else if (sim_wait(s, d) < 0) {
            return;
        }
    }
    c->finished++;
}

static void watcher(struct sim *s, void *arg)
{
    struct scen *c = arg;
    c->method_runs++;
    if (c->method_runs % 4 == 0)
        sim_next_trigger(s, 3 * SIM_NS);
}

/* One run of the scenario: 0 with a correct result, or a negative code
 * with an "out of memory" message. Frees everything either way. */
static int run_failures; /* runs that sim_run ended with SIM_ENOMEM */

static int scenario(void *ud)
{
    const char **why = ud;
    static char msg[512];
    *why = "";
    struct sim *s = sim_new(NULL);
    if (!s)
        return SIM_ENOMEM;
    struct scen c = {0};
    int rc = 0;
    c.fifo = sim_fifo_new(s, "fifo", sizeof(uint64_t), 3);
    c.sig = sim_signal_new(s, "sig", sizeof(int));
    for (int i = 0; i < NEVENTS; i++)
        if (!(c.ev[i] = sim_event_new(s, "ev")))
            rc = SIM_ENOMEM;
    struct sim_port *out = sim_port_new(s, "a.out", SIM_PORT_OUT, "t", 0, 1);
    struct sim_port *in = sim_port_new(s, "b.in", SIM_PORT_IN, "t", 0, 1);
    if (!c.fifo || !c.sig || !out || !in || rc < 0)
        goto built;
    if ((rc = sim_port_bind(out, in)) < 0)
        goto built;
    struct sim_proc *m = sim_method(s, "watcher", watcher, &c, false);
    if (!m || (rc = sim_sensitive(m, sim_signal_changed_event(c.sig))) < 0) {
        rc = SIM_ENOMEM;
        goto built;
    }
    if (!sim_thread(s, "producer", producer, &c, 0) ||
        !sim_thread(s, "consumer", consumer, &c, 0)) {
        rc = SIM_ENOMEM;
        goto built;
    }
    /* a spawn that fails is skipped: the run goes on without it */
    for (int i = 0; i < NTHREADS; i++)
        if (sim_thread(s, "sleeper", sleeper, &c, 16384))
            c.spawned++;
    rc = sim_run(s, SIM_FOREVER);
    run_failures += rc == SIM_ENOMEM;
    if (rc == SIM_DONE &&
        (c.finished != c.spawned || c.consumed != ROUNDS * 4 ||
         c.sum_read != c.sum_written || c.method_runs == 0)) {
        snprintf(msg, sizeof msg, "done but wrong: %d/%d sleepers, %d read",
                 c.finished, c.spawned, c.consumed);
        *why = msg;
        sim_free(s);
        return 1;
    }
built:
    snprintf(msg, sizeof msg, "%s", sim_errmsg(s));
    *why = msg;
    sim_free(s);
    return rc;
}

TEST(scenario_without_failures)
{
    const char *why;
    failalloc_arm(0);
    ASSERT_EQ(scenario(&why), SIM_DONE);
}

TEST(every_allocation_fails_in_turn)
{
    unsigned long n;
    int errors = 0;
    for (n = 1;; n++) {
        const char *why;
        bool fired;
        int rc = failalloc_run(n, scenario, &why, &fired);
        if (!fired) {
            ASSERT_EQ(rc, SIM_DONE);
            break;
        }
        if (rc == 1)
            TEST__FAIL("allocation %lu failed: %s", n, why);
        if (rc < 0) {
            errors++;
            if (rc != SIM_ENOMEM)
                TEST__FAIL("allocation %lu failed: code %d: %s", n, rc, why);
            if (n > 1) /* sim_new itself reports by returning NULL */
                ASSERT_CONTAINS(why, "out of memory");
        }
    }
    printf("note: %lu allocations failed in turn, %d reported as errors, "
           "%d of them by a running simulation\n", n - 1, errors,
           run_failures);
    ASSERT_TRUE(n > 200 && run_failures > 0);
}

/* A binding that cannot get memory on one side binds neither side. */
TEST(failed_bind_binds_neither)
{
    struct sim *s = sim_new(NULL);
    struct sim_port *a = sim_port_new(s, "a.out", SIM_PORT_OUT, "t", 0, 2);
    struct sim_port *b = sim_port_new(s, "b.in", SIM_PORT_IN, "t", 0, 1);
    struct sim_port *c = sim_port_new(s, "c.in", SIM_PORT_IN, "t", 0, 1);
    ASSERT_TRUE(a && b && c);
    ASSERT_EQ(sim_port_bind(a, c), 0); /* a has room for more peers now */
    failalloc_arm(1);                  /* b's first peer array */
    int rc = sim_port_bind(a, b);
    bool fired = failalloc_fired();
    failalloc_arm(0);
    ASSERT_TRUE(fired);
    ASSERT_EQ(rc, SIM_ENOMEM);
    ASSERT_EQ(sim_port_bound_count(a), 1);
    ASSERT_EQ(sim_port_bound_count(b), 0);
    ASSERT_EQ(sim_port_bind(a, b), 0); /* and it can be retried */
    ASSERT_EQ(sim_port_bound_count(b), 1);
    sim_free(s);
}

TEST_MAIN(scenario_without_failures, every_allocation_fails_in_turn,
          failed_bind_binds_neither)
