/* link_credit.c — credit flow control: finite input buffers, virtual
 * channels, flit by flit
 *
 * The mode of a link whose buffer_flits > 0 (link.h). The far end of the
 * link has `vcs` virtual channels (VCs), each an input buffer of B =
 * buffer_flits flits; the sender keeps one credit per free slot of each.
 *
 * Rule, per link and flit (d = f / bw of the flit, rounded to the ps as in
 * the wormhole mode; l = latency; o = the link's overhead; c = credit_ns):
 *   - a message's head, on reaching a link's input (the source, or the
 *     buffer at the far end of the previous hop), may ask for the link o
 *     later; it needs a free VC of its class on the link (class c uses the
 *     VCs v with v % vc_classes == c) and holds that VC until its tail has
 *     left the buffer at the far end (atomic VC allocation);
 *   - a flit may start when it is at the input, the flit before it of the
 *     same message has started, the link is idle and its VC has a credit;
 *     it takes one credit, occupies the link for d and is in the far
 *     buffer l after its end;
 *   - when a flit leaves a buffer (starts on the next hop; on the last hop:
 *     arrives, the sink never stalls) its credit reaches the sender c
 *     later, and the tail's credit frees the VC there;
 *   - the link serves, one flit at a time, the messages at its input in
 *     round-robin order (arrival order of their heads first), skipping
 *     any that cannot send; a router's input can feed several outputs at
 *     once.
 *
 * Consequences checked by tests/components/test_link_credit.c:
 *   one flit over hops j:     T = Σ_j (o_j + l_j + d_j)  (as wormhole)
 *   n full flits, one hop, no contention, with the credit round trip
 *   R = d + l + c (a flit's start to its credit's return):
 *       if B·d >= R:  T = o + (n-1)·d + d + l       (bandwidth bound)
 *       else:         S_k = o + ⌊k/B⌋·R + (k mod B)·d,
 *                     T = S_{n-1} + d + l         (credit bound: B flits
 *                     per round trip, throughput B·f / R < bw)
 *   two messages from different inputs onto one link, one VC: the second
 *   waits for the first's tail (its head cannot get the VC): serialised;
 *   with two VCs their flits alternate, each at half the link's rate.
 * A message alone on a path of h hops (kb_link_credit_path_time): with
 * S(j,k) the start of flit k on hop j, d(j,k) its serialisation there and
 * B_j, c_j hop j's buffer and credit delay, the rule gives
 *     S(j,k) = max( o_j                          if j = 0,
 *                   S(j-1,k) + d(j-1,k) + l_{j-1} (+ o_j for the head, k = 0),
 *                   S(j,k-1) + d(j,k-1)                (the link is busy),
 *                   S(j+1,k-B_j) + c_j  when k >= B_j  (flit k-B_j's credit;
 *                   on the last hop S(h-1,k-B) + d + l + c: the sink) )
 *     T = S(h-1,n-1) + d(h-1,n-1) + l_{h-1}
 * a longest path through a graph of (hop, flit) nodes, which
 * kb_link_credit_path_time walks in O(n·h). With one set of parameters on
 * every hop (d, l, o, c, B; R = d + l + c) its longest path takes every
 * head overhead, then the slower of the link's pace and the credit loop
 * (the loop costs R per B flits on any hop):
 *     T = Σ_j (o_j + l_j + d_1) + max((n-1)·d, ⌊(n-1)/B⌋·R + ((n-1) mod B)·d)
 *         - d_1 + d_n    (d_1, d_n: the first and last flit's d)
 * which is the wormhole closed form while B·d >= R and the one-hop credit
 * bound above otherwise; on hops that differ a slow credit loop on one hop
 * and a slow link on another combine, which only the walk gets exactly.
 *
 * An open path (per-hop routing, kb_link_msg.next_hop) learns its next
 * hop when its head reaches the far end of the last one: the head then
 * waits at every candidate link at once, each from o of that link (plus
 * the candidate's delay) on, and the first link that can give it a VC of
 * one of the candidate's classes takes it; the others drop it. Body
 * flits follow the chosen link.
 *
 * A message never lets a credit or a VC go while it waits, so a cycle of
 * messages each holding a VC the next one waits for never resolves: a
 * deadlock, which the engine reports as the transfers blocked on it
 * (docs/components/link.md states which routing choices avoid it). */
#include "link_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

/* A credit on its way back to this link's sender. */
struct credit {
    sim_time t;
    uint64_t seq;
    uint32_t vc;
    uint32_t release; /* the tail's credit: the VC is free again */
};

/* A message at this link's input, and the hop this link is on its path;
 * open: the head of an open path waits here as candidate c (and maybe at
 * other links too) for a hop not yet decided. */
struct cand {
    struct kb_link_msg *m;
    uint32_t hop;
    int open;
    struct kb_link_cand c;
};

struct kb_link_credit {
    uint32_t vcs, classes, buffer;
    sim_time credit_ps;
    uint32_t *credits;          /* vcs free slots, sender's count */
    struct kb_link_msg **owner; /* vcs: the message holding the VC, or NULL */
    struct credit *heap;        /* min-heap on (t, seq) */
    size_t n_heap, cap_heap;
    uint64_t seq;
    struct cand *cands; /* in head arrival order */
    size_t n_cands, cap_cands, rr;
    sim_time busy_until; /* end of the flit on the link */
    int *trk; /* vcs trace tracks "<link>.vc<v>", made on first use (-1) */
};

/* Per message and hop j: the VC held on link j, flits sent over it, and
 * the times at which the flits sent over link j and still in its far
 * buffer may go on (a ring of buffer_flits). */
struct hop {
    uint64_t sent;
    sim_time t_head; /* when the head started on this hop (trace span) */
    uint32_t vc, cls;
    uint32_t cap, head, cnt;
    sim_time *ring;
};

struct msg_state {
    sim_time t_src; /* the head may ask for the first link from here on */
    uint32_t n_wait; /* open path: the links the undecided head waits at */
    struct kb_link *wait[KB_LINK_MAX_CANDS];
    struct hop hop[];
};

struct kb_link_credit *kb_link_credit_new(const struct kb_link_params *p)
{
    struct kb_link_credit *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->vcs = p->vcs;
    c->classes = p->vc_classes;
    c->buffer = p->buffer_flits;
    c->credit_ps = (sim_time)llround(p->credit_ns * 1000.0);
    c->credits = malloc(p->vcs * sizeof *c->credits);
    c->owner = calloc(p->vcs, sizeof *c->owner);
    c->trk = malloc(p->vcs * sizeof *c->trk);
    if (!c->credits || !c->owner || !c->trk) {
        kb_link_credit_free(c);
        return NULL;
    }
    for (uint32_t v = 0; v < p->vcs; v++) {
        c->credits[v] = p->buffer_flits;
        c->trk[v] = -1;
    }
    return c;
}

void kb_link_credit_free(struct kb_link_credit *c)
{
    if (!c)
        return;
    free(c->credits);
    free(c->owner);
    free(c->trk);
    free(c->heap);
    free(c->cands);
    free(c);
}

int kb_link_credit_backlog(const struct kb_link_credit *c) { return (int)c->n_cands; }

/* ---- credits on their way back ----------------------------------------- */

static int cr_before(const struct credit *a, const struct credit *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static int credit_push(struct kb_link *l, sim_time t, sim_time now, uint32_t vc,
                       uint32_t release)
{
    struct kb_link_credit *c = l->ext->cr;
    if (c->n_heap == c->cap_heap) {
        size_t cap = c->cap_heap ? 2 * c->cap_heap : 8;
        struct credit *h = realloc(c->heap, cap * sizeof *h);
        if (!h)
            return SIM_ENOMEM;
        c->heap = h;
        c->cap_heap = cap;
    }
    struct credit a = {t, c->seq++, vc, release};
    size_t i = c->n_heap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!cr_before(&a, &c->heap[up]))
            break;
        c->heap[i] = c->heap[up];
        i = up;
    }
    c->heap[i] = a;
    kb_link_wake_at(l, t, now);
    return 0;
}

static struct credit credit_pop(struct kb_link_credit *c)
{
    struct credit top = c->heap[0];
    struct credit last = c->heap[--c->n_heap];
    size_t n = c->n_heap, i = 0;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= n)
            break;
        if (k + 1 < n && cr_before(&c->heap[k + 1], &c->heap[k]))
            k++;
        if (!cr_before(&c->heap[k], &last))
            break;
        c->heap[i] = c->heap[k];
        i = k;
    }
    if (n)
        c->heap[i] = last;
    return top;
}

/* ---- messages ---------------------------------------------------------- */

static int cand_add_open(struct kb_link_credit *c, struct kb_link_msg *m, uint32_t hop,
                         const struct kb_link_cand *oc)
{
    if (c->n_cands == c->cap_cands) {
        size_t cap = c->cap_cands ? 2 * c->cap_cands : 4;
        struct cand *a = realloc(c->cands, cap * sizeof *a);
        if (!a)
            return SIM_ENOMEM;
        c->cands = a;
        c->cap_cands = cap;
    }
    c->cands[c->n_cands] = (struct cand){m, hop, oc != NULL, {0}};
    if (oc)
        c->cands[c->n_cands].c = *oc;
    c->n_cands++;
    return 0;
}

static int cand_add(struct kb_link_credit *c, struct kb_link_msg *m, uint32_t hop)
{
    return cand_add_open(c, m, hop, NULL);
}

/* The undecided head of m at hop j leaves the input of l (another link
 * took it). */
static void cand_withdraw(struct kb_link *l, const struct kb_link_msg *m, uint32_t j)
{
    struct kb_link_credit *c = l->ext->cr;
    for (size_t i = 0; i < c->n_cands; i++)
        if (c->cands[i].m == m && c->cands[i].hop == j) {
            memmove(&c->cands[i], &c->cands[i + 1], (c->n_cands - i - 1) * sizeof *c->cands);
            c->n_cands--;
            if (c->rr > i)
                c->rr--;
            if (c->n_cands)
                c->rr %= c->n_cands;
            else
                c->rr = 0;
            return;
        }
}

int kb_link_credit_inject(struct kb_link_msg *m)
{
    size_t ring = 0;
    uint32_t bmax = 0, n = m->open ? m->room : m->n_hops;
    for (uint32_t j = 0; j < m->n_hops; j++) {
        if (!m->path[j]->credit)
            return SIM_EINVAL; /* the fabric checks paths for one mode */
        ring += m->path[j]->ext->cr->buffer;
        if (m->path[j]->ext->cr->buffer > bmax)
            bmax = m->path[j]->ext->cr->buffer;
    }
    if (n < m->n_hops)
        return SIM_EINVAL;
    ring += (size_t)(n - m->n_hops) * bmax; /* an open path's hops to come */
    struct msg_state *st = malloc(sizeof *st + n * sizeof(struct hop) +
                                  ring * sizeof(sim_time));
    if (!st)
        return SIM_ENOMEM;
    struct kb_link *l = m->path[0];
    sim_time now = sim_now(l->k->sim);
    sim_time *words = (sim_time *)(st->hop + n);
    uint32_t cls = m->vc_class;
    for (uint32_t j = 0; j < m->n_hops; j++) {
        struct kb_link_credit *c = m->path[j]->ext->cr;
        cls += m->path[j]->k->p.dateline ? 1 : 0;
        if (m->hop_class)
            cls = m->hop_class[j];
        st->hop[j] = (struct hop){0, 0, 0, cls < c->classes ? cls : c->classes - 1,
                                  c->buffer, 0, 0, words};
        words += c->buffer;
    }
    for (uint32_t j = m->n_hops; j < n; j++) {
        st->hop[j] = (struct hop){0, 0, 0, 0, bmax, 0, 0, words};
        words += bmax;
    }
    st->n_wait = 0;
    st->t_src = now + l->k->ovh_ps;
    m->credit = st;
    if (cand_add(l->ext->cr, m, 0) < 0) {
        free(st);
        m->credit = NULL;
        return SIM_ENOMEM;
    }
    kb_link_wake_at(l, st->t_src, now);
    return 0;
}

/* When flit `sent` of m may start on hop j: at the source from t_src on,
 * else when it may leave the previous hop's far buffer (SIM_FOREVER: not
 * there yet). */
static sim_time flit_ready(const struct kb_link_msg *m, uint32_t j)
{
    const struct msg_state *st = m->credit;
    if (j == 0)
        return st->t_src;
    const struct hop *h = &st->hop[j - 1];
    return h->cnt ? h->ring[h->head] : SIM_FOREVER;
}

/* A free VC of class cls with a credit, or -1. */
static int free_vc(const struct kb_link_credit *c, uint32_t cls)
{
    for (uint32_t v = cls; v < c->vcs; v += c->classes)
        if (!c->owner[v] && c->credits[v])
            return (int)v;
    return -1;
}

/* A message's pass over the link, on the row of the VC it held: from its
 * head's start to the end of its tail flit (other VCs' flits interleave
 * on their own rows; one message a VC at a time, so a row's spans never
 * overlap). */
static void trace_pass(struct kb_link *l, const struct kb_link_msg *m, uint32_t hop,
                       const struct hop *h, sim_time end)
{
    struct kb_link_credit *c = l->ext->cr;
    if (c->trk[h->vc] < 0) {
        char row[300];
        snprintf(row, sizeof row, "%s.vc%u", kb_link_name(l), h->vc);
        c->trk[h->vc] = sim_trace_track_path(l->ext->tr, row);
    }
    uint64_t bytes = kb_link_msg_bytes(m);
    char name[32];
    snprintf(name, sizeof name, "%" PRIu64 " B", bytes);
    const struct sim_trace_arg a[] = {
        {"bytes", NULL, bytes},
        {"flits", NULL, m->n_flits},
        {"hop", NULL, hop},
        {"vc", NULL, h->vc},
        {"first_link", kb_link_name(m->path[0]), 0},
        {"last_link", kb_link_name(m->path[m->n_hops - 1]), 0},
    };
    sim_trace_span(l->ext->tr, c->trk[h->vc], "link", name, h->t_head, end, a,
                   (int)(sizeof a / sizeof a[0]));
}

/* The head of open path m has reached the far end of hop j - 1 at `at`:
 * it waits at every candidate link for hop j. */
static int open_candidates(struct kb_link_msg *m, uint32_t j, sim_time at, sim_time now)
{
    struct msg_state *st = m->credit;
    struct kb_link_cand cs[KB_LINK_MAX_CANDS];
    if (j >= m->room || !m->next_hop)
        return SIM_EINVAL;
    int n = m->next_hop(m, cs, KB_LINK_MAX_CANDS);
    if (n < 1)
        return n < 0 ? n : SIM_EINVAL;
    st->n_wait = 0;
    for (int i = 0; i < n && i < KB_LINK_MAX_CANDS; i++) {
        struct kb_link *nl = cs[i].link;
        if (!nl->credit || nl->ext->cr->buffer > st->hop[j].cap || cs[i].n_cls < 1 || cs[i].n_cls > 2)
            return SIM_EINVAL;
        if (cand_add_open(nl->ext->cr, m, j, &cs[i]) < 0)
            return SIM_ENOMEM;
        st->wait[st->n_wait++] = nl;
        kb_link_wake_at(nl, at + nl->k->ovh_ps + cs[i].delay, now);
    }
    return 0;
}

/* Flit `sent` of the message at cands[i] starts on l now, over VC vc.
 * Returns whether the message left the link's input (its tail went). */
static int send_flit(struct kb_link *l, size_t i, uint32_t vc, sim_time now, int *err)
{
    struct kb_link_credit *c = l->ext->cr;
    struct kb_link_msg *m = c->cands[i].m;
    uint32_t j = c->cands[i].hop;
    struct msg_state *st = m->credit;
    struct hop *h = &st->hop[j];
    uint64_t k = h->sent;
    int tail = k + 1 == m->n_flits;
    uint32_t fb = tail ? m->last_bytes : m->flit_bytes;
    sim_time d = fb == l->k->p.flit_bytes ? l->k->ser_full : kb_link_ser_ps(l, fb);

    c->credits[vc]--;
    if (k == 0) {
        h->vc = vc;
        h->t_head = now;
        c->owner[vc] = m;
        l->st.messages++;
    }
    if (tail && l->traced)
        trace_pass(l, m, j, h, now + d);
    c->busy_until = now + d;
    l->st.bytes += fb;
    l->st.flits++;
    l->st.busy_ps += d;
    h->sent++;

    if (j > 0) { /* the flit leaves the previous hop's far buffer */
        struct hop *up = &st->hop[j - 1];
        up->head = (up->head + 1) % up->cap;
        up->cnt--;
        struct kb_link *ul = m->path[j - 1];
        if (credit_push(ul, now + ul->ext->cr->credit_ps, now, up->vc, tail) < 0)
            *err = 1;
    }
    sim_time at = now + d + l->k->lat_ps; /* in the far buffer */
    if (j + 1 < m->n_hops) {
        struct kb_link *nl = m->path[j + 1];
        sim_time ready = at + (k == 0 ? nl->k->ovh_ps : 0);
        h->ring[(h->head + h->cnt++) % h->cap] = ready;
        /* through port `out` (decision 0038) */
        if (k == 0) {
            if (l->out->head(l->out->ctx, m, j + 1, ready, now) < 0)
                *err = 1;
        } else {
            l->out->flit(l->out->ctx, m, j + 1, ready, now);
        }
    } else if (m->open) {
        /* the next hop is not decided yet: the head asks for candidates
         * (its ring entry leaves out the overhead, which is the serving
         * link's) */
        h->ring[(h->head + h->cnt++) % h->cap] = at;
        int rc = k == 0 ? open_candidates(m, j + 1, at, now) : 0;
        if (rc < 0)
            *err = rc == SIM_ENOMEM ? 1 : 2;
    } else {
        /* the sink takes the flit as it arrives */
        if (credit_push(l, at + c->credit_ps, now, vc, tail) < 0)
            *err = 1;
    }
    if (!tail)
        return 0;
    memmove(&c->cands[i], &c->cands[i + 1], (c->n_cands - i - 1) * sizeof *c->cands);
    c->n_cands--;
    if (j + 1 == m->n_hops && !m->open) {
        /* no link refers to m any more */
        free(st);
        m->credit = NULL;
        m->done(m, at);
    }
    return 1;
}

/* kb_flit_if of a credit link: a head joins the messages at the input, a
 * body flit wakes the link when it may go on (decision 0038). */
int kb_link_credit_head(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now)
{
    struct kb_link *l = ctx;
    if (cand_add(l->ext->cr, m, hop) < 0)
        return SIM_ENOMEM;
    kb_link_wake_at(l, t, now);
    return 0;
}

void kb_link_credit_flit(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now)
{
    (void)m;
    (void)hop;
    kb_link_wake_at(ctx, t, now);
}

void kb_link_credit_serve(struct sim *s, void *arg)
{
    struct kb_link *l = arg;
    struct kb_link_credit *c = l->ext->cr;
    sim_time now = sim_now(s);
    l->wake_req = SIM_FOREVER; /* the pending notification is the one served */

    while (c->n_heap && c->heap[0].t <= now) {
        struct credit cr = credit_pop(c);
        c->credits[cr.vc]++;
        if (cr.release)
            c->owner[cr.vc] = NULL;
    }

    sim_time next = SIM_FOREVER;
    if (c->busy_until > now) {
        next = c->busy_until;
    } else {
        size_t n = c->n_cands;
        for (size_t t = 0; t < n; t++) {
            size_t i = (c->rr + t) % n;
            struct kb_link_msg *m = c->cands[i].m;
            uint32_t j = c->cands[i].hop;
            struct hop *h = &((struct msg_state *)m->credit)->hop[j];
            sim_time ready = flit_ready(m, j);
            if (c->cands[i].open && ready != SIM_FOREVER) /* a head deciding here pays */
                ready += l->k->ovh_ps + c->cands[i].c.delay;  /* this link's overhead */
            if (ready > now) {
                if (ready < next)
                    next = ready;
                continue;
            }
            int vc;
            if (c->cands[i].open) {
                /* the head of an open path: the candidate's classes in order */
                const struct kb_link_cand *oc = &c->cands[i].c;
                uint32_t cls = 0;
                vc = -1;
                for (uint32_t q = 0; q < oc->n_cls && vc < 0; q++) {
                    cls = oc->cls[q] < c->classes ? oc->cls[q] : c->classes - 1;
                    vc = free_vc(c, cls);
                }
                if (vc < 0)
                    continue;
                struct msg_state *st = m->credit;
                for (uint32_t w = 0; w < st->n_wait; w++)
                    if (st->wait[w] != l)
                        cand_withdraw(st->wait[w], m, j);
                st->n_wait = 0;
                h->cls = cls;
                c->cands[i].open = 0;
                m->took(m, oc, cls); /* path[j] = l; n_hops, open */
            } else {
                vc = h->sent ? (c->credits[h->vc] ? (int)h->vc : -1) : free_vc(c, h->cls);
            }
            if (vc < 0)
                continue; /* a credit or a VC frees up with a credit's return */
            int err = 0;
            int gone = send_flit(l, i, (uint32_t)vc, now, &err);
            if (err) {
                sim_fail(s, "link '%s': %s", kb_link_name(l),
                         err == 2 ? "the router gave no usable next hop for a message"
                                  : "out of memory");
                return;
            }
            c->rr = gone ? i : i + 1;
            if (c->n_cands)
                c->rr %= c->n_cands;
            next = c->busy_until;
            break;
        }
    }
    if (c->n_heap && c->heap[0].t < next)
        next = c->heap[0].t;
    if (next != SIM_FOREVER)
        kb_link_wake_at(l, next, now);
}

/* ---- closed form ------------------------------------------------------- */

/* The recurrence of the file comment, flit by flit: S(j, k) kept for the
 * last w = max B + 1 flits of every hop. */
sim_time kb_link_credit_path_time(struct kb_link *const *path, uint32_t n_hops,
                                  uint32_t flit, uint64_t bytes)
{
    if (n_hops == 0)
        return 0;
    uint64_t n = bytes ? bytes / flit + (bytes % flit != 0) : 1;
    uint64_t last = bytes - (n - 1) * flit;
    uint32_t w = 1;
    for (uint32_t j = 0; j < n_hops; j++)
        if (path[j]->ext->cr->buffer + 1 > w)
            w = path[j]->ext->cr->buffer + 1;
    sim_time *S = malloc((size_t)n_hops * w * sizeof *S);
    sim_time *dl = malloc((size_t)n_hops * sizeof *dl); /* d of the last flit */
    if (!S || !dl) {
        free(S);
        free(dl);
        return SIM_FOREVER;
    }
    for (uint32_t j = 0; j < n_hops; j++)
        dl[j] = last == flit ? path[j]->k->ser_full : kb_link_ser_ps(path[j], last);
#define D(j, i) ((i) + 1 == n ? dl[j] : path[j]->k->ser_full)
#define AT(j, k) S[(size_t)(j) * w + (k) % w]
    for (uint64_t k = 0; k < n; k++) {
        for (uint32_t j = 0; j < n_hops; j++) {
            const struct kb_link *l = path[j];
            sim_time t = j == 0 ? l->k->ovh_ps
                                : AT(j - 1, k) + D(j - 1, k) + path[j - 1]->k->lat_ps +
                                      (k == 0 ? l->k->ovh_ps : 0);
            if (k > 0 && AT(j, k - 1) + D(j, k - 1) > t)
                t = AT(j, k - 1) + D(j, k - 1);
            uint32_t b = l->ext->cr->buffer;
            if (k >= b) {
                sim_time cr = j + 1 < n_hops
                                  ? AT(j + 1, k - b) + l->ext->cr->credit_ps
                                  : AT(j, k - b) + D(j, k - b) + l->k->lat_ps + l->ext->cr->credit_ps;
                if (cr > t)
                    t = cr;
            }
            AT(j, k) = t;
        }
    }
    sim_time t = AT(n_hops - 1, n - 1) + dl[n_hops - 1] + path[n_hops - 1]->k->lat_ps;
#undef D
#undef AT
    free(S);
    free(dl);
    return t;
}
