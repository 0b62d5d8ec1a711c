/* test_pe_cpu.c — PE_CPU dispatch overhead: the formula, op counting,
 * parameter errors and the thread-only rule */
#include "pe_cpu.h"
#include "sim.h"
#include "test.h"

struct run {
    struct kb_cpu *cpu;
    int n;
    int rc;
    sim_time end;
};

static void dispatch_thread(struct sim *s, void *arg)
{
    struct run *r = arg;
    for (int i = 0; i < r->n && r->rc == 0; i++)
        r->rc = kb_cpu_dispatch(r->cpu);
    r->end = sim_now(s);
}

TEST(dispatch_formula)
{
    /* cycles / GHz ns: 4 @ 1 GHz = 4 ns; 4 @ 1.5 GHz = 2.667 ns; 7 @ 2 GHz */
    static const struct {
        uint32_t cycles;
        double ghz;
        sim_time ps;
    } cases[] = {{4, 1.0, 4000}, {4, 1.5, 2667}, {7, 2.0, 3500}, {0, 1.0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sim *s = T_OWN(sim_new(NULL), sim_free);
        ASSERT_TRUE(s);
        struct kb_cpu_params p = {cases[i].cycles, cases[i].ghz};
        struct kb_cpu *c = T_OWN(kb_cpu_new(s, "pe0", &p, NULL, 0), kb_cpu_free);
        ASSERT_TRUE(c);
        ASSERT_TRUE(c != NULL);
        ASSERT_U64_EQ(kb_cpu_dispatch_time(c), cases[i].ps);
        struct run r = {c, 10, 0, 0};
        ASSERT_TRUE(sim_thread(s, "kernel", dispatch_thread, &r, 0));
        ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
        ASSERT_EQ(r.rc, 0);
        ASSERT_U64_EQ(r.end, 10 * cases[i].ps);
        struct kb_cpu_stats st;
        kb_cpu_get_stats(c, &st);
        ASSERT_U64_EQ(st.ops, 10);
        ASSERT_U64_EQ(st.busy_ps, 10 * cases[i].ps);
        T_FREE(kb_cpu_free, c);
        T_FREE(sim_free, s);
    }
}

TEST(bad_clock)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[128] = "";
    struct kb_cpu_params p = {4, 0};
    ASSERT_TRUE(kb_cpu_new(s, "pe3", &p, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "cpu of 'pe3': clock must be > 0 GHz, got 0");
    T_FREE(sim_free, s);
}

TEST(outside_a_thread)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_cpu_params p = {4, 1.0};
    struct kb_cpu *c = T_OWN(kb_cpu_new(s, "pe0", &p, NULL, 0), kb_cpu_free);
    ASSERT_TRUE(c);
    ASSERT_EQ(kb_cpu_dispatch(c), SIM_EPERM);
    struct kb_cpu_stats st;
    kb_cpu_get_stats(c, &st);
    ASSERT_U64_EQ(st.ops, 0);
    T_FREE(kb_cpu_free, c);
    T_FREE(sim_free, s);
}

TEST_MAIN(dispatch_formula, bad_clock, outside_a_thread)
