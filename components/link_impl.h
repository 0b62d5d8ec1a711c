/* link_impl.h — the inside of struct kb_link, shared by link.c (the
 * wormhole_unbounded model) and link_credit.c (credit flow control); not
 * for use outside those two files */
#ifndef KBSIM_LINK_IMPL_H
#define KBSIM_LINK_IMPL_H

#include "link.h"

/* A worm's bytes: its full flits and the last one. */
static inline uint64_t kb_link_msg_bytes(const struct kb_link_msg *m)
{
    return (m->n_flits - 1) * m->flit_bytes + m->last_bytes;
}

/* The head of a worm due at this link's input at time t. seq orders equal
 * times first come, first served; it is compared modulo 2^32, which holds
 * while fewer than 2^31 heads wait at one link. */
struct arrival {
    sim_time t;
    struct kb_link_msg *m;
    uint32_t hop;
    uint32_t seq;
};

struct waiting {
    struct kb_link_msg *m;
    uint32_t hop;
};

/* A link's parameters and what follows from them, shared by the links
 * made with equal parameters in one simulation (a fabric's links: a few
 * kinds for hundreds of thousands of links, so they stay in cache). */
struct kb_link_kind {
    struct kb_link_params p;
    double ps_per_byte;
    sim_time ser_full; /* ser() of a full flit, the common case */
    sim_time lat_ps, ovh_ps;
    struct sim *sim;
};

/* queues held in the link until they outgrow this */
#define LINK_INLINE 2

/* What only set-up, credit mode and tracing use: made with the link in
 * credit mode, when tracing or by kb_link_new, else when first asked for
 * (ports, kb_link_in). */
struct kb_link_ext {
    struct kb_flit_if in_if;   /* the export of port `in`: kb_link_in */
    struct kb_link_credit *cr; /* credit mode (link_credit.c), else NULL */
    struct sim_trace *tr;      /* NULL: not traced */
    struct sim_port *in_port, *out_port; /* "NAME.in", "NAME.out" */
    sim_time cur_start;        /* traced: when the worm acquired the link */
    int trk;                   /* trace track, made on the first message */
    bool owns_kind;            /* made by kb_link_new: k is the link's own */
};

/* The layout follows the accesses (decision 0049), 4 cache lines. What a
 * worm crossing a link without contention touches is lines 0-2: a
 * hand-off from the previous hop (kb_link_route_head, post) reads line 0
 * and writes its arrival into line 1; the activation that starts the worm
 * reads lines 0-1 and writes the worm's counts into line 2. Line 3 holds
 * what only contention (the waiting heads), port `out` when it is not the
 * fabric's router, and set-up, credit mode and tracing (ext) use. A
 * fabric's links are 64-byte aligned (struct kb_link_pool). */
struct kb_link {
    /* line 0 */
    const struct kb_link_kind *k;
    /* the link after this one on the route of the head that arrived
     * first (a hint: the activation that starts it fetches that link
     * while it reads the worm) */
    struct kb_link *next_hint;
    /* heads on their way to this link's input, a min-heap on (t, seq)
     * (link_heap): in line 1 until it outgrows it */
    uint32_t n_heap, cap_heap;
    uint32_t seq;
    bool lazy;   /* the tail's wake-up not made (link.c, "The tail's wake-up") */
    bool credit; /* credit mode: ext->cr is set */
    bool traced; /* ext->tr is set */
    /* routed: port `out` is a fabric node's kb_link_route_head (the call
     * is made without reading `out`); pooled: in a kb_link_pool, so
     * kb_link_free leaves the memory */
    bool routed : 1, pooled : 1;
    sim_time wake_req; /* earliest wake-up asked for and not yet served */
    struct sim_proc *proc; /* woken with sim_method_wake; has the link's name */
    /* the worm holding the link, NULL when none */
    struct kb_link_msg *cur;
    sim_time cur_tail; /* when its last flit starts */

    /* line 1 */
    union {
        struct arrival heap_in[LINK_INLINE]; /* cap_heap == LINK_INLINE */
        struct arrival *heap_out;            /* else, on the heap */
    };
    uint64_t lazy_seq; /* the tail's wake-up's sequence number, reserved */
    sim_time free_at;  /* end of the last flit of the last worm */

    /* line 2 */
    uint32_t n_fifo; /* heads waiting (line 3) */
    uint32_t cur_hop;
    /* The counts include the worm holding the link from its start (one
     * write, in the line the start touches); what it adds is kept beside
     * them, so an observer asking before its release sees the counts
     * without it (kb_link_get_stats) and the worm need not be read after
     * it may have left the fabric. */
    struct kb_link_stats st;
    sim_time cur_busy;  /* the worm's serialisation time, all flits */
    uint64_t cur_bytes, cur_flits;

    /* line 3 */
    /* heads that have arrived, in arrival order (ring buffer; fifo_in
     * until it outgrows it) */
    struct waiting *fifo;
    uint32_t fifo_head, cap_fifo;
    struct waiting fifo_in[LINK_INLINE];
    const struct kb_flit_if *out; /* the peer of port `out`, NULL until bound */
    struct kb_link_ext *ext; /* NULL until needed */
};

/* l's arrivals */
static inline struct arrival *link_heap(struct kb_link *l)
{
    return l->cap_heap == LINK_INLINE ? l->heap_in : l->heap_out;
}

struct kb_link_credit;

/* link.c: makes `t` (absolute, >= now) a wake-up time of l */
void kb_link_wake_at(struct kb_link *l, sim_time t, sim_time now);

/* link_credit.c: the credit-mode state of a new link (NULL when out of
 * memory), its method process, its release, and its message start */
struct kb_link_credit *kb_link_credit_new(const struct kb_link_params *p);
void kb_link_credit_free(struct kb_link_credit *c);
void kb_link_credit_serve(struct sim *s, void *arg);
/* the credit mode's kb_flit_if functions */
int kb_link_credit_head(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now);
void kb_link_credit_flit(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now);
int kb_link_credit_inject(struct kb_link_msg *m);
int kb_link_credit_backlog(const struct kb_link_credit *c);

#endif
