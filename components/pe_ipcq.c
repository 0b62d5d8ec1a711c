/* pe_ipcq.c — kb_ipcq: direction tables, rings, credits, send and recv
 *
 * Timing of one slot of b bytes on a channel tx -> rx (no contention):
 *
 *     land   = send + T_dma           T_dma = kb_dma_time(tx slot, rx slot, b)
 *     read   = kb_mem_time(rx buf, slot, b) + path_time(rx buf node -> rx PE, b)
 *     credit = path_time(rx PE -> tx DMA node, credit_bytes)
 *
 * A recv that finds the slot full at t returns at t + read + credit, and
 * the sender holds the credit again at that instant (the receiver is busy
 * for the credit's flight, as in the reference model). The credit is not
 * simulated flit by flit: it is a short control message on a fast path,
 * so its closed-form time is charged and it takes no link bandwidth. A
 * sender without credit from t_b sleeps until the arrival t_c, or polls at
 * t_b + k·poll and proceeds at the first poll >= t_c; either way the wait
 * is counted as blocked time. The metadata travels in the message header
 * (no extra bytes) and is published with the data by the DMA's completion
 * callback, at the instant the last byte lands, so a receiver polling the
 * slot sees both or neither. The data is the slot's own (decision 0060):
 * taken at the send, carried with the slot, handed to the receive; the
 * rings' memory is booked and timed, never written.
 *
 * Traced (a trace open when the IPCQ is made), each side of a channel has
 * a row, "NAME.ipcq.DIR.send" or "NAME.ipcq.DIR.recv", made on its first
 * message: a send span runs from the call of kb_ipcq_send to its return
 * (the credit wait; the copy itself is the DMA's vc_comm span), a recv
 * span from the call of kb_ipcq_recv to its return (the wait for the
 * data, the slot reads and the credits). Both carry the message's number
 * on the channel, so a send and its recv pair up. The receiving side also
 * has a counter, "NAME.ipcq.DIR.slots": the ring slots holding data not
 * yet read (landed, not yet consumed by a recv), sampled at each change,
 * i.e. when a slot lands and when a recv consumes one; its row is made
 * when the first slot lands. */
#include "pe_ipcq.h"

#include "kb_err.h"
#include "kb_port.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

struct chan;

/* One slot of a channel: the header staged by the send, and what the
 * receiver sees (published when the last byte lands). */
struct slot {
    struct chan *c;
    enum kb_ipcq_slot_state state;
    uint64_t bytes, msg_bytes;
    struct kb_ipcq_meta meta;
    uint64_t st_bytes, st_msg_bytes; /* staged */
    struct kb_ipcq_meta st_meta;
    /* the slot's bytes, from the send until the recv takes them: they
     * travel with the slot, not in the rings' memory (decision 0060) */
    struct kb_mem_snap carry;
};

/* A channel tx -> rx; the fields a send or a recv touches first, then
 * the counters and the names. */
struct chan {
    struct kb_ipcq *tx, *rx;
    uint64_t tx_base, rx_base; /* rings in tx->buf and rx->buf */
    uint32_t n, size;
    struct slot *slots;
    uint64_t tail, head; /* slots sent, slots read */
    uint32_t tail_i, head_i; /* their slots in the ring: tail % n, head % n */
    uint32_t credits;    /* held by the sender */
    uint32_t arr_head, arr_n;
    sim_time *arrivals;  /* credits in flight: a FIFO of arrival times */
    sim_time credit_ps;
    struct sim_event *ev_credit, *ev_data;
    struct sim_event *ev_path; /* a slot read's path to the PE (made on first use) */
    /* the rings' memories and nodes, as the DMA names the ends of a copy
     * (found when the channel is wired, with the rings) */
    struct kb_mem *tx_bank, *rx_bank;
    int tx_node, rx_node;
    struct sim_trace *rx_tr; /* rx->tr, for the sender's DMA landing a slot */
    bool sending, receiving;
    bool credit_wait; /* the sender waits on ev_credit (else no one does) */
    uint32_t full; /* rx slots holding visible data */
    struct kb_ipcq_stats st;
    int tx_trk, rx_trk; /* trace tracks of the two sides, made on first use */
    int full_trk;       /* trace track of the rx ring's occupancy, likewise */
    int refs;
    char *tx_dir, *rx_dir;
};

struct dir {
    char *name;
    struct chan *tx, *rx;
};

struct kb_ipcq {
    struct sim *sim;
    char *name;
    const struct kb_dma_if *dma; /* bound to port "NAME.ipcq.dma" */
    const struct kb_mem_if *buf; /* bound to port "NAME.ipcq.buf" */
    struct sim_port *port_in, *port_dma, *port_buf;
    struct kb_ipcq_if iface;
    int buf_node, pe_node;
    bool read_path; /* read_links found */
    struct kb_ipcq_params p;
    sim_time poll_ps;
    struct dir *dirs;
    size_t n_dirs, cap_dirs;
    /* the route from the buffer to the PE, for slot reads */
    int *read_links;
    int n_read_links;
    struct sim_trace *tr; /* NULL: not traced */
    char err[256];
};

static char *dupstr(const char *s)
{
    char *d = malloc(strlen(s) + 1);
    return d ? strcpy(d, s) : NULL;
}

/* ---- life cycle ------------------------------------------------------ */

/* ---- the module's ports ---------------------------------------------- */

static int if_send(void *ctx, const char *dir, const void *data, uint64_t bytes,
                   const struct kb_ipcq_meta *meta)
{
    return kb_ipcq_send(ctx, dir, data, bytes, meta);
}
static int64_t if_recv(void *ctx, const char *dir, void *out, uint64_t bytes_max,
                       struct kb_ipcq_meta *meta)
{
    return kb_ipcq_recv(ctx, dir, out, bytes_max, meta);
}
static int if_probe(void *ctx, const char *dir, uint64_t *bytes, struct kb_ipcq_meta *meta)
{
    return kb_ipcq_probe(ctx, dir, bytes, meta);
}
static bool if_wired(void *ctx, const char *dir, bool tx) { return kb_ipcq_wired(ctx, dir, tx); }
static const char *if_errmsg(void *ctx) { return kb_ipcq_errmsg(ctx); }
static int if_dir(void *ctx, const char *dir) { return kb_ipcq_dir(ctx, dir); }
static bool if_wired_at(void *ctx, int dir, bool tx) { return kb_ipcq_wired_at(ctx, dir, tx); }
static int if_send_at(void *ctx, int dir, const void *data, uint64_t bytes,
                      const struct kb_ipcq_meta *meta)
{
    return kb_ipcq_send_at(ctx, dir, data, bytes, meta);
}
static int if_recv_step(void *ctx, struct kb_ipcq_recv_op *op, int64_t *result)
{
    return kb_ipcq_recv_step(ctx, op, result);
}
static int64_t if_recv_at(void *ctx, int dir, void *out, uint64_t bytes_max,
                          struct kb_ipcq_meta *meta)
{
    return kb_ipcq_recv_at(ctx, dir, out, bytes_max, meta);
}

static int if_send_snap(void *ctx, const char *dir, const struct kb_mem_snap *data,
                        uint64_t bytes, const struct kb_ipcq_meta *meta)
{
    return kb_ipcq_send_snap(ctx, dir, data, bytes, meta);
}
static int if_send_snap_at(void *ctx, int dir, const struct kb_mem_snap *data, uint64_t bytes,
                           const struct kb_ipcq_meta *meta)
{
    return kb_ipcq_send_snap_at(ctx, dir, data, bytes, meta);
}
static int64_t if_recv_snap(void *ctx, const char *dir, struct kb_mem_snap *out,
                            uint64_t bytes_max, struct kb_ipcq_meta *meta)
{
    return kb_ipcq_recv_snap(ctx, dir, out, bytes_max, meta);
}
static int64_t if_recv_snap_at(void *ctx, int dir, struct kb_mem_snap *out, uint64_t bytes_max,
                               struct kb_ipcq_meta *meta)
{
    return kb_ipcq_recv_snap_at(ctx, dir, out, bytes_max, meta);
}

/* Port "dma" or "buf" was bound: cache the peer's interface. */
static void port_bound(void *ud, struct sim_port *p)
{
    struct kb_ipcq *q = ud;
    if (p == q->port_dma) {
        q->dma = sim_port_peer_iface(p, 0);
        q->pe_node = q->dma ? q->dma->node : -1;
    } else if (p == q->port_buf) {
        q->buf = sim_port_peer_iface(p, 0);
        q->buf_node = q->buf ? q->buf->node : -1;
    }
    q->read_path = false;
}

struct sim_port *kb_ipcq_port(const struct kb_ipcq *q, const char *which)
{
    if (strcmp(which, "in") == 0)
        return q->port_in;
    if (strcmp(which, "dma") == 0)
        return q->port_dma;
    if (strcmp(which, "buf") == 0)
        return q->port_buf;
    return NULL;
}

/* Both ports bound, and the route from the buffer to the PE found (for
 * slot reads): 0, or SIM_EINVAL naming what is missing. */
static int connected(struct kb_ipcq *q)
{
    if (q->read_path)
        return 0;
    if (!q->dma || !q->buf)
        return KB_SETERR(q, SIM_EINVAL, "ipcq of '%s': port '%s' is unbound", q->name,
                      sim_port_name(q->dma ? q->port_buf : q->port_dma));
    if (!q->buf->bank)
        return KB_SETERR(q, SIM_EINVAL, "ipcq of '%s': its buffer is no memory a DMA can copy to",
                      q->name);
    const int *links;
    int n = q->dma->route(q->dma->ctx, q->buf_node, q->pe_node, &links);
    if (n < 0)
        return KB_SETERR(q, SIM_EINVAL, "ipcq of '%s': no route from its buffer (node %d) to "
                      "the pe (node %d)", q->name, q->buf_node, q->pe_node);
    free(q->read_links);
    q->read_links = NULL;
    if (n > 0 && !(q->read_links = malloc((size_t)n * sizeof *links)))
        return KB_SETERR(q, SIM_ENOMEM, "ipcq of '%s': out of memory", q->name);
    if (n > 0)
        memcpy(q->read_links, links, (size_t)n * sizeof *links);
    q->n_read_links = n;
    q->read_path = true;
    return 0;
}

/* ---- life cycle ------------------------------------------------------ */

struct kb_ipcq *kb_ipcq_new(struct sim *s, const char *name, const struct kb_ipcq_params *p,
                            char *err, size_t errlen)
{
    if (!name)
        name = "";
    const char *why = NULL;
    char tmp[128];
    if (p->n_slots < 1)
        why = "slots must be >= 1, got 0";
    else if (p->slot_size < 1)
        why = "slot size must be >= 1 byte, got 0";
    else if (p->credit_bytes < 1)
        why = "credit must be >= 1 byte, got 0";
    else if (p->backpressure != KB_IPCQ_SLEEP && p->backpressure != KB_IPCQ_POLL)
        why = "backpressure must be sleep or poll";
    else if (p->backpressure == KB_IPCQ_POLL &&
             (!(p->poll_ns > 0) || isinf(p->poll_ns) ||
              llround(p->poll_ns * 1000.0) < 1)) {
        snprintf(tmp, sizeof tmp, "poll interval must be >= 0.001 ns, got %g",
                 p->poll_ns);
        why = tmp;
    }
    struct kb_ipcq *q = NULL;
    if (!why) {
        q = calloc(1, sizeof *q);
        if (!q || !(q->name = dupstr(name)))
            why = "out of memory";
    }
    if (why) {
        kb_errf(err, errlen, "ipcq of '%s': %s", name, why);
        kb_ipcq_free(q);
        return NULL;
    }
    q->sim = s;
    q->buf_node = q->pe_node = -1;
    q->tr = sim_tracer(s);
    q->p = *p;
    q->poll_ps = p->backpressure == KB_IPCQ_POLL ? (sim_time)llround(p->poll_ns * 1000.0) : 0;
    q->iface = (struct kb_ipcq_if){.ctx = q,
                                   .send = if_send,
                                   .recv = if_recv,
                                   .probe = if_probe,
                                   .wired = if_wired,
                                   .errmsg = if_errmsg,
                                   .dir = if_dir,
                                   .wired_at = if_wired_at,
                                   .send_at = if_send_at,
                                   .recv_at = if_recv_at,
                                   .recv_step = if_recv_step,
                                   .send_snap = if_send_snap,
                                   .send_snap_at = if_send_snap_at,
                                   .recv_snap = if_recv_snap,
                                   .recv_snap_at = if_recv_snap_at};
    if (!(q->port_in = kb_port_export(s, name, "ipcq", KB_IPCQ_IF, &q->iface, 1, err, errlen)) ||
        !(q->port_dma = kb_port_new(s, name, "ipcq", "dma", SIM_PORT_OUT, KB_DMA_IF, 1, 1, err,
                                    errlen)) ||
        !(q->port_buf = kb_port_new(s, name, "ipcq", "buf", SIM_PORT_OUT, KB_MEM_IF, 1, 1, err,
                                    errlen))) {
        kb_ipcq_free(q);
        return NULL;
    }
    sim_port_on_bind(q->port_dma, port_bound, q);
    sim_port_on_bind(q->port_buf, port_bound, q);
    return q;
}

static void chan_release(struct chan *c)
{
    if (!c || --c->refs > 0)
        return;
    free(c->tx_dir);
    free(c->rx_dir);
    for (uint32_t i = 0; c->slots && i < c->n; i++)
        kb_mem_snap_free(&c->slots[i].carry);
    free(c->slots);
    free(c->arrivals);
    free(c);
}

void kb_ipcq_free(struct kb_ipcq *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->n_dirs; i++) {
        chan_release(q->dirs[i].tx);
        chan_release(q->dirs[i].rx);
        free(q->dirs[i].name);
    }
    free(q->dirs);
    free(q->read_links);
    free(q->name);
    free(q);
}

const char *kb_ipcq_errmsg(const struct kb_ipcq *q) { return q->err; }
const char *kb_ipcq_name(const struct kb_ipcq *q) { return q->name; }

/* ---- directions and wiring ------------------------------------------- */

static struct dir *find_dir(const struct kb_ipcq *q, const char *name)
{
    for (size_t i = 0; i < q->n_dirs; i++)
        if (strcmp(q->dirs[i].name, name) == 0)
            return &q->dirs[i];
    return NULL;
}

static struct dir *get_dir(struct kb_ipcq *q, const char *name)
{
    struct dir *d = find_dir(q, name);
    if (d)
        return d;
    if (q->n_dirs == q->cap_dirs) {
        size_t cap = q->cap_dirs ? 2 * q->cap_dirs : 8;
        struct dir *a = realloc(q->dirs, cap * sizeof *a);
        if (!a)
            return NULL;
        q->dirs = a;
        q->cap_dirs = cap;
    }
    d = &q->dirs[q->n_dirs];
    if (!(d->name = dupstr(name)))
        return NULL;
    d->tx = d->rx = NULL;
    q->n_dirs++;
    return d;
}

bool kb_ipcq_wired(const struct kb_ipcq *q, const char *dir, bool tx)
{
    const struct dir *d = find_dir(q, dir);
    return d && (tx ? d->tx : d->rx);
}

int kb_ipcq_wire(struct kb_ipcq *a, const char *a_dir, struct kb_ipcq *b,
                 const char *b_dir)
{
    if (!a_dir || !*a_dir || !b_dir || !*b_dir)
        return KB_SETERR(a, SIM_EINVAL, "ipcq of '%s': direction name is empty",
                      a->name);
    if (kb_ipcq_wired(a, a_dir, true))
        return KB_SETERR(a, SIM_EINVAL, "direction '%s' of '%s' is already wired "
                      "for sending", a_dir, a->name);
    if (kb_ipcq_wired(b, b_dir, false))
        return KB_SETERR(a, SIM_EINVAL, "direction '%s' of '%s' is already wired "
                      "for receiving", b_dir, b->name);
    if (a->p.n_slots != b->p.n_slots || a->p.slot_size != b->p.slot_size)
        return KB_SETERR(a, SIM_EINVAL, "cannot wire '%s' '%s' to '%s' '%s': "
                      "rings of %u x %u and %u x %u bytes", a->name, a_dir,
                      b->name, b_dir, a->p.n_slots, a->p.slot_size,
                      b->p.n_slots, b->p.slot_size);
    int rc = connected(a);
    if (rc < 0)
        return rc;
    if ((rc = connected(b)) < 0)
        return KB_SETERR(a, rc, "%s", b->err);
    const int *links;
    int n = b->dma->route(b->dma->ctx, b->pe_node, a->pe_node, &links);
    sim_time credit_ps = n < 0
        ? SIM_FOREVER
        : kb_fabric_path_time(b->dma->fabric, links, n,
                              b->p.credit_bytes);
    if (credit_ps == SIM_FOREVER) {
        /* say which way is missing: on a graph that does not join the two
         * PEs there is no route either way */
        const int *fwd;
        if (a->dma->route(a->dma->ctx, a->pe_node, b->pe_node, &fwd) < 0)
            return KB_SETERR(a, SIM_EINVAL, "cannot wire '%s' '%s' to '%s' '%s': "
                          "no route from '%s' to '%s' (the fabric does not join "
                          "them)", a->name, a_dir, b->name, b_dir, a->name, b->name);
        return KB_SETERR(a, SIM_EINVAL, "cannot wire '%s' '%s' to '%s' '%s': no "
                      "credit route back from '%s'", a->name, a_dir, b->name,
                      b_dir, b->name);
    }

    uint32_t ns = a->p.n_slots, sz = a->p.slot_size;
    uint64_t ring = (uint64_t)ns * sz;
    struct chan *c = calloc(1, sizeof *c);
    if (!c)
        return KB_SETERR(a, SIM_ENOMEM, "out of memory wiring '%s' '%s'", a->name,
                      a_dir);
    c->tx = a;
    c->rx = b;
    c->n = ns;
    c->size = sz;
    c->credits = ns;
    c->credit_ps = credit_ps;
    c->tx_trk = c->rx_trk = c->full_trk = -1;
    c->refs = 2;
    c->tx_dir = dupstr(a_dir);
    c->rx_dir = dupstr(b_dir);
    c->slots = calloc(ns, sizeof *c->slots);
    c->arrivals = calloc(ns, sizeof *c->arrivals);
    struct dir *da = c->tx_dir && c->rx_dir && c->slots && c->arrivals
                         ? get_dir(a, a_dir) : NULL;
    struct dir *db = da ? get_dir(b, b_dir) : NULL;
    if (!db) {
        c->refs = 1;
        chan_release(c);
        return KB_SETERR(a, SIM_ENOMEM, "out of memory wiring '%s' '%s'", a->name,
                      a_dir);
    }
    for (uint32_t i = 0; i < ns; i++)
        c->slots[i].c = c;
    /* burst-aligned, so that a slot starts on an HBM channel boundary */
    if (a->buf->alloc(a->buf->ctx, ring, 256, &c->tx_base) < 0) {
        c->refs = 1;
        chan_release(c);
        return KB_SETERR(a, SIM_ENOMEM, "tx ring of '%s' '%s': %s", a->name, a_dir,
                      a->buf->errmsg(a->buf->ctx));
    }
    if (b->buf->alloc(b->buf->ctx, ring, 256, &c->rx_base) < 0) {
        a->buf->dealloc(a->buf->ctx, c->tx_base);
        c->refs = 1;
        chan_release(c);
        return KB_SETERR(a, SIM_ENOMEM, "rx ring of '%s' '%s': %s", b->name, b_dir,
                      b->buf->errmsg(b->buf->ctx));
    }
    char nm[300];
    snprintf(nm, sizeof nm, "%s.ipcq.%s.credit", a->name, a_dir);
    c->ev_credit = sim_event_new(a->sim, nm);
    snprintf(nm, sizeof nm, "%s.ipcq.%s.data", b->name, b_dir);
    c->ev_data = sim_event_new(b->sim, nm);
    if (!c->ev_credit || !c->ev_data) {
        c->refs = 1;
        chan_release(c);
        return KB_SETERR(a, SIM_ENOMEM, "out of memory wiring '%s' '%s'", a->name,
                      a_dir);
    }
    c->tx_bank = a->buf->bank;
    c->tx_node = a->buf_node;
    c->rx_bank = b->buf->bank;
    c->rx_node = b->buf_node;
    c->rx_tr = b->tr;
    da->tx = c;
    db->rx = c;
    return 0;
}

/* ---- trace ----------------------------------------------------------- */

/* One side's message as a span on its row, "NAME.ipcq.DIR.send" (tx) or
 * "NAME.ipcq.DIR.recv", from the call at t0 to now. peer: the other side,
 * "NAME.ipcq.DIR"; msg: the message's number on the channel, from 0; slot:
 * its first slot in the ring, slots: how many it took. */
static void trace_msg(struct chan *c, bool tx, uint64_t bytes, uint64_t msg,
                      uint64_t slot, uint64_t slots, sim_time t0)
{
    struct kb_ipcq *q = tx ? c->tx : c->rx, *p = tx ? c->rx : c->tx;
    const char *dir = tx ? c->tx_dir : c->rx_dir;
    const char *pdir = tx ? c->rx_dir : c->tx_dir;
    const char *what = tx ? "send" : "recv";
    int *trk = tx ? &c->tx_trk : &c->rx_trk;
    if (*trk < 0) {
        char nm[300];
        snprintf(nm, sizeof nm, "%s.ipcq.%s.%s", q->name, dir, what);
        *trk = sim_trace_track_path(q->tr, nm);
    }
    char name[48], peer[300];
    snprintf(name, sizeof name, "%s %" PRIu64 " B", what, bytes);
    snprintf(peer, sizeof peer, "%s.ipcq.%s", p->name, pdir);
    const struct sim_trace_arg a[] = {
        {"bytes", NULL, bytes}, {"peer", peer, 0}, {"msg", NULL, msg},
        {"slot", NULL, slot}, {"slots", NULL, slots}};
    sim_trace_span(q->tr, *trk, "ipcq", name, t0, sim_now(q->sim), a,
                   (int)(sizeof a / sizeof a[0]));
}

/* The receive ring's occupancy, c->full, as a counter sample now on the
 * receiving side's "NAME.ipcq.DIR.slots" track, named like its row (the
 * name without its process, as sim_trace_track_path splits it). Called
 * where c->full changes, so each sample is a new value. */
static void trace_full(struct chan *c)
{
    struct kb_ipcq *q = c->rx;
    char nm[300];
    snprintf(nm, sizeof nm, "%s.ipcq.%s.slots", q->name, c->rx_dir);
    if (c->full_trk < 0)
        c->full_trk = sim_trace_track_path(q->tr, nm);
    const char *dot = strchr(nm, '.');
    sim_trace_counter(q->tr, c->full_trk, dot ? dot + 1 : nm, sim_now(q->sim),
                      (double)c->full);
}

/* ---- send ------------------------------------------------------------ */

/* Credits whose arrival time has come join the sender's count. */
static void collect_credits(struct chan *c, sim_time now)
{
    while (c->arr_n && c->arrivals[c->arr_head] <= now) {
        if (++c->arr_head == c->n)
            c->arr_head = 0;
        c->arr_n--;
        c->credits++;
    }
}

static int take_credit(struct kb_ipcq *q, struct chan *c)
{
    struct sim *s = q->sim;
    sim_time t_b = sim_now(s);
    collect_credits(c, t_b);
    while (!c->credits) {
        int rc;
        if (q->p.backpressure == KB_IPCQ_POLL)
            rc = sim_wait(s, q->poll_ps);
        else if (c->arr_n)
            rc = sim_wait(s, c->arrivals[c->arr_head] - sim_now(s));
        else {
            c->credit_wait = true;
            rc = sim_wait_event(s, c->ev_credit);
            c->credit_wait = false;
        }
        if (rc < 0) {
            c->st.blocked_ps += sim_now(s) - t_b;
            return rc;
        }
        collect_credits(c, sim_now(s));
    }
    c->st.blocked_ps += sim_now(s) - t_b;
    c->credits--;
    return 0;
}

/* The DMA's completion: publish the staged header with the bytes. */
static void slot_landed(void *ud, int status)
{
    struct slot *sl = ud;
    struct chan *c = sl->c;
    if (status < 0) {
        sim_fail(c->rx->sim, "ipcq '%s' '%s' -> '%s' '%s': %s", c->tx->name,
                 c->tx_dir, c->rx->name, c->rx_dir, c->tx->dma->errmsg(c->tx->dma->ctx));
        return;
    }
    sl->bytes = sl->st_bytes;
    sl->msg_bytes = sl->st_msg_bytes;
    sl->meta = sl->st_meta;
    sl->state = KB_IPCQ_FULL;
    if (++c->full > c->st.occupancy_hwm)
        c->st.occupancy_hwm = c->full;
    if (c->rx_tr)
        trace_full(c);
    sim_notify(c->ev_data);
}

static struct dir *dir_at(const struct kb_ipcq *q, int i);

/* kb_ipcq_send on direction d (NULL: not found), named dir in messages,
 * of data or snap (a snapshot: kb_ipcq_send_snap) */
static int send_on(struct kb_ipcq *q, struct dir *d, const char *dir, const void *data,
                   const struct kb_mem_snap *snap, uint64_t bytes,
                   const struct kb_ipcq_meta *meta)
{
    if (!d || !d->tx)
        return KB_SETERR(q, SIM_EINVAL, "send on direction '%s' of '%s', which is "
                      "not wired", dir, q->name);
    struct chan *c = d->tx;
    if (!sim_current(q->sim))
        return KB_SETERR(q, SIM_EPERM, "send on direction '%s' of '%s' outside a "
                      "thread process", dir, q->name);
    if (c->sending)
        return KB_SETERR(q, SIM_EPERM, "send on direction '%s' of '%s' while "
                      "another send is blocked there", dir, q->name);
    bool carry = !q->dma->timing_only; /* the slots carry bytes */
    static const struct kb_ipcq_meta zero;
    sim_time t0 = sim_now(q->sim);
    uint64_t first = c->tail;
    c->sending = true;
    uint64_t off = 0;
    int rc = 0;
    do {
        uint64_t len = bytes - off < c->size ? bytes - off : c->size;
        if ((rc = take_credit(q, c)) < 0) {
            rc = KB_SETERR(q, rc, "send on direction '%s' of '%s' cannot wait for "
                        "a credit outside a thread process", dir, q->name);
            break;
        }
        uint32_t i = c->tail_i;
        uint64_t at = (uint64_t)i * c->size;
        struct slot *sl = &c->slots[i];
        /* the slot's bytes as they are now (no data: zeros) */
        if (carry && (rc = snap ? kb_mem_snap_add(&sl->carry, snap, off, len)
                                : kb_mem_snap_add_bytes(&sl->carry,
                                                        data ? (const unsigned char *)data + off
                                                             : NULL,
                                                        len)) < 0) {
            rc = KB_SETERR(q, rc, "send on direction '%s' of '%s': out of memory", dir,
                           q->name);
            c->credits++;
            break;
        }
        sl->state = KB_IPCQ_FILLING;
        sl->st_bytes = len;
        sl->st_msg_bytes = bytes;
        sl->st_meta = meta ? *meta : zero;
        struct kb_dma_end src = {c->tx_bank, c->tx_base + at, c->tx_node};
        struct kb_dma_end dst = {c->rx_bank, c->rx_base + at, c->rx_node};
        /* the copy moves no bytes where the DMA can do that (the slot
         * carries them); its time is the same either way */
        rc = q->dma->copy_timed_async
                 ? q->dma->copy_timed_async(q->dma->ctx, KB_DMA_COMM, src, dst, len, NULL,
                                            slot_landed, sl)
                 : q->dma->copy_async(q->dma->ctx, KB_DMA_COMM, src, dst, len, NULL,
                                      slot_landed, sl);
        if (rc < 0) {
            kb_mem_snap_clear(&sl->carry);
            sl->state = KB_IPCQ_EMPTY;
            c->credits++;
            rc = KB_SETERR(q, rc, "send on direction '%s' of '%s': %s", dir,
                        q->name, q->dma->errmsg(q->dma->ctx));
            break;
        }
        c->tail++;
        if (++c->tail_i == c->n)
            c->tail_i = 0;
        off += len;
    } while (off < bytes);
    c->sending = false;
    if (rc < 0)
        return rc;
    if (q->tr)
        trace_msg(c, true, bytes, c->st.tx_messages, first % c->n,
                  c->tail - first, t0);
    c->st.tx_messages++;
    c->st.tx_bytes += bytes;
    return 0;
}

/* ---- recv ------------------------------------------------------------ */

/* A receive is one routine, recv_advance, that runs until it must wait
 * and says what for (an event, or a time: rwait); its driver waits so, as
 * a thread (kb_ipcq_recv: sim_wait_event / sim_wait) or as a method
 * process (kb_ipcq_recv_step: sim_next_trigger_event / sim_next_trigger).
 * Either way the waits are asked at the same instants and queued in the
 * same places, so the receiving process runs at the same times, in the
 * same deltas and at the same places in them. Per slot:
 *   R_SLOT   wait until the slot is full (ev_data);
 *   R_ACCESS the slot's read booked on the buffer (kb_mem_schedule), a
 *            wait until it ends (a delta when it takes no time);
 *   R_PATH   the bytes' path from the buffer to the PE, when the buffer is
 *            elsewhere (kb_fabric_send, a wait for its last byte);
 *   R_CREDIT the bytes copied out, the slot freed, the credit sent, a wait
 *            for its flight (a delta when it takes none). */
enum { R_START, R_SLOT, R_ACCESS, R_PATH, R_CREDIT, R_DONE };

struct rwait {
    struct sim_event *ev; /* NULL: the delay */
    sim_time delay;
};

/* The end of a receive that started (c->receiving): rc, which is its
 * length or a negative code whose message is set. */
static int64_t recv_end(struct chan *c, struct kb_ipcq_recv_op *op, int64_t rc)
{
    c->receiving = false;
    op->state = R_DONE;
    return rc;
}

/* Runs op on direction d (NULL: not found), named dir in messages, until
 * it waits (0, *w set) or ends (1, *res its length or a negative code). */
static int recv_advance(struct kb_ipcq *q, struct dir *d, const char *dir,
                        struct kb_ipcq_recv_op *op, struct rwait *w, int64_t *res)
{
    struct sim *s = q->sim;
    if (op->state == R_START) {
        if (!d || !d->rx) {
            op->state = R_DONE;
            *res = KB_SETERR(q, SIM_EINVAL, "recv on direction '%s' of '%s', which is "
                          "not wired", dir, q->name);
            return 1;
        }
        if (!sim_current(s)) {
            op->state = R_DONE;
            *res = KB_SETERR(q, SIM_EPERM, "recv on direction '%s' of '%s' outside a "
                          "thread process", dir, q->name);
            return 1;
        }
        if (d->rx->receiving) {
            op->state = R_DONE;
            *res = KB_SETERR(q, SIM_EPERM, "recv on direction '%s' of '%s' while "
                          "another recv is blocked there", dir, q->name);
            return 1;
        }
        struct chan *c = d->rx;
        op->t0 = op->t_w = sim_now(s);
        op->first = c->head;
        op->got = op->total = 0;
        c->receiving = true;
        op->state = R_SLOT;
    }
    struct chan *c = d->rx;
    for (;;) {
        switch (op->state) {
        case R_SLOT: {
            struct slot *sl = &c->slots[c->head_i];
            if (sl->state != KB_IPCQ_FULL) {
                w->ev = c->ev_data;
                return 0;
            }
            c->st.recv_wait_ps += sim_now(s) - op->t_w;
            if (op->got == 0) {
                op->total = sl->msg_bytes;
                if (op->total > op->bytes_max) {
                    *res = recv_end(c, op, KB_SETERR(q, SIM_EINVAL, "message of %llu bytes "
                                    "on direction '%s' of '%s' is larger than the %llu "
                                    "bytes asked for", (unsigned long long)op->total, dir,
                                    q->name, (unsigned long long)op->bytes_max));
                    return 1;
                }
                if (op->meta)
                    *op->meta = sl->meta;
            }
            op->t_r = sim_now(s);
            op->len = sl->bytes;
            /* the read of the slot: booked now, waited for (a delta
             * when it takes no time), as kb_mem_access does */
            sim_time end = kb_mem_schedule(c->rx_bank,
                                           c->rx_base + (uint64_t)c->head_i * c->size,
                                           op->len, false);
            if (end == SIM_FOREVER) {
                *res = recv_end(c, op, KB_SETERR(q, SIM_EINVAL, "recv on direction '%s' "
                                "of '%s': %s", dir, q->name, kb_mem_errmsg(c->rx_bank)));
                return 1;
            }
            op->state = R_ACCESS;
            if (end == sim_now(s))
                break; /* a free read: no wait (decision 0052) */
            w->ev = NULL;
            w->delay = end - sim_now(s);
            return 0;
        }
        case R_ACCESS:
            op->state = R_PATH;
            if (q->n_read_links) {
                struct kb_fabric *f = q->dma->fabric;
                if (!c->ev_path) {
                    c->ev_path = sim_event_new(s, "fabric.transfer");
                    if (!c->ev_path) {
                        *res = recv_end(c, op, KB_SETERR(q, SIM_ENOMEM, "recv on direction "
                                        "'%s' of '%s': out of memory", dir, q->name));
                        return 1;
                    }
                }
                int rc = kb_fabric_send(f, q->read_links, q->n_read_links, op->len, c->ev_path);
                if (rc < 0) {
                    *res = recv_end(c, op, KB_SETERR(q, rc, "recv on direction '%s' of '%s': "
                                    "%s", dir, q->name, kb_fabric_errmsg(f)));
                    return 1;
                }
                w->ev = c->ev_path;
                return 0;
            }
            break;
        case R_PATH: {
            struct slot *sl = &c->slots[c->head_i];
            /* the slot's bytes: copied out, or their pieces handed over */
            if (op->out && !q->dma->timing_only)
                (void)kb_mem_snap_read(&sl->carry, 0, (unsigned char *)op->out + op->got,
                                       op->len);
            if (op->snap && !q->dma->timing_only &&
                kb_mem_snap_move(op->snap, &sl->carry) < 0) {
                *res = recv_end(c, op, KB_SETERR(q, SIM_ENOMEM, "recv on direction '%s' of "
                                "'%s': out of memory", dir, q->name));
                return 1;
            }
            kb_mem_snap_clear(&sl->carry);
            sl->state = KB_IPCQ_EMPTY;
            sl->bytes = sl->msg_bytes = 0;
            memset(&sl->meta, 0, sizeof sl->meta);
            c->full--;
            if (q->tr)
                trace_full(c);
            c->head++;
            if (++c->head_i == c->n)
                c->head_i = 0;
            op->got += op->len;
            /* the credit: the sender holds it again when it arrives (at
             * most n credits are in flight, so the FIFO never overflows) */
            uint32_t ai = c->arr_head + c->arr_n;
            c->arrivals[ai >= c->n ? ai - c->n : ai] = sim_now(s) + c->credit_ps;
            c->arr_n++;
            if (c->credit_wait) /* (a notification no one waits for does nothing) */
                sim_notify(c->ev_credit);
            op->state = R_CREDIT;
            if (!c->credit_ps)
                break; /* a credit that takes no time: no wait (decision 0052) */
            w->ev = NULL;
            w->delay = c->credit_ps;
            return 0;
        }
        case R_CREDIT:
            c->st.recv_busy_ps += sim_now(s) - op->t_r;
            if (op->got < op->total) {
                op->t_w = sim_now(s);
                op->state = R_SLOT;
                break;
            }
            if (q->tr)
                trace_msg(c, false, op->got, c->st.rx_messages, op->first % c->n,
                          c->head - op->first, op->t0);
            c->st.rx_messages++;
            c->st.rx_bytes += op->got;
            *res = recv_end(c, op, (int64_t)op->got);
            return 1;
        default:
            *res = KB_SETERR(q, SIM_EINVAL, "recv on direction '%s' of '%s': the "
                             "receive has ended", dir, q->name);
            return 1;
        }
    }
}

/* A wait of a receive failed (rc): the time it spent waiting is counted
 * as the wait would have, and the receive ends. */
static int64_t recv_abort(struct kb_ipcq *q, struct dir *d, const char *dir,
                          struct kb_ipcq_recv_op *op, int rc, const char *kind)
{
    struct chan *c = d->rx;
    struct sim *s = q->sim;
    if (op->state == R_SLOT)
        c->st.recv_wait_ps += sim_now(s) - op->t_w;
    else if (op->state == R_CREDIT)
        c->st.recv_busy_ps += sim_now(s) - op->t_r;
    recv_end(c, op, rc);
    if (rc == SIM_EPERM)
        return KB_SETERR(q, rc, "recv on direction '%s' of '%s' cannot wait "
                      "outside a %s process", dir, q->name, kind);
    return rc;
}

void kb_ipcq_recv_begin(struct kb_ipcq_recv_op *op, int dir, void *out, uint64_t bytes_max,
                        struct kb_ipcq_meta *meta)
{
    memset(op, 0, sizeof *op);
    op->dir = dir;
    op->out = out;
    op->bytes_max = bytes_max;
    op->meta = meta;
    op->state = R_START;
}

void kb_ipcq_recv_begin_snap(struct kb_ipcq_recv_op *op, int dir, struct kb_mem_snap *out,
                             uint64_t bytes_max, struct kb_ipcq_meta *meta)
{
    kb_ipcq_recv_begin(op, dir, NULL, bytes_max, meta);
    op->snap = out;
    if (out)
        kb_mem_snap_clear(out);
}

/* kb_ipcq_recv on direction d (NULL: not found), named dir in messages:
 * recv_advance driven by a thread's waits */
static int64_t recv_on(struct kb_ipcq *q, struct dir *d, const char *dir, void *out,
                       struct kb_mem_snap *snap, uint64_t bytes_max, struct kb_ipcq_meta *meta)
{
    struct kb_ipcq_recv_op op;
    if (snap)
        kb_ipcq_recv_begin_snap(&op, -1, snap, bytes_max, meta);
    else
        kb_ipcq_recv_begin(&op, -1, out, bytes_max, meta);
    struct rwait w;
    int64_t res;
    while (!recv_advance(q, d, dir, &op, &w, &res)) {
        int rc = w.ev ? sim_wait_event(q->sim, w.ev) : sim_wait(q->sim, w.delay);
        if (rc < 0)
            return recv_abort(q, d, dir, &op, rc, "thread");
    }
    return res;
}

int kb_ipcq_send(struct kb_ipcq *q, const char *dir, const void *data,
                 uint64_t bytes, const struct kb_ipcq_meta *meta)
{
    return send_on(q, find_dir(q, dir), dir, data, NULL, bytes, meta);
}

int kb_ipcq_send_snap(struct kb_ipcq *q, const char *dir, const struct kb_mem_snap *data,
                      uint64_t bytes, const struct kb_ipcq_meta *meta)
{
    return send_on(q, find_dir(q, dir), dir, NULL, data, bytes, meta);
}

int kb_ipcq_send_snap_at(struct kb_ipcq *q, int dir, const struct kb_mem_snap *data,
                         uint64_t bytes, const struct kb_ipcq_meta *meta)
{
    struct dir *d = dir_at(q, dir);
    return send_on(q, d, d ? d->name : "(none)", NULL, data, bytes, meta);
}

int64_t kb_ipcq_recv_snap(struct kb_ipcq *q, const char *dir, struct kb_mem_snap *out,
                          uint64_t bytes_max, struct kb_ipcq_meta *meta)
{
    return recv_on(q, find_dir(q, dir), dir, NULL, out, bytes_max, meta);
}

int64_t kb_ipcq_recv_snap_at(struct kb_ipcq *q, int dir, struct kb_mem_snap *out,
                             uint64_t bytes_max, struct kb_ipcq_meta *meta)
{
    struct dir *d = dir_at(q, dir);
    return recv_on(q, d, d ? d->name : "(none)", NULL, out, bytes_max, meta);
}

int64_t kb_ipcq_recv(struct kb_ipcq *q, const char *dir, void *out,
                     uint64_t bytes_max, struct kb_ipcq_meta *meta)
{
    return recv_on(q, find_dir(q, dir), dir, out, NULL, bytes_max, meta);
}

/* ---- directions by index --------------------------------------------- */

int kb_ipcq_dir(const struct kb_ipcq *q, const char *dir)
{
    const struct dir *d = find_dir(q, dir);
    return d ? (int)(d - q->dirs) : -1;
}

static struct dir *dir_at(const struct kb_ipcq *q, int i)
{
    return i >= 0 && (size_t)i < q->n_dirs ? &q->dirs[i] : NULL;
}

bool kb_ipcq_wired_at(const struct kb_ipcq *q, int dir, bool tx)
{
    const struct dir *d = dir_at(q, dir);
    return d && (tx ? d->tx : d->rx);
}

int kb_ipcq_send_at(struct kb_ipcq *q, int dir, const void *data, uint64_t bytes,
                    const struct kb_ipcq_meta *meta)
{
    struct dir *d = dir_at(q, dir);
    return send_on(q, d, d ? d->name : "(none)", data, NULL, bytes, meta);
}

int64_t kb_ipcq_recv_at(struct kb_ipcq *q, int dir, void *out, uint64_t bytes_max,
                        struct kb_ipcq_meta *meta)
{
    struct dir *d = dir_at(q, dir);
    return recv_on(q, d, d ? d->name : "(none)", out, NULL, bytes_max, meta);
}

int kb_ipcq_recv_step(struct kb_ipcq *q, struct kb_ipcq_recv_op *op, int64_t *result)
{
    struct dir *d = dir_at(q, op->dir);
    const char *dir = d ? d->name : "(none)";
    struct rwait w;
    if (recv_advance(q, d, dir, op, &w, result))
        return 1;
    int rc = w.ev ? sim_next_trigger_event(q->sim, w.ev) : sim_next_trigger(q->sim, w.delay);
    if (rc < 0) {
        *result = recv_abort(q, d, dir, op, rc, "method");
        return 1;
    }
    return 0;
}

int kb_ipcq_probe(struct kb_ipcq *q, const char *dir, uint64_t *bytes,
                  struct kb_ipcq_meta *meta)
{
    struct dir *d = find_dir(q, dir);
    if (!d || !d->rx)
        return KB_SETERR(q, SIM_EINVAL, "probe on direction '%s' of '%s', which "
                      "is not wired", dir, q->name);
    const struct slot *sl = &d->rx->slots[d->rx->head_i];
    if (sl->state != KB_IPCQ_FULL)
        return 0;
    if (bytes)
        *bytes = sl->msg_bytes;
    if (meta)
        *meta = sl->meta;
    return 1;
}

int kb_ipcq_slot_info(struct kb_ipcq *q, const char *dir, uint32_t i,
                      struct kb_ipcq_slot *out)
{
    struct dir *d = find_dir(q, dir);
    if (!d || !d->rx)
        return KB_SETERR(q, SIM_EINVAL, "direction '%s' of '%s' is not wired for "
                      "receiving", dir, q->name);
    struct chan *c = d->rx;
    if (i >= c->n)
        return KB_SETERR(q, SIM_EINVAL, "slot %u of direction '%s' of '%s' does "
                      "not exist (%u slots)", i, dir, q->name, c->n);
    const struct slot *sl = &c->slots[i];
    memset(out, 0, sizeof *out);
    out->state = sl->state;
    out->addr = c->rx_base + (uint64_t)i * c->size;
    if (sl->state == KB_IPCQ_FULL) {
        out->bytes = sl->bytes;
        out->msg_bytes = sl->msg_bytes;
        out->meta = sl->meta;
        out->data = &sl->carry;
    }
    return 0;
}

sim_time kb_ipcq_credit_time(struct kb_ipcq *q, const char *dir)
{
    const struct dir *d = find_dir(q, dir);
    return d && d->rx ? d->rx->credit_ps : SIM_FOREVER;
}

/* ---- counters -------------------------------------------------------- */

static void add_stats(struct kb_ipcq_stats *o, const struct dir *d)
{
    if (d->tx) {
        o->tx_messages += d->tx->st.tx_messages;
        o->tx_bytes += d->tx->st.tx_bytes;
        o->blocked_ps += d->tx->st.blocked_ps;
    }
    if (d->rx) {
        o->rx_messages += d->rx->st.rx_messages;
        o->rx_bytes += d->rx->st.rx_bytes;
        o->recv_wait_ps += d->rx->st.recv_wait_ps;
        o->recv_busy_ps += d->rx->st.recv_busy_ps;
        if (d->rx->st.occupancy_hwm > o->occupancy_hwm)
            o->occupancy_hwm = d->rx->st.occupancy_hwm;
    }
}

int kb_ipcq_get_stats(const struct kb_ipcq *q, const char *dir,
                      struct kb_ipcq_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!dir) {
        for (size_t i = 0; i < q->n_dirs; i++)
            add_stats(out, &q->dirs[i]);
        return 0;
    }
    const struct dir *d = find_dir(q, dir);
    if (!d)
        return SIM_EINVAL;
    add_stats(out, d);
    return 0;
}
