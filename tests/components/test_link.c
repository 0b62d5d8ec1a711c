/* test_link.c — one kb_link on its own: parameter checks, serialisation
 * rounding, wormhole timing of hand-made messages, counters */
#include <math.h>

#include "kb_port.h"
#include "link.h"
#include "sim.h"
#include "test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct kb_link_params P = {
    .bw_gbps = 256, .latency_ns = 1.7, .overhead_ns = 0, .flit_bytes = 256};

/* A message over `n` links, recording when its last byte arrives. */
struct msg {
    struct kb_link_msg m;
    struct kb_link *path[4];
    uint64_t body[8]; /* 2 words a hop */
    sim_time at;
    int calls;
};

static void msg_done(struct kb_link_msg *m, sim_time at)
{
    struct msg *x = m->ud;
    x->at = at;
    x->calls++;
}

static void msg_init(struct msg *x, struct kb_link **links, uint32_t n,
                     uint64_t bytes, uint32_t flit)
{
    uint64_t nf = (bytes + flit - 1) / flit;
    for (uint32_t j = 0; j < n; j++)
        x->path[j] = links[j];
    x->m = (struct kb_link_msg){.path = x->path,
                                .n_hops = n,
                                .n_flits = nf,
                                .flit_bytes = flit,
                                .last_bytes = (uint32_t)(bytes - (nf - 1) * flit),
                                .body = x->body,
                                .done = msg_done,
                                .ud = x};
    x->at = 0;
    x->calls = 0;
}

TEST(params_are_checked)
{
    char err[256];
    struct kb_link_params p = P;
    ASSERT_EQ(kb_link_params_check(&p, "l", err, sizeof err), 0);
    p.bw_gbps = -4;
    ASSERT_EQ(kb_link_params_check(&p, "sip0.ucie.e", err, sizeof err),
              SIM_EINVAL);
    ASSERT_STREQ(err, "link 'sip0.ucie.e': bandwidth must be a positive "
                 "number of GB/s, got -4");
    p.bw_gbps = NAN;
    ASSERT_EQ(kb_link_params_check(&p, "l", err, sizeof err), SIM_EINVAL);
    ASSERT_CONTAINS(err, "bandwidth");
    p.bw_gbps = INFINITY;
    ASSERT_EQ(kb_link_params_check(&p, "l", err, sizeof err), SIM_EINVAL);
    p = P;
    p.latency_ns = -1;
    ASSERT_EQ(kb_link_params_check(&p, "l", err, sizeof err), SIM_EINVAL);
    ASSERT_STREQ(err, "link 'l': latency must be >= 0 ns, got -1");
    p = P;
    p.overhead_ns = -0.5;
    ASSERT_EQ(kb_link_params_check(&p, "l", err, sizeof err), SIM_EINVAL);
    ASSERT_STREQ(err, "link 'l': overhead must be >= 0 ns, got -0.5");
    p = P;
    p.flit_bytes = 0;
    ASSERT_EQ(kb_link_params_check(&p, "l", err, sizeof err), SIM_EINVAL);
    ASSERT_STREQ(err, "link 'l': flit size must be > 0 bytes, got 0");

    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_TRUE(kb_link_new(s, "bad", &p, err, sizeof err) == NULL);
    ASSERT_CONTAINS(err, "link 'bad'");
    T_FREE(sim_free, s);
}

/* The end of the line: a kb_flit_if export that records what reaches it
 * and forwards each head to the link its route names, as a fabric node
 * does; bound to the `out` of every link of a test (1..1 each). */
struct sink {
    struct kb_flit_if iface;
    struct sim_port *in;
    int heads;
    uint32_t hop;
    sim_time t, now;
};

static int sink_head(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now)
{
    struct sink *k = ctx;
    k->heads++;
    k->hop = hop;
    k->t = t;
    k->now = now;
    const struct kb_flit_if *in = kb_link_in(m->path[hop]);
    return in->head(in->ctx, m, hop, t, now);
}

static void sink_init(struct sink *k, struct sim *s)
{
    memset(k, 0, sizeof *k);
    k->iface = (struct kb_flit_if){k, sink_head, NULL};
    char err[256];
    k->in = kb_port_export(s, NULL, "node", KB_FLIT_IF, &k->iface, KB_PORT_MANY, err,
                           sizeof err);
}

/* Binds l's `out` to the sink; 0 or the bind's error. */
static int to_sink(struct sim *s, struct kb_link *l, struct sink *k)
{
    char err[256];
    return kb_port_bind(s, kb_link_out_port(l), k->in, err, sizeof err);
}

TEST(serialisation_rounds_per_flit)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    struct kb_link_params p = P;
    p.bw_gbps = 128;
    p.latency_ns = 0.1 * 17; /* 17 mm at 0.1 ns/mm */
    struct kb_link *l = T_OWN(kb_link_new(s, "l", &p, err, sizeof err), kb_link_free);
    ASSERT_TRUE(l);
    ASSERT_TRUE(l != NULL);
    ASSERT_U64_EQ(kb_link_ser_ps(l, 256), 2000);
    ASSERT_U64_EQ(kb_link_ser_ps(l, 1), 8);   /* 7.8125 */
    ASSERT_U64_EQ(kb_link_ser_ps(l, 232), 1813); /* 1812.5 */
    ASSERT_U64_EQ(kb_link_ser_ps(l, 0), 0);
    ASSERT_U64_EQ(kb_link_latency_ps(l), 1700);
    ASSERT_U64_EQ(kb_link_overhead_ps(l), 0);
    ASSERT_STREQ(kb_link_name(l), "l");
    T_FREE(kb_link_free, l);
    T_FREE(sim_free, s);
}

TEST(one_hop_worm)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    struct kb_link_params p = P;
    p.overhead_ns = 8;
    struct kb_link *l = T_OWN(kb_link_new(s, "l", &p, err, sizeof err), kb_link_free);
    ASSERT_TRUE(l);
    struct sink k;
    sink_init(&k, s);
    ASSERT_TRUE(k.in);
    ASSERT_EQ(to_sink(s, l, &k), 0);
    struct msg x;
    msg_init(&x, &l, 1, 1000, 256);
    ASSERT_EQ(kb_link_inject(&x.m), 0);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(x.calls, 1);
    /* 8 + 1000/256 + 1.7 ns; flits 1000, 1000, 1000, 906.25 -> 906 ps */
    ASSERT_U64_EQ(x.at, 8000 + 3000 + 906 + 1700);
    struct kb_link_stats st;
    kb_link_get_stats(l, &st);
    ASSERT_U64_EQ(st.bytes, 1000);
    ASSERT_U64_EQ(st.flits, 4);
    ASSERT_U64_EQ(st.messages, 1);
    ASSERT_U64_EQ(st.busy_ps, 3906);
    /* the last activation is the tail starting at 8 + 3 ns */
    ASSERT_U64_EQ(sim_now(s), 11000);
    ASSERT_NEAR(kb_link_utilisation(l, 0), 3906.0 / 11000.0, 1e-12);
    ASSERT_NEAR(kb_link_utilisation(l, 20000), 3906.0 / 20000.0, 1e-12);
    T_FREE(kb_link_free, l);
    T_FREE(sim_free, s);
}

/* A worm's counts are kept from its start (link_impl.h) but show only from
 * its release, when its last flit starts: one 1000-byte worm, overhead
 * 8 ns, its head at 8 ns, its tail at 11 ns (as one_hop_worm). */
TEST(counts_show_from_the_release)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    struct kb_link_params p = P;
    p.overhead_ns = 8;
    struct kb_link *l = T_OWN(kb_link_new(s, "l", &p, err, sizeof err), kb_link_free);
    ASSERT_TRUE(l);
    struct sink k;
    sink_init(&k, s);
    ASSERT_TRUE(k.in);
    ASSERT_EQ(to_sink(s, l, &k), 0);
    struct msg x;
    msg_init(&x, &l, 1, 1000, 256);
    ASSERT_EQ(kb_link_inject(&x.m), 0);
    struct kb_link_stats st;
    ASSERT_EQ(sim_run(s, 10 * SIM_NS), SIM_UNTIL);
    kb_link_get_stats(l, &st);
    ASSERT_U64_EQ(st.messages, 1); /* acquired at 8 ns */
    ASSERT_U64_EQ(st.bytes, 0);
    ASSERT_U64_EQ(st.flits, 0);
    ASSERT_U64_EQ(st.busy_ps, 0);
    ASSERT_NEAR(kb_link_utilisation(l, 0), 0.0, 0);
    ASSERT_EQ(kb_link_backlog(l), 1);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    kb_link_get_stats(l, &st);
    ASSERT_U64_EQ(st.bytes, 1000);
    ASSERT_U64_EQ(st.flits, 4);
    ASSERT_U64_EQ(st.busy_ps, 3906);
    ASSERT_NEAR(kb_link_utilisation(l, 0), 3906.0 / 11000.0, 1e-12);
    ASSERT_EQ(kb_link_backlog(l), 0);
    T_FREE(kb_link_free, l);
    T_FREE(sim_free, s);
}

/* Links whose `out` is kb_link_route_head (a fabric node's export) hand a
 * head on without reading `out`; the worm lands where the closed form
 * says and a hop over an idle link costs one activation: 4 flits of
 * 1 ns over 3 links of 1.7 ns latency, no overhead, the head
 * 2 x (1 + 1.7) ns to the last link, then 4 + 1.7 ns; activations are the
 * 3 heads and the last hop's tail (which calls done). The same worm through
 * the test's sink (a node that forwards by kb_link_in) lands at the same ps. */
TEST(routed_worm_over_idle_links)
{
    for (int routed = 0; routed < 2; routed++) {
        struct sim *s = T_OWN(sim_new(NULL), sim_free);
        ASSERT_TRUE(s);
        char err[256];
        struct kb_link *pl[3];
        for (int i = 0; i < 3; i++) {
            char name[8] = {'l', (char)('0' + i), 0};
            pl[i] = T_OWN(kb_link_new(s, name, &P, err, sizeof err), kb_link_free);
            ASSERT_TRUE(pl[i]);
        }
        struct kb_flit_if route = {NULL, kb_link_route_head, kb_link_route_flit};
        struct sim_port *node = NULL;
        struct sink k;
        if (routed) {
            node = kb_port_export(s, NULL, "node", KB_FLIT_IF, &route, KB_PORT_MANY, err,
                                  sizeof err);
            ASSERT_TRUE(node);
        } else {
            sink_init(&k, s);
            ASSERT_TRUE(k.in);
        }
        for (int i = 0; i < 3; i++)
            ASSERT_EQ(kb_port_bind(s, kb_link_out_port(pl[i]), routed ? node : k.in, err,
                                   sizeof err),
                      0);
        struct msg x;
        msg_init(&x, pl, 3, 4 * 256, 256);
        ASSERT_EQ(kb_link_inject(&x.m), 0);
        ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
        ASSERT_EQ(x.calls, 1);
        ASSERT_U64_EQ(x.at, 2 * (1000 + 1700) + 4 * 1000 + 1700);
        struct sim_stats ss;
        sim_get_stats(s, &ss);
        ASSERT_U64_EQ(ss.activations, 4);
        if (!routed)
            ASSERT_EQ(k.heads, 2);
        for (int i = 0; i < 3; i++) {
            struct kb_link_stats st;
            kb_link_get_stats(pl[i], &st);
            ASSERT_U64_EQ(st.bytes, 1024);
            ASSERT_U64_EQ(st.busy_ps, 4000);
            T_FREE(kb_link_free, pl[i]);
        }
        T_FREE(sim_free, s);
    }
}

/* A pool hands out links in chunks: 64 at a time up to 8192, then 2 MiB
 * chunks of 8192 (link.c); kb_link_pool_at finds each where it was made,
 * each 64-byte aligned, and a link made past the small chunks carries a
 * worm as any other. */
enum { POOL_N = 8192 + 8192 + 5 };
struct pool_owner {
    struct kb_link_kind *k;
    struct kb_link_pool *pool;
    struct kb_link *made[POOL_N];
    size_t n;
};

static void pool_owner_free(struct pool_owner *o)
{
    for (size_t i = 0; i < o->n; i++)
        kb_link_free(o->made[i]);
    kb_link_pool_free(o->pool);
    kb_link_kind_free(o->k);
    free(o);
}

TEST(pool_past_its_small_chunks)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    struct pool_owner *o = T_OWN(calloc(1, sizeof(struct pool_owner)), pool_owner_free);
    ASSERT_TRUE(o);
    o->k = kb_link_kind_new(s, &P, "kind", err, sizeof err);
    ASSERT_TRUE(o->k);
    o->pool = kb_link_pool_new();
    ASSERT_TRUE(o->pool);
    for (size_t i = 0; i < POOL_N; i++) {
        char name[24];
        snprintf(name, sizeof name, "p%zu", i);
        o->made[i] = kb_link_new_unported(o->k, o->pool, name, err, sizeof err);
        ASSERT_TRUE(o->made[i]);
        o->n = i + 1;
        ASSERT_U64_EQ(kb_link_pool_count(o->pool), i + 1);
    }
    for (size_t i = 0; i < POOL_N; i++) {
        ASSERT_TRUE(kb_link_pool_at(o->pool, i) == o->made[i]);
        ASSERT_U64_EQ((uintptr_t)o->made[i] % 64, 0);
    }
    ASSERT_STREQ(kb_link_name(o->made[POOL_N - 1]), "p16388");
    /* the last one carries a worm: 2 flits, 1.7 ns latency */
    struct sink snk;
    sink_init(&snk, s);
    ASSERT_TRUE(snk.in);
    struct kb_link *l = o->made[POOL_N - 1];
    ASSERT_EQ(kb_link_make_ports(l, err, sizeof err), 0);
    ASSERT_EQ(to_sink(s, l, &snk), 0);
    struct msg x;
    msg_init(&x, &l, 1, 300, 256);
    ASSERT_EQ(kb_link_inject(&x.m), 0);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_U64_EQ(x.at, 1000 + 172 + 1700); /* 44 bytes: 171.875 -> 172 ps */
    T_FREE(pool_owner_free, o);
    T_FREE(sim_free, s);
}

TEST(worm_holds_link_while_its_body_is_upstream)
{
    /* a: slow link 0 then link 1; b: link 1 alone, injected while a holds
     * link 1 waiting for its body. b must wait for a's tail. */
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    struct kb_link_params slow = P;
    slow.bw_gbps = 32; /* 8 ns a flit */
    slow.latency_ns = 0;
    struct kb_link_params fast = P;
    fast.latency_ns = 0;
    struct kb_link *l0 = T_OWN(kb_link_new(s, "l0", &slow, err, sizeof err), kb_link_free);
    ASSERT_TRUE(l0);
    struct kb_link *l1 = T_OWN(kb_link_new(s, "l1", &fast, err, sizeof err), kb_link_free);
    ASSERT_TRUE(l1);
    /* l0 feeds l1 directly, link to link */
    ASSERT_EQ(kb_port_bind(s, kb_link_out_port(l0), kb_link_in_port(l1), err, sizeof err), 0);
    struct sink k;
    sink_init(&k, s);
    ASSERT_TRUE(k.in);
    ASSERT_EQ(to_sink(s, l1, &k), 0);
    struct kb_link *pa[2] = {l0, l1};
    struct msg a, b;
    msg_init(&a, pa, 2, 3 * 256, 256);
    msg_init(&b, &l1, 1, 256, 256);
    ASSERT_EQ(kb_link_inject(&a.m), 0);
    ASSERT_EQ(sim_run(s, 9 * SIM_NS), SIM_UNTIL); /* a's head is on l1 */
    ASSERT_EQ(kb_link_inject(&b.m), 0);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    /* a's flits leave l0 at 8, 16, 24 and cross l1 in 1 ns each */
    ASSERT_U64_EQ(a.at, 25000);
    ASSERT_U64_EQ(b.at, 26000);
    struct kb_link_stats st;
    kb_link_get_stats(l1, &st);
    ASSERT_U64_EQ(st.messages, 2);
    ASSERT_U64_EQ(st.busy_ps, 4000);
    T_FREE(kb_link_free, l0);
    T_FREE(kb_link_free, l1);
    T_FREE(sim_free, s);
}

/* The tail's wake-up is made only when it has work (decision 0032,
 * addendum): a 4-flit worm over l0 then l1 (1 ns a flit, 1.7 ns latency)
 * costs l0 one activation (its head) and l1 two (its head, and its tail,
 * which calls done). l0's counts are those of the release at 3 ns, when
 * asked for at or after it; a head posted before then (mode 1, at 2 ns)
 * or after (mode 2, at 3 ns) waits for l0 to be free at 4 ns either way. */
TEST(tail_wakeup_only_when_needed)
{
    for (int mode = 0; mode < 3; mode++) {
        struct sim *s = T_OWN(sim_new(NULL), sim_free);
        ASSERT_TRUE(s);
        char err[256];
        struct kb_link *l0 = T_OWN(kb_link_new(s, "l0", &P, err, sizeof err), kb_link_free);
        struct kb_link *l1 = T_OWN(kb_link_new(s, "l1", &P, err, sizeof err), kb_link_free);
        ASSERT_TRUE(l0 && l1);
        ASSERT_EQ(kb_port_bind(s, kb_link_out_port(l0), kb_link_in_port(l1), err, sizeof err), 0);
        struct sink k;
        sink_init(&k, s);
        ASSERT_TRUE(k.in);
        ASSERT_EQ(to_sink(s, l1, &k), 0);
        struct kb_link *pa[2] = {l0, l1};
        struct msg a, b;
        msg_init(&a, pa, 2, 4 * 256, 256);
        msg_init(&b, &l0, 1, 256, 256);
        ASSERT_EQ(kb_link_inject(&a.m), 0);
        struct kb_link_stats st;
        ASSERT_EQ(sim_run(s, 2 * SIM_NS), SIM_UNTIL);
        kb_link_get_stats(l0, &st);
        ASSERT_U64_EQ(st.messages, 1);
        ASSERT_U64_EQ(st.bytes, 0);
        ASSERT_EQ(kb_link_backlog(l0), 1);
        if (mode == 1)
            ASSERT_EQ(kb_link_inject(&b.m), 0);
        ASSERT_EQ(sim_run(s, 3 * SIM_NS), SIM_UNTIL);
        if (mode == 2)
            ASSERT_EQ(kb_link_inject(&b.m), 0);
        else {
            ASSERT_EQ(kb_link_backlog(l0), mode == 1);
            kb_link_get_stats(l0, &st);
            ASSERT_U64_EQ(st.bytes, 1024);
            ASSERT_U64_EQ(st.flits, 4);
            ASSERT_U64_EQ(st.busy_ps, 4000);
        }
        ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
        ASSERT_U64_EQ(a.at, 5700 + 1000 + 1700); /* last flit on l1 at 5.7 ns */
        ASSERT_EQ(a.calls, 1);
        if (mode) {
            ASSERT_U64_EQ(b.at, 4000 + 1000 + 1700);
            ASSERT_EQ(b.calls, 1);
        }
        kb_link_get_stats(l0, &st);
        ASSERT_U64_EQ(st.bytes, mode ? 1280 : 1024);
        struct sim_stats ss;
        sim_get_stats(s, &ss);
        if (mode == 0)
            ASSERT_U64_EQ(ss.activations, 3);
        T_FREE(kb_link_free, l0);
        T_FREE(kb_link_free, l1);
        T_FREE(sim_free, s);
    }
}

TEST(fifo_order_of_heads)
{
    /* three one-flit messages injected at t = 0 in order c, a, b */
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    struct kb_link *l = T_OWN(kb_link_new(s, "l", &P, err, sizeof err), kb_link_free);
    ASSERT_TRUE(l);
    struct sink k;
    sink_init(&k, s);
    ASSERT_TRUE(k.in);
    ASSERT_EQ(to_sink(s, l, &k), 0);
    struct msg a, b, c;
    msg_init(&a, &l, 1, 256, 256);
    msg_init(&b, &l, 1, 256, 256);
    msg_init(&c, &l, 1, 256, 256);
    ASSERT_EQ(kb_link_inject(&c.m), 0);
    ASSERT_EQ(kb_link_inject(&a.m), 0);
    ASSERT_EQ(kb_link_inject(&b.m), 0);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_U64_EQ(c.at, 1000 + 1700);
    ASSERT_U64_EQ(a.at, 2000 + 1700);
    ASSERT_U64_EQ(b.at, 3000 + 1700);
    T_FREE(kb_link_free, l);
    T_FREE(sim_free, s);
}

TEST(many_heads_keep_fifo_order)
{
    /* 40 heads at once outgrow the two a link holds inline (heap and
     * ring buffer, which wraps as heads leave); they still go first come,
     * first served: message i ends (i + 1) × 1 ns of serialisation plus
     * 0.7 ns overhead and 1 ns latency after the start */
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    struct kb_link *l = T_OWN(kb_link_new(s, "l", &P, err, sizeof err), kb_link_free);
    ASSERT_TRUE(l);
    struct sink k;
    sink_init(&k, s);
    ASSERT_TRUE(k.in);
    ASSERT_EQ(to_sink(s, l, &k), 0);
    enum { N = 40 };
    static struct msg x[N];
    for (int i = 0; i < N; i++) {
        msg_init(&x[i], &l, 1, 256, 256);
        ASSERT_EQ(kb_link_inject(&x[i].m), 0);
    }
    ASSERT_EQ(kb_link_backlog(l), N);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    for (int i = 0; i < N; i++) {
        ASSERT_EQ(x[i].calls, 1);
        ASSERT_U64_EQ(x[i].at, 1000 * (uint64_t)(i + 1) + 1700);
    }
    ASSERT_EQ(kb_link_backlog(l), 0);
    T_FREE(kb_link_free, l);
    T_FREE(sim_free, s);
}

TEST(inject_rejects_empty_messages)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    struct kb_link *l = T_OWN(kb_link_new(s, "l", &P, err, sizeof err), kb_link_free);
    ASSERT_TRUE(l);
    struct msg x;
    msg_init(&x, &l, 0, 256, 256);
    ASSERT_EQ(kb_link_inject(&x.m), SIM_EINVAL);
    msg_init(&x, &l, 1, 256, 256);
    x.m.n_flits = 0;
    ASSERT_EQ(kb_link_inject(&x.m), SIM_EINVAL);
    T_FREE(kb_link_free, l);
    T_FREE(sim_free, s);
}

/* kb_flit_if: a worm over l0 -> node -> l1 is handed on through l0's port
 * `out` once, at the head's time on l1 (o1 included), and arrives at the
 * closed form of fabric.c: T = Σ_j (o_j + l_j + f/bw_j) + (n-1)·f / min bw. */
TEST(flit_if_hand_off)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    struct kb_link_params p0 = P, p1 = P;
    p0.overhead_ns = 3;   /* 256 GB/s: 1 ns a flit, 1.7 ns wire */
    p1.bw_gbps = 128;     /* 2 ns a flit */
    p1.latency_ns = 0.5;
    p1.overhead_ns = 2;
    struct kb_link *l0 = T_OWN(kb_link_new(s, "l0", &p0, err, sizeof err), kb_link_free);
    struct kb_link *l1 = T_OWN(kb_link_new(s, "l1", &p1, err, sizeof err), kb_link_free);
    ASSERT_TRUE(l0 && l1);
    ASSERT_STREQ(sim_port_name(kb_link_in_port(l0)), "l0.in");
    ASSERT_STREQ(sim_port_name(kb_link_out_port(l0)), "l0.out");
    ASSERT_STREQ(sim_port_type(kb_link_out_port(l0)), "kb_flit_if");
    ASSERT_TRUE(sim_port_dir(kb_link_in_port(l0)) == SIM_PORT_IN);
    ASSERT_TRUE(kb_link_in(l1)->flit == NULL); /* wormhole: the head carries the stream */
    struct sink k;
    sink_init(&k, s);
    ASSERT_TRUE(k.in);
    ASSERT_EQ(to_sink(s, l0, &k), 0);
    ASSERT_EQ(to_sink(s, l1, &k), 0);
    ASSERT_EQ(sim_port_bound_count(k.in), 2);
    struct kb_link *pa[2] = {l0, l1};
    struct msg x;
    msg_init(&x, pa, 2, 4 * 256, 256);
    ASSERT_EQ(kb_link_inject(&x.m), 0);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(k.heads, 1);
    ASSERT_EQ(k.hop, 1);
    ASSERT_U64_EQ(k.now, 3000);                /* the head starts on l0 after o0 */
    ASSERT_U64_EQ(k.t, 3000 + 1000 + 1700 + 2000); /* + f/bw0 + l0 + o1 */
    /* (3 + 1.7 + 1) + (2 + 0.5 + 2) + 3 flits x 2 ns */
    ASSERT_U64_EQ(x.at, 5700 + 4500 + 3 * 2000);
    T_FREE(kb_link_free, l0);
    T_FREE(kb_link_free, l1);
    T_FREE(sim_free, s);
}

/* The link's ports refuse a wrong type and a second upstream, naming both
 * ends, and an unbound `out` stops the run at elaboration. */
TEST(flit_if_bind_errors)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[512];
    struct kb_link *l = T_OWN(kb_link_new(s, "a->b", &P, err, sizeof err), kb_link_free);
    ASSERT_TRUE(l);
    static int dummy;
    struct sim_port *dma = kb_port_export(s, "a", "dma", KB_DMA_IF, &dummy, 4, err, sizeof err);
    ASSERT_TRUE(dma);
    ASSERT_EQ(kb_port_bind(s, kb_link_out_port(l), dma, err, sizeof err), SIM_EBIND);
    ASSERT_STREQ(err, "cannot bind 'a->b.out' (type 'kb_flit_if') to 'a.dma.in' (type "
                      "'kb_dma_if'): interface types differ");
    struct sim_port *u1 = kb_port_new(s, "a", "node", "out", SIM_PORT_OUT, KB_FLIT_IF, 0,
                                      KB_PORT_MANY, err, sizeof err);
    struct sim_port *u2 = kb_port_new(s, "c", "node", "out", SIM_PORT_OUT, KB_FLIT_IF, 0,
                                      KB_PORT_MANY, err, sizeof err);
    ASSERT_TRUE(u1 && u2);
    ASSERT_EQ(kb_port_bind(s, u1, kb_link_in_port(l), err, sizeof err), 0);
    ASSERT_EQ(kb_port_bind(s, u2, kb_link_in_port(l), err, sizeof err), SIM_EBIND);
    ASSERT_STREQ(err, "cannot bind 'c.node.out' to 'a->b.in': 'a->b.in' accepts at most 1 "
                      "binding and has 1");
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_EBIND);
    ASSERT_STREQ(sim_errmsg(s), "port 'a->b.out' (out, type 'kb_flit_if') is unbound");
    T_FREE(kb_link_free, l);
    T_FREE(sim_free, s);
}

TEST_MAIN(params_are_checked, serialisation_rounds_per_flit, one_hop_worm,
          counts_show_from_the_release, routed_worm_over_idle_links, pool_past_its_small_chunks,
          worm_holds_link_while_its_body_is_upstream, tail_wakeup_only_when_needed,
          fifo_order_of_heads, many_heads_keep_fifo_order,
          inject_rejects_empty_messages, flit_if_hand_off, flit_if_bind_errors)
