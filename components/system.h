/* system.h — kb_system: the whole machine built into one fabric — SIPs,
 * cube meshes, cube NoCs, PEs with their TCM and HBM, cube SRAMs, UCIe
 * links — with deterministic routing between any two nodes, no-contention
 * path times, IPCQ neighbour maps, and PE-to-PE transfers
 *
 * Two forms share this interface: the AHBM hierarchy built from a
 * struct kb_topology_cfg (topology.yaml), and a generic graph
 * (graph_topology.h) whose PEs are the nodes marked pe.
 *
 * The hierarchy (docs/components/system.md has the figures):
 *   cube   a 3×3 router mesh "sip<s>.cube<c>.r<0..8>" over a cube_mm-wide
 *          cube (routers cube_mm / 2 apart): corner routers 0, 2, 6, 8 (NW,
 *          NE, SW, SE) each carry pes_per_corner PEs, the middle of each
 *          edge (1 N, 5 E, 7 S, 3 W) is a UCIe port, the centre (4) the
 *          SRAM "...sram". PE p sits at corner p / pes_per_corner.
 *   PE     node "sip<s>.cube<c>.pe<p>" (TCM hangs off it) linked both ways
 *          to its corner router and to its HBM controller "....pe<p>.hbm".
 *   SIP    cubes in a w×h mesh; a UCIe link joins facing edge ports of
 *          neighbouring cubes, one directed link each way.
 *   system SIPs on ring_1d / torus_2d / mesh_2d / mesh_2d_no_wrap: every
 *          cube on a SIP's E edge links to the cube of the same row on the
 *          W edge of the SIP to its E (and S edge to N edge likewise), so
 *          the cubes of all SIPs form one grid, with wrap links where the
 *          SIP topology wraps (ring: E-W; torus_2d and mesh_2d: both).
 * Links: NoC links noc.bandwidth_gbps, latency ns_per_mm × cube_mm / 2;
 * PE <-> router noc.bandwidth_gbps, 0 ns; PE <-> HBM hbm.link_gbps; router
 * <-> SRAM sram.link_gbps; UCIe connections × gbps_per_connection. A link
 * leaving a router pays router_overhead_ns; a UCIe link also pays both of
 * its ports' overhead, 2 × port_overhead_ns, on the head flit.
 *
 * Routing: up from the source to its router, then cube to cube along the
 * global cube grid in dimension order (X first, each dimension the shorter
 * way round where it wraps, a tie toward E/S), crossing each cube on XY
 * routes of its NoC between ports, then XY to the destination's router
 * and down to it.
 *
 * Errors: NULL or a negative SIM_E* code, the message in err or
 * kb_system_errmsg(). */
#ifndef KBSIM_SYSTEM_H
#define KBSIM_SYSTEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric.h"
#include "graph_topology.h"
#include "pe.h"
#include "sim.h"
#include "topology_schema.h"

struct kb_system;

struct kb_system_opts {
    /* Transfers move timing only: no payload is read or written, so
     * memories stay untouched (no pages allocated) and times are the same
     * as with payload. For scale runs. */
    bool timing_only;
};

/* Builds the hierarchy of cfg (a loaded, validated topology) into a new
 * fabric of simulation s, before the run. opts may be NULL. */
struct kb_system *kb_system_new(struct sim *s, const struct kb_topology_cfg *cfg,
                                const struct kb_system_opts *opts, char *err, size_t errlen);
/* Builds a graph; each PE gets a TCM with cfg's pe.tcm parameters. */
struct kb_system *kb_system_new_graph(struct sim *s, const struct kb_graph_cfg *g,
                                      const struct kb_topology_cfg *cfg,
                                      const struct kb_system_opts *opts, char *err,
                                      size_t errlen);
/* Frees the fabric, memories and tables; after sim_free or before the run. */
void kb_system_free(struct kb_system *sys);

const char *kb_system_errmsg(const struct kb_system *sys);
struct kb_fabric *kb_system_fabric(const struct kb_system *sys);
/* The simulation the system was built in (its modules' ports are there). */
struct sim *kb_system_sim(const struct kb_system *sys);
/* The topology settings the system was built from (a graph's: its PE,
 * IPCQ and clock settings; the grid keys are the defaults'). */
const struct kb_topology_cfg *kb_system_config(const struct kb_system *sys);
bool kb_system_is_graph(const struct kb_system *sys);
bool kb_system_timing_only(const struct kb_system *sys);

struct kb_system_counts {
    int sips, cubes, pes, nodes, links; /* a graph: sips = cubes = 0 */
};
void kb_system_get_counts(const struct kb_system *sys, struct kb_system_counts *out);

/* The PE of a rank (0 .. pes - 1), or NULL. */
struct kb_pe *kb_system_pe(const struct kb_system *sys, int rank);
/* The PE of a rank with its units (PE_CPU, PE_DMA, PE_MATH, PE_GEMM,
 * PE_IPCQ), made on first use so a large system pays only for the PEs a
 * run uses; the DMA routes with kb_system_route_cb and moves no payload in
 * timing-only mode. NULL with the message in kb_system_errmsg. */
struct kb_pe *kb_system_pe_units(struct kb_system *sys, int rank);

/* The IPCQ settings the PE units will be made with (ccl.yaml's buffer_kind
 * and backpressure override the topology's). Only while no PE has its
 * units yet, or when they match: SIM_EPERM otherwise, with the message. */
int kb_system_set_ipcq(struct kb_system *sys, enum kb_topo_buffer_kind kind,
                       enum kb_topo_backpressure bp);
/* The rank of the PE at fabric node `node`, or -1. */
int kb_system_rank_of_node(const struct kb_system *sys, int node);

/* The route between two fabric nodes (any: PE, HBM, SRAM, router) as link
 * ids: returns its number of links (0 when src == dst), or SIM_EINVAL for
 * a bad node, and writes the first min(that, max) links to links. A route
 * longer than max is not an error (ask again with a buffer that long;
 * kb_system_max_hops is always enough), so routes have no length limit. */
int kb_system_route(struct kb_system *sys, int src_node, int dst_node, int *links, int max);
/* The same, in the shape PE_DMA takes as its route callback (ud = sys). */
int kb_system_route_cb(void *sys, int src_node, int dst_node, int *links, int max);
int kb_system_max_hops(const struct kb_system *sys);

/* Sends `bytes` from fabric node src to dst now, timing only, and calls
 * cb(ud, at) when the last byte arrives (at: that absolute time). Routing
 * is fabric.routing's: xy or yx, or adaptive — of the xy and yx routes
 * the one whose links hold fewer messages now (ties: xy), the yx one in
 * the upper half of the VC classes. (kb_system_route, which PE_DMA keeps
 * routes from, gives the xy route under adaptive; PE_DMA copies and
 * kb_system_transfer make the same choice when their flits start.) Any
 * context. */
int kb_system_send(struct kb_system *sys, int src_node, int dst_node, uint64_t bytes,
                   void (*cb)(void *ud, sim_time at), void *ud);

/* No-contention time of `bytes` from src to dst (kb_fabric_path_time of
 * the route); SIM_FOREVER when there is no route. */
sim_time kb_system_path_time(struct kb_system *sys, int src_node, int dst_node,
                             uint64_t bytes);

/* IPCQ directions. N/S/E/W: the PE with the same local index in the
 * neighbouring cube of the SIP's cube mesh (none at an edge). GLOBAL_*:
 * the same PE of the same cube in the neighbouring SIP per the SIP
 * topology (ring_1d: E/W with wrap; torus_2d, mesh_2d: all four with wrap;
 * mesh_2d_no_wrap: none at an edge). A dimension of one SIP has no
 * neighbours; in one of two, both ways lead to the other SIP. */
enum kb_system_dir {
    KB_DIR_N, KB_DIR_S, KB_DIR_E, KB_DIR_W,
    KB_DIR_GLOBAL_N, KB_DIR_GLOBAL_S, KB_DIR_GLOBAL_E, KB_DIR_GLOBAL_W,
    KB_DIR_COUNT
};
/* "N", ..., "global_W"; and back (-1 for an unknown name). */
const char *kb_system_dir_name(enum kb_system_dir d);
int kb_system_dir_parse(const char *name);
/* The rank in direction d of rank, or -1 (none, a bad rank, a graph). */
int kb_system_neighbor(const struct kb_system *sys, int rank, enum kb_system_dir d);

/* From a thread process: moves `bytes` from src_rank's TCM at src_addr to
 * dst_rank's TCM at dst_addr along the routed path and returns when the
 * last byte has arrived; the destination's bytes change then, all at once
 * (not at all in timing-only mode). Fabric time only: memory access time
 * is PE_DMA's to charge. SIM_EINVAL for a bad rank or range, SIM_EPERM
 * outside a thread process. */
int kb_system_transfer(struct kb_system *sys, int src_rank, uint64_t src_addr, int dst_rank,
                       uint64_t dst_addr, uint64_t bytes);

/* A few lines of summary (shape, counts, link parameters) into buf;
 * returns the length it needed, like snprintf. */
size_t kb_system_describe(const struct kb_system *sys, char *buf, size_t len);

#endif
