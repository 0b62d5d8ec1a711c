/* link_impl.h — the inside of struct kb_link, shared by link.c (the
 * wormhole_unbounded model) and link_credit.c (credit flow control); not
 * for use outside those two files */
#ifndef KBSIM_LINK_IMPL_H
#define KBSIM_LINK_IMPL_H

#include "link.h"

/* The head of a worm due at this link's input at time t. */
struct arrival {
    sim_time t;
    uint64_t seq; /* FIFO among equal times */
    struct kb_link_msg *m;
    uint32_t hop;
};

struct waiting {
    struct kb_link_msg *m;
    uint32_t hop;
};

/* kb_link_msg.body[k] when hop k's line no longer bounds the body */
#define NO_LINE SIM_FOREVER

struct kb_link {
    struct kb_flit_if in_if; /* first: kb_link_in (link.h) */
    const struct kb_flit_if *out; /* the peer of port `out`, NULL until bound */
    struct sim *sim; /* the name is the process's (kb_link_name) */
    struct kb_link_params p;
    double ps_per_byte;
    sim_time ser_full; /* ser() of a full flit, the common case */
    sim_time lat_ps, ovh_ps;

    struct sim_proc *proc; /* woken with sim_method_wake */
    sim_time wake_req; /* earliest wake-up asked for and not yet served */
    /* the wake-up at cur_tail not made (link.c, "The tail's wake-up"):
     * its sequence number, reserved; lazy says it is outstanding */
    uint64_t lazy_seq;
    bool lazy;
    uint64_t lazy_bytes, lazy_flits; /* the worm's: it may be gone by then */

    /* heads on their way to this link's input, min-heap on (t, seq) */
    struct arrival *heap;
    size_t n_heap, cap_heap;
    uint64_t seq;

    /* heads that have arrived, in arrival order (ring buffer) */
    struct waiting *fifo;
    size_t fifo_head, n_fifo, cap_fifo;

    /* the worm holding the link, NULL when none */
    struct kb_link_msg *cur;
    uint32_t cur_hop;
    sim_time cur_start; /* when the worm acquired the link */
    sim_time cur_tail;  /* when its last flit starts */
    sim_time cur_busy;  /* its serialisation time, all flits */
    sim_time free_at;   /* end of the last flit of the last worm */

    struct sim_trace *tr; /* NULL: not traced */
    int trk;              /* trace track, made on the first message */

    struct kb_link_stats st;

    struct kb_link_credit *cr; /* credit mode (link_credit.c), else NULL */

    struct sim_port *in_port, *out_port; /* "NAME.in", "NAME.out" */
};

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
