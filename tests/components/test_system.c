/* test_system.c — the system builder: node and link counts derived by hand,
 * names, exact routes (same cube, other cube, other SIP, wrap), path time
 * against the closed form, neighbour maps at edges and wraps, transfers
 * with payload and in timing-only mode */
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "system.h"
/* a system build makes thousands of allocations from a few dozen call
 * sites: under --failalloc, every site's first one, the first 40 and 50
 * spread over the rest fail in turn (the ASan run stays in minutes) */
#define TEST_FAILALLOC_ALL 40
#include "test.h"

/* The name of link `id`, made on first use: NULL when out of memory. */
static const char *link_name(struct kb_fabric *f, int id)
{
    struct kb_link *l = kb_fabric_link(f, id);
    return l ? kb_link_name(l) : NULL;
}
#include "topology_schema.h"

#define TOPO_DEFAULTS KBSIM_SOURCE_DIR "/configs/topology.yaml"

/* The default topology with `user` laid over it. */
static int load(struct kb_topology_cfg *cfg, const char *user)
{
    struct kb_config_errors errs;
    kb_config_errors_init(&errs);
    struct kb_config_src src = {
        .defaults_path = TOPO_DEFAULTS, .user_name = "user.yaml", .user_text = user};
    int rc = kb_topo_cfg_load(cfg, &src, &errs);
    if (!test__injected())
        kb_config_errors_print(&errs, stderr);
    kb_config_errors_release(&errs);
    return rc;
}

struct fixture {
    struct sim *s;
    struct kb_system *sys;
    char err[256];
};

static int open_sys(struct fixture *t, const char *user, bool timing_only)
{
    struct kb_topology_cfg cfg;
    t->s = T_OWN(sim_new(NULL), sim_free);
    t->sys = NULL;
    if (!t->s)
        return 0;
    if (load(&cfg, user) < 0)
        return 0;
    struct kb_system_opts o = {timing_only};
    t->sys = T_OWN(kb_system_new(t->s, &cfg, &o, t->err, sizeof t->err), kb_system_free);
    if (!t->sys && !test__injected())
        fprintf(stderr, "%s\n", t->err);
    return t->sys != NULL;
}

static void close_sys(struct fixture *t)
{
    T_FREE(kb_system_free, t->sys);
    T_FREE(sim_free, t->s);
}

/* Counts. Per cube: 9 routers + 1 SRAM + 8 PEs + 8 HBMs = 26 nodes;
 * links: the 3×3 NoC mesh 2·(2·3 + 3·2) = 24, router<->SRAM 2, per PE
 * 2 to its router and 2 to its HBM = 32, so 58. The cubes of all SIPs form
 * one global grid of (sips.w·4) × (sips.h·4) cubes with 2 directed UCIe
 * links per adjacent pair, plus the wrap pairs where the SIP topology
 * wraps a dimension of >= 2 SIPs:
 *   default, ring of 2: grid 8×4, x wraps: x pairs 8·4 = 32, y pairs
 *     8·3 = 24, so 2·56 = 112 UCIe; 32 cubes: 832 nodes, 32·58 + 112 =
 *     1968 links.
 *   6-SIP ring: grid 24×4, x wraps: 24·4 + 24·3 = 168 pairs, 336 UCIe;
 *     96 cubes: 2496 nodes, 96·58 + 336 = 5904 links.
 *   torus_2d 2×3 and mesh_2d 2×3 (both wrap): grid 8×12: 8·12 + 8·12 =
 *     192 pairs, 384 UCIe: 5568 + 384 = 5952 links.
 *   mesh_2d_no_wrap 2×3: 7·12 + 8·11 = 172 pairs, 344 UCIe: 5912 links.
 *   16-SIP ring (2048 PEs): 256 cubes: 6656 nodes, grid 64×4: 64·4 + 64·3
 *     = 448 pairs: 256·58 + 896 = 15744 links. */
static void check_counts(const char *user, int sips, int cubes, int pes, int nodes, int links)
{
    struct fixture t;
    if (!open_sys(&t, user, false)) {
        close_sys(&t);
        TEST__STOP_OR_FAIL(1, "cannot build '%s'", user);
    }
    struct kb_system_counts n;
    kb_system_get_counts(t.sys, &n);
    close_sys(&t);
    ASSERT_EQ(n.sips, sips);
    ASSERT_EQ(n.cubes, cubes);
    ASSERT_EQ(n.pes, pes);
    ASSERT_EQ(n.nodes, nodes);
    ASSERT_EQ(n.links, links);
}

TEST(counts_default) { check_counts("{}", 2, 32, 256, 832, 1968); }

TEST(counts_six_sips)
{
    if (test_failalloc_mode)
        return; /* under the shim: counts_default's call sites, 10x the runs */
    check_counts("sips: {count: 6, topology: ring_1d}", 6, 96, 768, 2496, 5904);
    check_counts("sips: {count: 6, topology: torus_2d, w: 2, h: 3}", 6, 96, 768, 2496, 5952);
    check_counts("sips: {count: 6, topology: mesh_2d, w: 2, h: 3}", 6, 96, 768, 2496, 5952);
    check_counts("sips: {count: 6, topology: mesh_2d_no_wrap, w: 2, h: 3}", 6, 96, 768, 2496,
                 5912);
}

TEST(counts_sixteen_sips)
{
    if (test_failalloc_mode)
        return; /* under the shim: counts_default's call sites, 10x the runs */
    check_counts("sips: {count: 16}", 16, 256, 2048, 6656, 15744);
    /* one SIP: no inter-SIP links, the 4×4 mesh's 48 */
    check_counts("sips: {count: 1}", 1, 16, 128, 416, 16 * 58 + 48);
}

TEST(names_and_ranks)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t, "{}", false));
    struct kb_fabric *f = kb_system_fabric(t.sys);
    const struct kb_pe *pe = kb_system_pe(t.sys, 5 * 8 + 3);
    ASSERT_STREQ(pe->name, "sip0.cube5.pe3");
    ASSERT_EQ(pe->sip, 0);
    ASSERT_EQ(pe->cube, 5);
    ASSERT_EQ(pe->local_pe, 3);
    ASSERT_STREQ(kb_fabric_node_name(f, pe->hbm_node), "sip0.cube5.pe3.hbm");
    ASSERT_STREQ(kb_fabric_node_name(f, pe->sram_node), "sip0.cube5.sram");
    ASSERT_TRUE(kb_fabric_find_node(f, "sip0.cube5.r2") >= 0);
    ASSERT_EQ(kb_system_rank_of_node(t.sys, pe->node), 43);
    ASSERT_EQ(kb_system_rank_of_node(t.sys, pe->hbm_node), -1);
    pe = kb_system_pe(t.sys, 128);
    ASSERT_STREQ(pe->name, "sip1.cube0.pe0");
    ASSERT_TRUE(kb_system_pe(t.sys, 256) == NULL);
    ASSERT_TRUE(kb_system_pe(t.sys, -1) == NULL);
    /* the memories and the nodes they hang off */
    int node;
    ASSERT_TRUE(kb_pe_mem(pe, KB_MEM_TCM, &node) == pe->tcm && node == pe->node);
    ASSERT_TRUE(kb_pe_mem(pe, KB_MEM_HBM, &node) == pe->hbm && node == pe->hbm_node);
    ASSERT_TRUE(kb_pe_mem(pe, KB_MEM_SRAM, &node) == pe->sram && node == pe->sram_node);
    ASSERT_TRUE(kb_pe_mem(kb_system_pe(t.sys, 129), KB_MEM_SRAM, NULL) == pe->sram);
    ASSERT_U64_EQ(kb_mem_params(pe->hbm)->capacity, (uint64_t)2 << 30);
    ASSERT_EQ(kb_mem_params(pe->hbm)->n_channels, 8);
    ASSERT_TRUE(link_name(f, 1800)); /* NULL: out of memory */
    ASSERT_TRUE(kb_fabric_find_link(f, kb_fabric_find_node(f, "sip0.cube3.r5"),
                                    kb_fabric_find_node(f, "sip1.cube0.r3")) >= 0);
    close_sys(&t);
}

/* The route between two named nodes as "name name ...", checking that the
 * links join head to tail and end at the destination. */
static const char *route_str(struct kb_system *sys, const char *a, const char *b, int *hops)
{
    static char buf[2048];
    struct kb_fabric *f = kb_system_fabric(sys);
    int src = kb_fabric_find_node(f, a), dst = kb_fabric_find_node(f, b);
    int links[256];
    int k = kb_system_route(sys, src, dst, links, 256);
    if (k < 0)
        return kb_system_errmsg(sys);
    *hops = k;
    size_t len = (size_t)snprintf(buf, sizeof buf, "%s", a);
    int at = src;
    for (int i = 0; i < k; i++) {
        if (kb_fabric_link_src(f, links[i]) != at)
            return "broken";
        at = kb_fabric_link_dst(f, links[i]);
        len += (size_t)snprintf(buf + len, sizeof buf - len, " %s", kb_fabric_node_name(f, at));
    }
    return at == dst ? buf : "wrong end";
}

TEST(routes)
{
    struct fixture t;
    int h = -1;
    ASSERT_TRUE(open_sys(&t, "{}", false));
    struct kb_system *s = t.sys;
    /* same corner */
    ASSERT_STREQ(route_str(s, "sip0.cube0.pe0", "sip0.cube0.pe1", &h),
                 "sip0.cube0.pe0 sip0.cube0.r0 sip0.cube0.pe1");
    ASSERT_EQ(h, 2);
    /* opposite corners of one cube: XY, horizontal first */
    ASSERT_STREQ(route_str(s, "sip0.cube0.pe0", "sip0.cube0.pe7", &h),
                 "sip0.cube0.pe0 sip0.cube0.r0 sip0.cube0.r1 sip0.cube0.r2 sip0.cube0.r5 "
                 "sip0.cube0.r8 sip0.cube0.pe7");
    ASSERT_EQ(h, 6);
    /* another cube: E across cube 1, then S into cube 5 */
    ASSERT_STREQ(route_str(s, "sip0.cube0.pe0", "sip0.cube5.pe0", &h),
                 "sip0.cube0.pe0 sip0.cube0.r0 sip0.cube0.r1 sip0.cube0.r2 sip0.cube0.r5 "
                 "sip0.cube1.r3 sip0.cube1.r4 sip0.cube1.r7 sip0.cube5.r1 sip0.cube5.r0 "
                 "sip0.cube5.pe0");
    ASSERT_EQ(h, 10);
    /* another SIP: the E edge of SIP 0 faces the W edge of SIP 1 */
    ASSERT_STREQ(route_str(s, "sip0.cube3.pe0", "sip1.cube0.pe0", &h),
                 "sip0.cube3.pe0 sip0.cube3.r0 sip0.cube3.r1 sip0.cube3.r2 sip0.cube3.r5 "
                 "sip1.cube0.r3 sip1.cube0.r0 sip1.cube0.pe0");
    ASSERT_EQ(h, 7);
    /* the ring's wrap link is the shorter way (1 cube step, not 7) */
    ASSERT_STREQ(route_str(s, "sip0.cube0.pe0", "sip1.cube3.pe0", &h),
                 "sip0.cube0.pe0 sip0.cube0.r0 sip0.cube0.r3 sip1.cube3.r5 sip1.cube3.r4 "
                 "sip1.cube3.r3 sip1.cube3.r0 sip1.cube3.pe0");
    ASSERT_EQ(h, 7);
    /* memories: own HBM directly, the SRAM through the centre router,
     * another PE's HBM through that PE */
    ASSERT_STREQ(route_str(s, "sip0.cube0.pe0", "sip0.cube0.pe0.hbm", &h),
                 "sip0.cube0.pe0 sip0.cube0.pe0.hbm");
    ASSERT_STREQ(route_str(s, "sip0.cube0.pe0", "sip0.cube0.sram", &h),
                 "sip0.cube0.pe0 sip0.cube0.r0 sip0.cube0.r1 sip0.cube0.r4 sip0.cube0.sram");
    ASSERT_STREQ(route_str(s, "sip0.cube0.pe0.hbm", "sip0.cube0.pe2.hbm", &h),
                 "sip0.cube0.pe0.hbm sip0.cube0.pe0 sip0.cube0.r0 sip0.cube0.r1 "
                 "sip0.cube0.r2 sip0.cube0.pe2 sip0.cube0.pe2.hbm");
    ASSERT_STREQ(route_str(s, "sip0.cube0.pe0", "sip0.cube0.pe0", &h), "sip0.cube0.pe0");
    ASSERT_EQ(h, 0);
    /* a short buffer gets the route's head and its full length (routes
     * have no length limit); a bad node is an error */
    int links[4], full[256];
    int n = kb_system_route(s, 0, kb_system_pe(s, 255)->node, full, 256);
    ASSERT_TRUE(n > 4);
    ASSERT_EQ(kb_system_route(s, 0, kb_system_pe(s, 255)->node, links, 4), n);
    ASSERT_EQ(memcmp(links, full, sizeof links), 0);
    ASSERT_EQ(kb_system_route(s, 0, 100000, links, 4), SIM_EINVAL);
    close_sys(&t);
}

/* Every route between pseudo-random node pairs joins up, ends where it
 * should and fits kb_system_max_hops, on each SIP topology. */
TEST(routes_all_shapes)
{
    if (test_failalloc_mode)
        return; /* under the shim: counts_default's call sites, 10x the runs */
    const char *shapes[] = {"{}", "sips: {count: 6, topology: torus_2d, w: 2, h: 3}",
                            "sips: {count: 6, topology: mesh_2d_no_wrap, w: 3, h: 2}",
                            "sips: {count: 5}", "sip: {cube_mesh: {w: 1, h: 3}}"};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        struct fixture t;
        ASSERT_TRUE(open_sys(&t, shapes[i], false));
        struct kb_fabric *f = kb_system_fabric(t.sys);
        int n = kb_fabric_node_count(f), max = kb_system_max_hops(t.sys);
        int *links = T_OWN(malloc((size_t)max * sizeof *links), free);
        ASSERT_TRUE(links);
        unsigned seed = 12345;
        int bad = 0;
        for (int k = 0; k < 3000 && !bad; k++) {
            seed = seed * 1103515245u + 12345u;
            int a = (int)((seed >> 8) % (unsigned)n);
            seed = seed * 1103515245u + 12345u;
            int b = (int)((seed >> 8) % (unsigned)n);
            int h = kb_system_route(t.sys, a, b, links, max);
            int at = a;
            for (int j = 0; j < h; j++) {
                bad |= kb_fabric_link_src(f, links[j]) != at;
                at = kb_fabric_link_dst(f, links[j]);
            }
            bad |= h < 0 || at != b;
        }
        T_FREE(free, links);
        close_sys(&t);
        ASSERT_EQ(bad, 0);
    }
}

struct xfer {
    struct kb_system *sys;
    int a, b;
    uint64_t bytes;
    sim_time end;
    int rc;
};

static void xfer_thread(struct sim *s, void *arg)
{
    struct xfer *x = arg;
    x->rc = kb_system_transfer(x->sys, x->a, 0, x->b, 4096, x->bytes);
    x->end = sim_now(s);
}

/* 4096 B = 16 flits of 256 B from sip0.cube0.pe0 to sip0.cube1.pe0: links
 * pe->r0 (256 GB/s, 0 ns), r0->r1, r1->r2, r2->r5 (256 GB/s, 0.85 ns each),
 * UCIe (512 GB/s, 16 ns overhead), cube1 r3->r0 (0.85 ns), r0->pe (0 ns).
 * Head: 1 + 3·(0.85 + 1) + (16 + 0.5) + (0.85 + 1) + 1 = 25.9 ns; the 15
 * other flits at the slowest link, 1 ns each: 40.9 ns. */
TEST(path_time_closed_form)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t, "{}", false));
    int a = kb_system_pe(t.sys, 0)->node, b = kb_system_pe(t.sys, 8)->node;
    ASSERT_EQ(kb_system_path_time(t.sys, a, b, 4096), 40900);
    /* same corner: 2 hops of 1 ns head + 15 ns body */
    ASSERT_EQ(kb_system_path_time(t.sys, a, kb_system_pe(t.sys, 1)->node, 4096), 17000);
    /* against kb_fabric_path_time on the route itself */
    int links[64];
    int k = kb_system_route(t.sys, a, kb_system_pe(t.sys, 255)->node, links, 64);
    ASSERT_TRUE(k > 0);
    ASSERT_EQ(kb_system_path_time(t.sys, a, kb_system_pe(t.sys, 255)->node, 1000),
              kb_fabric_path_time(kb_system_fabric(t.sys), links, k, 1000));
    /* the simulated transfer takes exactly the closed form */
    struct xfer x = {t.sys, 0, 8, 4096, 0, -1};
    ASSERT_TRUE(sim_thread(t.s, "x", xfer_thread, &x, 0));
    ASSERT_EQ(sim_run(t.s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(x.rc, 0);
    ASSERT_EQ(x.end, 40900);
    close_sys(&t);
}

TEST(neighbours_default)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t, "{}", false));
    struct kb_system *s = t.sys;
    /* sip0.cube0.pe3 at the NW corner of the cube mesh */
    ASSERT_EQ(kb_system_neighbor(s, 3, KB_DIR_N), -1);
    ASSERT_EQ(kb_system_neighbor(s, 3, KB_DIR_W), -1);
    ASSERT_EQ(kb_system_neighbor(s, 3, KB_DIR_E), 1 * 8 + 3);
    ASSERT_EQ(kb_system_neighbor(s, 3, KB_DIR_S), 4 * 8 + 3);
    /* cube 15 at the SE corner */
    ASSERT_EQ(kb_system_neighbor(s, 120, KB_DIR_E), -1);
    ASSERT_EQ(kb_system_neighbor(s, 120, KB_DIR_S), -1);
    ASSERT_EQ(kb_system_neighbor(s, 120, KB_DIR_N), 88);
    ASSERT_EQ(kb_system_neighbor(s, 120, KB_DIR_W), 112);
    /* a ring of two: E and W both lead to the other SIP; no N/S */
    ASSERT_EQ(kb_system_neighbor(s, 3, KB_DIR_GLOBAL_E), 131);
    ASSERT_EQ(kb_system_neighbor(s, 3, KB_DIR_GLOBAL_W), 131);
    ASSERT_EQ(kb_system_neighbor(s, 131, KB_DIR_GLOBAL_E), 3);
    ASSERT_EQ(kb_system_neighbor(s, 3, KB_DIR_GLOBAL_N), -1);
    ASSERT_EQ(kb_system_neighbor(s, 3, KB_DIR_GLOBAL_S), -1);
    ASSERT_EQ(kb_system_neighbor(s, 256, KB_DIR_E), -1);
    ASSERT_EQ(kb_system_dir_parse("global_E"), KB_DIR_GLOBAL_E);
    ASSERT_EQ(kb_system_dir_parse("up"), -1);
    ASSERT_STREQ(kb_system_dir_name(KB_DIR_W), "W");
    close_sys(&t);
}

/* rank of (sip, cube 10, local 0) */
#define R(sip) ((sip) * 128 + 80)

TEST(neighbours_sip_topologies)
{
    if (test_failalloc_mode)
        return; /* under the shim: counts_default's call sites, 10x the runs */
    struct fixture t;
    ASSERT_TRUE(open_sys(&t, "sips: {count: 6}", false));
    ASSERT_EQ(kb_system_neighbor(t.sys, R(5), KB_DIR_GLOBAL_E), R(0));
    ASSERT_EQ(kb_system_neighbor(t.sys, R(0), KB_DIR_GLOBAL_W), R(5));
    ASSERT_EQ(kb_system_neighbor(t.sys, R(2), KB_DIR_GLOBAL_E), R(3));
    ASSERT_EQ(kb_system_neighbor(t.sys, R(2), KB_DIR_GLOBAL_N), -1);
    close_sys(&t);

    /* torus 2 wide, 3 high: SIP (x, y) = y·2 + x */
    ASSERT_TRUE(open_sys(&t, "sips: {count: 6, topology: torus_2d, w: 2, h: 3}", false));
    ASSERT_EQ(kb_system_neighbor(t.sys, R(0), KB_DIR_GLOBAL_N), R(4));
    ASSERT_EQ(kb_system_neighbor(t.sys, R(0), KB_DIR_GLOBAL_S), R(2));
    ASSERT_EQ(kb_system_neighbor(t.sys, R(0), KB_DIR_GLOBAL_E), R(1));
    ASSERT_EQ(kb_system_neighbor(t.sys, R(0), KB_DIR_GLOBAL_W), R(1));
    ASSERT_EQ(kb_system_neighbor(t.sys, R(5), KB_DIR_GLOBAL_S), R(1));
    close_sys(&t);

    ASSERT_TRUE(open_sys(&t, "sips: {count: 6, topology: mesh_2d_no_wrap, w: 2, h: 3}",
                         false));
    ASSERT_EQ(kb_system_neighbor(t.sys, R(0), KB_DIR_GLOBAL_N), -1);
    ASSERT_EQ(kb_system_neighbor(t.sys, R(0), KB_DIR_GLOBAL_W), -1);
    ASSERT_EQ(kb_system_neighbor(t.sys, R(0), KB_DIR_GLOBAL_E), R(1));
    ASSERT_EQ(kb_system_neighbor(t.sys, R(0), KB_DIR_GLOBAL_S), R(2));
    ASSERT_EQ(kb_system_neighbor(t.sys, R(5), KB_DIR_GLOBAL_E), -1);
    ASSERT_EQ(kb_system_neighbor(t.sys, R(5), KB_DIR_GLOBAL_S), -1);
    ASSERT_EQ(kb_system_neighbor(t.sys, R(5), KB_DIR_GLOBAL_N), R(3));
    close_sys(&t);

    ASSERT_TRUE(open_sys(&t, "sips: {count: 1}", false));
    for (int d = KB_DIR_GLOBAL_N; d <= KB_DIR_GLOBAL_W; d++)
        ASSERT_EQ(kb_system_neighbor(t.sys, 80, (enum kb_system_dir)d), -1);
    close_sys(&t);
}

/* One transfer from rank a to rank b with a pattern in a's TCM: its end
 * time, whether b's TCM received the pattern and b's TCM pages. Returns 0,
 * or the negative code of the first call that failed. */
static int run_transfer(bool timing_only, int a, int b, uint64_t bytes, sim_time *end,
                        int *moved, uint64_t *pages)
{
    struct fixture t;
    if (!open_sys(&t, "{}", timing_only))
        return SIM_ENOMEM; /* or a message on stderr */
    unsigned char *pat = T_OWN(malloc(bytes), free), *got = T_OWN(calloc(1, bytes), free);
    if (!pat || !got)
        return SIM_ENOMEM;
    for (uint64_t i = 0; i < bytes; i++)
        pat[i] = (unsigned char)(i * 7 + 1);
    int rc = kb_mem_write(kb_system_pe(t.sys, a)->tcm, 0, pat, bytes);
    if (rc < 0)
        return rc;
    struct xfer x = {t.sys, a, b, bytes, 0, -1};
    if (!sim_thread(t.s, "x", xfer_thread, &x, 0))
        return SIM_ENOMEM;
    if ((rc = sim_run(t.s, SIM_FOREVER)) != SIM_DONE)
        return rc < 0 ? rc : SIM_EINVAL;
    if (x.rc < 0)
        return x.rc;
    if ((rc = kb_mem_read(kb_system_pe(t.sys, b)->tcm, 4096, got, bytes)) < 0)
        return rc;
    *end = x.end;
    *moved = memcmp(pat, got, bytes) == 0;
    *pages = kb_mem_pages(kb_system_pe(t.sys, b)->tcm);
    T_FREE(free, pat);
    T_FREE(free, got);
    close_sys(&t);
    return 0;
}

TEST(transfer_payload_and_timing_only)
{
    int moved;
    uint64_t pages;
    sim_time with, without;
    ASSERT_OK(run_transfer(false, 0, 200, 100000, &with, &moved, &pages));
    ASSERT_TRUE(with > 0);
    ASSERT_EQ(moved, 1);
    ASSERT_TRUE(pages > 0);
    ASSERT_OK(run_transfer(true, 0, 200, 100000, &without, &moved, &pages));
    ASSERT_EQ(without, with);
    ASSERT_EQ(moved, 0);
    ASSERT_U64_EQ(pages, 0);
}

TEST(transfer_errors)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t, "{}", false));
    /* outside a process */
    ASSERT_EQ(kb_system_transfer(t.sys, 0, 0, 1, 0, 16), SIM_EPERM);
    ASSERT_CONTAINS(kb_system_errmsg(t.sys), "not in a thread process");
    ASSERT_EQ(kb_system_transfer(t.sys, 0, 0, 999, 0, 16), SIM_EINVAL);
    ASSERT_CONTAINS(kb_system_errmsg(t.sys), "ranks 0..255");
    ASSERT_EQ(kb_system_transfer(t.sys, 0, 16 << 20, 1, 0, 1), SIM_EINVAL);
    ASSERT_CONTAINS(kb_system_errmsg(t.sys), "beyond the capacity");
    close_sys(&t);
}

TEST(bad_config)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg, "{}"), 0);
    cfg.sips.w = 3; /* 3 × 1 is not 2 SIPs */
    char err[256];
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_TRUE(kb_system_new(s, &cfg, NULL, err, sizeof err) == NULL);
    ASSERT_CONTAINS(err, "inconsistent (2 SIPs as 3x1");
    T_FREE(sim_free, s);
}

TEST(describe)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t, "{}", false));
    char buf[1024];
    kb_system_describe(t.sys, buf, sizeof buf);
    ASSERT_CONTAINS(buf, "system: 2 SIPs (ring_1d 2x1) x 4x4 cubes x 8 PEs = 256 PEs");
    ASSERT_CONTAINS(buf, "fabric: 832 nodes, 1968 links");
    ASSERT_CONTAINS(buf, "UCIe: 512 GB/s, 16 ns a crossing");
    close_sys(&t);
}

struct dma_run {
    struct kb_system *sys;
    sim_time end, formula;
    int rc;
};

static void dma_thread(struct sim *s, void *arg)
{
    struct dma_run *x = arg;
    struct kb_pe *a = kb_system_pe_units(x->sys, 0), *b = kb_system_pe(x->sys, 200);
    struct kb_dma_end src = {a->tcm, 0, a->node}, dst = {b->hbm, 4096, b->hbm_node};
    x->formula = kb_dma_time(a->dma, src, dst, 65536);
    x->rc = kb_dma_copy(a->dma, KB_DMA_WRITE, src, dst, 65536);
    x->end = sim_now(s);
}

/* The units are made on first use and their DMA routes through the system:
 * a TCM -> remote HBM copy takes kb_dma_time. */
TEST(pe_units_dma)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t, "{}", false));
    ASSERT_TRUE(kb_system_pe(t.sys, 0)->dma == NULL);
    struct kb_pe *pe = kb_system_pe_units(t.sys, 0);
    ASSERT_TRUE(pe && pe->cpu && pe->dma && pe->math && pe->gemm && pe->ipcq);
    ASSERT_EQ(kb_dma_node(pe->dma), pe->node);
    ASSERT_TRUE(kb_system_pe_units(t.sys, 256) == NULL);
    ASSERT_CONTAINS(kb_system_errmsg(t.sys), "no PE of rank 256");
    struct dma_run x = {t.sys, 0, 0, -1};
    ASSERT_TRUE(sim_thread(t.s, "x", dma_thread, &x, 0));
    ASSERT_EQ(sim_run(t.s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(x.rc, 0);
    ASSERT_TRUE(x.formula > 0 && x.formula != SIM_FOREVER);
    ASSERT_EQ(x.end, x.formula);
    close_sys(&t);
}

/* Nothing is made for a link until a run uses it: a built system has
 * made none; a transfer makes exactly the links of its route, and a
 * second one over the same route makes no more. */
TEST(links_made_on_first_use)
{
    struct fixture t;
    ASSERT_TRUE(open_sys(&t, "{}", false));
    struct kb_fabric *f = kb_system_fabric(t.sys);
    ASSERT_EQ(kb_fabric_link_count(f), 1968);
    ASSERT_EQ(kb_fabric_links_made(f), 0);
    int links[64];
    int a = kb_system_pe(t.sys, 0)->node, b = kb_system_pe(t.sys, 8)->node;
    int k = kb_system_route(t.sys, a, b, links, 64);
    ASSERT_EQ(kb_fabric_links_made(f), 0); /* routing alone makes nothing */
    struct xfer x = {t.sys, 0, 8, 4096, 0, -1};
    ASSERT_TRUE(sim_thread(t.s, "x", xfer_thread, &x, 0));
    ASSERT_EQ(sim_run(t.s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(x.rc, 0);
    ASSERT_EQ(x.end, 40900); /* the closed form, as before */
    ASSERT_EQ(kb_fabric_links_made(f), k);
    ASSERT_EQ(kb_system_path_time(t.sys, a, b, 4096), 40900);
    ASSERT_EQ(kb_fabric_links_made(f), k);
    close_sys(&t);
}

TEST_MAIN(counts_default, counts_six_sips, counts_sixteen_sips, names_and_ranks, routes,
          routes_all_shapes, path_time_closed_form, neighbours_default,
          neighbours_sip_topologies, transfer_payload_and_timing_only, transfer_errors,
          bad_config, describe, pe_units_dma, links_made_on_first_use)
