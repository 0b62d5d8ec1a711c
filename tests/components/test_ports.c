/* test_ports.c — the PE units as modules with typed ports (decision 0027):
 * one test per port interface, each calling through the bound interface
 * and checking values and time against the unit's own closed form; the
 * binding errors (unbound, mis-typed, over-bound, wrong direction) with
 * both ends named; every port of a built system bound */
#include <stdlib.h>
#include <string.h>

#include "kb_port.h"
#include "system.h"
#include "test.h"
#include "topology_schema.h"

#define TOPO_DEFAULTS KBSIM_SOURCE_DIR "/configs/topology.yaml"

struct fixture {
    struct sim *s;
    struct kb_system *sys;
    struct kb_pe *pe0, *pe1;
    char err[256];
};

static int open_sys(struct fixture *t)
{
    struct kb_topology_cfg cfg;
    struct kb_config_errors errs;
    kb_config_errors_init(&errs);
    struct kb_config_src src = {.defaults_path = TOPO_DEFAULTS, .user_name = "user.yaml",
                                .user_text = "{sips: {count: 1}}"};
    int rc = kb_topo_cfg_load(&cfg, &src, &errs);
    kb_config_errors_print(&errs, stderr);
    kb_config_errors_release(&errs);
    if (rc < 0 || !(t->s = T_OWN(sim_new(NULL), sim_free)))
        return 0;
    t->sys = T_OWN(kb_system_new(t->s, &cfg, NULL, t->err, sizeof t->err), kb_system_free);
    if (!t->sys)
        return 0;
    t->pe0 = kb_system_pe_units(t->sys, 0);
    t->pe1 = kb_system_pe_units(t->sys, 1);
    return t->pe0 && t->pe1;
}

static void close_sys(struct fixture *t)
{
    T_FREE(kb_system_free, t->sys);
    T_FREE(sim_free, t->s);
}

/* A thread running fn(arg) and noting the time it took. */
struct job {
    void (*fn)(struct job *j);
    struct fixture *t;
    sim_time took;
    int rc;
};

static void job_thread(struct sim *s, void *arg)
{
    struct job *j = arg;
    sim_time t0 = sim_now(s);
    j->fn(j);
    j->took = sim_now(s) - t0;
}

static int run_job(struct fixture *t, struct job *j)
{
    j->t = t;
    if (!sim_thread(t->s, "job", job_thread, j, 0))
        return SIM_ENOMEM;
    return sim_run(t->s, SIM_FOREVER);
}

/* ---- kb_mem_if: the IPCQ's buffer port ------------------------------------ */

static void mem_access(struct job *j)
{
    const struct kb_mem_if *m = sim_port_peer_iface(kb_ipcq_port(j->t->pe0->ipcq, "buf"), 0);
    j->rc = m->access(m->ctx, 4096, 1000, false);
}

TEST(mem_if)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t));
    const struct kb_mem_if *m = sim_port_peer_iface(kb_ipcq_port(t.pe0->ipcq, "buf"), 0);
    ASSERT_TRUE(m);
    /* ipcq.buffer_kind tcm: the PE's own TCM, at the PE's node */
    ASSERT_TRUE(m->ctx == t.pe0->tcm && m->bank == t.pe0->tcm);
    ASSERT_EQ(m->node, t.pe0->node);
    uint64_t a, b;
    ASSERT_OK(m->alloc(m->ctx, 100, 64, &a));
    ASSERT_OK(kb_mem_alloc(t.pe0->tcm, 100, 64, &b));
    ASSERT_U64_EQ(b, a + 128); /* one allocator behind both */
    ASSERT_OK(m->write(m->ctx, a, "ports", 6));
    char out[6];
    ASSERT_OK(kb_mem_read(t.pe0->tcm, a, out, 6));
    ASSERT_STREQ(out, "ports");
    ASSERT_OK(m->read(m->ctx, a, out, 6));
    ASSERT_STREQ(out, "ports");
    ASSERT_EQ(m->write(m->ctx, kb_mem_params(t.pe0->tcm)->capacity, "x", 1), SIM_EINVAL);
    ASSERT_CONTAINS(m->errmsg(m->ctx), "tcm of 'sip0.cube0.pe0'");
    ASSERT_OK(m->dealloc(m->ctx, a));
    struct job j = {.fn = mem_access};
    ASSERT_EQ(run_job(&t, &j), SIM_DONE);
    ASSERT_OK(j.rc);
    ASSERT_U64_EQ(j.took, kb_mem_time(t.pe0->tcm, 4096, 1000));
    close_sys(&t);
}

/* ---- kb_dma_if: the CPU's and the IPCQ's dma ports ----------------------- */

static struct kb_dma_end tcm_end(struct kb_pe *pe, uint64_t addr)
{
    struct kb_dma_end e = {kb_pe_mem(pe, KB_MEM_TCM, NULL), addr, -1};
    kb_pe_mem(pe, KB_MEM_TCM, &e.node);
    return e;
}

static void dma_copy(struct job *j)
{
    const struct kb_dma_if *d = kb_cpu_dma(j->t->pe0->cpu);
    j->rc = d->copy(d->ctx, KB_DMA_WRITE, tcm_end(j->t->pe0, 0), tcm_end(j->t->pe1, 8192), 4096);
}

TEST(dma_if)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t));
    const struct kb_dma_if *d = kb_cpu_dma(t.pe0->cpu);
    ASSERT_TRUE(d && d->ctx == t.pe0->dma);
    /* the IPCQ is bound to the same export */
    ASSERT_TRUE(sim_port_peer_iface(kb_ipcq_port(t.pe0->ipcq, "dma"), 0) == d);
    ASSERT_EQ(d->node, t.pe0->node);
    ASSERT_EQ(d->node, kb_dma_node(t.pe0->dma));
    ASSERT_TRUE(d->fabric == kb_system_fabric(t.sys) && !d->timing_only);
    const int *links;
    int n = d->route(d->ctx, t.pe0->node, t.pe1->node, &links);
    ASSERT_TRUE(n > 0);
    ASSERT_OK(kb_mem_write(t.pe0->tcm, 0, "through a port", 15));
    sim_time want = d->time(d->ctx, tcm_end(t.pe0, 0), tcm_end(t.pe1, 8192), 4096);
    ASSERT_U64_EQ(want, kb_dma_time(t.pe0->dma, tcm_end(t.pe0, 0), tcm_end(t.pe1, 8192), 4096));
    struct job j = {.fn = dma_copy};
    ASSERT_EQ(run_job(&t, &j), SIM_DONE);
    ASSERT_OK(j.rc);
    ASSERT_U64_EQ(j.took, want); /* an idle system: the closed form */
    char out[15];
    ASSERT_OK(kb_mem_read(t.pe1->tcm, 8192, out, 15));
    ASSERT_STREQ(out, "through a port");
    struct kb_dma_end bad = tcm_end(t.pe1, kb_mem_params(t.pe1->tcm)->capacity);
    ASSERT_TRUE(d->copy_async(d->ctx, KB_DMA_READ, bad, tcm_end(t.pe0, 0), 64, NULL, NULL,
                              NULL) < 0);
    ASSERT_CONTAINS(d->errmsg(d->ctx), "dma of 'sip0.cube0.pe0'");
    close_sys(&t);
}

/* ---- kb_math_if and kb_gemm_if: the CPU's math and gemm ports ------------ */

static float va[64], vb[64], vo[64];

static void math_add(struct job *j)
{
    const struct kb_math_if *m = kb_cpu_math(j->t->pe0->cpu);
    j->rc = m->run(m->ctx, KB_MATH_ADD, va, vb, NULL, vo, 64, KB_DTYPE_F32);
}

TEST(math_if)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t));
    const struct kb_math_if *m = kb_cpu_math(t.pe0->cpu);
    ASSERT_TRUE(m && m->ctx == t.pe0->math);
    ASSERT_TRUE(m->params(m->ctx) == kb_math_params(t.pe0->math));
    for (int i = 0; i < 64; i++)
        va[i] = (float)i, vb[i] = 0.5f * (float)i;
    struct job j = {.fn = math_add};
    ASSERT_EQ(run_job(&t, &j), SIM_DONE);
    ASSERT_OK(j.rc);
    for (int i = 0; i < 64; i++)
        ASSERT_TRUE(vo[i] == 1.5f * (float)i);
    ASSERT_U64_EQ(j.took, kb_math_time(m->params(m->ctx), KB_MATH_ADD, 64, KB_DTYPE_F32));
    ASSERT_EQ(m->run(m->ctx, KB_MATH_ADD, va, vb, NULL, vo, 64, KB_DTYPE_F32), SIM_EPERM);
    ASSERT_CONTAINS(m->errmsg(m->ctx), "outside a process");
    close_sys(&t);
}

static void gemm_run(struct job *j)
{
    const struct kb_gemm_if *g = kb_cpu_gemm(j->t->pe0->cpu);
    /* [1 2; 3 4] x [5 6; 7 8] */
    j->rc = g->run(g->ctx, 2, 2, 2, va, 2, vb, 2, vo, 2, KB_DTYPE_F32, KB_DTYPE_F32, false);
}

TEST(gemm_if)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t));
    const struct kb_gemm_if *g = kb_cpu_gemm(t.pe0->cpu);
    ASSERT_TRUE(g && g->ctx == t.pe0->gemm);
    const struct kb_gemm_params *p = g->params(g->ctx);
    ASSERT_TRUE(p == kb_gemm_params(t.pe0->gemm));
    memcpy(va, (float[]){1, 2, 3, 4}, 4 * sizeof(float));
    memcpy(vb, (float[]){5, 6, 7, 8}, 4 * sizeof(float));
    struct job j = {.fn = gemm_run};
    ASSERT_EQ(run_job(&t, &j), SIM_DONE);
    ASSERT_OK(j.rc);
    ASSERT_TRUE(vo[0] == 19 && vo[1] == 22 && vo[2] == 43 && vo[3] == 50);
    ASSERT_U64_EQ(j.took, kb_gemm_time(p, 2, 2, 2));
    /* one tile, no wait: its cycles */
    float c[4] = {0};
    ASSERT_EQ(g->tile(g->ctx, va, 2, vb, 2, c, 2, 2, 2, 2, KB_DTYPE_F32, false),
              (int64_t)kb_gemm_tile_cycles(p, 2, 2, 2));
    ASSERT_TRUE(c[3] == 50);
    close_sys(&t);
}

/* ---- kb_ipcq_if: the CPU's ipcq port --------------------------------------- */

static int64_t got;
static char rbuf[32];

static void ipcq_send(struct job *j)
{
    const struct kb_ipcq_if *q = kb_cpu_ipcq(j->t->pe0->cpu);
    struct kb_ipcq_meta meta = {7, 0, 0};
    j->rc = q->send(q->ctx, "E", "ring", 5, &meta);
}

static void ipcq_recv(struct job *j)
{
    const struct kb_ipcq_if *q = kb_cpu_ipcq(j->t->pe1->cpu);
    struct kb_ipcq_meta meta;
    got = q->recv(q->ctx, "W", rbuf, sizeof rbuf, &meta);
    j->rc = meta.tag == 7 ? 0 : -1;
}

TEST(ipcq_if)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t));
    const struct kb_ipcq_if *q0 = kb_cpu_ipcq(t.pe0->cpu), *q1 = kb_cpu_ipcq(t.pe1->cpu);
    ASSERT_TRUE(q0 && q0->ctx == t.pe0->ipcq && q1->ctx == t.pe1->ipcq);
    ASSERT_TRUE(!q0->wired(q0->ctx, "E", true));
    ASSERT_OK(kb_ipcq_wire(t.pe0->ipcq, "E", t.pe1->ipcq, "W"));
    ASSERT_TRUE(q0->wired(q0->ctx, "E", true) && q1->wired(q1->ctx, "W", false));
    uint64_t bytes;
    ASSERT_EQ(q1->probe(q1->ctx, "W", &bytes, NULL), 0);
    struct job s = {.fn = ipcq_send}, r = {.fn = ipcq_recv};
    s.t = r.t = &t;
    ASSERT_TRUE(sim_thread(t.s, "send", job_thread, &s, 0));
    ASSERT_TRUE(sim_thread(t.s, "recv", job_thread, &r, 0));
    ASSERT_EQ(sim_run(t.s, SIM_FOREVER), SIM_DONE);
    ASSERT_OK(s.rc);
    ASSERT_OK(r.rc);
    ASSERT_EQ(got, 5);
    ASSERT_STREQ(rbuf, "ring");
    ASSERT_EQ(q0->send(q0->ctx, "N", "x", 1, NULL), SIM_EINVAL);
    ASSERT_CONTAINS(q0->errmsg(q0->ctx), "not wired");
    /* the by-index operations (decision 0045): the same directions */
    int e = q0->dir(q0->ctx, "E"), w = q1->dir(q1->ctx, "W");
    ASSERT_TRUE(e >= 0 && w >= 0 && q0->dir(q0->ctx, "N") == -1);
    ASSERT_TRUE(q0->wired_at(q0->ctx, e, true) && !q0->wired_at(q0->ctx, e, false));
    ASSERT_TRUE(q1->wired_at(q1->ctx, w, false) && !q0->wired_at(q0->ctx, -1, true));
    ASSERT_EQ(q0->send_at(q0->ctx, -1, "x", 1, NULL), SIM_EINVAL);
    ASSERT_CONTAINS(q0->errmsg(q0->ctx), "not wired");
    close_sys(&t);
}

/* ---- kb_cpu_if: a module of the test's own bound to the CPU's export ----- */

static const struct kb_cpu_if *user_cpu; /* cached on bind, as units do */

static void user_bound(void *ud, struct sim_port *p)
{
    (void)ud;
    user_cpu = sim_port_peer_iface(p, 0);
}

static void cpu_dispatch(struct job *j)
{
    (void)j;
    for (int i = 0; i < 3; i++)
        j->rc |= user_cpu->dispatch(user_cpu->ctx);
}

TEST(cpu_if)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t));
    struct sim_port *p = kb_port_new(t.s, "host", "kernel", "cpu", SIM_PORT_OUT, KB_CPU_IF, 1, 1,
                                     t.err, sizeof t.err);
    ASSERT_TRUE(p);
    ASSERT_STREQ(sim_port_name(p), "host.kernel.cpu");
    /* without an owner (a Lua module "unit"): "unit.port" */
    struct sim_port *q = kb_port_new(t.s, NULL, "probe", "cpu", SIM_PORT_OUT, KB_CPU_IF, 0, 1,
                                     t.err, sizeof t.err);
    ASSERT_TRUE(q);
    ASSERT_STREQ(sim_port_name(q), "probe.cpu");
    q = kb_port_new(t.s, "", "probe2", "cpu", SIM_PORT_OUT, KB_CPU_IF, 0, 1, t.err, sizeof t.err);
    ASSERT_TRUE(q);
    ASSERT_STREQ(sim_port_name(q), "probe2.cpu");
    sim_port_on_bind(p, user_bound, NULL);
    ASSERT_OK(kb_port_bind(t.s, p, kb_cpu_port(t.pe0->cpu), t.err, sizeof t.err));
    ASSERT_TRUE(user_cpu && user_cpu->ctx == t.pe0->cpu);
    struct job j = {.fn = cpu_dispatch};
    ASSERT_EQ(run_job(&t, &j), SIM_DONE);
    ASSERT_OK(j.rc);
    ASSERT_U64_EQ(j.took, 3 * user_cpu->dispatch_time(user_cpu->ctx));
    ASSERT_U64_EQ(j.took, 3 * kb_cpu_dispatch_time(t.pe0->cpu));
    struct kb_cpu_stats st;
    kb_cpu_get_stats(t.pe0->cpu, &st);
    ASSERT_U64_EQ(st.ops, 3);
    close_sys(&t);
}

/* ---- binding errors -------------------------------------------------------- */

TEST(bind_errors)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t));
    /* mis-typed: a gemm user on the math unit's export */
    struct sim_port *g = kb_port_new(t.s, "host", "user", "math", SIM_PORT_OUT, KB_GEMM_IF, 1, 1,
                                     t.err, sizeof t.err);
    ASSERT_TRUE(g);
    ASSERT_EQ(kb_port_bind(t.s, g, kb_math_port(t.pe0->math), t.err, sizeof t.err), SIM_EBIND);
    ASSERT_STREQ(t.err, "cannot bind 'host.user.math' (type 'kb_gemm_if') to "
                        "'sip0.cube0.pe0.math.in' (type 'kb_math_if'): interface types differ");
    /* over-bound: the math unit takes one issuer, its CPU */
    struct sim_port *m = kb_port_new(t.s, "host", "user2", "math", SIM_PORT_OUT, KB_MATH_IF, 1,
                                     1, t.err, sizeof t.err);
    ASSERT_TRUE(m);
    ASSERT_EQ(kb_port_bind(t.s, m, kb_math_port(t.pe0->math), t.err, sizeof t.err), SIM_EBIND);
    ASSERT_STREQ(t.err, "cannot bind 'host.user2.math' to 'sip0.cube0.pe0.math.in': "
                        "'sip0.cube0.pe0.math.in' accepts at most 1 binding and has 1");
    /* and a CPU port already bound */
    ASSERT_EQ(kb_port_bind(t.s, kb_cpu_out_port(t.pe0->cpu, KB_CPU_MATH),
                           kb_math_port(t.pe1->math), t.err, sizeof t.err),
              SIM_EBIND);
    ASSERT_CONTAINS(t.err, "'sip0.cube0.pe0.cpu.math' accepts at most 1 binding and has 1");
    /* direction: an export to an export */
    ASSERT_EQ(kb_port_bind(t.s, kb_dma_port(t.pe0->dma), kb_dma_port(t.pe1->dma), t.err,
                           sizeof t.err),
              SIM_EBIND);
    ASSERT_STREQ(t.err, "cannot bind 'sip0.cube0.pe0.dma.in' (in) to 'sip0.cube0.pe1.dma.in' "
                        "(in): directions must be out to in, or inout to inout");
    /* unbound: an IPCQ nobody bound; its wiring says which port, the run
     * does not start and names both of its ports */
    struct kb_ipcq_params ip = {4, 4096, KB_IPCQ_SLEEP, 1, 16}; /* the PEs' rings */
    struct kb_ipcq *q = T_OWN(kb_ipcq_new(t.s, "lone", &ip, t.err, sizeof t.err), kb_ipcq_free);
    ASSERT_TRUE(q);
    ASSERT_EQ(kb_ipcq_wire(q, "E", t.pe0->ipcq, "x"), SIM_EINVAL);
    ASSERT_STREQ(kb_ipcq_errmsg(q), "ipcq of 'lone': port 'lone.ipcq.dma' is unbound");
    ASSERT_OK(kb_port_bind(t.s, kb_ipcq_port(q, "dma"), kb_dma_port(t.pe1->dma), t.err,
                           sizeof t.err));
    ASSERT_EQ(kb_ipcq_wire(q, "E", t.pe0->ipcq, "x"), SIM_EINVAL);
    ASSERT_STREQ(kb_ipcq_errmsg(q), "ipcq of 'lone': port 'lone.ipcq.buf' is unbound");
    ASSERT_EQ(sim_run(t.s, SIM_FOREVER), SIM_EBIND);
    ASSERT_STREQ(sim_errmsg(t.s),
                 "port 'host.user.math' (out, type 'kb_gemm_if') is unbound\n"
                 "port 'host.user2.math' (out, type 'kb_math_if') is unbound\n"
                 "port 'lone.ipcq.buf' (out, type 'kb_mem_if') is unbound");
    T_FREE(kb_ipcq_free, q);
    close_sys(&t);
}

/* ---- a CPU port bound by the builder to another export (decision 0045) ---- */

/* A counting wrapper of a real DMA's interface: what it exports is the
 * real one with copy replaced. */
static struct counting_dma {
    struct kb_dma_if iface;
    const struct kb_dma_if *real;
    int copies;
} cdma;

static int counting_copy(void *ctx, enum kb_dma_class c, struct kb_dma_end src,
                         struct kb_dma_end dst, uint64_t bytes)
{
    struct counting_dma *w = ctx;
    w->copies++;
    return w->real->copy(w->real->ctx, c, src, dst, bytes);
}
static const char *counting_errmsg(void *ctx)
{
    struct counting_dma *w = ctx;
    return w->real->errmsg(w->real->ctx);
}

static struct kb_pe *pe2;
static void swapped_copy(struct job *j)
{
    const struct kb_dma_if *d = kb_cpu_dma(pe2->cpu);
    j->rc = d->copy(d->ctx, KB_DMA_WRITE, tcm_end(pe2, 0), tcm_end(j->t->pe1, 0), 4096);
}

TEST(cpu_port_swapped)
{
    struct fixture t;
    memset(&cdma, 0, sizeof cdma); /* --failalloc runs the case again and again */
    pe2 = NULL;
    ASSERT_TRUE(open_sys(&t));
    /* PE 2's units are not made yet: its builder makes its CPU, binds the
     * CPU's dma port to a counting wrapper of PE 1's DMA and leaves its math
     * port unbound; kb_system_pe_units makes the rest and keeps both */
    pe2 = kb_system_pe(t.sys, 2);
    ASSERT_TRUE(pe2 && !pe2->bound && !pe2->cpu);
    struct kb_pe_params p;
    kb_pe_params_from_cfg(&p, kb_system_config(t.sys));
    ASSERT_TRUE(pe2->cpu = kb_cpu_new(t.s, pe2->name, &p.cpu, t.err, sizeof t.err));
    cdma.real = kb_cpu_dma(t.pe1->cpu);
    cdma.iface = *cdma.real;
    cdma.iface.ctx = &cdma;
    cdma.iface.copy = counting_copy;
    cdma.iface.errmsg = counting_errmsg;
    cdma.iface.copy_async = NULL; /* the CPU issues blocking copies only */
    struct sim_port *w = kb_port_export(t.s, "host", "countdma", KB_DMA_IF, &cdma.iface, 1,
                                        t.err, sizeof t.err);
    ASSERT_TRUE(w);
    ASSERT_OK(kb_port_bind(t.s, kb_cpu_out_port(pe2->cpu, KB_CPU_DMA), w, t.err, sizeof t.err));
    pe2->cpu_unbound |= 1u << KB_CPU_MATH;
    ASSERT_TRUE(kb_system_pe_units(t.sys, 2) == pe2 && pe2->bound);
    ASSERT_TRUE(kb_cpu_dma(pe2->cpu) == &cdma.iface);
    ASSERT_TRUE(kb_cpu_math(pe2->cpu) == NULL); /* left unbound, as asked */
    ASSERT_EQ(sim_port_bound_count(kb_math_port(pe2->math)), 0);
    ASSERT_TRUE(kb_cpu_gemm(pe2->cpu)->ctx == pe2->gemm); /* the rest as usual */
    ASSERT_TRUE(kb_cpu_ipcq(pe2->cpu)->ctx == pe2->ipcq);
    /* PE 2's own DMA still serves its IPCQ */
    const struct kb_dma_if *qd = sim_port_peer_iface(kb_ipcq_port(pe2->ipcq, "dma"), 0);
    ASSERT_TRUE(qd->ctx == pe2->dma);
    ASSERT_OK(kb_mem_write(pe2->tcm, 0, "swapped", 8));
    struct job j = {.fn = swapped_copy};
    ASSERT_EQ(run_job(&t, &j), SIM_DONE);
    ASSERT_OK(j.rc);
    ASSERT_EQ(cdma.copies, 1);
    struct kb_dma_stats st1, st2;
    kb_dma_get_stats(t.pe1->dma, KB_DMA_WRITE, &st1);
    kb_dma_get_stats(pe2->dma, KB_DMA_WRITE, &st2);
    ASSERT_TRUE(st1.transfers == 1 && st2.transfers == 0); /* PE 1's DMA moved it */
    char out[8];
    ASSERT_OK(kb_mem_read(t.pe1->tcm, 0, out, 8));
    ASSERT_STREQ(out, "swapped");
    close_sys(&t);
}

/* ---- a built system: every port it made is bound as it must be ------------ */

TEST(system_ports_bound)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t));
    int ports = 0, bindings = 0;
    for (struct sim_port *p = sim_port_next(t.s, NULL); p; p = sim_port_next(t.s, p)) {
        int mn, mx;
        sim_port_multiplicity(p, &mn, &mx);
        ASSERT_TRUE(sim_port_bound_count(p) >= mn && sim_port_bound_count(p) <= mx);
        if (sim_port_dir(p) == SIM_PORT_OUT)
            bindings += sim_port_bound_count(p);
        ports++;
    }
    /* two PEs: cpu 5, dma 1, math 1, gemm 1, ipcq 3, its TCM's export 1 */
    ASSERT_EQ(ports, 2 * 12);
    ASSERT_EQ(bindings, 2 * 6);
    ASSERT_EQ(sim_run(t.s, SIM_FOREVER), SIM_DONE);
    close_sys(&t);
}

TEST_MAIN(mem_if, dma_if, math_if, gemm_if, ipcq_if, cpu_if, bind_errors, cpu_port_swapped,
          system_ports_bound)
