/* system.c — kb_system: builds the AHBM hierarchy (or a graph) into one
 * fabric; routing, path times, neighbour maps, PE-to-PE transfers */
#include "system.h"

#include "kb_err.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "noc.h"

/* The cube NoC: a 3×3 router mesh, corners for PEs, edge middles for UCIe
 * ports, the centre for the SRAM (see system.h). */
#define NOC_SIDE 3
#define SRAM_ROUTER 4
static const int corner_router[4] = {0, 2, 6, 8};          /* NW NE SW SE */
static const int port_router[KB_NOC_NDIRS] = {5, 3, 7, 1}; /* E W S N */
static const enum kb_noc_dir opposite[KB_NOC_NDIRS] = {KB_NOC_W, KB_NOC_E, KB_NOC_N,
                                                       KB_NOC_S};
static const char *const noc_dir_name[KB_NOC_NDIRS] = {"E", "W", "S", "N"};

enum node_kind { NK_ROUTER, NK_SRAM, NK_PE, NK_HBM, NK_OTHER };

/* What routing needs to know of a node, 8 bytes a node. */
struct node_info {
    int32_t cube;  /* global cube index; a graph: the PE's rank or -1 */
    uint16_t kind; /* enum node_kind */
    uint16_t idx;  /* router index or local PE */
};

struct cube {
    struct kb_noc *noc;
    int sram_node, sram_up, sram_down;
    int ucie[KB_NOC_NDIRS]; /* outgoing UCIe link per direction, -1: none */
    struct kb_mem *sram;
};

struct pe_links {
    int up, down, to_hbm, from_hbm;
};

struct kb_system {
    struct sim *sim;
    struct kb_fabric *f;
    struct kb_topology_cfg cfg;
    bool timing_only;
    struct kb_graph *graph; /* the graph form, else NULL */

    int n_sips, cubes_per_sip, n_cubes, ppc, n_pes;
    int sw, sh, cw, ch, gw, gh; /* SIP grid, cube mesh, global cube grid */
    bool wrap_x, wrap_y;        /* the SIP topology wraps this dimension */
    int max_hops;

    struct cube *cubes;
    struct kb_pe *pes;
    struct pe_links *pl;
    struct node_info *info;
    int n_info;
    int *route_buf; /* max_hops links, for callers with a shorter buffer */
    int *send_buf;  /* kb_system_send's route */
    int *pick_buf;  /* pick_route's yx route */
    uint8_t *link_kind; /* credit mode: LK_* bits a link (classify) */
    struct held *held;  /* transfers running (a deadlocked one never returns) */
    int n_link_kind;
    char err[256];
};

/* ---- building ------------------------------------------------------------ */

/* Records a new fabric node's place; the table grows with the fabric. */
static int add_node(struct kb_system *sys, const char *name, int cube, enum node_kind kind,
                    int idx)
{
    int id = kb_fabric_add_node(sys->f, name);
    if (id < 0)
        return KB_SETERR(sys, id, "%s", kb_fabric_errmsg(sys->f));
    if (id >= sys->n_info)
        return KB_SETERR(sys, SIM_EINVAL, "node '%s': id %d beyond the node table", name, id);
    sys->info[id] = (struct node_info){cube, (uint16_t)kind, (uint16_t)idx};
    return id;
}

/* A link's parameters, with the flow control of fabric: in topology.yaml */
static struct kb_link_params link_params(const struct kb_system *sys, double bw, double latency,
                                         double overhead)
{
    const struct kb_topology_cfg *cfg = &sys->cfg;
    struct kb_link_params p = {.bw_gbps = bw, .latency_ns = latency, .overhead_ns = overhead,
                               .flit_bytes = (uint32_t)cfg->flit_bytes};
    if (cfg->fabric.flow_control == KB_TOPO_FC_CREDIT) {
        p.buffer_flits = (uint32_t)cfg->fabric.buffer_flits;
        p.vcs = (uint32_t)cfg->fabric.vcs;
        p.vc_classes = (uint32_t)kb_topo_vc_classes(cfg);
        p.credit_ns = cfg->fabric.credit_ns;
    }
    return p;
}

static int add_link(struct kb_system *sys, int src, int dst, const char *name,
                    double bw, double latency, double overhead)
{
    struct kb_link_params p = link_params(sys, bw, latency, overhead);
    int id = kb_fabric_add_link(sys->f, src, dst, name, &p);
    if (id < 0)
        KB_SETERR(sys, id, "%s", kb_fabric_errmsg(sys->f));
    return id;
}

/* Global cube grid coordinates of cube g, and back. */
static void cube_xy(const struct kb_system *sys, int g, int *x, int *y)
{
    int s = g / sys->cubes_per_sip, c = g % sys->cubes_per_sip;
    *x = (s % sys->sw) * sys->cw + c % sys->cw;
    *y = (s / sys->sw) * sys->ch + c / sys->cw;
}

static int cube_at(const struct kb_system *sys, int x, int y)
{
    int s = (y / sys->ch) * sys->sw + x / sys->cw;
    return s * sys->cubes_per_sip + (y % sys->ch) * sys->cw + x % sys->cw;
}

/* The cube next to g toward d in the global grid, or -1. */
static int cube_step(const struct kb_system *sys, int g, enum kb_noc_dir d)
{
    int x, y;
    cube_xy(sys, g, &x, &y);
    int dx = d == KB_NOC_E ? 1 : d == KB_NOC_W ? -1 : 0;
    int dy = d == KB_NOC_S ? 1 : d == KB_NOC_N ? -1 : 0;
    x += dx;
    y += dy;
    if (sys->wrap_x)
        x = (x + sys->gw) % sys->gw;
    if (sys->wrap_y)
        y = (y + sys->gh) % sys->gh;
    if (x < 0 || x >= sys->gw || y < 0 || y >= sys->gh)
        return -1;
    return cube_at(sys, x, y);
}

static int build_cube(struct kb_system *sys, int g)
{
    const struct kb_topology_cfg *cfg = &sys->cfg;
    struct cube *cb = &sys->cubes[g];
    int s = g / sys->cubes_per_sip, c = g % sys->cubes_per_sip;
    char prefix[64], name[96];
    snprintf(prefix, sizeof prefix, "sip%d.cube%d", s, c);
    double noc_bw = cfg->cube.noc.bandwidth_gbps, ovh = cfg->cube.noc.router_overhead_ns;
    int first = kb_fabric_node_count(sys->f);
    struct kb_noc_params np = {
        KB_NOC_MESH, prefix, NOC_SIDE, NOC_SIDE,
        link_params(sys, noc_bw, cfg->cube.noc.ns_per_mm * cfg->cube.noc.cube_mm / (NOC_SIDE - 1),
                    ovh),
        NULL};
    cb->noc = kb_noc_new(sys->f, &np, sys->err, sizeof sys->err);
    if (!cb->noc)
        return SIM_EINVAL;
    for (int r = 0; r < NOC_SIDE * NOC_SIDE; r++)
        sys->info[first + r] = (struct node_info){g, NK_ROUTER, (uint16_t)r};
    for (int d = 0; d < KB_NOC_NDIRS; d++)
        cb->ucie[d] = -1;

    int rs = kb_noc_node(cb->noc, SRAM_ROUTER);
    snprintf(name, sizeof name, "%s.sram", prefix);
    if ((cb->sram_node = add_node(sys, name, g, NK_SRAM, 0)) < 0 ||
        (cb->sram_down = add_link(sys, rs, cb->sram_node, NULL, cfg->cube.sram.link_gbps, 0,
                                  ovh)) < 0 ||
        (cb->sram_up = add_link(sys, cb->sram_node, rs, NULL, cfg->cube.sram.link_gbps, 0,
                                0)) < 0)
        return SIM_EINVAL;
    struct kb_mem_params sp = {KB_MEM_SRAM, cfg->cube.sram.capacity,
                               cfg->cube.sram.bandwidth_gbps, cfg->cube.sram.setup_ns, 1, 0};
    if (!(cb->sram = kb_mem_new(sys->sim, prefix, &sp, sys->err, sizeof sys->err)))
        return SIM_EINVAL;
    kb_mem_set_node(cb->sram, cb->sram_node);

    struct kb_mem_params tp = {KB_MEM_TCM, cfg->pe.tcm.capacity, cfg->pe.tcm.bandwidth_gbps,
                               cfg->pe.tcm.setup_ns, 1, 0};
    struct kb_mem_params hp = {KB_MEM_HBM, cfg->pe.hbm.capacity, cfg->pe.hbm.channel_gbps,
                               cfg->pe.hbm.setup_ns, (uint32_t)cfg->pe.hbm.pseudo_channels,
                               (uint32_t)cfg->pe.hbm.burst_bytes};
    for (int p = 0; p < sys->ppc; p++) {
        int rank = g * sys->ppc + p;
        struct kb_pe *pe = &sys->pes[rank];
        struct pe_links *pl = &sys->pl[rank];
        int r = kb_noc_node(cb->noc, corner_router[p / cfg->cube.pes_per_corner]);
        *pe = (struct kb_pe){.rank = rank, .sip = s, .cube = c, .local_pe = p,
                             .hbm_node = -1, .sram_node = cb->sram_node, .sram = cb->sram};
        snprintf(name, sizeof name, "%s.pe%d", prefix, p);
        if ((pe->node = add_node(sys, name, g, NK_PE, p)) < 0)
            return SIM_EINVAL;
        pe->name = kb_fabric_node_name(sys->f, pe->node);
        snprintf(name, sizeof name, "%s.pe%d.hbm", prefix, p);
        if ((pe->hbm_node = add_node(sys, name, g, NK_HBM, p)) < 0 ||
            (pl->up = add_link(sys, pe->node, r, NULL, noc_bw, 0, 0)) < 0 ||
            (pl->down = add_link(sys, r, pe->node, NULL, noc_bw, 0, ovh)) < 0 ||
            (pl->to_hbm = add_link(sys, pe->node, pe->hbm_node, NULL, cfg->pe.hbm.link_gbps,
                                   0, 0)) < 0 ||
            (pl->from_hbm = add_link(sys, pe->hbm_node, pe->node, NULL, cfg->pe.hbm.link_gbps,
                                     0, 0)) < 0)
            return SIM_EINVAL;
        if (!(pe->tcm = kb_mem_new(sys->sim, pe->name, &tp, sys->err, sizeof sys->err)) ||
            !(pe->hbm = kb_mem_new(sys->sim, pe->name, &hp, sys->err, sizeof sys->err)))
            return SIM_EINVAL;
        kb_mem_set_node(pe->tcm, pe->node);
        kb_mem_set_node(pe->hbm, pe->hbm_node);
    }
    return 0;
}

/* One UCIe link out of every cube port that faces a cube: the SIP's cube
 * mesh inside, the neighbouring SIP's edge cubes at its edges. */
static int build_ucie(struct kb_system *sys)
{
    const struct kb_topology_cfg *cfg = &sys->cfg;
    double bw = cfg->ucie.connections * cfg->ucie.gbps_per_connection;
    double ovh = cfg->cube.noc.router_overhead_ns + 2 * cfg->ucie.port_overhead_ns;
    char name[96];
    for (int g = 0; g < sys->n_cubes; g++) {
        for (int d = 0; d < KB_NOC_NDIRS; d++) {
            int nb = cube_step(sys, g, (enum kb_noc_dir)d);
            if (nb < 0)
                continue;
            int src = kb_noc_node(sys->cubes[g].noc, port_router[d]);
            int dst = kb_noc_node(sys->cubes[nb].noc, port_router[opposite[d]]);
            snprintf(name, sizeof name, "sip%d.cube%d.ucie.%s", g / sys->cubes_per_sip,
                     g % sys->cubes_per_sip, noc_dir_name[d]);
            if ((sys->cubes[g].ucie[d] = add_link(sys, src, dst, name, bw, 0, ovh)) < 0)
                return SIM_EINVAL;
        }
    }
    return 0;
}

/* ---- VC classes (credit flow control) --------------------------------------
 *
 * A route of the cube grid has two phases: the steps in its first
 * dimension (X for xy, Y for yx) with the legs inside cubes up to the
 * first step in the other dimension, then the rest. Classes, for routing
 * order xy (yx: X and Y swapped; adaptive: yx routes in classes K..2K-1):
 *     phase 0:  0, or 1 once it crossed the wrap link of its dimension
 *     phase 1:  1 + wrap_x, plus 1 once it crossed a Y wrap link
 * so K = (1 + wrap_x) + (1 + wrap_y) classes. Within one class every
 * chain of links that follow each other on some route is monotone in the
 * class's cube-grid dimension: the legs inside a cube are XY routes, which
 * never turn back in X, and never turn from Y to X, so they cannot carry a
 * chain from a cube's entry port back out through the port it came in
 * by; a ring's chain stops at its wrap link, where the class changes. So
 * no class has a cycle of channel dependencies and, with one VC a class at
 * least, credit flow control cannot deadlock (Dally and Seitz's
 * condition). docs/components/noc.md states it beside the regular
 * networks'. */

/* link_kind bits: the cube-grid dimension of a UCIe link, and its wrap */
#define LK_X 1
#define LK_Y 2
#define LK_WRAP 4

static void classify(void *ud, const int *links, int n, uint32_t order, uint8_t *classes)
{
    const struct kb_system *sys = ud;
    bool yx = order != 0 || sys->cfg.fabric.routing == KB_TOPO_ROUTE_YX;
    int first = yx ? LK_Y : LK_X;
    int k0 = 1 + (yx ? sys->wrap_y : sys->wrap_x);          /* phase 0's classes */
    int k = k0 + 1 + (yx ? sys->wrap_x : sys->wrap_y);     /* one order's */
    int base = order != 0 ? k : 0;
    int phase = 0, crossed = 0;
    for (int j = 0; j < n; j++) {
        int kind = links[j] < sys->n_link_kind ? sys->link_kind[links[j]] : 0;
        if (!phase && (kind & (LK_X | LK_Y)) && !(kind & first)) {
            phase = 1;
            crossed = 0;
        }
        if (kind & LK_WRAP)
            crossed = 1;
        classes[j] = (uint8_t)(base + (phase ? k0 : 0) + crossed);
    }
}

/* The UCIe links' dimensions and wraps, for classify; set as the fabric's
 * classifier when links run credit flow control and deadlock_avoidance
 * is vc_classes. */
static int build_link_kinds(struct kb_system *sys)
{
    if (sys->cfg.fabric.flow_control != KB_TOPO_FC_CREDIT ||
        sys->cfg.fabric.deadlock_avoidance != KB_TOPO_DL_VC_CLASSES)
        return 0;
    sys->n_link_kind = kb_fabric_link_count(sys->f);
    if (!(sys->link_kind = calloc((size_t)sys->n_link_kind, 1)))
        return KB_SETERR(sys, SIM_ENOMEM, "system: out of memory");
    for (int g = 0; g < sys->n_cubes; g++) {
        int x, y;
        cube_xy(sys, g, &x, &y);
        for (int d = 0; d < KB_NOC_NDIRS; d++) {
            int id = sys->cubes[g].ucie[d];
            if (id < 0)
                continue;
            int xn, yn;
            cube_xy(sys, cube_step(sys, g, (enum kb_noc_dir)d), &xn, &yn);
            bool wrap = (d == KB_NOC_E && xn < x) || (d == KB_NOC_W && xn > x) ||
                        (d == KB_NOC_S && yn < y) || (d == KB_NOC_N && yn > y);
            sys->link_kind[id] = (uint8_t)((d == KB_NOC_E || d == KB_NOC_W ? LK_X : LK_Y) |
                                           (wrap ? LK_WRAP : 0));
        }
    }
    kb_fabric_set_classifier(sys->f, classify, sys);
    return 0;
}

static int hop_router(void *ud, int at, int dst, uint32_t state, struct kb_fabric_hop *out,
                      int max);

static struct kb_system *sys_alloc(struct sim *s, const struct kb_topology_cfg *cfg,
                                   const struct kb_system_opts *opts, char *err,
                                   size_t errlen)
{
    struct kb_system *sys = calloc(1, sizeof *sys);
    if (!sys || !(sys->f = kb_fabric_new(s))) {
        free(sys);
        snprintf(err, errlen, "system: out of memory");
        return NULL;
    }
    sys->sim = s;
    sys->cfg = *cfg;
    sys->timing_only = opts && opts->timing_only;
    return sys;
}

static struct kb_system *fail(struct kb_system *sys, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s", sys->err[0] ? sys->err : "system: out of memory");
    kb_system_free(sys);
    return NULL;
}

struct kb_system *kb_system_new(struct sim *s, const struct kb_topology_cfg *cfg,
                                const struct kb_system_opts *opts, char *err, size_t errlen)
{
    if (cfg->sips.count < 1 || cfg->sips.topology < 0 ||
        cfg->sips.topology > KB_TOPO_MESH_2D_NO_WRAP || cfg->sips.w * cfg->sips.h != cfg->sips.count ||
        cfg->sip.cube_mesh.w < 1 || cfg->sip.cube_mesh.h < 1 || cfg->cube.corners < 1 ||
        cfg->cube.corners > 4 || cfg->cube.pes_per_corner < 1 || cfg->flit_bytes < 1) {
        snprintf(err, errlen, "system: topology not loaded or inconsistent (%d SIPs as %dx%d, "
                 "%dx%d cubes, %d corners x %d PEs)", cfg->sips.count, cfg->sips.w,
                 cfg->sips.h, cfg->sip.cube_mesh.w, cfg->sip.cube_mesh.h, cfg->cube.corners,
                 cfg->cube.pes_per_corner);
        return NULL;
    }
    int64_t n_pes = (int64_t)cfg->sips.count * cfg->sip.cube_mesh.w * cfg->sip.cube_mesh.h *
                    cfg->cube.corners * cfg->cube.pes_per_corner;
    /* node ids and ranks are ints; keep a wide margin */
    if (n_pes > KB_TOPO_MAX_PES) {
        snprintf(err, errlen, "system: %" PRId64 " PEs is too many", n_pes);
        return NULL;
    }
    struct kb_system *sys = sys_alloc(s, cfg, opts, err, errlen);
    if (!sys)
        return NULL;
    sys->n_sips = cfg->sips.count;
    sys->sw = cfg->sips.w;
    sys->sh = cfg->sips.h;
    sys->cw = cfg->sip.cube_mesh.w;
    sys->ch = cfg->sip.cube_mesh.h;
    sys->cubes_per_sip = sys->cw * sys->ch;
    sys->n_cubes = sys->n_sips * sys->cubes_per_sip;
    sys->ppc = cfg->cube.corners * cfg->cube.pes_per_corner;
    sys->n_pes = (int)n_pes;
    sys->gw = sys->sw * sys->cw;
    sys->gh = sys->sh * sys->ch;
    bool wraps = cfg->sips.topology != KB_TOPO_MESH_2D_NO_WRAP;
    sys->wrap_x = wraps && sys->sw >= 2;
    sys->wrap_y = wraps && sys->sh >= 2 && cfg->sips.topology != KB_TOPO_RING_1D;
    int mx = sys->wrap_x ? sys->gw / 2 : sys->gw - 1;
    int my = sys->wrap_y ? sys->gh / 2 : sys->gh - 1;
    /* up 2 (HBM, PE), down 2, NoC routes of at most 4 links in each cube
     * passed, one UCIe link per cube step */
    sys->max_hops = 4 + (mx + my + 1) * 2 * (NOC_SIDE - 1) + mx + my;

    sys->n_info = sys->n_cubes * (NOC_SIDE * NOC_SIDE + 1 + 2 * sys->ppc);
    sys->cubes = calloc((size_t)sys->n_cubes, sizeof *sys->cubes);
    sys->pes = calloc((size_t)sys->n_pes, sizeof *sys->pes);
    sys->pl = calloc((size_t)sys->n_pes, sizeof *sys->pl);
    sys->info = calloc((size_t)sys->n_info, sizeof *sys->info);
    if (!sys->cubes || !sys->pes || !sys->pl || !sys->info)
        return fail(sys, err, errlen);
    for (int g = 0; g < sys->n_cubes; g++)
        if (build_cube(sys, g) < 0)
            return fail(sys, err, errlen);
    if (build_ucie(sys) < 0 || build_link_kinds(sys) < 0)
        return fail(sys, err, errlen);
    if (cfg->fabric.routing == KB_TOPO_ROUTE_ADAPTIVE_HOP &&
        cfg->fabric.flow_control == KB_TOPO_FC_CREDIT)
        kb_fabric_set_router(sys->f, hop_router, sys);
    return sys;
}

struct kb_system *kb_system_new_graph(struct sim *s, const struct kb_graph_cfg *g,
                                      const struct kb_topology_cfg *cfg,
                                      const struct kb_system_opts *opts, char *err,
                                      size_t errlen)
{
    struct kb_system *sys = sys_alloc(s, cfg, opts, err, errlen);
    if (!sys)
        return NULL;
    if (!(sys->graph = kb_graph_new(sys->f, g, sys->err, sizeof sys->err)))
        return fail(sys, err, errlen);
    sys->n_pes = kb_graph_n_pes(sys->graph);
    sys->max_hops = kb_graph_max_hops(sys->graph);
    sys->n_info = kb_fabric_node_count(sys->f);
    sys->pes = calloc((size_t)sys->n_pes + 1, sizeof *sys->pes);
    sys->info = calloc((size_t)sys->n_info + 1, sizeof *sys->info);
    if (!sys->pes || !sys->info)
        return fail(sys, err, errlen);
    for (int i = 0; i < sys->n_info; i++)
        sys->info[i] = (struct node_info){-1, NK_OTHER, 0};
    struct kb_mem_params tp = {KB_MEM_TCM, cfg->pe.tcm.capacity, cfg->pe.tcm.bandwidth_gbps,
                               cfg->pe.tcm.setup_ns, 1, 0};
    for (int r = 0; r < sys->n_pes; r++) {
        struct kb_pe *pe = &sys->pes[r];
        int node = kb_graph_pe_node(sys->graph, r);
        *pe = (struct kb_pe){.rank = r, .sip = -1, .cube = -1, .local_pe = r,
                             .name = kb_fabric_node_name(sys->f, node), .node = node,
                             .hbm_node = -1, .sram_node = -1};
        sys->info[node] = (struct node_info){r, NK_PE, 0};
        if (!(pe->tcm = kb_mem_new(s, pe->name, &tp, sys->err, sizeof sys->err)))
            return fail(sys, err, errlen);
        kb_mem_set_node(pe->tcm, node);
    }
    return sys;
}

/* A transfer's route and payload while it runs (kb_system_transfer). */
struct held {
    struct held *prev, *next;
    int *links;
    unsigned char *buf;
    bool linked; /* on sys->held */
};

static void held_free(struct kb_system *sys, struct held *h)
{
    if (h->linked) {
        if (h->prev)
            h->prev->next = h->next;
        else
            sys->held = h->next;
        if (h->next)
            h->next->prev = h->prev;
    }
    free(h->links);
    free(h->buf);
    free(h);
}

void kb_system_free(struct kb_system *sys)
{
    if (!sys)
        return;
    if (sys->pes)
        for (int r = 0; r < sys->n_pes; r++)
            kb_pe_release(&sys->pes[r]);
    if (sys->cubes)
        for (int g = 0; g < sys->n_cubes; g++) {
            kb_noc_free(sys->cubes[g].noc);
            kb_mem_free(sys->cubes[g].sram);
        }
    kb_graph_free(sys->graph);
    kb_fabric_free(sys->f);
    free(sys->cubes);
    free(sys->pes);
    free(sys->pl);
    free(sys->info);
    free(sys->route_buf);
    free(sys->send_buf);
    free(sys->pick_buf);
    free(sys->link_kind);
    while (sys->held)
        held_free(sys, sys->held);
    free(sys);
}

static int dma_pick(void *ud, int src_node, int dst_node, const int *links, int n,
                    const int **out, uint32_t *vc_class);

/* Routing by the xy/yx choice at the source: adaptive, and adaptive_hop
 * where the flits are not moved one by one (wormhole_unbounded: whole
 * worms on static paths). Under credit mode adaptive_hop decides per hop
 * for kb_system_send; PE_DMA copies and kb_system_transfer take the xy
 * route in the escape classes (hop_router). */
static bool source_adaptive(const struct kb_system *sys)
{
    int r = sys->cfg.fabric.routing;
    return r == KB_TOPO_ROUTE_ADAPTIVE ||
           (r == KB_TOPO_ROUTE_ADAPTIVE_HOP && sys->cfg.fabric.flow_control != KB_TOPO_FC_CREDIT);
}

/* ---- queries ------------------------------------------------------------- */

const char *kb_system_errmsg(const struct kb_system *sys) { return sys->err; }
struct kb_fabric *kb_system_fabric(const struct kb_system *sys) { return sys->f; }
struct sim *kb_system_sim(const struct kb_system *sys) { return sys->sim; }
const struct kb_topology_cfg *kb_system_config(const struct kb_system *sys) { return &sys->cfg; }
bool kb_system_is_graph(const struct kb_system *sys) { return sys->graph != NULL; }
bool kb_system_timing_only(const struct kb_system *sys) { return sys->timing_only; }
int kb_system_max_hops(const struct kb_system *sys) { return sys->max_hops; }

void kb_system_get_counts(const struct kb_system *sys, struct kb_system_counts *out)
{
    out->sips = sys->n_sips;
    out->cubes = sys->n_cubes;
    out->pes = sys->n_pes;
    out->nodes = kb_fabric_node_count(sys->f);
    out->links = kb_fabric_link_count(sys->f);
}

struct kb_pe *kb_system_pe(const struct kb_system *sys, int rank)
{
    return rank >= 0 && rank < sys->n_pes ? &sys->pes[rank] : NULL;
}

struct kb_pe *kb_system_pe_units(struct kb_system *sys, int rank)
{
    struct kb_pe *pe = kb_system_pe(sys, rank);
    if (!pe) {
        KB_SETERR(sys, SIM_EINVAL, "no PE of rank %d (ranks 0..%d)", rank, sys->n_pes - 1);
        return NULL;
    }
    if (pe->bound)
        return pe;
    if (kb_pe_units_new(pe, sys->sim, sys->f, kb_system_route_cb, sys, &sys->cfg,
                        sys->timing_only, sys->err, sizeof sys->err) < 0)
        return NULL;
    if (!sys->graph && source_adaptive(sys))
        kb_dma_set_route_pick(pe->dma, dma_pick, sys);
    return pe;
}

int kb_system_set_ipcq(struct kb_system *sys, enum kb_topo_buffer_kind kind,
                       enum kb_topo_backpressure bp)
{
    if ((int)kind == sys->cfg.ipcq.buffer_kind && (int)bp == sys->cfg.ipcq.backpressure)
        return 0;
    for (int r = 0; r < sys->n_pes; r++)
        if (sys->pes[r].ipcq)
            return KB_SETERR(sys, SIM_EPERM,
                          "the IPCQs of this system are already made with buffer_kind '%s' "
                          "and backpressure '%s'; use a new system for '%s' / '%s'",
                          kb_topo_buffer_kind_names[sys->cfg.ipcq.buffer_kind],
                          kb_topo_backpressure_names[sys->cfg.ipcq.backpressure],
                          kb_topo_buffer_kind_names[kind], kb_topo_backpressure_names[bp]);
    sys->cfg.ipcq.buffer_kind = (int)kind;
    sys->cfg.ipcq.backpressure = (int)bp;
    return 0;
}

int kb_system_rank_of_node(const struct kb_system *sys, int node)
{
    if (node < 0 || node >= sys->n_info || sys->info[node].kind != NK_PE)
        return -1;
    const struct node_info *in = &sys->info[node];
    return sys->graph ? in->cube : in->cube * sys->ppc + in->idx;
}

/* ---- routing ------------------------------------------------------------- */

/* Steps from a to b on a line, or a ring of `size` when wrap: the count,
 * and *plus for the + direction (the shorter way round, a tie toward +). */
static int steps(int a, int b, int size, bool wrap, bool *plus)
{
    if (!wrap) {
        *plus = b >= a;
        return *plus ? b - a : a - b;
    }
    int up = ((b - a) % size + size) % size, down = size - up;
    *plus = up <= down;
    return up == 0 ? 0 : *plus ? up : down;
}

/* The router a node attaches to, and the links from the node up to it
 * (written to up[], at most 2). */
static int attach(const struct kb_system *sys, int node, int *up, int *n_up)
{
    const struct node_info *in = &sys->info[node];
    const struct cube *cb = &sys->cubes[in->cube];
    *n_up = 0;
    switch ((enum node_kind)in->kind) {
    case NK_ROUTER: return in->idx;
    case NK_SRAM: up[(*n_up)++] = cb->sram_up; return SRAM_ROUTER;
    case NK_HBM: up[(*n_up)++] = sys->pl[in->cube * sys->ppc + in->idx].from_hbm;
    /* fall through */
    case NK_PE:
        up[(*n_up)++] = sys->pl[in->cube * sys->ppc + in->idx].up;
        return corner_router[in->idx / sys->cfg.cube.pes_per_corner];
    case NK_OTHER: break;
    }
    return -1;
}

/* Appends the NoC route r -> rd inside cube g. */
static int noc_leg(struct kb_system *sys, int g, int r, int rd, int *links, int *k, int max)
{
    int n = kb_noc_route(sys->cubes[g].noc, r, rd, links + *k, max - *k);
    if (n < 0)
        return KB_SETERR(sys, SIM_EINVAL, "route: more than %d links", max);
    *k += n;
    return 0;
}

/* yx: the cube grid's Y steps before its X steps (routing yx; one of
 * adaptive's two orders) */
static int route_tree(struct kb_system *sys, int src, int dst, int *links, int max, bool yx)
{
    const struct node_info *si = &sys->info[src], *di = &sys->info[dst];
    /* a PE and its own HBM talk over their direct link */
    if (si->cube == di->cube && si->idx == di->idx &&
        ((si->kind == NK_PE && di->kind == NK_HBM) ||
         (si->kind == NK_HBM && di->kind == NK_PE))) {
        if (max < 1)
            return KB_SETERR(sys, SIM_EINVAL, "route: more than %d links", max);
        const struct pe_links *pl = &sys->pl[si->cube * sys->ppc + si->idx];
        links[0] = si->kind == NK_PE ? pl->to_hbm : pl->from_hbm;
        return 1;
    }
    int up[2], down[2], n_up, n_down;
    int r = attach(sys, src, up, &n_up);
    int rd = attach(sys, dst, down, &n_down);
    int k = 0;
    if (n_up > max)
        return KB_SETERR(sys, SIM_EINVAL, "route: more than %d links", max);
    for (int i = 0; i < n_up; i++)
        links[k++] = up[i];
    int g = si->cube, x, y, xd, yd;
    cube_xy(sys, g, &x, &y);
    cube_xy(sys, di->cube, &xd, &yd);
    bool plus_x, plus_y;
    int sx = steps(x, xd, sys->gw, sys->wrap_x, &plus_x);
    int sy = steps(y, yd, sys->gh, sys->wrap_y, &plus_y);
    enum kb_noc_dir dx = plus_x ? KB_NOC_E : KB_NOC_W, dy = plus_y ? KB_NOC_S : KB_NOC_N;
    for (int i = 0; i < sx + sy; i++) {
        enum kb_noc_dir d = yx ? (i < sy ? dy : dx) : (i < sx ? dx : dy);
        if (noc_leg(sys, g, r, port_router[d], links, &k, max) < 0)
            return SIM_EINVAL;
        if (k >= max)
            return KB_SETERR(sys, SIM_EINVAL, "route: more than %d links", max);
        links[k++] = sys->cubes[g].ucie[d];
        g = cube_step(sys, g, d);
        r = port_router[opposite[d]];
    }
    if (noc_leg(sys, g, r, rd, links, &k, max) < 0)
        return SIM_EINVAL;
    if (k + n_down > max)
        return KB_SETERR(sys, SIM_EINVAL, "route: more than %d links", max);
    /* down is up reversed: the links back from the router to the node */
    const struct node_info *in = di;
    if (in->kind == NK_SRAM) {
        links[k++] = sys->cubes[in->cube].sram_down;
    } else if (in->kind == NK_PE || in->kind == NK_HBM) {
        const struct pe_links *pl = &sys->pl[in->cube * sys->ppc + in->idx];
        links[k++] = pl->down;
        if (in->kind == NK_HBM)
            links[k++] = pl->to_hbm;
    }
    return k;
}

/* The route into links, which holds max >= max_hops links. */
static int route_full(struct kb_system *sys, int src_node, int dst_node, int *links, int max)
{
    if (sys->graph) {
        int k = kb_graph_route(sys->graph, src_node, dst_node, links, max);
        if (k < 0)
            KB_SETERR(sys, k, "%s", kb_graph_errmsg(sys->graph));
        return k;
    }
    return route_tree(sys, src_node, dst_node, links, max,
                      sys->cfg.fabric.routing == KB_TOPO_ROUTE_YX);
}

int kb_system_route(struct kb_system *sys, int src_node, int dst_node, int *links, int max)
{
    int n = kb_fabric_node_count(sys->f);
    if (src_node < 0 || src_node >= n || dst_node < 0 || dst_node >= n)
        return KB_SETERR(sys, SIM_EINVAL, "route from node %d to node %d: the system has nodes "
                      "0..%d", src_node, dst_node, n - 1);
    if (src_node == dst_node)
        return 0;
    if (max >= sys->max_hops)
        return route_full(sys, src_node, dst_node, links, max);
    /* a short buffer: the whole route in ours, its head copied to theirs */
    if (!sys->route_buf &&
        !(sys->route_buf = malloc((size_t)sys->max_hops * sizeof *sys->route_buf)))
        return KB_SETERR(sys, SIM_ENOMEM, "route from '%s' to '%s': out of memory",
                      kb_fabric_node_name(sys->f, src_node), kb_fabric_node_name(sys->f, dst_node));
    int k = route_full(sys, src_node, dst_node, sys->route_buf, sys->max_hops);
    if (k > 0 && max > 0)
        memcpy(links, sys->route_buf, (size_t)(k < max ? k : max) * sizeof *links);
    return k;
}

/* Messages waiting at or holding the links of a route. */
static int route_backlog(const struct kb_system *sys, const int *links, int k)
{
    int b = 0;
    for (int i = 0; i < k; i++)
        b += kb_fabric_link_backlog(sys->f, links[i]);
    return b;
}

/* fabric.routing adaptive (source-adaptive, decision 0028): given the xy
 * route a (k links) from src to dst, the route to take now — the yx route
 * when its links hold fewer messages than a's (a tie keeps xy) — in *out
 * (a, or sys->pick_buf, checked and its links made) with its VC class in
 * *cls: 1 for yx, classify's second half, so each order keeps its own
 * deadlock-free channels. Other routings, and graphs: a, class 0. */
static int pick_route(struct kb_system *sys, int src_node, int dst_node, const int *a, int k,
                      const int **out, uint32_t *cls)
{
    *out = a;
    *cls = 0;
    if (sys->graph || !source_adaptive(sys) || k == 0)
        return k;
    if (!sys->pick_buf &&
        !(sys->pick_buf = malloc(((size_t)sys->max_hops + 1) * sizeof *sys->pick_buf)))
        return KB_SETERR(sys, SIM_ENOMEM, "route: out of memory");
    int kb = route_tree(sys, src_node, dst_node, sys->pick_buf, sys->max_hops, true);
    if (kb < 0)
        return kb;
    if (route_backlog(sys, sys->pick_buf, kb) >= route_backlog(sys, a, k))
        return k;
    int rc = kb_fabric_check_path(sys->f, sys->pick_buf, kb);
    if (rc < 0)
        return KB_SETERR(sys, rc, "route from '%s' to '%s': %s",
                         kb_fabric_node_name(sys->f, src_node),
                         kb_fabric_node_name(sys->f, dst_node), kb_fabric_errmsg(sys->f));
    *out = sys->pick_buf;
    *cls = 1;
    return kb;
}

/* pick_route in the shape of PE_DMA's route selection (kb_dma_pick_fn) */
static int dma_pick(void *ud, int src_node, int dst_node, const int *links, int n,
                    const int **out, uint32_t *vc_class)
{
    return pick_route(ud, src_node, dst_node, links, n, out, vc_class);
}

/* ---- per-hop adaptive routing (adaptive_hop, credit mode) --------------------
 *
 * Minimal adaptive at every router, deadlock-free by an escape network
 * (Duato). The xy routes with their VC classes (classify, K classes) are
 * the escape network; the adaptive hops use one more class, A = K. At a
 * router the head of a message not yet on the escape network waits at
 * once for
 *   - each minimal direction's next link, in class A: in a cube with cube
 *     steps left in X and Y, the next link of the NoC leg toward the E/W
 *     exit and toward the N/S exit (or the UCIe link itself at the exit
 *     router); once the two legs part the message keeps to its exit in
 *     that cube (else it could go back and forth between them), and a UCIe
 *     step frees it again; with no steps left, the XY leg to the target;
 *   - the next link of the xy route from this router, in its escape class
 *     (classify's classes for the route from here: phase and wrap state
 *     kept in the router state from then on),
 * and takes whichever link first has a free VC of such a class and a
 * credit, the adaptive class first on a link that offers both. Of two
 * minimal directions whose next links differ, only the less occupied
 * (messages at its next link and at the cube's exit that way; a tie
 * offers both) is offered; an escape VC on a link of its own only 1 ps
 * after the last adaptive candidate could first take the head, so it is
 * the way out when no adaptive VC is free, not a rival. A message that
 * took an escape VC stays on the xy route (escape state) to the end.
 * Why no deadlock: the escape network alone is the xy routing of
 * classify, whose classes have no cycle of channel dependencies (a route
 * from any router is made of XY legs and X-then-Y cube steps, the
 * argument above); a message on it waits only for escape VCs, so escape
 * messages always drain. A message in class A always waits for an escape
 * VC too (it is a candidate there), which frees as escape messages
 * drain, so no cycle of waits can stay closed; cycles among class-A VCs
 * alone are allowed (Duato's condition: the escape sub-network is
 * connected, minimal from every router and acyclic). */

/* hop_router state bits */
#define RS_ESCAPE 1u
#define RS_COMMIT_X 2u
#define RS_COMMIT_Y 4u
#define RS_PHASE 8u   /* escape: past its first Y step (classify's phase 1) */
#define RS_CROSSED 16u /* escape: crossed the wrap link of the phase's dimension */

/* classify's xy class of `link` after the escape state *st, which it
 * moves on */
static uint8_t escape_class(const struct kb_system *sys, int link, uint32_t *st)
{
    int kind = link < sys->n_link_kind ? sys->link_kind[link] : 0;
    if (!(*st & RS_PHASE) && (kind & LK_Y))
        *st = (*st | RS_PHASE) & ~RS_CROSSED;
    if (kind & LK_WRAP)
        *st |= RS_CROSSED;
    int k0 = 1 + sys->wrap_x;
    return (uint8_t)((*st & RS_PHASE ? k0 : 0) + (*st & RS_CROSSED ? 1 : 0));
}

/* adds link (classes cls, states) to the candidates, merging a link
 * already there (its classes then tried in the order added) */
static int add_cand(struct kb_fabric_hop *out, int n, int link, uint8_t cls, uint32_t state)
{
    for (int i = 0; i < n; i++)
        if (out[i].link == link) {
            if (out[i].n_cls < 2) {
                out[i].cls[1] = cls;
                out[i].state[1] = state;
                out[i].n_cls = 2;
            }
            return n;
        }
    out[n] = (struct kb_fabric_hop){link, {cls, 0}, 1, {state, 0}, 0};
    return n + 1;
}

static int hop_router(void *ud, int at, int dst, uint32_t state, struct kb_fabric_hop *out,
                      int max)
{
    struct kb_system *sys = ud;
    if (max < 3 || at < 0 || at >= sys->n_info)
        return SIM_EINVAL;
    if (!sys->pick_buf &&
        !(sys->pick_buf = malloc(((size_t)sys->max_hops + 1) * sizeof *sys->pick_buf)))
        return SIM_ENOMEM;
    /* the escape candidate: the xy route from here */
    int k = route_tree(sys, at, dst, sys->pick_buf, sys->max_hops, false);
    if (k < 1)
        return k < 0 ? k : SIM_EINVAL;
    int e = sys->pick_buf[0];
    uint32_t es = state & RS_ESCAPE ? state : RS_ESCAPE;
    uint8_t ec = escape_class(sys, e, &es);
    if (state & RS_ESCAPE)
        return add_cand(out, 0, e, ec, es);
    uint8_t a = (uint8_t)(2 + sys->wrap_x + sys->wrap_y); /* the adaptive class, K */
    const struct node_info *in = &sys->info[at];
    int n = 0;
    if (in->kind == NK_ROUTER && sys->info[dst].cube != in->cube) {
        int x, y, xd, yd;
        cube_xy(sys, in->cube, &x, &y);
        cube_xy(sys, sys->info[dst].cube, &xd, &yd);
        bool plus_x, plus_y;
        int sx = steps(x, xd, sys->gw, sys->wrap_x, &plus_x);
        int sy = steps(y, yd, sys->gh, sys->wrap_y, &plus_y);
        enum kb_noc_dir dirs[2];
        int nd = 0;
        if (sx && !(state & RS_COMMIT_Y))
            dirs[nd++] = plus_x ? KB_NOC_E : KB_NOC_W;
        if (sy && !(state & RS_COMMIT_X))
            dirs[nd++] = plus_y ? KB_NOC_S : KB_NOC_N;
        int next[2], occ[2];
        for (int i = 0; i < nd; i++) {
            const struct cube *cb = &sys->cubes[in->cube];
            if (in->idx == port_router[dirs[i]]) {
                next[i] = cb->ucie[dirs[i]];
            } else {
                int leg[2 * NOC_SIDE];
                if (kb_noc_route(cb->noc, in->idx, port_router[dirs[i]], leg, 2 * NOC_SIDE) < 1)
                    return SIM_EINVAL;
                next[i] = leg[0];
            }
            /* the direction's occupancy: messages at its next link and
             * at the cube's exit that way */
            occ[i] = kb_fabric_link_backlog(sys->f, next[i]) +
                     (next[i] != cb->ucie[dirs[i]] ? kb_fabric_link_backlog(sys->f, cb->ucie[dirs[i]])
                                                  : 0);
        }
        for (int i = 0; i < nd; i++) {
            if (nd == 2 && next[0] != next[1] && occ[i] > occ[1 - i])
                continue; /* the other direction is less occupied */
            bool ucie = in->idx == port_router[dirs[i]];
            bool shared = nd == 2 && next[0] == next[1];
            uint32_t st = ucie || shared ? 0
                          : dirs[i] == KB_NOC_E || dirs[i] == KB_NOC_W ? RS_COMMIT_X
                                                                         : RS_COMMIT_Y;
            n = add_cand(out, n, next[i], a, st);
        }
    }
    if (n == 0) /* the target's cube, or not a router: the XY way on */
        n = add_cand(out, 0, e, a, state);
    int m = add_cand(out, n, e, ec, es);
    if (m > n) {
        /* an escape VC on a link of its own is taken only if no adaptive
         * VC was free when the last adaptive candidate could first take
         * the head (the links' overheads differ: a NoC hop's is not a
         * UCIe crossing's), 1 ps later */
        sim_time latest = 0;
        for (int i = 0; i < n; i++) {
            struct kb_link *l = kb_fabric_link(sys->f, out[i].link);
            if (!l)
                return SIM_ENOMEM;
            if (kb_link_overhead_ps(l) > latest)
                latest = kb_link_overhead_ps(l);
        }
        struct kb_link *le = kb_fabric_link(sys->f, e);
        if (!le)
            return SIM_ENOMEM;
        sim_time oe = kb_link_overhead_ps(le);
        out[n].delay = (latest > oe ? latest - oe : 0) + 1;
    }
    return m;
}

int kb_system_send(struct kb_system *sys, int src_node, int dst_node, uint64_t bytes,
                   void (*cb)(void *ud, sim_time at), void *ud)
{
    if (!sys->graph && sys->cfg.fabric.routing == KB_TOPO_ROUTE_ADAPTIVE_HOP &&
        sys->cfg.fabric.flow_control == KB_TOPO_FC_CREDIT && src_node != dst_node) {
        int n = kb_fabric_node_count(sys->f);
        if (src_node < 0 || src_node >= n || dst_node < 0 || dst_node >= n)
            return KB_SETERR(sys, SIM_EINVAL, "send from node %d to node %d: the system has "
                             "nodes 0..%d", src_node, dst_node, n - 1);
        /* the fixed links up to the first router, in the adaptive class */
        int up[2], n_up;
        const struct node_info *si = &sys->info[src_node];
        if (si->kind == NK_ROUTER || attach(sys, src_node, up, &n_up) < 0 ||
            (si->cube == sys->info[dst_node].cube && si->idx == sys->info[dst_node].idx &&
             sys->info[dst_node].kind != NK_ROUTER && sys->info[dst_node].kind != NK_SRAM)) {
            n_up = 0; /* from a router, or a PE and its own HBM: the static route */
        }
        if (n_up > 0) {
            uint8_t cls[2];
            cls[0] = cls[1] = (uint8_t)(2 + sys->wrap_x + sys->wrap_y);
            int rc = kb_fabric_send_open(sys->f, up, n_up, cls, sys->max_hops + 2 * NOC_SIDE,
                                         dst_node, 0, bytes, cb, ud);
            if (rc < 0)
                return KB_SETERR(sys, rc, "send from '%s' to '%s': %s",
                                 kb_fabric_node_name(sys->f, src_node),
                                 kb_fabric_node_name(sys->f, dst_node), kb_fabric_errmsg(sys->f));
            return 0;
        }
    }
    if (!sys->send_buf &&
        !(sys->send_buf = malloc(((size_t)sys->max_hops + 1) * sizeof *sys->send_buf)))
        return KB_SETERR(sys, SIM_ENOMEM, "send: out of memory");
    int k = kb_system_route(sys, src_node, dst_node, sys->send_buf, sys->max_hops);
    if (k < 0)
        return k;
    const int *a;
    uint32_t cls;
    if ((k = pick_route(sys, src_node, dst_node, sys->send_buf, k, &a, &cls)) < 0)
        return k;
    int rc = kb_fabric_send_cb(sys->f, a, k, bytes, cls, cb, ud);
    if (rc < 0)
        return KB_SETERR(sys, rc, "send from '%s' to '%s': %s", kb_fabric_node_name(sys->f, src_node),
                      kb_fabric_node_name(sys->f, dst_node), kb_fabric_errmsg(sys->f));
    return 0;
}

int kb_system_route_cb(void *sys, int src_node, int dst_node, int *links, int max)
{
    return kb_system_route(sys, src_node, dst_node, links, max);
}

sim_time kb_system_path_time(struct kb_system *sys, int src_node, int dst_node, uint64_t bytes)
{
    int *links = malloc(((size_t)sys->max_hops + 1) * sizeof *links);
    if (!links)
        return SIM_FOREVER;
    int k = kb_system_route(sys, src_node, dst_node, links, sys->max_hops);
    sim_time t = k < 0 ? SIM_FOREVER : kb_fabric_path_time(sys->f, links, k, bytes);
    free(links);
    return t;
}

/* ---- neighbour maps ------------------------------------------------------ */

static const char *const dir_names[KB_DIR_COUNT] = {
    "N", "S", "E", "W", "global_N", "global_S", "global_E", "global_W"};

const char *kb_system_dir_name(enum kb_system_dir d)
{
    return (unsigned)d < KB_DIR_COUNT ? dir_names[d] : NULL;
}

int kb_system_dir_parse(const char *name)
{
    for (int d = 0; d < KB_DIR_COUNT; d++)
        if (strcmp(dir_names[d], name) == 0)
            return d;
    return -1;
}

/* (x, y) moved by (dx, dy) in a w×h grid, wrapping where asked; false
 * when it falls off. */
static bool grid_step(int *x, int *y, int dx, int dy, int w, int h, bool wrap_x, bool wrap_y)
{
    if ((dx && w < 2) || (dy && h < 2))
        return false;
    int nx = *x + dx, ny = *y + dy;
    if (wrap_x)
        nx = (nx + w) % w;
    if (wrap_y)
        ny = (ny + h) % h;
    if (nx < 0 || nx >= w || ny < 0 || ny >= h)
        return false;
    *x = nx;
    *y = ny;
    return true;
}

int kb_system_neighbor(const struct kb_system *sys, int rank, enum kb_system_dir d)
{
    if (sys->graph || rank < 0 || rank >= sys->n_pes || (unsigned)d >= KB_DIR_COUNT)
        return -1;
    const struct kb_pe *pe = &sys->pes[rank];
    static const int ddx[4] = {0, 0, 1, -1}, ddy[4] = {-1, 1, 0, 0}; /* N S E W */
    int base = d >= KB_DIR_GLOBAL_N ? KB_DIR_GLOBAL_N : KB_DIR_N;
    int dx = ddx[d - base], dy = ddy[d - base];
    int sip = pe->sip, cube = pe->cube;
    if (base == KB_DIR_N) {
        int x = cube % sys->cw, y = cube / sys->cw;
        if (!grid_step(&x, &y, dx, dy, sys->cw, sys->ch, false, false))
            return -1;
        cube = y * sys->cw + x;
    } else {
        int x = sip % sys->sw, y = sip / sys->sw;
        if (!grid_step(&x, &y, dx, dy, sys->sw, sys->sh, sys->wrap_x, sys->wrap_y))
            return -1;
        sip = y * sys->sw + x;
    }
    return (sip * sys->cubes_per_sip + cube) * sys->ppc + pe->local_pe;
}

/* ---- transfers ----------------------------------------------------------- */

int kb_system_transfer(struct kb_system *sys, int src_rank, uint64_t src_addr, int dst_rank,
                       uint64_t dst_addr, uint64_t bytes)
{
    struct kb_pe *a = kb_system_pe(sys, src_rank), *b = kb_system_pe(sys, dst_rank);
    if (!a || !b)
        return KB_SETERR(sys, SIM_EINVAL, "transfer from rank %d to rank %d: the system has "
                      "ranks 0..%d", src_rank, dst_rank, sys->n_pes - 1);
    const struct kb_mem_params *pa = kb_mem_params(a->tcm), *pb = kb_mem_params(b->tcm);
    if (src_addr > pa->capacity || bytes > pa->capacity - src_addr ||
        dst_addr > pb->capacity || bytes > pb->capacity - dst_addr)
        return KB_SETERR(sys, SIM_EINVAL, "transfer of %" PRIu64 " bytes from tcm of '%s' at %"
                      PRIu64 " to tcm of '%s' at %" PRIu64 ": beyond the capacity (%" PRIu64
                      " bytes)", bytes, a->name, src_addr, b->name, dst_addr, pa->capacity);
    /* what the blocked transfer holds, on the system's list so that a
     * transfer that never returns (a network deadlock) is freed with it */
    struct held *h = calloc(1, sizeof *h);
    int *links = h ? malloc(((size_t)sys->max_hops + 1) * sizeof *links) : NULL;
    if (!links) {
        free(h);
        return KB_SETERR(sys, SIM_ENOMEM, "transfer: out of memory");
    }
    h->links = links;
    int k = kb_system_route(sys, a->node, b->node, links, sys->max_hops);
    if (k < 0) {
        held_free(sys, h);
        return k;
    }
    /* the bytes leave the source when the transfer starts */
    unsigned char *buf = NULL;
    if (!sys->timing_only && bytes) {
        buf = h->buf = malloc(bytes);
        if (!buf || kb_mem_read(a->tcm, src_addr, buf, bytes) < 0) {
            held_free(sys, h);
            return KB_SETERR(sys, SIM_ENOMEM, "transfer of %" PRIu64 " bytes: out of memory",
                          bytes);
        }
    }
    h->next = sys->held;
    if (sys->held)
        sys->held->prev = h;
    sys->held = h;
    h->linked = true;
    const int *route;
    uint32_t cls;
    int rc = pick_route(sys, a->node, b->node, links, k, &route, &cls);
    if (rc >= 0 && route != links) { /* held: pick_buf is the next pick's */
        memcpy(links, route, (size_t)rc * sizeof *links);
        k = rc;
    }
    if (rc >= 0 && (rc = kb_fabric_check_path(sys->f, links, k)) >= 0)
        rc = kb_fabric_transfer_class(sys->f, links, k, bytes, cls);
    if (rc < 0) {
        held_free(sys, h);
        return KB_SETERR(sys, rc, "transfer from '%s' to '%s': %s", a->name, b->name,
                      rc == SIM_EPERM ? "not in a thread process" : kb_fabric_errmsg(sys->f));
    }
    if (buf)
        rc = kb_mem_write(b->tcm, dst_addr, buf, bytes);
    held_free(sys, h);
    return rc < 0 ? KB_SETERR(sys, rc, "%s", kb_mem_errmsg(b->tcm)) : 0;
}

/* ---- describe ------------------------------------------------------------ */

size_t kb_system_describe(const struct kb_system *sys, char *buf, size_t len)
{
    struct kb_system_counts n;
    kb_system_get_counts(sys, &n);
    const struct kb_topology_cfg *c = &sys->cfg;
    int w;
    if (sys->graph)
        w = snprintf(buf, len, "graph: %d nodes, %d PEs, %d links%s\n", n.nodes, n.pes,
                     n.links, sys->timing_only ? "; timing only" : "");
    else
        w = snprintf(buf, len,
                     "system: %d SIPs (%s %dx%d) x %dx%d cubes x %d PEs = %d PEs\n"
                     "fabric: %d nodes, %d links; flit %d B%s\n"
                     "cube NoC: 3x3 routers, %g GB/s, %g ns a hop; PE-HBM %g GB/s; "
                     "PE-SRAM %g GB/s\n"
                     "UCIe: %g GB/s, %g ns a crossing\n",
                     n.sips, kb_topo_kind_names[c->sips.topology], sys->sw, sys->sh, sys->cw,
                     sys->ch, sys->ppc, n.pes, n.nodes, n.links, c->flit_bytes,
                     sys->timing_only ? "; timing only" : "", c->cube.noc.bandwidth_gbps,
                     c->cube.noc.ns_per_mm * c->cube.noc.cube_mm / (NOC_SIDE - 1),
                     c->pe.hbm.link_gbps, c->cube.sram.link_gbps,
                     c->ucie.connections * c->ucie.gbps_per_connection,
                     2 * c->ucie.port_overhead_ns + c->cube.noc.router_overhead_ns);
    return w < 0 ? 0 : (size_t)w;
}
