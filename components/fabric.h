/* fabric.h — kb_fabric: nodes, directed links and the transfers over them
 *
 * A fabric owns named nodes (integer ids, hierarchical names such as
 * "sip0.cube5.r3") and the kb_links between them (integer ids too). A
 * transfer names its path as a list of link ids — routing is the caller's
 * business (noc.h computes paths on meshes, tori, rings and switches) —
 * and is carried by the links' own processes, which time every flit of it
 * (link.h), so contention between transfers emerges from the simulation.
 * The fabric moves timing only; payload bytes are copied by whoever owns
 * them (PE_DMA).
 *
 * Errors: functions returning int give a non-negative value on success and
 * a negative SIM_E* code on failure, pointers NULL; kb_fabric_errmsg() says
 * what went wrong. */
#ifndef KBSIM_FABRIC_H
#define KBSIM_FABRIC_H

#include <stdbool.h>
#include <stdint.h>

#include "link.h"
#include "sim.h"

struct kb_fabric;

/* An empty fabric whose links run in simulation s. NULL only when out of
 * memory. */
struct kb_fabric *kb_fabric_new(struct sim *s);
/* Frees nodes, links and any message still in flight. Call it when the
 * simulation no longer runs (before or after sim_free). */
void kb_fabric_free(struct kb_fabric *f);

const char *kb_fabric_errmsg(const struct kb_fabric *f);
struct sim *kb_fabric_sim(const struct kb_fabric *f);

/* A new node; names are unique. Returns its id (0, 1, ...). */
int kb_fabric_add_node(struct kb_fabric *f, const char *name);
/* The id of the node called name, or -1. */
int kb_fabric_find_node(const struct kb_fabric *f, const char *name);
const char *kb_fabric_node_name(const struct kb_fabric *f, int node);
int kb_fabric_node_count(const struct kb_fabric *f);

/* A new directed link src -> dst; name NULL gives "src->dst". Several
 * links may join the same pair (a 2-node ring has two each way). Returns
 * its id; a bad parameter is an error naming the link and the value. */
int kb_fabric_add_link(struct kb_fabric *f, int src, int dst,
                       const char *name, const struct kb_link_params *p);
/* As kb_fabric_add_link, the link named "<src's name>.<suffix>"; suffix is
 * kept, not copied (a string literal, say), and the name is made only when
 * it is asked for, so that a large regular network (a NoC's mesh) holds no
 * string a link. */
int kb_fabric_add_link_suffixed(struct kb_fabric *f, int src, int dst, const char *suffix,
                                const struct kb_link_params *p);
int kb_fabric_link_count(const struct kb_fabric *f);
/* The link itself, made on its first use (NULL when out of memory). */
struct kb_link *kb_fabric_link(struct kb_fabric *f, int link);
/* Links whose kb_link exists. A link is made on its first use (a path
 * check, path time or send over it, kb_fabric_link), so a large system
 * pays for a process, an event and queues only on the links a run uses. */
int kb_fabric_links_made(const struct kb_fabric *f);
/* Whether link `link` has been made (read only: makes nothing). */
bool kb_fabric_link_made(const struct kb_fabric *f, int link);
int kb_fabric_link_src(const struct kb_fabric *f, int link);
int kb_fabric_link_dst(const struct kb_fabric *f, int link);
/* The first link added from src to dst, or -1. */
int kb_fabric_find_link(const struct kb_fabric *f, int src, int dst);

/* Checks that links[0..n) exist, join head to tail and share one flit
 * size. 0 or SIM_EINVAL. */
int kb_fabric_check_path(struct kb_fabric *f, const int *links, int n_links);

/* The closed-form time of `bytes` over the path with no other traffic (the
 * formula is in fabric.c). SIM_FOREVER for an invalid path. */
sim_time kb_fabric_path_time(struct kb_fabric *f, const int *links,
                             int n_links, uint64_t bytes);

/* Starts a transfer of `bytes` along the path now and notifies `done` (if
 * not NULL) when the last byte arrives. Use one event per outstanding
 * transfer: an event keeps only its earliest pending notification. An
 * empty path completes in the next delta. Callable from any process or
 * before the run. */
int kb_fabric_send(struct kb_fabric *f, const int *links, int n_links,
                   uint64_t bytes, struct sim_event *done);

/* Like kb_fabric_send, but calls cb(ud, at) when the last byte arrives
 * (at: that absolute time, now or later; cb may send again), and starts
 * the message in VC class vc_class on the first hop (credit mode: each
 * dateline link on the path adds one; ignored by wormhole_unbounded). */
int kb_fabric_send_cb(struct kb_fabric *f, const int *links, int n_links, uint64_t bytes,
                      uint32_t vc_class, void (*cb)(void *ud, sim_time at), void *ud);

/* kb_fabric_send_cb on a path that has passed kb_fabric_check_path
 * before (a route kept by its user, as kb_dma keeps its routes): the
 * path is not checked again. */
int kb_fabric_send_cb_checked(struct kb_fabric *f, const int *links, int n_links,
                              uint64_t bytes, uint32_t vc_class,
                              void (*cb)(void *ud, sim_time at), void *ud);

/* The links of a path that has passed kb_fabric_check_path, into
 * out[0..n_links): a user that keeps a route (kb_dma) keeps these beside
 * its link ids and sends with kb_fabric_send_cb_links, so that a message
 * does not look each hop up in the fabric's table (a cold line a hop at
 * system scale). */
void kb_fabric_path_links(const struct kb_fabric *f, const int *links, int n_links,
                          struct kb_link **out);

/* kb_fabric_send_cb_checked with path[j] = the link of links[j], as
 * kb_fabric_path_links gave them. */
int kb_fabric_send_cb_links(struct kb_fabric *f, const int *links, struct kb_link *const *path,
                            int n_links, uint64_t bytes, uint32_t vc_class,
                            void (*cb)(void *ud, sim_time at), void *ud);

/* Like kb_fabric_send, from a thread process: returns when the last byte
 * has arrived. SIM_EPERM outside a process. */
int kb_fabric_transfer(struct kb_fabric *f, const int *links, int n_links,
                       uint64_t bytes);

/* kb_fabric_transfer on a path that has passed kb_fabric_check_path
 * before (a route kept by its user, as kb_dma keeps its routes): the
 * path is not checked again. */
int kb_fabric_transfer_checked(struct kb_fabric *f, const int *links, int n_links,
                               uint64_t bytes);
/* kb_fabric_transfer_checked with the sender's VC class (as
 * kb_fabric_send_cb's): a routing order the classifier tells apart. */
int kb_fabric_transfer_class(struct kb_fabric *f, const int *links, int n_links,
                             uint64_t bytes, uint32_t vc_class);

/* The router's VC classes for credit flow control: fn(ud, links, n,
 * vc_class, classes) writes the class of each of the n hops of a path
 * about to be sent (vc_class: the sender's, e.g. a routing order); it is
 * called on every credit-mode send. Without one, a message starts in
 * vc_class and each dateline link adds one. */
typedef void kb_fabric_classify_fn(void *ud, const int *links, int n, uint32_t vc_class,
                                   uint8_t *classes);
void kb_fabric_set_classifier(struct kb_fabric *f, kb_fabric_classify_fn *fn, void *ud);

/* Per-hop routing (credit mode): a router gives an open path's candidates
 * for its next hop from node `at` toward `dst` in the router's state
 * `state`: distinct links, each with one or two VC classes (tried in
 * order) and the state the message takes on with each; at most max.
 * Returns their number (>= 1) or a negative error. */
struct kb_fabric_hop {
    int link;
    uint8_t cls[2];
    uint8_t n_cls;
    uint32_t state[2];
    sim_time delay; /* the head may take it this long after it could ask */
};
typedef int kb_fabric_route_fn(void *ud, int at, int dst, uint32_t state,
                               struct kb_fabric_hop *out, int max);
void kb_fabric_set_router(struct kb_fabric *f, kb_fabric_route_fn *fn, void *ud);

/* Sends `bytes` now over an open path: the fixed first hops prefix[0..n)
 * in classes prefix_cls, then hop by hop as the router (set above) says,
 * up to `room` hops in all, until a hop ends at node dst; cb(ud, at) when
 * the last byte arrives. Credit mode only (SIM_EINVAL otherwise). */
int kb_fabric_send_open(struct kb_fabric *f, const int *prefix, int n_prefix,
                        const uint8_t *prefix_cls, int room, int dst, uint32_t state,
                        uint64_t bytes, void (*cb)(void *ud, sim_time at), void *ud);

/* Messages waiting at or holding link `link` now (0 for a link not yet
 * made): a congestion measure for adaptive routing. */
int kb_fabric_link_backlog(const struct kb_fabric *f, int link);

/* Transfers started and not yet delivered to their last link's far end. */
uint64_t kb_fabric_in_flight(const struct kb_fabric *f);

#endif
