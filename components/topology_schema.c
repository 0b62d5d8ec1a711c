/* topology_schema.c — the schema of topology.yaml and its consistency rules
 * (SIP grid resolution, GEMM tiling), filling struct kb_topology_cfg */
#include "topology_schema.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const kb_topo_kind_names[] = {"ring_1d", "torus_2d", "mesh_2d", "mesh_2d_no_wrap",
                                          NULL};
const char *const kb_topo_buffer_kind_names[] = {"tcm", "sram", "hbm", NULL};
const char *const kb_topo_backpressure_names[] = {"sleep", "poll", NULL};
const char *const kb_topo_flow_control_names[] = {"wormhole_unbounded", "credit", NULL};
const char *const kb_topo_routing_names[] = {"xy", "yx", "adaptive", "adaptive_hop", NULL};
const char *const kb_topo_deadlock_names[] = {"vc_classes", "none", NULL};

#define F(field) offsetof(struct kb_topology_cfg, field)
#define GE KB_CONFIG_F_MIN
#define LE KB_CONFIG_F_MAX
#define OPT KB_CONFIG_F_OPTIONAL
#define POW2 KB_CONFIG_F_POW2
#define INT(n, f, fl, lo, hi, d) {n, KB_CONFIG_T_INT, GE | LE | (fl), lo, hi, NULL, NULL, F(f), d}
#define ENUM(n, f, ch, d) {n, KB_CONFIG_T_ENUM, 0, 0, 0, ch, NULL, F(f), d}
#define MAP(n, sub, d) {n, KB_CONFIG_T_MAP, 0, 0, 0, NULL, sub, 0, d}
/* the shared ranges of config_schema.h */
#define NS(n, f, d) {n, KB_CONFIG_T_FLOAT, GE | LE, 0, KB_CONFIG_MAX_NS, NULL, NULL, F(f), d}
#define GBPS(n, f, d)                                                                         \
    {n, KB_CONFIG_T_FLOAT, GE | LE, KB_CONFIG_MIN_GBPS, KB_CONFIG_MAX_GBPS, NULL, NULL, F(f), d}
#define SIZE(n, f, hi, d) {n, KB_CONFIG_T_BYTES, GE | LE, 1, hi, NULL, NULL, F(f), d}

static const struct kb_config_key sips_keys[] = {
    INT("count", sips.count, 0, 1, 4096, "number of SIPs"),
    ENUM("topology", sips.topology, kb_topo_kind_names, "how the SIPs are connected"),
    INT("w", sips.w, OPT, 1, 4096, "SIP grid width (2-D topologies)"),
    INT("h", sips.h, OPT, 1, 4096, "SIP grid height (2-D topologies)"),
    {0},
};
static const struct kb_config_key cube_mesh_keys[] = {
    INT("w", sip.cube_mesh.w, 0, 1, 64, "cubes per row"),
    INT("h", sip.cube_mesh.h, 0, 1, 64, "cubes per column"),
    {0},
};
static const struct kb_config_key sip_keys[] = {
    MAP("cube_mesh", cube_mesh_keys, "the cube mesh of one SIP"),
    {0},
};
static const struct kb_config_key noc_keys[] = {
    GBPS("bandwidth_gbps", cube.noc.bandwidth_gbps, "NoC link bandwidth, GB/s"),
    NS("ns_per_mm", cube.noc.ns_per_mm, "wire delay, ns per mm"),
    {"cube_mm", KB_CONFIG_T_FLOAT, GE | LE, 0.001, 1000, NULL, NULL,
     F(cube.noc.cube_mm), "cube edge length, mm"},
    NS("router_overhead_ns", cube.noc.router_overhead_ns, "per router, ns"),
    {0},
};
static const struct kb_config_key sram_keys[] = {
    SIZE("capacity", cube.sram.capacity, KB_CONFIG_MAX_SIZE, "SRAM per cube, bytes"),
    GBPS("bandwidth_gbps", cube.sram.bandwidth_gbps, "SRAM bandwidth, GB/s"),
    NS("setup_ns", cube.sram.setup_ns, "SRAM access setup, ns"),
    GBPS("link_gbps", cube.sram.link_gbps, "PE to SRAM link, GB/s"),
    {0},
};
static const struct kb_config_key cube_keys[] = {
    INT("pes_per_corner", cube.pes_per_corner, 0, 1, 64, "PEs at each corner"),
    INT("corners", cube.corners, 0, 1, 4, "corners holding PEs"),
    MAP("noc", noc_keys, "the cube's network on chip"),
    MAP("sram", sram_keys, "the cube's shared SRAM"),
    {0},
};
static const struct kb_config_key tcm_keys[] = {
    SIZE("capacity", pe.tcm.capacity, KB_CONFIG_MAX_SIZE, "TCM per PE, bytes"),
    GBPS("bandwidth_gbps", pe.tcm.bandwidth_gbps, "TCM bandwidth, GB/s"),
    NS("setup_ns", pe.tcm.setup_ns, "TCM access setup, ns"),
    {0},
};
static const struct kb_config_key hbm_keys[] = {
    INT("pseudo_channels", pe.hbm.pseudo_channels, POW2, 1, 64,
        "pseudo-channels per PE (selected by address bits)"),
    GBPS("channel_gbps", pe.hbm.channel_gbps, "per pseudo-channel, GB/s"),
    NS("setup_ns", pe.hbm.setup_ns, "HBM access setup, ns"),
    INT("burst_bytes", pe.hbm.burst_bytes, POW2, 1, 1 << 20, "burst; interleave granule"),
    SIZE("capacity", pe.hbm.capacity, KB_CONFIG_MAX_SIZE, "HBM per PE, bytes"),
    GBPS("link_gbps", pe.hbm.link_gbps, "PE to HBM link, GB/s"),
    {0},
};
static const struct kb_config_key dma_keys[] = {
    INT("read_channels", pe.dma.read_channels, 0, 1, 64, "DMA read channels"),
    INT("write_channels", pe.dma.write_channels, 0, 1, 64, "DMA write channels"),
    INT("comm_channels", pe.dma.comm_channels, 0, 1, 64, "vc_comm channels (IPCQ)"),
    {0},
};
static const struct kb_config_key math_keys[] = {
    INT("vector_bytes_per_cycle", pe.math.vector_bytes_per_cycle, 0, 1, 1 << 30,
        "vector unit width, bytes per cycle"),
    INT("transcendental_cycles", pe.math.transcendental_cycles, 0, 1, 1 << 20,
        "cycles a vector of exp or log takes"),
    {0},
};
static const struct kb_config_key mac_keys[] = {
    INT("m", pe.gemm.mac.m, 0, 1, 1024, "MAC array rows"),
    INT("n", pe.gemm.mac.n, 0, 1, 1024, "MAC array columns"),
    INT("k", pe.gemm.mac.k, 0, 1, 1024, "MAC array depth"),
    {0},
};
static const struct kb_config_key tile_keys[] = {
    INT("m", pe.gemm.tile.m, 0, 1, 4096, "tile rows"),
    INT("n", pe.gemm.tile.n, 0, 1, 4096, "tile columns"),
    INT("k", pe.gemm.tile.k, 0, 1, 4096, "tile depth"),
    {0},
};
static const struct kb_config_key gemm_keys[] = {
    MAP("mac", mac_keys, "MACs per cycle, m x n x k"),
    MAP("tile", tile_keys, "GEMM tile, m x n x k"),
    {0},
};
static const struct kb_config_key cpu_keys[] = {
    INT("dispatch_cycles", pe.cpu.dispatch_cycles, 0, 0, 1000000, "per kernel op, cycles"),
    {0},
};
static const struct kb_config_key pe_keys[] = {
    MAP("tcm", tcm_keys, "tightly coupled memory"),
    MAP("hbm", hbm_keys, "the PE's HBM controller"),
    MAP("dma", dma_keys, "PE_DMA"),
    MAP("math", math_keys, "PE_MATH"),
    MAP("gemm", gemm_keys, "PE_GEMM"),
    MAP("cpu", cpu_keys, "PE_CPU"),
    {0},
};
static const struct kb_config_key ucie_keys[] = {
    INT("connections", ucie.connections, 0, 1, 64, "connections per port"),
    GBPS("gbps_per_connection", ucie.gbps_per_connection, "GB/s per connection"),
    NS("port_overhead_ns", ucie.port_overhead_ns, "per port, ns"),
    {0},
};
static const struct kb_config_key ipcq_keys[] = {
    INT("n_slots", ipcq.n_slots, 0, 1, 65536, "ring slots per direction"),
    SIZE("slot_size", ipcq.slot_size, (double)(1 << 30), "bytes per slot"),
    ENUM("buffer_kind", ipcq.buffer_kind, kb_topo_buffer_kind_names, "slot memory"),
    ENUM("backpressure", ipcq.backpressure, kb_topo_backpressure_names, "no credit: wait how"),
    INT("credit_bytes", ipcq.credit_bytes, 0, 1, 1 << 20, "credit message size"),
    {0},
};
static const struct kb_config_key fabric_keys[] = {
    ENUM("flow_control", fabric.flow_control, kb_topo_flow_control_names,
         "wormhole_unbounded (unbounded input buffers) or credit (finite buffers, VCs)"),
    INT("buffer_flits", fabric.buffer_flits, 0, 1, 4096, "credit: input buffer per VC, flits"),
    INT("vcs", fabric.vcs, 0, 1, 16, "credit: virtual channels per port"),
    NS("credit_ns", fabric.credit_ns, "credit: credit return delay, ns"),
    ENUM("routing", fabric.routing, kb_topo_routing_names,
         "cube grid: xy, yx (dimension order), adaptive (minimal, per message) or "
         "adaptive_hop (minimal, per hop, credit mode; xy escape)"),
    ENUM("deadlock_avoidance", fabric.deadlock_avoidance, kb_topo_deadlock_names,
         "credit: vc_classes (datelines, route classes) or none"),
    {0},
};
static const struct kb_config_key topo_keys[] = {
    MAP("sips", sips_keys, "the SIPs and how they connect"),
    MAP("sip", sip_keys, "one SIP"),
    MAP("cube", cube_keys, "one cube"),
    MAP("pe", pe_keys, "one PE"),
    MAP("ucie", ucie_keys, "UCIe ports, cube to cube and SIP to SIP"),
    INT("flit_bytes", flit_bytes, 0, 1, 1 << 20, "flit size, bytes"),
    {"clock_ghz", KB_CONFIG_T_FLOAT, GE | LE, KB_CONFIG_MIN_GHZ, KB_CONFIG_MAX_GHZ, NULL, NULL,
     F(clock_ghz), "PE clock, GHz"},
    MAP("ipcq", ipcq_keys, "PE_IPCQ ring buffers"),
    MAP("fabric", fabric_keys, "flow control and routing of every link and router"),
    {0},
};

const struct kb_config_key *kb_topo_schema(void)
{
    return topo_keys;
}

/* "3x2 or 2x3": grids for `count` (w x h), squarest first, the wider
 * before its transpose; 1-row grids only when count is prime. */
static void grid_choices(int count, char *buf, size_t size)
{
    int w[4], n = 0;
    bool prime = true;
    for (int a = 2; a < count; a++)
        prime &= count % a != 0;
    /* the shorter side b falls from the square root: squarest first */
    for (int b = count; b >= 1 && n < 4; b--) {
        int a = count / b;
        if (count % b || a < b || (!prime && b == 1))
            continue;
        w[n++] = a;
        if (a != b && n < 4)
            w[n++] = b;
    }
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%dx%d",
                                i == 0 ? "" : i == n - 1 ? " or " : ", ", w[i], count / w[i]);
}

static bool is_square(int n, int *root)
{
    int r = 0;
    while ((r + 1) * (r + 1) <= n)
        r++;
    *root = r;
    return r * r == n;
}

/* The SIP grid: explicit w x h must multiply to count; without them a 2-D
 * topology needs a square count. Never guess a shape. */
static void resolve_sips(struct kb_config *c, const struct kb_config_node *root,
                         struct kb_topology_cfg *cfg)
{
    const struct kb_config_node *count = kb_config_lookup(root, "sips.count");
    const struct kb_config_node *w = kb_config_lookup(root, "sips.w");
    const struct kb_config_node *h = kb_config_lookup(root, "sips.h");
    /* a value that failed to read already has its message */
    if (!count || cfg->sips.count <= 0 || cfg->sips.topology < 0 || (w && !cfg->sips.w) ||
        (h && !cfg->sips.h))
        return;
    const char *topo = kb_topo_kind_names[cfg->sips.topology];
    if (cfg->sips.topology == KB_TOPO_RING_1D) {
        if (w || h)
            kb_config_error_at(c, w ? w : h, "'%s' applies to 2-d topologies, not %s",
                               w ? "w" : "h", topo);
        cfg->sips.w = cfg->sips.count;
        cfg->sips.h = 1;
        return;
    }
    if (w && h) {
        if ((int64_t)cfg->sips.w * cfg->sips.h != cfg->sips.count)
            kb_config_error_at(c, count, "sips.count is %d but w x h is %dx%d = %lld",
                               cfg->sips.count, cfg->sips.w, cfg->sips.h,
                               (long long)cfg->sips.w * cfg->sips.h);
        return;
    }
    if (w || h) {
        kb_config_error_at(c, w ? w : h, "'%s' given without '%s'", w ? "w" : "h",
                           w ? "h" : "w");
        return;
    }
    int r;
    if (is_square(cfg->sips.count, &r)) {
        cfg->sips.w = cfg->sips.h = r;
        return;
    }
    char grids[128];
    grid_choices(cfg->sips.count, grids, sizeof grids);
    kb_config_error_at(c, count, "%d SIPs on %s need explicit w and h (%s)", cfg->sips.count,
                       topo, grids);
}

static void check_tile(struct kb_config *c, const struct kb_config_node *root, const char *dim,
                       int tile, int mac)
{
    char path[32];
    snprintf(path, sizeof path, "pe.gemm.tile.%s", dim);
    const struct kb_config_node *n = kb_config_lookup(root, path);
    if (n && tile > 0 && mac > 0 && tile % mac)
        kb_config_error_at(c, n, "gemm tile %s %d is not a multiple of the mac array's %d", dim,
                           tile, mac);
}

/* "file:line:col" of a node, or its file alone (a Lua table, --set). */
static void node_place(const struct kb_config_node *n, char *buf, size_t len)
{
    if (n->line > 0)
        snprintf(buf, len, "%s:%d:%d", n->file, n->line, n->col);
    else
        snprintf(buf, len, "%s", n->file);
}

/* A value derived from two keys, a × b (× scale), must stay <= limit. The
 * error goes to the key nearer its own maximum (the one most likely just
 * set), and names the other key's value and place. Skipped when either
 * key failed to read (it has its message). */
static void check_product(struct kb_config *c, const struct kb_config_node *root,
                          const char *path_a, double a, double max_a, const char *path_b,
                          double b, double max_b, double scale, double limit, const char *what,
                          const char *unit)
{
    const struct kb_config_node *na = kb_config_lookup(root, path_a);
    const struct kb_config_node *nb = kb_config_lookup(root, path_b);
    if (!na || !nb || !(a > 0) || !(b > 0) || a > max_a || b > max_b)
        return;
    double v = a * b * scale;
    if (v <= limit)
        return;
    bool at_a = a / max_a >= b / max_b;
    const struct kb_config_node *here = at_a ? na : nb, *other = at_a ? nb : na;
    char where[256];
    node_place(other, where, sizeof where);
    kb_config_error_at(c, here, "%s = %g %s is above %g %s (%s is %s at %s)", what, v, unit,
                       limit, unit, at_a ? path_b : path_a, other->text, where);
}

/* Keys whose product the model uses: each within its range, the product
 * may still not be. */
static void check_products(struct kb_config *c, const struct kb_config_node *root,
                           const struct kb_topology_cfg *cfg)
{
    check_product(c, root, "cube.noc.ns_per_mm", cfg->cube.noc.ns_per_mm, KB_CONFIG_MAX_NS,
                  "cube.noc.cube_mm", cfg->cube.noc.cube_mm, 1000, 1.0 / 2,
                  KB_CONFIG_MAX_NS, "the NoC hop latency ns_per_mm x cube_mm / 2", "ns");
    check_product(c, root, "ucie.connections", cfg->ucie.connections, 64,
                  "ucie.gbps_per_connection", cfg->ucie.gbps_per_connection,
                  KB_CONFIG_MAX_GBPS, 1, KB_CONFIG_MAX_GBPS,
                  "the UCIe port bandwidth connections x gbps_per_connection", "GB/s");
    const struct kb_config_node *count = kb_config_lookup(root, "sips.count");
    int64_t n_pes = (int64_t)cfg->sips.count * cfg->sip.cube_mesh.w * cfg->sip.cube_mesh.h *
                    cfg->cube.corners * cfg->cube.pes_per_corner;
    if (count && n_pes > KB_TOPO_MAX_PES)
        kb_config_error_at(c, count,
                           "%lld PEs (sips.count x cube_mesh w x h x corners x "
                           "pes_per_corner = %d x %dx%d x %d x %d) is more than %d",
                           (long long)n_pes, cfg->sips.count, cfg->sip.cube_mesh.w,
                           cfg->sip.cube_mesh.h, cfg->cube.corners, cfg->cube.pes_per_corner,
                           KB_TOPO_MAX_PES);
}

int kb_topo_vc_classes(const struct kb_topology_cfg *cfg)
{
    if (cfg->fabric.deadlock_avoidance == KB_TOPO_DL_NONE)
        return 1;
    bool wraps = cfg->sips.topology != KB_TOPO_MESH_2D_NO_WRAP;
    /* two route phases, each with one class more if its dimension wraps
     * (system.c, classify) */
    int k = 2 + (wraps && cfg->sips.w >= 2) +
            (wraps && cfg->sips.h >= 2 && cfg->sips.topology != KB_TOPO_RING_1D);
    if (cfg->fabric.routing == KB_TOPO_ROUTE_ADAPTIVE)
        return 2 * k;
    /* adaptive_hop: the xy classes are the escape network, plus one
     * adaptive class (system.c, hop_router) */
    return cfg->fabric.routing == KB_TOPO_ROUTE_ADAPTIVE_HOP ? k + 1 : k;
}

/* Credit flow control needs a VC for every class the routing uses. */
static void check_vcs(struct kb_config *c, const struct kb_config_node *root,
                      const struct kb_topology_cfg *cfg)
{
    const struct kb_config_node *n = kb_config_lookup(root, "fabric.vcs");
    if (!n || cfg->fabric.flow_control != KB_TOPO_FC_CREDIT || cfg->fabric.vcs < 1 ||
        cfg->sips.w < 1 || cfg->fabric.routing < 0 || cfg->fabric.deadlock_avoidance < 0)
        return;
    int need = kb_topo_vc_classes(cfg);
    if (cfg->fabric.vcs < need)
        kb_config_error_at(c, n, "fabric.vcs is %d but routing %s with deadlock_avoidance "
                           "vc_classes on sips.topology %s uses %d VC classes (two route "
                           "phases, one more for each wrapping dimension%s): give at least %d, "
                           "or deadlock_avoidance: none",
                           cfg->fabric.vcs, kb_topo_routing_names[cfg->fabric.routing],
                           kb_topo_kind_names[cfg->sips.topology], need,
                           cfg->fabric.routing == KB_TOPO_ROUTE_ADAPTIVE
                               ? ", times two for the xy and yx orders"
                           : cfg->fabric.routing == KB_TOPO_ROUTE_ADAPTIVE_HOP
                               ? ", plus the adaptive class" : "",
                           need);
}

static int cfg_from_tree(struct kb_config *c, const struct kb_config_node *root,
                         struct kb_topology_cfg *cfg, bool grid)
{
    size_t before = c->errors->n;
    memset(cfg, 0, sizeof *cfg);
    /* enums start invalid so the checks below can tell "not read" */
    cfg->sips.topology = cfg->ipcq.buffer_kind = cfg->ipcq.backpressure = -1;
    cfg->fabric.flow_control = cfg->fabric.routing = cfg->fabric.deadlock_avoidance = -1;
    if (!root)
        return -1;
    kb_config_schema_apply(c, topo_keys, root, "", cfg);
    if (root->kind != KB_CONFIG_MAP)
        return -1;
    resolve_sips(c, root, cfg);
    check_tile(c, root, "m", cfg->pe.gemm.tile.m, cfg->pe.gemm.mac.m);
    check_tile(c, root, "n", cfg->pe.gemm.tile.n, cfg->pe.gemm.mac.n);
    check_tile(c, root, "k", cfg->pe.gemm.tile.k, cfg->pe.gemm.mac.k);
    check_products(c, root, cfg);
    if (grid && cfg->sips.topology >= 0)
        check_vcs(c, root, cfg);
    cfg->pes_per_cube = cfg->cube.pes_per_corner * cfg->cube.corners;
    cfg->cubes_per_sip = cfg->sip.cube_mesh.w * cfg->sip.cube_mesh.h;
    cfg->n_pes = (int64_t)cfg->sips.count * cfg->cubes_per_sip * cfg->pes_per_cube;
    return c->errors->n == before ? 0 : -1;
}

int kb_topo_cfg_from_tree(struct kb_config *c, const struct kb_config_node *root,
                          struct kb_topology_cfg *cfg)
{
    return cfg_from_tree(c, root, cfg, true);
}

int kb_topo_cfg_from_tree_graph(struct kb_config *c, const struct kb_config_node *root,
                                struct kb_topology_cfg *cfg)
{
    return cfg_from_tree(c, root, cfg, false);
}

int kb_topo_cfg_load(struct kb_topology_cfg *cfg, const struct kb_config_src *src,
                     struct kb_config_errors *errors)
{
    struct kb_config c;
    kb_config_init(&c, errors);
    size_t before = errors->n;
    struct kb_config_node *root = kb_config_load(&c, topo_keys, src);
    int r = kb_topo_cfg_from_tree(&c, root, cfg);
    kb_config_release(&c);
    return r == 0 && errors->n == before ? 0 : -1;
}
