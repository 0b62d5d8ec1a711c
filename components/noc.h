/* noc.h — kb_noc: regular networks built into a fabric, and their routes
 *
 * Four shapes, each a set of routers (fabric nodes) indexed 0..n-1:
 *   mesh   w×h grid, router i at x = i % w, y = i / w; links to the E (+x),
 *          W, S (+y) and N neighbours that exist
 *   torus  the mesh plus wrap links, so every router of a dimension of
 *          size >= 2 has all four; in a dimension of size 2 the E and W
 *          links are two distinct links to the same neighbour
 *   ring   n routers, E (+1) and W (-1) links with wrap; w = n, h = 1
 *   switch n endpoints fully connected through one crossbar node: a route
 *          is endpoint -> crossbar -> endpoint (two links, one switch hop)
 * Routing is deterministic. Mesh: dimension order, X (horizontal) first.
 * Torus and ring: dimension order, X first, each dimension the shorter way
 * round, a tie broken toward + (E, S). Every link of a network gets the
 * same parameters: the caller chooses latency (e.g. wire length ×
 * ns_per_mm; a torus is assumed folded, so wrap links are no longer).
 *
 * Routers are named "<prefix>.r<i>" ("sip0.cube5.r3"), the crossbar
 * "<prefix>.xbar", links "<router>.<dir>" ("sip0.cube5.r3.E") or
 * "<endpoint>.up" / "<prefix>.xbar.<i>". A network may instead join
 * existing fabric nodes (params.nodes), e.g. the gateways of SIPs. */
#ifndef KBSIM_NOC_H
#define KBSIM_NOC_H

#include <stddef.h>

#include "fabric.h"
#include "link.h"

enum kb_noc_kind { KB_NOC_MESH, KB_NOC_TORUS, KB_NOC_RING, KB_NOC_SWITCH };

/* Outgoing link directions of a router; a ring uses E and W. */
enum kb_noc_dir { KB_NOC_E, KB_NOC_W, KB_NOC_S, KB_NOC_N, KB_NOC_NDIRS };

struct kb_noc_params {
    enum kb_noc_kind kind;
    const char *prefix; /* name prefix, e.g. "sip0.cube5"; "" for none */
    int w, h;           /* mesh, torus: grid; ring, switch: w = n, h = 1 */
    struct kb_link_params link;
    /* NULL: create the routers; else w×h existing fabric node ids */
    const int *nodes;
};

struct kb_noc;

/* Builds the network's nodes and links into f. NULL on a bad parameter or
 * a fabric error, with the message in err. The fabric owns the nodes and
 * links; the kb_noc only holds the routing tables. */
struct kb_noc *kb_noc_new(struct kb_fabric *f, const struct kb_noc_params *p,
                          char *err, size_t errlen);
void kb_noc_free(struct kb_noc *n);

const char *kb_noc_errmsg(const struct kb_noc *n);
int kb_noc_size(const struct kb_noc *n); /* routers / endpoints */
/* The fabric node of router i, or -1. */
int kb_noc_node(const struct kb_noc *n, int i);
/* The crossbar node of a switch, or -1. */
int kb_noc_xbar(const struct kb_noc *n);
/* The link leaving router i toward d, or -1 if there is none. */
int kb_noc_link(const struct kb_noc *n, int i, enum kb_noc_dir d);

/* The route from router src to router dst as fabric link ids, written to
 * links[0..max). Returns the number of links (0 when src == dst), or
 * SIM_EINVAL for a bad index or a buffer too short (see kb_noc_max_hops). */
int kb_noc_route(struct kb_noc *n, int src, int dst, int *links, int max);
/* Links on the route from src to dst, or SIM_EINVAL. */
int kb_noc_hops(struct kb_noc *n, int src, int dst);
/* The longest route of the network, in links. */
int kb_noc_max_hops(const struct kb_noc *n);

#endif
