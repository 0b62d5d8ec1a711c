/* graph_topology.h — kb_graph: a system described as an arbitrary graph of
 * named nodes and links (from YAML or a Lua table), built into a fabric and
 * routed by shortest path
 *
 * The description, in YAML (a Lua table mirrors it key for key):
 *
 *     nodes:
 *       - {name: a, pe: true}          # pe: the node is a PE (rank = order)
 *       - {name: sw}
 *     links:
 *       - {from: a, to: sw, bandwidth_gbps: 64, latency_ns: 5,
 *          overhead_ns: 0, bidirectional: true}
 *
 *     routes:                          # optional: user-given paths
 *       - {from: a, to: b, via: [sw]}  # a -> sw -> b instead of the table's
 *
 * latency_ns, overhead_ns and bidirectional are optional (0, 0, false).
 * Beside nodes and links a graph system may carry the topology.yaml keys
 * of its PEs: pe, ipcq, clock_ghz, flit_bytes, fabric (laid over the defaults as
 * a grid's file is); the grid's keys (sips, sip, cube, ucie) are refused.
 * Refused, each at its place: an unknown or missing key, a link to an
 * unknown node, a duplicate node name, a bandwidth <= 0, a negative time,
 * a direction wired twice (a -> b given twice, also through
 * bidirectional), a graph without PEs.
 *
 * Routing: a user-given path when `routes` has one for the pair (its
 * consecutive nodes must be linked; via may be empty; one path a pair),
 * else the table: the fewest links (breadth-first search from the source, which
 * visits the neighbours of a node in increasing node order and keeps the
 * first parent found, so equal-length choices go to the lower node id;
 * among parallel links the first listed). Each source's search runs once,
 * on its first route, and is kept. */
#ifndef KBSIM_GRAPH_TOPOLOGY_H
#define KBSIM_GRAPH_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "fabric.h"
#include "topology_schema.h"

struct kb_graph_node_cfg {
    char *name;
    bool pe;
    char where[192]; /* "file:line:col", for messages raised later */
};

struct kb_graph_link_cfg {
    int from, to; /* node indices */
    struct kb_link_params p;
    bool bidirectional;
};

/* A user-given path: node indices from, hop..., to (n nodes, n >= 2),
 * each consecutive pair joined by a link of the graph. */
struct kb_graph_route_cfg {
    int *nodes;
    size_t n;
};
struct kb_graph_cfg {
    struct kb_graph_node_cfg *nodes;
    size_t n_nodes;
    struct kb_graph_link_cfg *links;
    size_t n_links;
    int n_pes;
    struct kb_graph_route_cfg *routes;
    size_t n_routes;
};

/* True when a configuration tree is a graph (its top level has 'nodes'),
 * not a topology.yaml description. */
bool kb_graph_tree_is_graph(const struct kb_config_node *root);

/* Validate a tree (read from YAML, or built from a Lua table) into *g;
 * every link gets flit size `flit`. The system keys are accepted, not
 * read (kb_graph_system_from_tree reads them). Returns 0, or -1 with every
 * problem in c->errors; *g is then released. */
int kb_graph_cfg_from_tree(struct kb_config *c, const struct kb_config_node *root,
                           unsigned flit, struct kb_graph_cfg *g);
/* A graph system: the topology tree `topo_root` (the defaults) with the
 * graph's system keys laid over it and then the --set overrides, checked
 * into *topo; the graph into *g with the topology's flit size. topo_root
 * is changed. Returns 0, or -1 with every problem in c->errors. */
int kb_graph_system_from_tree(struct kb_config *c, struct kb_config_node *topo_root,
                              const struct kb_config_node *graph_root,
                              const char *const *sets, size_t n_sets,
                              struct kb_topology_cfg *topo, struct kb_graph_cfg *g);
void kb_graph_cfg_release(struct kb_graph_cfg *g);

struct kb_graph;

/* Adds the nodes (with their names) and links to f. NULL with err set
 * when the fabric refuses one. */
struct kb_graph *kb_graph_new(struct kb_fabric *f, const struct kb_graph_cfg *g, char *err,
                              size_t errlen);
void kb_graph_free(struct kb_graph *gr);

int kb_graph_size(const struct kb_graph *gr); /* nodes */
int kb_graph_node(const struct kb_graph *gr, int i); /* fabric node of node i */
int kb_graph_n_pes(const struct kb_graph *gr);
int kb_graph_pe_node(const struct kb_graph *gr, int rank); /* or -1 */
int kb_graph_max_hops(const struct kb_graph *gr); /* an upper bound: nodes - 1 */

/* The route between two fabric nodes of the graph as link ids in
 * links[0..max). Returns the number of links, or SIM_EINVAL (message in
 * kb_graph_errmsg) for a node not in the graph, no path, a short buffer. */
int kb_graph_route(struct kb_graph *gr, int src_node, int dst_node, int *links, int max);
const char *kb_graph_errmsg(const struct kb_graph *gr);

#endif
