/* topology_schema.h — the system description of topology.yaml as a plain
 * C struct, its schema and its consistency rules
 *
 * Keys, units and defaults: docs/topology.md and configs/topology.yaml. */
#ifndef KBSIM_TOPOLOGY_SCHEMA_H
#define KBSIM_TOPOLOGY_SCHEMA_H

#include "config_schema.h"

enum kb_topo_kind {
    KB_TOPO_RING_1D,
    KB_TOPO_TORUS_2D,
    KB_TOPO_MESH_2D,
    KB_TOPO_MESH_2D_NO_WRAP,
};
enum kb_topo_buffer_kind { KB_TOPO_BUF_TCM, KB_TOPO_BUF_SRAM, KB_TOPO_BUF_HBM };
enum kb_topo_backpressure { KB_TOPO_BP_SLEEP, KB_TOPO_BP_POLL };
enum kb_topo_flow_control { KB_TOPO_FC_WORMHOLE_UNBOUNDED, KB_TOPO_FC_CREDIT };
enum kb_topo_routing {
    KB_TOPO_ROUTE_XY,
    KB_TOPO_ROUTE_YX,
    KB_TOPO_ROUTE_ADAPTIVE,
    KB_TOPO_ROUTE_ADAPTIVE_HOP
};
enum kb_topo_deadlock { KB_TOPO_DL_VC_CLASSES, KB_TOPO_DL_NONE };

/* PEs in a system at most: ranks and node ids are ints, with a wide margin
 * (a system has 2 nodes a PE plus 10 a cube). */
#define KB_TOPO_MAX_PES (1 << 24)

/* The YAML spellings, indexed by the enums above, NULL-terminated. */
extern const char *const kb_topo_kind_names[];
extern const char *const kb_topo_buffer_kind_names[];
extern const char *const kb_topo_backpressure_names[];
extern const char *const kb_topo_flow_control_names[];
extern const char *const kb_topo_routing_names[];
extern const char *const kb_topo_deadlock_names[];

/* Bandwidths in GB/s (= bytes/ns), times in ns, sizes in bytes. Enum
 * fields hold the enums above. Every value is filled by a successful
 * load; sips.w and sips.h are resolved (w = count, h = 1 on a ring). */
struct kb_topology_cfg {
    struct {
        int count;
        int topology;
        int w, h;
    } sips;
    struct {
        struct {
            int w, h;
        } cube_mesh;
    } sip;
    struct {
        int pes_per_corner, corners;
        struct {
            double bandwidth_gbps, ns_per_mm, cube_mm, router_overhead_ns;
        } noc;
        struct {
            uint64_t capacity;
            double bandwidth_gbps, setup_ns, link_gbps;
        } sram;
    } cube;
    struct {
        struct {
            uint64_t capacity;
            double bandwidth_gbps, setup_ns;
        } tcm;
        struct {
            int pseudo_channels;
            double channel_gbps, setup_ns;
            int burst_bytes;
            uint64_t capacity;
            double link_gbps;
        } hbm;
        struct {
            int read_channels, write_channels, comm_channels;
        } dma;
        struct {
            int vector_bytes_per_cycle;
            int transcendental_cycles;
        } math;
        struct {
            struct {
                int m, n, k;
            } mac, tile;
        } gemm;
        struct {
            int dispatch_cycles;
        } cpu;
    } pe;
    struct {
        int connections;
        double gbps_per_connection, port_overhead_ns;
    } ucie;
    int flit_bytes;
    double clock_ghz;
    struct {
        int n_slots;
        uint64_t slot_size;
        int buffer_kind;
        int backpressure;
        int credit_bytes;
    } ipcq;
    struct {
        int flow_control; /* enum kb_topo_flow_control */
        int buffer_flits, vcs;
        double credit_ns;
        int routing;            /* enum kb_topo_routing */
        int deadlock_avoidance; /* enum kb_topo_deadlock */
    } fabric;
    /* derived */
    int pes_per_cube;  /* pes_per_corner × corners */
    int cubes_per_sip; /* cube_mesh w × h */
    int64_t n_pes;     /* sips × cubes_per_sip × pes_per_cube */
};

/* VC classes the routing uses with credit flow control: two (the route's
 * two phases), plus one for each wrapping dimension of the cube grid
 * (dateline), times two for adaptive routing (xy and yx orders apart);
 * 1 with deadlock_avoidance none. */
int kb_topo_vc_classes(const struct kb_topology_cfg *cfg);

/* The schema (for --set checks shared with other configurations). */
const struct kb_config_key *kb_topo_schema(void);

/* Load defaults + user file + --set overrides into *cfg. Returns 0, or -1
 * with every problem in `errors` as "file:line:col: problem". */
int kb_topo_cfg_load(struct kb_topology_cfg *cfg, const struct kb_config_src *src,
                     struct kb_config_errors *errors);

/* Validate an already built tree (the Lua binding builds one from a Lua
 * table, with the script's file and line on each node) into *cfg.
 * Returns 0 or -1; problems go to c->errors. */
int kb_topo_cfg_from_tree(struct kb_config *c, const struct kb_config_node *root,
                          struct kb_topology_cfg *cfg);
/* The same for the PE and fabric settings of a graph system: the checks
 * that concern the grid of SIPs (the VC classes its routing needs) are
 * left out, since a graph has its own routes and one VC class. */
int kb_topo_cfg_from_tree_graph(struct kb_config *c, const struct kb_config_node *root,
                                struct kb_topology_cfg *cfg);

#endif
