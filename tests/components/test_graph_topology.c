/* test_graph_topology.c — the generic graph form: reading, every kind of bad
 * input with its file:line:col, BFS routes and their tie-break, a system
 * built from a graph running a timed transfer */
#include <stdlib.h>

#include "graph_topology.h"
#include "system.h"
/* reading the defaults makes hundreds of allocations from a few call
 * sites: under --failalloc, every site's first, the first 60 and 50
 * spread over the rest fail in turn (the ASan run stays short) */
#define TEST_FAILALLOC_ALL 60
#include "test.h"
#include "topology_schema.h"

#define TOPO_DEFAULTS KBSIM_SOURCE_DIR "/configs/topology.yaml"

static struct kb_config_errors errs;

static const char *all_errors(void)
{
    static char buf[8192];
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < errs.n; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? "\n" : "",
                                errs.msgs[i]);
    return buf;
}

/* Reads `text` as g.yaml into *g; returns kb_graph_cfg_from_tree's result. */
static int read_graph(const char *text, struct kb_graph_cfg *g)
{
    kb_config_errors_release(&errs);
    kb_config_errors_init(&errs);
    struct kb_config c;
    kb_config_init(&c, &errs);
    struct kb_config_node *root = kb_config_parse_string(&c, "g.yaml", text, strlen(text));
    int rc = kb_graph_cfg_from_tree(&c, root, 256, g);
    kb_config_release(&c);
    return rc;
}

/* Four PEs around one switch. */
static const char *const group4 =
    "nodes:\n"
    "  - {name: a, pe: true}\n"
    "  - {name: b, pe: true}\n"
    "  - {name: c, pe: true}\n"
    "  - {name: d, pe: true}\n"
    "  - {name: sw}\n"
    "links:\n"
    "  - {from: a, to: sw, bandwidth_gbps: 64, latency_ns: 5, bidirectional: true}\n"
    "  - {from: b, to: sw, bandwidth_gbps: 64, latency_ns: 5, bidirectional: true}\n"
    "  - {from: c, to: sw, bandwidth_gbps: 64, latency_ns: 5, bidirectional: true}\n"
    "  - {from: d, to: sw, bandwidth_gbps: 32, latency_ns: 5, overhead_ns: 2,\n"
    "     bidirectional: true}\n";

TEST(read_group)
{
    struct kb_graph_cfg g;
    ASSERT_EQ(read_graph(group4, &g), 0);
    ASSERT_EQ(g.n_nodes, 5);
    ASSERT_EQ(g.n_pes, 4);
    ASSERT_EQ(g.n_links, 8);
    ASSERT_STREQ(g.nodes[4].name, "sw");
    ASSERT_EQ(g.links[1].from, 4);
    ASSERT_EQ(g.links[1].to, 0);
    ASSERT_NEAR(g.links[6].p.bw_gbps, 32, 0);
    ASSERT_NEAR(g.links[6].p.overhead_ns, 2, 0);
    ASSERT_EQ(g.links[0].p.flit_bytes, 256);
    ASSERT_STREQ(g.nodes[1].where, "g.yaml:3:12");
    kb_graph_cfg_release(&g);
}

/* A graph system: the graph's pe, ipcq, clock_ghz and flit_bytes are laid
 * over the topology defaults, --set over them; the grid's keys are not
 * a graph's. */
static int read_graph_system(const char *text, const char *const *sets, size_t n_sets,
                             struct kb_topology_cfg *topo, struct kb_graph_cfg *g)
{
    kb_config_errors_release(&errs);
    kb_config_errors_init(&errs);
    struct kb_config c;
    kb_config_init(&c, &errs);
    struct kb_config_node *defaults = kb_config_parse_file(&c, TOPO_DEFAULTS);
    struct kb_config_node *root = kb_config_parse_string(&c, "g.yaml", text, strlen(text));
    int rc = kb_graph_system_from_tree(&c, defaults, root, sets, n_sets, topo, g);
    kb_config_release(&c);
    return rc;
}

TEST(system_keys)
{
    struct kb_topology_cfg topo;
    struct kb_graph_cfg g;
    const char *text = "flit_bytes: 64\nclock_ghz: 2\npe: {tcm: {capacity: 1MiB}}\n"
                       "ipcq: {n_slots: 8}\n"
                       "nodes: [{name: x, pe: true}, {name: y}]\n"
                       "links: [{from: x, to: y, bandwidth_gbps: 1}]\n";
    ASSERT_EQ(read_graph_system(text, NULL, 0, &topo, &g), 0);
    ASSERT_EQ(g.links[0].p.flit_bytes, 64);
    ASSERT_EQ(g.n_links, 1);
    ASSERT_EQ(topo.flit_bytes, 64);
    ASSERT_NEAR(topo.clock_ghz, 2, 0);
    ASSERT_EQ(topo.pe.tcm.capacity, 1 << 20);
    ASSERT_EQ(topo.ipcq.n_slots, 8);
    ASSERT_EQ(topo.ipcq.slot_size, 4096); /* the defaults' */
    kb_graph_cfg_release(&g);
    const char *sets[] = {"flit_bytes=128", "ipcq.n_slots=2"};
    ASSERT_EQ(read_graph_system(text, sets, 2, &topo, &g), 0);
    ASSERT_EQ(g.links[0].p.flit_bytes, 128);
    ASSERT_EQ(topo.ipcq.n_slots, 2);
    kb_graph_cfg_release(&g);
    ASSERT_EQ(read_graph_system("cube: {corners: 2}\npe: {tcm: {capacity: 0}}\n"
                                "nodes: [{name: x, pe: true}]\nlinks: []\n",
                                NULL, 0, &topo, &g), -1);
    ASSERT_CONTAINS(all_errors(), "g.yaml:1:1: 'cube' describes the AHBM grid, not a graph");
    ASSERT_CONTAINS(all_errors(), "g.yaml:2:22: expected a value >= 1 and <= 1TiB for "
                                  "'capacity', got 0");
    ASSERT_TRUE(g.nodes == NULL && g.links == NULL);
}

static void expect_error(const char *text, const char *msg)
{
    struct kb_graph_cfg g;
    ASSERT_EQ(read_graph(text, &g), -1);
    ASSERT_CONTAINS(all_errors(), msg);
    ASSERT_TRUE(g.nodes == NULL && g.links == NULL);
}

TEST(bad_inputs)
{
    expect_error("nodes: [{name: a, pe: true}, {name: b}]\n"
                 "links:\n"
                 "  - {from: a, to: zz, bandwidth_gbps: 1}\n",
                 "g.yaml:3:19: links[1]: link to unknown node 'zz'");
    expect_error("nodes: [{name: a, pe: true}, {name: b}]\n"
                 "links:\n"
                 "  - {from: q, to: b, bandwidth_gbps: 1}\n",
                 "g.yaml:3:12: links[1]: link from unknown node 'q'");
    expect_error("nodes:\n"
                 "  - {name: a, pe: true}\n"
                 "  - {name: a}\n"
                 "links: []\n",
                 "g.yaml:3:12: nodes[2]: duplicate node 'a' (first at g.yaml:2:12)");
    expect_error("nodes: [{name: a, pe: true}, {name: b}]\n"
                 "links:\n"
                 "  - {from: a, to: b, bandwidth_gbps: 0}\n",
                 "g.yaml:3:38: expected a value >= 0.001 and <= 1000000 for 'bandwidth_gbps', got 0");
    expect_error("nodes: [{name: a, pe: true}, {name: b}]\n"
                 "links:\n"
                 "  - {from: a, to: b, bandwidth_gbps: -4}\n",
                 "g.yaml:3:38: expected a value >= 0.001 and <= 1000000 for 'bandwidth_gbps', got -4");
    expect_error("nodes: [{name: a, pe: true}, {name: b}]\n"
                 "links:\n"
                 "  - {from: a, to: b, bandwidth_gbps: 1e-300}\n",
                 "g.yaml:3:38: expected a value >= 0.001 and <= 1000000 for 'bandwidth_gbps', "
                 "got 1e-300");
    expect_error("nodes: [{name: a, pe: true}, {name: b}]\n"
                 "links:\n"
                 "  - {from: a, to: b, bandwidth_gbps: 1, overhead_ns: 2e9}\n",
                 "g.yaml:3:54: expected a value >= 0 and <= 1000000000 for 'overhead_ns', "
                 "got 2e9");
    expect_error("nodes: [{name: a, pe: true}, {name: b}]\n"
                 "links:\n"
                 "  - {from: a, to: b, bandwidth_gbps: 1, latency_ns: -1}\n",
                 "g.yaml:3:53: expected a value >= 0 and <= 1000000000 for 'latency_ns', got -1");
    /* the same direction twice, once through bidirectional */
    expect_error("nodes: [{name: a, pe: true}, {name: b}]\n"
                 "links:\n"
                 "  - {from: a, to: b, bandwidth_gbps: 1, bidirectional: true}\n"
                 "  - {from: b, to: a, bandwidth_gbps: 1}\n",
                 "g.yaml:4:5: links[2]: direction 'b' -> 'a' is wired twice (first at "
                 "g.yaml:3:5)");
    expect_error("nodes: [{name: a, pe: true}]\n"
                 "links: [{from: a, to: a, bandwidth_gbps: 1}]\n",
                 "links[1]: link from 'a' to itself");
    expect_error("nodes: [{name: a, pe: true}]\nlinks: []\nlinkz: 1\n",
                 "g.yaml:3:1: unknown key 'linkz' (did you mean 'links'?)");
    expect_error("nodes: [{name: a, pe: true}]\n",
                 "g.yaml:1:1: missing key 'links'");
    expect_error("nodes: [{name: a}]\nlinks: []\n",
                 "g.yaml:1:8: the graph has no PE");
    expect_error("nodes: [{name: a, pe: true}]\nlinks: [{from: a, bandwidth_gbps: 1}]\n",
                 "missing key 'links[1].to'");
    expect_error("nodes: [{name: a, pe: yes}]\nlinks: []\n",
                 "g.yaml:1:23: expected true or false for 'pe'");
    expect_error("nodes: {a: 1}\nlinks: []\n", "g.yaml:1:8: expected a list for 'nodes'");
    /* several problems: all reported */
    expect_error("nodes: [{name: a, pe: true}, {name: a}]\n"
                 "links: [{from: a, to: x, bandwidth_gbps: 0}]\n",
                 "duplicate node 'a'");
    ASSERT_CONTAINS(all_errors(), "expected a value >= 0.001 and <= 1000000 for 'bandwidth_gbps'");
}

/* A simulation and a system built on it, owned by the test case. */
struct sysfix {
    struct sim *s;
    struct kb_system *sys;
};

static void unbuild(struct sysfix *t)
{
    kb_system_free(t->sys);
    if (t->s)
        sim_free(t->s);
    free(t);
}

/* The graph `text` built over the topology defaults, or NULL (the
 * reason in errs, or out of memory). */
static struct sysfix *build(const char *text)
{
    struct kb_topology_cfg cfg;
    struct kb_config_src src = {.defaults_path = TOPO_DEFAULTS};
    struct kb_graph_cfg g;
    kb_config_errors_release(&errs);
    kb_config_errors_init(&errs);
    if (kb_topo_cfg_load(&cfg, &src, &errs) < 0 || read_graph(text, &g) < 0)
        return NULL;
    char err[256];
    struct sysfix *t = T_OWN(calloc(1, sizeof *t), unbuild);
    if (t && (t->s = sim_new(NULL)))
        t->sys = kb_system_new_graph(t->s, &g, &cfg, NULL, err, sizeof err);
    kb_graph_cfg_release(&g);
    return t && t->sys ? t : NULL;
}

static const char *route_str(struct kb_system *sys, const char *a, const char *b)
{
    static char buf[512];
    struct kb_fabric *f = kb_system_fabric(sys);
    int links[32], at = kb_fabric_find_node(f, a);
    int k = kb_system_route(sys, at, kb_fabric_find_node(f, b), links, 32);
    if (k < 0)
        return kb_system_errmsg(sys);
    size_t len = (size_t)snprintf(buf, sizeof buf, "%s", a);
    for (int i = 0; i < k; i++) {
        if (kb_fabric_link_src(f, links[i]) != at)
            return "broken";
        at = kb_fabric_link_dst(f, links[i]);
        len += (size_t)snprintf(buf + len, sizeof buf - len, " %s", kb_fabric_node_name(f, at));
    }
    return buf;
}

TEST(routes_bfs)
{
    struct sysfix *t;
    ASSERT_TRUE((t = build(group4)));
    struct kb_system_counts n;
    kb_system_get_counts(t->sys, &n);
    ASSERT_EQ(n.nodes, 5);
    ASSERT_EQ(n.links, 8);
    ASSERT_EQ(n.pes, 4);
    ASSERT_EQ(n.sips, 0);
    ASSERT_TRUE(kb_system_is_graph(t->sys));
    ASSERT_STREQ(route_str(t->sys, "a", "c"), "a sw c");
    ASSERT_STREQ(route_str(t->sys, "d", "b"), "d sw b");
    ASSERT_STREQ(kb_system_pe(t->sys, 2)->name, "c");
    ASSERT_EQ(kb_system_rank_of_node(t->sys, kb_system_pe(t->sys, 3)->node), 3);
    ASSERT_EQ(kb_system_rank_of_node(t->sys, 4), -1);
    ASSERT_EQ(kb_system_neighbor(t->sys, 0, KB_DIR_E), -1);
    T_FREE(unbuild, t);

    /* a square a-b-d, a-c-d: two shortest ways; the lower node id wins,
     * whatever the order of the links */
    ASSERT_TRUE((t = build("nodes: [{name: a, pe: true}, {name: b}, {name: c}, {name: d, "
                          "pe: true}, {name: lone}]\n"
                          "links:\n"
                          "  - {from: c, to: d, bandwidth_gbps: 1, bidirectional: true}\n"
                          "  - {from: a, to: c, bandwidth_gbps: 1, bidirectional: true}\n"
                          "  - {from: b, to: d, bandwidth_gbps: 1, bidirectional: true}\n"
                          "  - {from: a, to: b, bandwidth_gbps: 1, bidirectional: true}\n")));
    ASSERT_STREQ(route_str(t->sys, "a", "d"), "a b d");
    ASSERT_STREQ(route_str(t->sys, "d", "a"), "d b a");
    ASSERT_STREQ(route_str(t->sys, "c", "b"), "c a b");
    ASSERT_STREQ(route_str(t->sys, "a", "lone"), "no path from 'a' to 'lone'");
    T_FREE(unbuild, t);

    /* one-way links: the way back goes round */
    ASSERT_TRUE((t = build("nodes: [{name: x, pe: true}, {name: y, pe: true}, {name: z}]\n"
                          "links:\n"
                          "  - {from: x, to: y, bandwidth_gbps: 1}\n"
                          "  - {from: y, to: z, bandwidth_gbps: 1}\n"
                          "  - {from: z, to: x, bandwidth_gbps: 1}\n")));
    ASSERT_STREQ(route_str(t->sys, "y", "x"), "y z x");
    T_FREE(unbuild, t);
}

/* A 6x6 mesh (many shortest ways between two nodes) routed from all 36
 * sources, more than the BFS trees a graph keeps: every route is the same
 * whether its source's tree is kept or searched again, whatever the order
 * of the asks. */
TEST(routes_same_when_trees_are_evicted)
{
    enum { W = 6, N = W * W };
    static char text[16384];
    size_t len = (size_t)snprintf(text, sizeof text, "nodes: [");
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s{name: n%d, pe: true}",
                                i ? ", " : "", i);
    len += (size_t)snprintf(text + len, sizeof text - len, "]\nlinks:\n");
    for (int i = 0; i < N; i++) {
        if (i % W + 1 < W)
            len += (size_t)snprintf(text + len, sizeof text - len, "  - {from: n%d, to: n%d, "
                                    "bandwidth_gbps: 1, bidirectional: true}\n", i, i + 1);
        if (i + W < N)
            len += (size_t)snprintf(text + len, sizeof text - len, "  - {from: n%d, to: n%d, "
                                    "bandwidth_gbps: 1, bidirectional: true}\n", i, i + W);
    }
    struct sysfix *t;
    ASSERT_TRUE((t = build(text)));
    static char first[N][N][128];
    char a[8], b[8];
    for (int i = 0; i < N; i++) /* source by source */
        for (int j = 0; j < N; j++) {
            snprintf(a, sizeof a, "n%d", i);
            snprintf(b, sizeof b, "n%d", j);
            snprintf(first[i][j], sizeof first[i][j], "%s", route_str(t->sys, a, b));
            /* a route, not an error (out of memory) */
            ASSERT_TRUE(strncmp(first[i][j], a, strlen(a)) == 0);
        }
    /* the corner to corner tie: BFS from n0 reaches n1 before n6 */
    ASSERT_STREQ(first[0][N - 1], "n0 n1 n2 n3 n4 n5 n11 n17 n23 n29 n35");
    ASSERT_STREQ(first[N - 1][0], "n35 n29 n23 n17 n11 n5 n4 n3 n2 n1 n0");
    for (int j = N - 1; j >= 0; j--) /* the source changing on every ask */
        for (int i = N - 1; i >= 0; i--) {
            snprintf(a, sizeof a, "n%d", i);
            snprintf(b, sizeof b, "n%d", j);
            ASSERT_STREQ(route_str(t->sys, a, b), first[i][j]);
        }
    T_FREE(unbuild, t);
}

struct xfer {
    struct kb_system *sys;
    int a, b;
    sim_time end;
    int rc;
};

static void xfer_thread(struct sim *s, void *arg)
{
    struct xfer *x = arg;
    x->rc = kb_system_transfer(x->sys, x->a, 0, x->b, 0, 4096);
    x->end = sim_now(s);
}

/* a -> sw -> d, 4096 B = 16 flits: a->sw 64 GB/s, 5 ns (4 ns a flit);
 * sw->d 32 GB/s, 5 ns, 2 ns overhead (8 ns a flit). Head: (5 + 4) +
 * (2 + 5 + 8) = 24 ns; 15 more flits at 8 ns: 144 ns in all. */
TEST(transfer_on_graph)
{
    struct sysfix *t;
    ASSERT_TRUE((t = build(group4)));
    ASSERT_EQ(kb_system_path_time(t->sys, kb_system_pe(t->sys, 0)->node,
                                  kb_system_pe(t->sys, 3)->node, 4096),
              144000);
    struct xfer x = {t->sys, 0, 3, 0, -1};
    ASSERT_TRUE(sim_thread(t->s, "x", xfer_thread, &x, 0));
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(x.rc, 0);
    ASSERT_EQ(x.end, 144000);
    char buf[256];
    kb_system_describe(t->sys, buf, sizeof buf);
    ASSERT_STREQ(buf, "graph: 5 nodes, 4 PEs, 8 links\n");
    T_FREE(unbuild, t);
}

/* the shared error list, freed so the run stays valgrind-clean */
TEST(release_errors) { kb_config_errors_release(&errs); }

TEST_MAIN(read_group, system_keys, bad_inputs, routes_bfs, routes_same_when_trees_are_evicted,
          transfer_on_graph,
          release_errors)
