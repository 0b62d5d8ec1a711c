/* topology_schema.c — the schema of topology.yaml and its consistency rules
 * (SIP grid resolution, GEMM tiling), filling struct kb_topology_cfg */
#include "topology_schema.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

const char *const kb_topo_kind_names[] = {"ring_1d", "torus_2d", "mesh_2d", "mesh_2d_no_wrap",
                                          NULL};
const char *const kb_topo_buffer_kind_names[] = {"tcm", "sram", "hbm", NULL};
const char *const kb_topo_backpressure_names[] = {"sleep", "poll", NULL};

#define F(field) offsetof(struct kb_topology_cfg, field)
#define GT0 KB_CONFIG_F_GT_MIN
#define GE KB_CONFIG_F_MIN
#define LE KB_CONFIG_F_MAX
#define OPT KB_CONFIG_F_OPTIONAL
#define POW2 KB_CONFIG_F_POW2
#define INT(n, f, fl, lo, hi, d) {n, KB_CONFIG_T_INT, fl, lo, hi, NULL, NULL, F(f), d}
#define BYTES(n, f, fl, lo, hi, d) {n, KB_CONFIG_T_BYTES, fl, lo, hi, NULL, NULL, F(f), d}
#define FLOAT(n, f, fl, lo, d) {n, KB_CONFIG_T_FLOAT, fl, lo, 0, NULL, NULL, F(f), d}
#define ENUM(n, f, ch, d) {n, KB_CONFIG_T_ENUM, 0, 0, 0, ch, NULL, F(f), d}
#define MAP(n, sub, d) {n, KB_CONFIG_T_MAP, 0, 0, 0, NULL, sub, 0, d}

static const struct kb_config_key sips_keys[] = {
    INT("count", sips.count, GE | LE, 1, 4096, "number of SIPs"),
    ENUM("topology", sips.topology, kb_topo_kind_names, "how the SIPs are connected"),
    INT("w", sips.w, OPT | GE | LE, 1, 4096, "SIP grid width (2-D topologies)"),
    INT("h", sips.h, OPT | GE | LE, 1, 4096, "SIP grid height (2-D topologies)"),
    {0},
};
static const struct kb_config_key cube_mesh_keys[] = {
    INT("w", sip.cube_mesh.w, GE | LE, 1, 64, "cubes per row"),
    INT("h", sip.cube_mesh.h, GE | LE, 1, 64, "cubes per column"),
    {0},
};
static const struct kb_config_key sip_keys[] = {
    MAP("cube_mesh", cube_mesh_keys, "the cube mesh of one SIP"),
    {0},
};
static const struct kb_config_key noc_keys[] = {
    FLOAT("bandwidth_gbps", cube.noc.bandwidth_gbps, GT0, 0, "NoC link bandwidth, GB/s"),
    FLOAT("ns_per_mm", cube.noc.ns_per_mm, GE, 0, "wire delay, ns per mm"),
    FLOAT("cube_mm", cube.noc.cube_mm, GT0, 0, "cube edge length, mm"),
    FLOAT("router_overhead_ns", cube.noc.router_overhead_ns, GE, 0, "per router, ns"),
    {0},
};
static const struct kb_config_key sram_keys[] = {
    BYTES("capacity", cube.sram.capacity, GT0, 0, 0, "SRAM per cube, bytes"),
    FLOAT("bandwidth_gbps", cube.sram.bandwidth_gbps, GT0, 0, "SRAM bandwidth, GB/s"),
    FLOAT("setup_ns", cube.sram.setup_ns, GE, 0, "SRAM access setup, ns"),
    FLOAT("link_gbps", cube.sram.link_gbps, GT0, 0, "PE to SRAM link, GB/s"),
    {0},
};
static const struct kb_config_key cube_keys[] = {
    INT("pes_per_corner", cube.pes_per_corner, GE | LE, 1, 64, "PEs at each corner"),
    INT("corners", cube.corners, GE | LE, 1, 4, "corners holding PEs"),
    MAP("noc", noc_keys, "the cube's network on chip"),
    MAP("sram", sram_keys, "the cube's shared SRAM"),
    {0},
};
static const struct kb_config_key tcm_keys[] = {
    BYTES("capacity", pe.tcm.capacity, GT0, 0, 0, "TCM per PE, bytes"),
    FLOAT("bandwidth_gbps", pe.tcm.bandwidth_gbps, GT0, 0, "TCM bandwidth, GB/s"),
    FLOAT("setup_ns", pe.tcm.setup_ns, GE, 0, "TCM access setup, ns"),
    {0},
};
static const struct kb_config_key hbm_keys[] = {
    INT("pseudo_channels", pe.hbm.pseudo_channels, GE | LE | POW2, 1, 1024,
        "pseudo-channels per PE (selected by address bits)"),
    FLOAT("channel_gbps", pe.hbm.channel_gbps, GT0, 0, "per pseudo-channel, GB/s"),
    FLOAT("setup_ns", pe.hbm.setup_ns, GE, 0, "HBM access setup, ns"),
    INT("burst_bytes", pe.hbm.burst_bytes, GE | POW2, 1, 0, "burst; interleave granule"),
    BYTES("capacity", pe.hbm.capacity, GT0, 0, 0, "HBM per PE, bytes"),
    FLOAT("link_gbps", pe.hbm.link_gbps, GT0, 0, "PE to HBM link, GB/s"),
    {0},
};
static const struct kb_config_key dma_keys[] = {
    INT("read_channels", pe.dma.read_channels, GE | LE, 1, 64, "DMA read channels"),
    INT("write_channels", pe.dma.write_channels, GE | LE, 1, 64, "DMA write channels"),
    INT("comm_channels", pe.dma.comm_channels, GE | LE, 1, 64, "vc_comm channels (IPCQ)"),
    {0},
};
static const struct kb_config_key math_keys[] = {
    INT("vector_bytes_per_cycle", pe.math.vector_bytes_per_cycle, GE, 1, 0,
        "vector unit width, bytes per cycle"),
    {0},
};
static const struct kb_config_key mac_keys[] = {
    INT("m", pe.gemm.mac.m, GE, 1, 0, "MAC array rows"),
    INT("n", pe.gemm.mac.n, GE, 1, 0, "MAC array columns"),
    INT("k", pe.gemm.mac.k, GE, 1, 0, "MAC array depth"),
    {0},
};
static const struct kb_config_key tile_keys[] = {
    INT("m", pe.gemm.tile.m, GE, 1, 0, "tile rows"),
    INT("n", pe.gemm.tile.n, GE, 1, 0, "tile columns"),
    INT("k", pe.gemm.tile.k, GE, 1, 0, "tile depth"),
    {0},
};
static const struct kb_config_key gemm_keys[] = {
    MAP("mac", mac_keys, "MACs per cycle, m x n x k"),
    MAP("tile", tile_keys, "GEMM tile, m x n x k"),
    {0},
};
static const struct kb_config_key cpu_keys[] = {
    INT("dispatch_cycles", pe.cpu.dispatch_cycles, GE, 0, 0, "per kernel op, cycles"),
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
    INT("connections", ucie.connections, GE | LE, 1, 64, "connections per port"),
    FLOAT("gbps_per_connection", ucie.gbps_per_connection, GT0, 0, "GB/s per connection"),
    FLOAT("port_overhead_ns", ucie.port_overhead_ns, GE, 0, "per port, ns"),
    {0},
};
static const struct kb_config_key ipcq_keys[] = {
    INT("n_slots", ipcq.n_slots, GE | LE, 1, 65536, "ring slots per direction"),
    BYTES("slot_size", ipcq.slot_size, GE, 1, 0, "bytes per slot"),
    ENUM("buffer_kind", ipcq.buffer_kind, kb_topo_buffer_kind_names, "slot memory"),
    ENUM("backpressure", ipcq.backpressure, kb_topo_backpressure_names, "no credit: wait how"),
    INT("credit_bytes", ipcq.credit_bytes, GE, 1, 0, "credit message size"),
    {0},
};
static const struct kb_config_key topo_keys[] = {
    MAP("sips", sips_keys, "the SIPs and how they connect"),
    MAP("sip", sip_keys, "one SIP"),
    MAP("cube", cube_keys, "one cube"),
    MAP("pe", pe_keys, "one PE"),
    MAP("ucie", ucie_keys, "UCIe ports, cube to cube and SIP to SIP"),
    INT("flit_bytes", flit_bytes, GE, 1, 0, "flit size, bytes"),
    FLOAT("clock_ghz", clock_ghz, GT0, 0, "PE clock, GHz"),
    MAP("ipcq", ipcq_keys, "PE_IPCQ ring buffers"),
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

int kb_topo_cfg_from_tree(struct kb_config *c, const struct kb_config_node *root,
                          struct kb_topology_cfg *cfg)
{
    size_t before = c->errors->n;
    memset(cfg, 0, sizeof *cfg);
    /* enums start invalid so the checks below can tell "not read" */
    cfg->sips.topology = cfg->ipcq.buffer_kind = cfg->ipcq.backpressure = -1;
    if (!root)
        return -1;
    kb_config_schema_apply(c, topo_keys, root, "", cfg);
    if (root->kind != KB_CONFIG_MAP)
        return -1;
    resolve_sips(c, root, cfg);
    check_tile(c, root, "m", cfg->pe.gemm.tile.m, cfg->pe.gemm.mac.m);
    check_tile(c, root, "n", cfg->pe.gemm.tile.n, cfg->pe.gemm.mac.n);
    check_tile(c, root, "k", cfg->pe.gemm.tile.k, cfg->pe.gemm.mac.k);
    cfg->pes_per_cube = cfg->cube.pes_per_corner * cfg->cube.corners;
    cfg->cubes_per_sip = cfg->sip.cube_mesh.w * cfg->sip.cube_mesh.h;
    cfg->n_pes = (int64_t)cfg->sips.count * cfg->cubes_per_sip * cfg->pes_per_cube;
    return c->errors->n == before ? 0 : -1;
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
