/* link.h — kb_link: a directed link carrying wormhole messages flit by flit
 *
 * A link has a bandwidth (GB/s = bytes/ns), a wire latency (ns), a flit
 * size (bytes) and a pass-through overhead (ns) that the head flit of a
 * message pays once before it may ask for the link (routing, port/PHY
 * pipeline). A flit occupies the link for flit_bytes / bw (serialisation)
 * and then propagates for the latency; the next flit may start as soon as
 * the previous one is serialised.
 *
 * Arbitration is FIFO in the order heads ask for the link. A message holds
 * the link from its first to its last flit, like a wormhole worm: flits of
 * different messages are never interleaved on one link, and a worm whose
 * body is still upstream keeps the link idle but reserved. Input buffering
 * is not bounded (no credit back-pressure between hops).
 *
 * Each link is a method process woken by one event. Because a worm holds
 * the link to its end and nothing pushes back, its whole flit stream on a
 * hop follows from its head's start and the stream arriving from upstream,
 * so a link computes it when the head starts instead of moving each flit:
 * it wakes when a head arrives, when it frees up for a waiting head and
 * when a tail starts, at the times the flit-by-flit rule gives, and
 * contention between worms still emerges from the simulation. Links are
 * normally created and wired by kb_fabric (fabric.h); the message type
 * below is the contract between the two. */
#ifndef KBSIM_LINK_H
#define KBSIM_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "sim.h"

struct kb_link_params {
    double bw_gbps;      /* bytes per ns, > 0 */
    double latency_ns;   /* wire delay after serialisation, >= 0 */
    double overhead_ns;  /* charged once per message, on its head flit, >= 0 */
    uint32_t flit_bytes; /* > 0 */
    /* Flow control (docs/components/link.md). buffer_flits 0 is
     * wormhole_unbounded, today's model: the fields below are unused.
     * Otherwise credit mode (link_credit.c): the far end has vcs virtual
     * channels of buffer_flits flits each and the sender holds one credit
     * per free slot; a credit comes back credit_ns after its flit leaves
     * the buffer. */
    uint32_t buffer_flits; /* 0 (unbounded) or flits per VC */
    uint32_t vcs;          /* credit mode: virtual channels, >= vc_classes */
    uint32_t vc_classes;   /* credit mode: VC classes; class c uses VCs v % vc_classes == c */
    double credit_ns;      /* credit mode: credit return delay, >= 0 */
    /* credit mode: a message's VC class goes up by one from this link on
     * (the dateline of a ring or torus dimension) */
    uint32_t dateline;
};

struct kb_link_stats {
    uint64_t bytes;    /* payload bytes serialised */
    uint64_t flits;    /* flits serialised */
    uint64_t messages; /* messages that acquired the link */
    sim_time busy_ps;  /* time spent serialising */
};

struct kb_link;
struct kb_link_msg;

/* ---- ports (decision 0038) ----------------------------------------------
 * A link is a module named after it with two ports of type kb_flit_if:
 *   in   IN, 0..1   its input; exports the link's kb_flit_if (made with the
 *                   link; the node upstream, or the previous link, binds it)
 *   out  OUT, 1..1  where its flits go: the node at its far end (whose
 *                   export forwards each worm to the next link of its
 *                   route) or another link; cached at bind, so a hand-off
 *                   is one load and an indirect call
 * A worm's route (kb_link_msg.path) names the links it takes, as an address
 * names a memory: a node picks its output by it. */
#define KB_FLIT_IF "kb_flit_if"

struct kb_flit_if {
    void *ctx;
    /* The head of worm m, on hop `hop` of its path, may ask for the link
     * of that hop from absolute time t (>= now, the link's overhead paid)
     * on. 0, or SIM_ENOMEM. */
    int (*head)(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now);
    /* Credit mode: a body flit of m, on hop `hop`, may go on from t (its
     * time is in the message's state). NULL on a wormhole_unbounded link,
     * whose body stream follows from its head. */
    void (*flit)(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now);
};

/* credit mode bounds (a bad value is an error naming the link) */
#define KB_LINK_MAX_BUFFER_FLITS 4096
#define KB_LINK_MAX_VCS 16
/* an open path's candidates for one hop */
#define KB_LINK_MAX_CANDS 4

/* One candidate for the next hop of an open path: a link and the VC
 * classes the head may take on it, tried in order (n_cls 1 or 2); tag is
 * the owner's. */
struct kb_link_cand {
    struct kb_link *link;
    uint8_t cls[2];
    uint8_t n_cls;
    uint32_t tag;
    sim_time delay; /* eligible this long after the head could ask (ps) */
};

/* A message in flight: a worm of n_flits flits (all flit_bytes long but
 * the last, last_bytes long) following `path`. The owner fills every field
 * but `body`'s contents and keeps the message alive until
 * done() runs. done() is called once, when the last flit starts on the
 * last hop, with `at` = the absolute time its last byte reaches the far
 * end; no link refers to the message after that call. */
struct kb_link_msg {
    /* the first 64 bytes are what a wormhole hop reads */
    struct kb_link **path;
    uint64_t n_flits;
    uint32_t n_hops;
    /* kept by the links (the owner starts it at 0): how many lines body
     * holds */
    uint32_t n_lines;
    uint32_t flit_bytes;
    uint32_t last_bytes;
    /* 2·n_hops words the links keep the worm's stream in: the body lines
     * not yet merged, each as (where it stands, its hop's flit time, so a
     * link never reads an earlier hop's link), n_lines of them */
    sim_time *body;
    /* kept by the links: the last flit's arrival at the next hop, and the
     * link after the one the head was handed to (path[hop + 1], NULL past
     * the end), so the hop that starts the head fetches that link's lines
     * while it reads the path beside them */
    sim_time last_in;
    struct kb_link *next_link;
    void (*done)(struct kb_link_msg *m, sim_time at);
    void *ud;
    /* credit mode: the first hop's VC class (routing adds one per dateline
     * crossed), and the per-hop state the links keep (made by
     * kb_link_inject, freed before done) */
    uint32_t vc_class;
    /* credit mode, NULL or n_hops classes given by the router (read only
     * during kb_link_inject): they replace vc_class and the datelines */
    const uint8_t *hop_class;
    void *credit;
    /* credit mode, per-hop routing (an open path): while `open`, the path
     * grows as the head goes. When the head reaches the far end of the
     * last known hop, next_hop(m, c, max) writes the next hop's candidate
     * links (at most max, >= 1; a negative error fails the run), and the
     * head waits at all of them at once; the first that serves it calls
     * took(m, c, cls) with the candidate and the VC class it got, and the
     * owner appends c->link to path (path and body hold `room` hops) and
     * updates n_hops and open. */
    int open;
    uint32_t room;
    int (*next_hop)(struct kb_link_msg *m, struct kb_link_cand *c, int max);
    void (*took)(struct kb_link_msg *m, const struct kb_link_cand *c, uint32_t cls);
};

/* Checks parameters; on error writes "link 'name': ..." into err and
 * returns SIM_EINVAL. */
int kb_link_params_check(const struct kb_link_params *p, const char *name,
                         char *err, size_t errlen);

/* A new link owned by the caller (free with kb_link_free after the
 * simulation is done with it). NULL on a bad parameter or no memory, with
 * the reason in err. */
struct kb_link *kb_link_new(struct sim *s, const char *name,
                            const struct kb_link_params *p, char *err,
                            size_t errlen);
void kb_link_free(struct kb_link *l);

const char *kb_link_name(const struct kb_link *l);

/* The link's ports: "NAME.in" (its export) and "NAME.out". */
struct sim_port *kb_link_in_port(const struct kb_link *l);
struct sim_port *kb_link_out_port(const struct kb_link *l);

/* A fabric's links in bulk (decision 0049): a kind holds parameters
 * (checked when made) and what follows from them, shared by the links
 * made with it; a pool holds the links themselves, 64-byte aligned, a
 * few hundred bytes each. Free both after every link made of them. */
struct kb_link_kind;
struct kb_link_pool;
struct kb_link_kind *kb_link_kind_new(struct sim *s, const struct kb_link_params *p,
                                      const char *name, char *err, size_t errlen);
void kb_link_kind_free(struct kb_link_kind *k);
struct kb_link_pool *kb_link_pool_new(void);
void kb_link_pool_free(struct kb_link_pool *pool);
/* The links made in pool so far, and the i-th of them (i < that count). */
size_t kb_link_pool_count(const struct kb_link_pool *pool);
struct kb_link *kb_link_pool_at(const struct kb_link_pool *pool, size_t i);

/* A link of kind k in pool, without its ports yet (the fabric's:
 * decision 0038, "Lazy records"): the fabric sets where its worms go,
 * the interface its port `out` would be bound to, and makes the ports
 * when they are asked for (kb_link_make_ports; 0 at once if made).
 * Binding `out` later caches the same interface. */
struct kb_link *kb_link_new_unported(const struct kb_link_kind *k, struct kb_link_pool *pool,
                                     const char *name, char *err, size_t errlen);
void kb_link_set_out(struct kb_link *l, const struct kb_flit_if *out);
int kb_link_make_ports(struct kb_link *l, char *err, size_t errlen);

/* The interface a fabric node exports (fabric.c: every node's NODE.net.in):
 * a head or flit reaching it on hop `hop` goes on to the input of the link
 * m->path[hop], its route's next link, through that link's export. Here,
 * beside the links, so a wormhole link's input is reached without a
 * second indirect call. ctx is unused. */
int kb_link_route_head(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now);
void kb_link_route_flit(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now);

/* The interface the link exports on its port `in` (made on first use for
 * a fabric's link: NULL when out of memory). */
const struct kb_flit_if *kb_link_in(const struct kb_link *l);
const struct kb_link_params *kb_link_params(const struct kb_link *l);

/* Serialisation time of `bytes` on this link in ps: bytes / bw, rounded to
 * the nearest ps. The simulation charges exactly this per flit. */
sim_time kb_link_ser_ps(const struct kb_link *l, uint64_t bytes);
/* Latency and overhead in ps (rounded once, at creation). */
sim_time kb_link_latency_ps(const struct kb_link *l);
sim_time kb_link_overhead_ps(const struct kb_link *l);

/* Whether the link runs credit flow control (buffer_flits > 0). */
int kb_link_credit_mode(const struct kb_link *l);

/* Credit mode: the time from a message's start to its last byte's arrival
 * when it crosses path[0..n_hops-1] (all credit-mode links) alone — the
 * closed form of the flit rule, link_credit.c. `flit` is the path's flit
 * size, 0 bytes is one empty flit. SIM_FOREVER when out of memory. */
sim_time kb_link_credit_path_time(struct kb_link *const *path, uint32_t n_hops,
                                  uint32_t flit, uint64_t bytes);

/* Starts a message at the current time on m->path[0]: every flit is ready
 * at the source, the head asks for the first link after its overhead.
 * Callable from any process or before the run. SIM_EINVAL for an empty
 * path or zero flits. */
int kb_link_inject(struct kb_link_msg *m);

/* Messages waiting at the link's input or holding it now. */
int kb_link_backlog(const struct kb_link *l);

void kb_link_get_stats(const struct kb_link *l, struct kb_link_stats *out);
/* busy / elapsed; elapsed 0 means "the current simulated time". */
double kb_link_utilisation(const struct kb_link *l, sim_time elapsed);

#endif
