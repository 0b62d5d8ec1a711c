/* test_link_credit.c — credit flow control (link_credit.c) against hand
 * calculations: one flit, the bandwidth-bound and the credit-bound stream
 * over one hop, two flows on one VC and on two, backpressure reaching the
 * sender, a ring that deadlocks without a dateline and runs with one, and
 * parameter checks */
#include <math.h>
#include <stdio.h>

#include "fabric.h"
#include "noc.h"
#include "sim.h"
#include "test.h"

/* 128 GB/s, 256 B flits: d = 2 ns; l = 3 ns; o = 8 ns; credit c = 1 ns */
static struct kb_link_params cp(uint32_t buffer, uint32_t vcs)
{
    return (struct kb_link_params){.bw_gbps = 128, .latency_ns = 3, .overhead_ns = 8,
                                   .flit_bytes = 256, .buffer_flits = buffer, .vcs = vcs,
                                   .vc_classes = 1, .credit_ns = 1};
}

#define D 2000
#define L 3000
#define O 8000
#define C 1000

/* nodes n0..n(h); link j joins nj -> n(j+1); extra nodes after */
static struct kb_fabric *chain(struct sim *s, int h, const struct kb_link_params *p,
                               int *links)
{
    if (!s)
        return NULL;
    struct kb_fabric *f = T_OWN(kb_fabric_new(s), kb_fabric_free);
    if (!f)
        return NULL;
    char name[32];
    for (int i = 0; i <= h; i++) {
        snprintf(name, sizeof name, "n%d", i);
        if (kb_fabric_add_node(f, name) < 0)
            return NULL;
    }
    for (int j = 0; j < h; j++)
        if ((links[j] = kb_fabric_add_link(f, j, j + 1, NULL, p)) < 0)
            return NULL;
    return f;
}

struct done {
    sim_time at;
    int calls;
};

static void on_done(void *ud, sim_time at)
{
    struct done *d = ud;
    d->at = at;
    d->calls++;
}

/* One message of `bytes` over links[0..n) from time 0; its arrival time,
 * or -1 when something failed (an allocation under --failalloc: a negative
 * value stops the case cleanly there, and is wrong anywhere else). */
static sim_time one(int h, const struct kb_link_params *p, uint64_t bytes)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    int links[8];
    struct kb_fabric *f = chain(s, h, p, links);
    struct done d = {0, 0};
    if (!f || kb_fabric_send_cb(f, links, h, bytes, 0, on_done, &d) < 0)
        return -1;
    if (sim_run(s, SIM_FOREVER) != SIM_DONE || d.calls != 1)
        return -1;
    T_FREE(kb_fabric_free, f);
    T_FREE(sim_free, s);
    return d.at;
}

TEST(one_flit_pays_every_hop)
{
    struct kb_link_params p = cp(1, 1);
    /* T = Σ_j (o + l + d) */
    ASSERT_EQ(one(1, &p, 256), O + L + D);
    ASSERT_EQ(one(3, &p, 256), 3 * (O + L + D));
    ASSERT_EQ(one(3, &p, 100), 3 * (O + L + 100 * 1000 / 128)); /* 781.25 -> 781 ps */
    ASSERT_EQ(one(2, &p, 0), 2 * (O + L)); /* an empty head flit */
}

TEST(stream_bandwidth_bound)
{
    /* R = d + l + c = 6 ns; B = 3: B·d = 6 >= R: T = o + n·d + l */
    struct kb_link_params p = cp(3, 1);
    for (uint64_t n = 1; n <= 20; n++)
        ASSERT_EQ(one(1, &p, n * 256), O + (sim_time)n * D + L);
}

TEST(stream_credit_bound)
{
    /* B·d < R = 6 ns: S_k = o + ⌊k/B⌋·R + (k mod B)·d, T = S_{n-1} + d + l */
    const sim_time R = D + L + C;
    for (uint32_t b = 1; b <= 2; b++) {
        struct kb_link_params p = cp(b, 1);
        for (uint64_t n = 1; n <= 12; n++) {
            uint64_t k = n - 1;
            sim_time s = O + (sim_time)(k / b) * R + (sim_time)(k % b) * D;
            ASSERT_EQ(one(1, &p, n * 256), s + D + L);
        }
        /* throughput of a long stream: B flits per round trip */
        sim_time t = one(1, &p, 4000 * 256);
        ASSERT_TRUE((long long)t >= 0);
        double gbps = 4000.0 * 256 / ((double)(t - O - L - D) / 1000.0);
        ASSERT_NEAR(gbps, b * 256.0 / (R / 1000.0), 0.01 * gbps);
    }
}

/* kb_fabric_path_time of `bytes` over an h-hop chain of p */
static sim_time closed(int h, const struct kb_link_params *p, uint64_t bytes)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    int links[8];
    struct kb_fabric *f = chain(s, h, p, links);
    if (!f)
        return -1;
    sim_time t = kb_fabric_path_time(f, links, h, bytes);
    T_FREE(kb_fabric_free, f);
    T_FREE(sim_free, s);
    return t == SIM_FOREVER ? (sim_time)-1 : t;
}

TEST(path_time_closed_form_uniform_chain)
{
    /* one set of parameters on every hop (link_credit.c): R = d + l + c,
     * T = Σ_j (o + l + d_1) + max((n-1)·d, ⌊(n-1)/B⌋·R + ((n-1) mod B)·d)
     *     - d_1 + d_n,
     * the same in the simulation and in kb_fabric_path_time, for buffers
     * below and above the round trip, full and partial last flits */
    for (uint32_t b = 1; b <= 5; b++) {
        for (int h = 1; h <= 4; h++) {
            for (uint64_t n = 1; n <= 14; n++) {
                for (uint64_t tail = 100; tail <= 256; tail += 156) {
                    struct kb_link_params p = cp(b, 1);
                    p.credit_ns = 1 + b % 3; /* c = 1..3 ns */
                    sim_time c = (sim_time)(p.credit_ns * 1000), r = D + L + c;
                    uint64_t bytes = (n - 1) * 256 + tail, k = n - 1;
                    sim_time dn = tail == 256 ? D : (sim_time)(tail * 1000 / 128 +
                                                    (tail * 1000 % 128 >= 64));
                    sim_time d1 = n == 1 ? dn : D;
                    sim_time x = (sim_time)k * D;
                    sim_time loop = (sim_time)(k / b) * r + (sim_time)(k % b) * D;
                    if (loop > x)
                        x = loop;
                    sim_time want = h * (O + L + d1) + x - d1 + dn;
                    ASSERT_EQ(one(h, &p, bytes), want);
                    ASSERT_EQ(closed(h, &p, bytes), want);
                }
            }
        }
    }
}

TEST(path_time_closed_form_mixed_hops)
{
    /* hops that differ (bandwidth, latency, overhead, buffers, credit
     * delay): kb_fabric_path_time walks the recurrence and matches the
     * simulation flit for flit, buffer_flits 1..8 */
    for (uint32_t b = 1; b <= 8; b++) {
        struct sim *s = T_OWN(sim_new(NULL), sim_free);
        ASSERT_TRUE(s);
        struct kb_fabric *f = T_OWN(kb_fabric_new(s), kb_fabric_free);
        ASSERT_TRUE(f);
        ASSERT_TRUE(kb_fabric_add_node(f, "a") >= 0 && kb_fabric_add_node(f, "b") >= 0 &&
               kb_fabric_add_node(f, "c") >= 0 && kb_fabric_add_node(f, "d") >= 0);
        struct kb_link_params p0 = cp(b, 1), p1 = cp(b + 2, 1), p2 = cp(1 + b / 2, 1);
        p0.bw_gbps = 256;
        p0.latency_ns = 0;
        p0.overhead_ns = 0;
        p1.bw_gbps = 64;
        p1.credit_ns = 5;
        p2.latency_ns = 7;
        p2.credit_ns = 0;
        int links[3] = {kb_fabric_add_link(f, 0, 1, NULL, &p0),
                        kb_fabric_add_link(f, 1, 2, NULL, &p1),
                        kb_fabric_add_link(f, 2, 3, NULL, &p2)};
        ASSERT_TRUE(links[0] >= 0 && links[1] >= 0 && links[2] >= 0);
        static const uint64_t sizes[] = {0, 1, 256, 700, 4096, 5000};
        struct done d[6] = {{0, 0}};
        sim_time want[6];
        for (int i = 0; i < 6; i++) {
            want[i] = kb_fabric_path_time(f, links, 3, sizes[i]);
            ASSERT_TRUE(want[i] != SIM_FOREVER);
        }
        /* one at a time: each starts after the one before has arrived */
        sim_time t0 = 0;
        for (int i = 0; i < 6; i++) {
            ASSERT_EQ(kb_fabric_send_cb(f, links, 3, sizes[i], 0, on_done, &d[i]), 0);
            ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
            ASSERT_EQ(d[i].calls, 1);
            ASSERT_EQ(d[i].at - t0, want[i]);
            t0 = sim_now(s);
        }
        T_FREE(kb_fabric_free, f);
        T_FREE(sim_free, s);
    }
}

/* Two messages of n flits from n0 to n1 at time 0. */
static void two(uint32_t vcs, uint64_t n, sim_time *t1, sim_time *t2)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    int links[1];
    struct kb_link_params p = cp(8, vcs);
    struct kb_fabric *f = chain(s, 1, &p, links);
    ASSERT_TRUE(f);
    struct done a = {0, 0}, b = {0, 0};
    ASSERT_OK(kb_fabric_send_cb(f, links, 1, n * 256, 0, on_done, &a));
    ASSERT_OK(kb_fabric_send_cb(f, links, 1, n * 256, 0, on_done, &b));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(a.calls + b.calls, 2);
    *t1 = a.at;
    *t2 = b.at;
    T_FREE(kb_fabric_free, f);
    T_FREE(sim_free, s);
}

TEST(two_flows_one_vc_serialise)
{
    /* The second head waits for the VC: free when the first tail's credit
     * is back, o + n·d + l + c; then n flits at d:
     * T1 = o + n·d + l, T2 = o + 2n·d + 2l + c */
    for (uint64_t n = 1; n <= 6; n++) {
        sim_time t1, t2;
        two(1, n, &t1, &t2);
        ASSERT_EQ(t1, O + (sim_time)n * D + L);
        ASSERT_EQ(t2, O + (sim_time)(2 * n) * D + 2 * L + C);
    }
}

TEST(two_flows_two_vcs_interleave)
{
    /* Round robin, flit by flit: T1 = o + (2n-1)·d + l, T2 = o + 2n·d + l
     * (each VC sends every 2d, and B·2d >= R so credits never stall) */
    for (uint64_t n = 1; n <= 6; n++) {
        sim_time t1, t2;
        two(2, n, &t1, &t2);
        ASSERT_EQ(t1, O + (sim_time)(2 * n - 1) * D + L);
        ASSERT_EQ(t2, O + (sim_time)(2 * n) * D + L);
    }
}

TEST(backpressure_reaches_the_sender)
{
    /* n0 -> n1 fast (1 ns a flit), n1 -> n2 slow (4 ns a flit), B = 2 on
     * both: the first link is held to the slow link's pace, so the first
     * link is busy only a quarter of the time and the message ends at the
     * slow link's rate; with unbounded buffers the first link would finish
     * its flits n·1 ns after the start. */
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_fabric *f = T_OWN(kb_fabric_new(s), kb_fabric_free);
    ASSERT_TRUE(f);
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        ASSERT_TRUE(kb_fabric_add_node(f, name) >= 0);
    }
    struct kb_link_params fast = {.bw_gbps = 256, .flit_bytes = 256, .buffer_flits = 2,
                                  .vcs = 1, .vc_classes = 1};
    struct kb_link_params slow = fast;
    slow.bw_gbps = 64;
    int links[2] = {kb_fabric_add_link(f, 0, 1, NULL, &fast),
                    kb_fabric_add_link(f, 1, 2, NULL, &slow)};
    ASSERT_TRUE(links[0] >= 0 && links[1] >= 0);
    struct done d = {0, 0};
    const uint64_t n = 100;
    ASSERT_OK(kb_fabric_send_cb(f, links, 2, n * 256, 0, on_done, &d));
    /* flit k starts on the slow link at 1 + 4k ns and frees its slot
     * then, so flit k >= 2 starts on the fast link at 1 + 4(k-2) ns: by
     * 50 ns the fast link has sent flits 0..14, not all 100 */
    struct kb_link_stats st;
    ASSERT_EQ(sim_run(s, 50000), SIM_UNTIL);
    kb_link_get_stats(kb_fabric_link(f, links[0]), &st);
    ASSERT_U64_EQ(st.flits, 15);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(d.at, 1000 + (sim_time)n * 4000); /* the slow link's pace */
    kb_link_get_stats(kb_fabric_link(f, links[0]), &st);
    ASSERT_U64_EQ(st.flits, n);
    ASSERT_EQ(st.busy_ps, (sim_time)n * 1000);
    T_FREE(kb_fabric_free, f);
    T_FREE(sim_free, s);
}

/* A ring of 4 nodes, one link each way clockwise; every node sends
 * `flits` flits three hops on from a thread. */
struct ring_xfer {
    struct kb_fabric *f;
    int links[3];
    uint64_t bytes;
    int rc;
};

static void ring_thread(struct sim *s, void *arg)
{
    (void)s;
    struct ring_xfer *x = arg;
    x->rc = kb_fabric_transfer(x->f, x->links, 3, x->bytes);
}

static int ring_run(int dateline, char *err, size_t errlen)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    if (!s)
        return SIM_ENOMEM;
    struct kb_fabric *f = T_OWN(kb_fabric_new(s), kb_fabric_free);
    if (!f)
        return SIM_ENOMEM;
    int ring[4];
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "r%d", i);
        if (kb_fabric_add_node(f, name) < 0)
            return SIM_ENOMEM;
    }
    for (int i = 0; i < 4; i++) {
        struct kb_link_params p = cp(1, dateline ? 2 : 1);
        p.vc_classes = dateline ? 2 : 1;
        p.dateline = dateline && i == 3; /* r3 -> r0 */
        if ((ring[i] = kb_fabric_add_link(f, i, (i + 1) % 4, NULL, &p)) < 0)
            return SIM_ENOMEM;
    }
    struct ring_xfer x[4];
    for (int i = 0; i < 4; i++) {
        x[i] = (struct ring_xfer){f, {ring[i], ring[(i + 1) % 4], ring[(i + 2) % 4]}, 8 * 256,
                                  0};
        char name[16];
        snprintf(name, sizeof name, "sender%d", i);
        if (!sim_thread(s, name, ring_thread, &x[i], 0))
            return SIM_ENOMEM;
    }
    int rc = sim_run(s, SIM_FOREVER);
    snprintf(err, errlen, "%s", sim_errmsg(s));
    for (int i = 0; i < 4; i++) /* a sender that failed (out of memory) */
        if (x[i].rc < 0)
            rc = x[i].rc;
    T_FREE(kb_fabric_free, f);
    T_FREE(sim_free, s);
    return rc;
}

TEST(ring_without_dateline_deadlocks)
{
    char err[1024];
    ASSERT_EQ(ring_run(0, err, sizeof err), SIM_EDEADLOCK);
    ASSERT_CONTAINS(err, "deadlock at ");
    ASSERT_CONTAINS(err, "4 processes are blocked");
    ASSERT_CONTAINS(err, "'sender0' waits on ");
    ASSERT_CONTAINS(err, "fabric.transfer");
}

TEST(ring_with_dateline_runs)
{
    char err[1024];
    ASSERT_EQ(ring_run(1, err, sizeof err), SIM_DONE);
}

/* A kb_noc ring of 4 under credit flow control, every router sending 8
 * flits to the one opposite (two hops E, the tie going +): one VC class
 * deadlocks; two classes (the noc marks the wrap link r3 -> r0 as the
 * dateline) run. */
struct noc_xfer {
    struct kb_fabric *f;
    int links[2];
    int rc;
};

static void noc_thread(struct sim *s, void *arg)
{
    (void)s;
    struct noc_xfer *x = arg;
    x->rc = kb_fabric_transfer(x->f, x->links, 2, 8 * 256);
}

static int noc_ring_run(uint32_t classes)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    if (!s)
        return SIM_ENOMEM;
    struct kb_fabric *f = T_OWN(kb_fabric_new(s), kb_fabric_free);
    if (!f)
        return SIM_ENOMEM;
    struct kb_link_params p = cp(1, classes);
    p.vc_classes = classes;
    struct kb_noc_params np = {KB_NOC_RING, "ring", 4, 1, p, NULL};
    char err[256];
    struct kb_noc *n = T_OWN(kb_noc_new(f, &np, err, sizeof err), kb_noc_free);
    if (!n)
        return SIM_EINVAL;
    struct noc_xfer x[4];
    for (int i = 0; i < 4; i++) {
        x[i] = (struct noc_xfer){f, {0, 0}, 0};
        if (kb_noc_route(n, i, (i + 2) % 4, x[i].links, 2) != 2)
            return SIM_EINVAL;
        if (!sim_thread(s, "sender", noc_thread, &x[i], 0))
            return SIM_ENOMEM;
    }
    int rc = sim_run(s, SIM_FOREVER);
    for (int i = 0; i < 4; i++) /* a sender that failed (out of memory) */
        if (x[i].rc < 0)
            rc = x[i].rc;
    T_FREE(kb_noc_free, n);
    T_FREE(kb_fabric_free, f);
    T_FREE(sim_free, s);
    return rc;
}

TEST(noc_ring_dateline)
{
    ASSERT_EQ(noc_ring_run(1), SIM_EDEADLOCK);
    ASSERT_EQ(noc_ring_run(2), SIM_DONE);
}

TEST(params_and_paths_are_checked)
{
    char err[256];
    struct kb_link_params p = cp(4, 2);
    ASSERT_EQ(kb_link_params_check(&p, "l", err, sizeof err), 0);
    p.vc_classes = 3;
    ASSERT_EQ(kb_link_params_check(&p, "l", err, sizeof err), SIM_EINVAL);
    ASSERT_CONTAINS(err, "link 'l': 2 virtual channels for 3 VC classes");
    p = cp(5000, 1);
    ASSERT_EQ(kb_link_params_check(&p, "l", err, sizeof err), SIM_EINVAL);
    ASSERT_CONTAINS(err, "buffer must be 1..4096 flits, got 5000");
    p = cp(4, 1);
    p.credit_ns = -1;
    ASSERT_EQ(kb_link_params_check(&p, "l", err, sizeof err), SIM_EINVAL);
    ASSERT_CONTAINS(err, "credit delay must be >= 0 ns");

    /* a path keeps one flow-control mode */
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_fabric *f = T_OWN(kb_fabric_new(s), kb_fabric_free);
    ASSERT_TRUE(f);
    ASSERT_TRUE(kb_fabric_add_node(f, "a") >= 0 && kb_fabric_add_node(f, "b") >= 0 &&
                kb_fabric_add_node(f, "c") >= 0);
    struct kb_link_params w = {.bw_gbps = 128, .flit_bytes = 256};
    p = cp(4, 1);
    int links[2] = {kb_fabric_add_link(f, 0, 1, NULL, &p), kb_fabric_add_link(f, 1, 2, NULL, &w)};
    ASSERT_TRUE(links[0] >= 0 && links[1] >= 0);
    ASSERT_EQ(kb_fabric_send(f, links, 2, 100, NULL), SIM_EINVAL);
    ASSERT_CONTAINS(kb_fabric_errmsg(f), "runs credit flow control but the next, 'b->c', "
                                         "runs wormhole_unbounded");
    T_FREE(kb_fabric_free, f);
    T_FREE(sim_free, s);
}

TEST(unfinished_messages_are_freed)
{
    /* a run stopped with credit messages in flight frees them with the
     * fabric (ASan checks) */
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    int links[3];
    struct kb_link_params p = cp(1, 1);
    struct kb_fabric *f = chain(s, 3, &p, links);
    ASSERT_TRUE(f);
    struct done d = {0, 0};
    ASSERT_OK(kb_fabric_send_cb(f, links, 3, 64 * 256, 0, on_done, &d));
    ASSERT_OK(kb_fabric_send_cb(f, links, 3, 64 * 256, 0, on_done, &d));
    sim_run(s, 50000);
    ASSERT_EQ(d.calls, 0);
    ASSERT_TRUE(kb_fabric_in_flight(f) == 2);
    T_FREE(kb_fabric_free, f);
    T_FREE(sim_free, s);
}

TEST_MAIN(one_flit_pays_every_hop, stream_bandwidth_bound, stream_credit_bound,
          two_flows_one_vc_serialise, two_flows_two_vcs_interleave,
          backpressure_reaches_the_sender, ring_without_dateline_deadlocks,
          ring_with_dateline_runs, noc_ring_dateline, params_and_paths_are_checked,
          unfinished_messages_are_freed, path_time_closed_form_uniform_chain,
          path_time_closed_form_mixed_hops)
