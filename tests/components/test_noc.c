/* test_noc.c — mesh, torus, ring and switch builders: exact node sequences
 * of routes, hop counts of all pairs, link names, errors, a timed transfer */
#include <stdlib.h>

#include "fabric.h"
#include "noc.h"
#include "sim.h"
#include "test.h"

/* The name of link `id`, made on first use: NULL when out of memory. */
static const char *link_name(struct kb_fabric *f, int id)
{
    struct kb_link *l = kb_fabric_link(f, id);
    return l ? kb_link_name(l) : NULL;
}

static const struct kb_link_params L = {
    .bw_gbps = 256, .latency_ns = 1.7, .overhead_ns = 0, .flit_bytes = 256};

struct net {
    struct sim *s;
    struct kb_fabric *f;
    struct kb_noc *n;
    char err[256];
};

static int net_open(struct net *t, enum kb_noc_kind kind, const char *prefix,
                    int w, int h)
{
    memset(t, 0, sizeof *t);
    t->s = T_OWN(sim_new(NULL), sim_free);
    if (!t->s)
        return 0;
    t->f = T_OWN(kb_fabric_new(t->s), kb_fabric_free);
    if (!t->f)
        return 0;
    struct kb_noc_params p = {kind, prefix, w, h, L, NULL};
    t->n = T_OWN(kb_noc_new(t->f, &p, t->err, sizeof t->err), kb_noc_free);
    if (!t->n)
        return 0;
    return 1;
}

static void net_close(struct net *t)
{
    T_FREE(kb_noc_free, t->n);
    T_FREE(kb_fabric_free, t->f);
    T_FREE(sim_free, t->s);
}

/* The route from src to dst as router indices "0 1 2 ...", checking on
 * the way that the links join head to tail. */
static const char *route_str(struct net *t, int src, int dst)
{
    static char buf[256];
    int links[64];
    int k = kb_noc_route(t->n, src, dst, links, 64);
    if (k < 0)
        return "error";
    int at = kb_noc_node(t->n, src);
    size_t len = (size_t)snprintf(buf, sizeof buf, "%d", src);
    for (int i = 0; i < k; i++) {
        if (kb_fabric_link_src(t->f, links[i]) != at)
            return "broken";
        at = kb_fabric_link_dst(t->f, links[i]);
        int idx = -1;
        for (int j = 0; j < kb_noc_size(t->n); j++)
            if (kb_noc_node(t->n, j) == at)
                idx = j;
        if (idx < 0 && at == kb_noc_xbar(t->n))
            len += (size_t)snprintf(buf + len, sizeof buf - len, " x");
        else
            len += (size_t)snprintf(buf + len, sizeof buf - len, " %d", idx);
    }
    return at == kb_noc_node(t->n, dst) ? buf : "wrong end";
}

static int iabs(int v) { return v < 0 ? -v : v; }
static int imin(int a, int b) { return a < b ? a : b; }

TEST(mesh_4x4_xy)
{
    struct net t;
    ASSERT_TRUE(net_open(&t, KB_NOC_MESH, "sip0.cube5", 4, 4));
    ASSERT_EQ(kb_noc_size(t.n), 16);
    ASSERT_EQ(kb_fabric_node_count(t.f), 16);
    /* 2 × 3 × 4 links in each of the two axes, both directions */
    ASSERT_EQ(kb_fabric_link_count(t.f), 48);
    ASSERT_STREQ(route_str(&t, 0, 11), "0 1 2 3 7 11");     /* X first */
    ASSERT_STREQ(route_str(&t, 15, 0), "15 14 13 12 8 4 0");
    ASSERT_STREQ(route_str(&t, 9, 6), "9 10 6");
    ASSERT_STREQ(route_str(&t, 12, 3), "12 13 14 15 11 7 3");
    ASSERT_STREQ(route_str(&t, 5, 5), "5");
    ASSERT_STREQ(kb_fabric_node_name(t.f, kb_noc_node(t.n, 3)),
                 "sip0.cube5.r3");
    ASSERT_STREQ(link_name(t.f, kb_noc_link(t.n, 3, KB_NOC_S)),
                 "sip0.cube5.r3.S");
    ASSERT_EQ(kb_noc_link(t.n, 3, KB_NOC_E), -1); /* edge */
    ASSERT_EQ(kb_noc_link(t.n, 0, KB_NOC_N), -1);
    ASSERT_EQ(kb_noc_max_hops(t.n), 6);
    for (int a = 0; a < 16; a++)
        for (int b = 0; b < 16; b++) {
            int links[8];
            int want = iabs(a % 4 - b % 4) + iabs(a / 4 - b / 4);
            ASSERT_EQ(kb_noc_route(t.n, a, b, links, 8), want);
            ASSERT_EQ(kb_noc_hops(t.n, a, b), want);
        }
    net_close(&t);
}

TEST(torus_3x2_wraps)
{
    struct net t;
    ASSERT_TRUE(net_open(&t, KB_NOC_TORUS, "sys", 3, 2));
    /* every router has 4 links: E, W (3 columns), S, N (2 rows, distinct) */
    ASSERT_EQ(kb_fabric_link_count(t.f), 24);
    ASSERT_STREQ(route_str(&t, 0, 2), "0 2");     /* W wrap, 1 hop not 2 */
    ASSERT_STREQ(route_str(&t, 0, 1), "0 1");
    ASSERT_STREQ(route_str(&t, 0, 5), "0 2 5");   /* tie on y: + (S) */
    ASSERT_STREQ(route_str(&t, 5, 0), "5 3 0");   /* E wrap, S wrap */
    int links[4];
    ASSERT_EQ(kb_noc_route(t.n, 5, 0, links, 4), 2);
    ASSERT_EQ(links[0], kb_noc_link(t.n, 5, KB_NOC_E));
    ASSERT_EQ(links[1], kb_noc_link(t.n, 3, KB_NOC_S));
    ASSERT_TRUE(kb_noc_link(t.n, 3, KB_NOC_S) != kb_noc_link(t.n, 3, KB_NOC_N));
    ASSERT_EQ(kb_fabric_link_dst(t.f, kb_noc_link(t.n, 3, KB_NOC_N)),
              kb_noc_node(t.n, 0));
    ASSERT_EQ(kb_noc_max_hops(t.n), 2);
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) {
            int dx = iabs(a % 3 - b % 3);
            int want = imin(dx, 3 - dx) + (a / 3 != b / 3);
            ASSERT_EQ(kb_noc_route(t.n, a, b, links, 4), want);
            ASSERT_EQ(kb_noc_hops(t.n, a, b), want);
        }
    net_close(&t);
}

TEST(torus_2x3_wraps)
{
    struct net t;
    ASSERT_TRUE(net_open(&t, KB_NOC_TORUS, "sys", 2, 3));
    ASSERT_STREQ(route_str(&t, 1, 4), "1 0 4");   /* tie on x: E wrap; N wrap */
    int links[4];
    ASSERT_EQ(kb_noc_route(t.n, 1, 4, links, 4), 2);
    ASSERT_EQ(links[0], kb_noc_link(t.n, 1, KB_NOC_E));
    ASSERT_EQ(links[1], kb_noc_link(t.n, 0, KB_NOC_N));
    ASSERT_STREQ(route_str(&t, 0, 3), "0 1 3");
    ASSERT_STREQ(route_str(&t, 4, 1), "4 5 1");   /* S wrap from row 2 */
    ASSERT_STREQ(route_str(&t, 0, 4), "0 4");
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) {
            int dy = iabs(a / 2 - b / 2);
            int want = (a % 2 != b % 2) + imin(dy, 3 - dy);
            ASSERT_EQ(kb_noc_hops(t.n, a, b), want);
            ASSERT_EQ(kb_noc_route(t.n, a, b, links, 4), want);
        }
    net_close(&t);
}

TEST(ring_of_6)
{
    struct net t;
    ASSERT_TRUE(net_open(&t, KB_NOC_RING, "ring", 6, 99 /* ignored */));
    ASSERT_EQ(kb_noc_size(t.n), 6);
    ASSERT_EQ(kb_fabric_link_count(t.f), 12);
    ASSERT_STREQ(route_str(&t, 0, 3), "0 1 2 3"); /* tie: + */
    ASSERT_STREQ(route_str(&t, 3, 0), "3 4 5 0");
    ASSERT_STREQ(route_str(&t, 0, 4), "0 5 4");
    ASSERT_STREQ(route_str(&t, 5, 1), "5 0 1");
    ASSERT_STREQ(route_str(&t, 2, 2), "2");
    ASSERT_EQ(kb_noc_link(t.n, 0, KB_NOC_S), -1);
    ASSERT_EQ(kb_noc_max_hops(t.n), 3);
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) {
            int d = iabs(a - b);
            ASSERT_EQ(kb_noc_hops(t.n, a, b), imin(d, 6 - d));
        }
    net_close(&t);
}

TEST(ring_of_2_has_two_links_each_way)
{
    struct net t;
    ASSERT_TRUE(net_open(&t, KB_NOC_RING, "", 2, 1));
    ASSERT_EQ(kb_fabric_link_count(t.f), 4);
    ASSERT_STREQ(kb_fabric_node_name(t.f, kb_noc_node(t.n, 1)), "r1");
    int links[2];
    ASSERT_EQ(kb_noc_route(t.n, 1, 0, links, 2), 1);
    ASSERT_EQ(links[0], kb_noc_link(t.n, 1, KB_NOC_E)); /* tie: + */
    ASSERT_EQ(kb_fabric_link_dst(t.f, kb_noc_link(t.n, 1, KB_NOC_W)),
              kb_noc_node(t.n, 0));
    net_close(&t);
}

TEST(switch_one_hop_through_crossbar)
{
    struct net t;
    ASSERT_TRUE(net_open(&t, KB_NOC_SWITCH, "sip0", 5, 0));
    ASSERT_EQ(kb_fabric_node_count(t.f), 6);
    ASSERT_STREQ(kb_fabric_node_name(t.f, kb_noc_xbar(t.n)), "sip0.xbar");
    ASSERT_STREQ(route_str(&t, 1, 4), "1 x 4");
    ASSERT_STREQ(route_str(&t, 3, 3), "3");
    int links[2];
    ASSERT_EQ(kb_noc_route(t.n, 4, 0, links, 2), 2);
    ASSERT_STREQ(link_name(t.f, links[0]), "sip0.r4.up");
    ASSERT_STREQ(link_name(t.f, links[1]), "sip0.xbar.0");
    ASSERT_EQ(kb_noc_hops(t.n, 0, 4), 2);
    ASSERT_EQ(kb_noc_max_hops(t.n), 2);
    net_close(&t);
}

TEST(existing_nodes)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_fabric *f = T_OWN(kb_fabric_new(s), kb_fabric_free);
    ASSERT_TRUE(f);
    int gw[3];
    gw[0] = kb_fabric_add_node(f, "sip0.gw");
    gw[1] = kb_fabric_add_node(f, "sip1.gw");
    gw[2] = kb_fabric_add_node(f, "sip2.gw");
    char err[256];
    struct kb_noc_params p = {KB_NOC_RING, "sys", 3, 1, L, gw};
    struct kb_noc *n = T_OWN(kb_noc_new(f, &p, err, sizeof err), kb_noc_free);
    ASSERT_TRUE(n);
    ASSERT_TRUE(n != NULL);
    ASSERT_EQ(kb_fabric_node_count(f), 3);
    ASSERT_STREQ(link_name(f, kb_noc_link(n, 2, KB_NOC_E)),
                 "sip2.gw.E");
    ASSERT_EQ(kb_fabric_link_dst(f, kb_noc_link(n, 2, KB_NOC_E)), gw[0]);
    T_FREE(kb_noc_free, n);
    int bad[2] = {0, 42};
    p = (struct kb_noc_params){KB_NOC_MESH, "m", 2, 1, L, bad};
    ASSERT_TRUE(kb_noc_new(f, &p, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "mesh 'm': router 1 is node 42, which the fabric does "
                 "not have");
    T_FREE(kb_fabric_free, f);
    T_FREE(sim_free, s);
}

TEST(errors)
{
    struct net t;
    ASSERT_TRUE(!net_open(&t, KB_NOC_MESH, "sip0.cube1", 0, 4));
    ASSERT_TRUE(t.n == NULL && t.f && t.s); /* refused, not out of memory */
    ASSERT_STREQ(t.err, "mesh 'sip0.cube1': size must be at least 1×1, got 0×4");
    net_close(&t);

    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_fabric *f = T_OWN(kb_fabric_new(s), kb_fabric_free);
    ASSERT_TRUE(f);
    char err[256];
    struct kb_noc_params p = {KB_NOC_TORUS, "sip0", 2, 2, L, NULL};
    p.link.bw_gbps = -1;
    ASSERT_TRUE(kb_noc_new(f, &p, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "link 'sip0.*': bandwidth must be a positive number of "
                 "GB/s, got -1");
    p.link = L;
    struct kb_noc *n = T_OWN(kb_noc_new(f, &p, err, sizeof err), kb_noc_free);
    ASSERT_TRUE(n);
    ASSERT_TRUE(n != NULL);
    /* the same names again: the fabric refuses duplicates */
    ASSERT_TRUE(kb_noc_new(f, &p, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "duplicate node 'sip0.r0'");
    int links[1];
    ASSERT_EQ(kb_noc_route(n, 0, 4, links, 1), SIM_EINVAL);
    ASSERT_STREQ(kb_noc_errmsg(n), "route from 0 to 4: the torus has routers "
                 "0..3");
    ASSERT_EQ(kb_noc_route(n, 0, 3, links, 1), SIM_EINVAL);
    ASSERT_STREQ(kb_noc_errmsg(n), "route from 0 to 3: more than 1 links");
    ASSERT_EQ(kb_noc_hops(n, -1, 0), SIM_EINVAL);
    T_FREE(kb_noc_free, n);
    T_FREE(kb_fabric_free, f);
    T_FREE(sim_free, s);
}

struct xfer {
    struct kb_fabric *f;
    int links[16];
    int n;
    sim_time end;
    int rc;
};

static void xfer_thread(struct sim *s, void *arg)
{
    struct xfer *x = arg;
    x->rc = kb_fabric_transfer(x->f, x->links, x->n, 4096);
    x->end = sim_now(s);
}

TEST(transfer_across_the_mesh)
{
    /* corner to corner: 6 hops of 1.7 ns + 1 ns, then 15 flits × 1 ns */
    struct net t;
    ASSERT_TRUE(net_open(&t, KB_NOC_MESH, "c", 4, 4));
    struct xfer x = {t.f, {0}, 0, 0, 0};
    x.n = kb_noc_route(t.n, 0, 15, x.links, 16);
    ASSERT_EQ(x.n, 6);
    ASSERT_TRUE(sim_thread(t.s, "x", xfer_thread, &x, 0));
    ASSERT_EQ(sim_run(t.s, SIM_FOREVER), SIM_DONE);
    ASSERT_OK(x.rc);
    ASSERT_U64_EQ(x.end, 6 * 2700 + 15 * 1000);
    ASSERT_U64_EQ(x.end, kb_fabric_path_time(t.f, x.links, 6, 4096));
    net_close(&t);
}

TEST_MAIN(mesh_4x4_xy, torus_3x2_wraps, torus_2x3_wraps, ring_of_6,
          ring_of_2_has_two_links_each_way, switch_one_hop_through_crossbar,
          existing_nodes, errors, transfer_across_the_mesh)
