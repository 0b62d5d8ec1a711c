/* pe_dma.c — kb_dma: channel queues, copy timing, payload copies
 *
 * Timing of one copy of B bytes from memory S (at node s) to memory D (at
 * node d) over the routed path P = route(s, d). With
 *
 *     Ls, Ld     the setups of S and D            (kb_mem_time(.., 0))
 *     Ds, Dd     their data phases for B bytes    (kb_mem_time(.., B) - setup)
 *     Tnet       kb_fabric_path_time(P, B)        (head latency + flit stream)
 *     Lnet       kb_fabric_path_time(P, 0)        (overheads + wire delays)
 *
 * a copy served on an idle system takes
 *
 *     T = Ls + max(Tnet, Lnet + Ds, Lnet + Dd) + Ld
 *
 * The source setup comes first; then the memory data phases overlap the
 * flit stream, so the slowest of the three stages (source read, fabric,
 * destination write) sets the rate, and a memory-bound copy still pays the
 * path's latency once; the destination setup is paid after the last byte
 * arrives. In the simulation, a channel serving a copy at t0:
 *
 *     r_end = kb_mem_schedule(S, read)           books S's channels at t0
 *     w_end = kb_mem_schedule(D, write) at t0+Ls books D's channels
 *     t_a   = end of kb_fabric_transfer(P, B) started at t0 + Ls (real flits)
 *     end   = max(t_a + Ld, r_end + Lnet + Ld, w_end + Lnet)
 *
 * which is T on an idle system. With other traffic, contention on either
 * memory (a later r_end or w_end) or on any link (a later t_a) shows: the
 * last byte cannot leave S before S's booked read ends, nor be written
 * before D's booked write ends.
 * A copy within one memory books read and write on the same channels, so
 * the two data phases serialise there, as they would in a single-ported
 * bank. The payload is copied at `end`, in one step with the completion
 * callback. */
#include "pe_dma.h"

#include "kb_err.h"
#include "kb_port.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

/* A queued copy; recycled through the DMA's free list. */
struct req {
    struct req *next;
    struct kb_dma_end src, dst;
    uint64_t bytes;
    bool nodata; /* kb_dma_copy_timed_async: no bytes written */
    struct sim_event *done;
    kb_dma_done_fn fn;
    void *ud;
    int n_links, cap_links;
    int *links; /* the route, kept with the request when it is recycled */
    struct kb_link **lp; /* its links (kb_fabric_path_links), cap_lp of room */
    int cap_lp;
    bool has_lp; /* lp holds the route's links */
    sim_time lnet; /* kb_fabric_path_time(links, 0) */
};

/* Routes this DMA has found, most recently used first. A PE's copies go
 * to a few places over and over (its IPCQ neighbours, its HBM), so a copy
 * finds its route here instead of asking the route function and checking
 * the path each time. The routes of a fabric do not change once its links
 * are all added; the cache is emptied if the link count moves. */
#define ROUTE_CACHE 8
struct route_entry {
    int src, dst, n, cap;
    int *links;
    struct kb_link **lp; /* the links of `links` (kb_fabric_path_links) */
    int cap_lp;
    sim_time lnet; /* kb_fabric_path_time(links, 0) */
};

/* A thread blocked in kb_dma_copy. */
struct waiter {
    struct waiter *next;
    struct sim_event *ev;
    int status;
};

/* Where a channel is in serving its copy (chan_step). */
enum phase {
    PH_IDLE,  /* waiting for work */
    PH_SETUP, /* the source's setup: until t0 + Ls */
    PH_NET,   /* the flits on the fabric: until the last one arrives */
    PH_END,   /* the memories: until `end` */
};

struct chan {
    struct kb_dma *d;
    struct sim *sim; /* d->sim, for the fabric's call at the last flit */
    enum kb_dma_class c;
    enum phase ph;
    int trk; /* trace track, made on the first copy */
    struct sim_proc *proc;
    struct req *serving; /* off the queue, being copied: freed with the DMA if never done */
    /* the copy in service (serve's locals, kept across the waits) */
    sim_time t0, ld, lnet, r_end, w_end;
    struct kb_dma_stats st;
};

struct klass {
    struct req *head, *tail;
    struct sim_event *work;
    struct chan *chans;
    uint32_t n;
};

/* What every copy touches first (the queues, the free lists, the
 * counters), then what only some do. */
struct kb_dma {
    struct sim *sim;
    struct kb_fabric *f;
    struct sim_trace *tr; /* NULL: not traced */
    struct req *free_reqs;
    struct waiter *free_waiters;
    uint64_t pending;
    kb_dma_pick_fn pick; /* NULL: the kept route, VC class 0 */
    void *pick_ud;
    struct klass k[KB_DMA_NCLASSES];
    struct kb_dma_params p;
    int rc_n;        /* route cache entries in use, rc[0] the most recent */
    int rc_f_links;  /* the fabric's link count when they were found */
    struct route_entry rc[ROUTE_CACHE];
    char *name;
    kb_dma_route_fn route;
    void *route_ud;
    int *scratch; /* routes of kb_dma_time and kb_dma_route */
    int cap_scratch;
    struct waiter **waiters; /* every waiter, for kb_dma_free */
    size_t n_waiters, cap_waiters;
    struct kb_dma_if iface;
    struct sim_port *port; /* "NAME.dma.in" */
    char err[256];
};

static const char *const class_names[KB_DMA_NCLASSES] = {"read", "write",
                                                         "comm"};

static int seterr(struct kb_dma *d, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int seterr(struct kb_dma *d, int code, const char *fmt, ...)
{
    /* every message starts "dma of 'NAME': " */
    int n = snprintf(d->err, sizeof d->err, "dma of '%s': ", d->name);
    if (n < 0 || (size_t)n >= sizeof d->err)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    kb_verrc(d->err + n, sizeof d->err - (size_t)n, code, fmt, ap);
    va_end(ap);
    return code;
}

static sim_time tmax(sim_time a, sim_time b) { return a > b ? a : b; }

/* ---- checks ---------------------------------------------------------- */

static int check_end(struct kb_dma *d, const char *what,
                     const struct kb_dma_end *e, uint64_t bytes)
{
    if (!e->mem)
        return seterr(d, SIM_EINVAL, "%s of the copy has no memory", what);
    uint64_t cap = kb_mem_capacity(e->mem);
    if (e->addr > cap || bytes > cap - e->addr)
        return seterr(d, SIM_EINVAL,
                      "%s of %llu bytes at 0x%llx is beyond the %llu bytes "
                      "of %s of '%s'", what, (unsigned long long)bytes,
                      (unsigned long long)e->addr, (unsigned long long)cap,
                      kb_mem_kind_name(kb_mem_params(e->mem)->kind),
                      kb_mem_name(e->mem));
    if (e->node < 0 || e->node >= kb_fabric_node_count(d->f))
        return seterr(d, SIM_EINVAL, "%s of the copy is at unknown node %d",
                      what, e->node);
    return 0;
}

/* Routes src -> dst into *links (capacity *cap, grown to the route's
 * length: routes of any length); the number of links or an error. */
static int route_path(struct kb_dma *d, int src, int dst, int **links, int *cap)
{
    /* at least 16 links, then as many as the route says it has */
    int n = 16;
    while (*cap < n || (n = d->route(d->route_ud, src, dst, *links, *cap)) > *cap) {
        int *a = realloc(*links, (size_t)n * sizeof *a);
        if (!a)
            return seterr(d, SIM_ENOMEM, "out of memory for a route of %d links "
                          "from '%s' to '%s'", n, kb_fabric_node_name(d->f, src),
                          kb_fabric_node_name(d->f, dst));
        *links = a;
        *cap = n;
    }
    if (n < 0)
        return seterr(d, n, "no route from '%s' to '%s'",
                      kb_fabric_node_name(d->f, src),
                      kb_fabric_node_name(d->f, dst));
    int rc = kb_fabric_check_path(d->f, *links, n);
    if (rc < 0) /* SIM_ENOMEM: a link of the route could not be made */
        return seterr(d, rc, "%s route from '%s' to '%s': %s",
                      rc == SIM_ENOMEM ? "the" : "bad",
                      kb_fabric_node_name(d->f, src),
                      kb_fabric_node_name(d->f, dst), kb_fabric_errmsg(d->f));
    return n;
}

/* *links (capacity *cap) grown to hold n; false when out of memory */
static bool links_room(int **links, int *cap, int n)
{
    if (n <= *cap)
        return true;
    int *a = realloc(*links, (size_t)n * sizeof *a);
    if (!a)
        return false;
    *links = a;
    *cap = n;
    return true;
}

/* *lp (capacity *cap) grown to hold n links; false when out of memory */
static bool lp_room(struct kb_link ***lp, int *cap, int n)
{
    if (n <= *cap)
        return true;
    struct kb_link **a = realloc(*lp, (size_t)n * sizeof *a);
    if (!a)
        return false;
    *lp = a;
    *cap = n;
    return true;
}

/* The request's links from the cache entry's (a request without them,
 * out of memory, sends by link id). */
static void req_links(struct req *r, struct kb_link *const *lp, int n)
{
    r->has_lp = lp && n > 0 && lp_room(&r->lp, &r->cap_lp, n);
    if (r->has_lp)
        memcpy(r->lp, lp, (size_t)n * sizeof *lp);
}

/* route_path through the route cache; *lnet (if not NULL) gets the
 * path's latency, kb_fabric_path_time(route, 0); r (if not NULL) gets the
 * route's links (req_links). */
static int find_path_lnet(struct kb_dma *d, int src, int dst, int **links, int *cap,
                          sim_time *lnet, struct req *r)
{
    int nl = kb_fabric_link_count(d->f);
    if (nl != d->rc_f_links) {
        d->rc_n = 0;
        d->rc_f_links = nl;
    }
    for (int i = 0; i < d->rc_n; i++) {
        struct route_entry *e = &d->rc[i];
        if (e->src != src || e->dst != dst)
            continue;
        if (!links_room(links, cap, e->n))
            return seterr(d, SIM_ENOMEM, "out of memory for a route of %d links "
                          "from '%s' to '%s'", e->n, kb_fabric_node_name(d->f, src),
                          kb_fabric_node_name(d->f, dst));
        if (e->n > 0)
            memcpy(*links, e->links, (size_t)e->n * sizeof **links);
        if (lnet)
            *lnet = e->lnet;
        if (r)
            req_links(r, e->lp, e->n);
        if (i > 0) { /* to the front */
            struct route_entry t = *e;
            memmove(&d->rc[1], &d->rc[0], (size_t)i * sizeof d->rc[0]);
            d->rc[0] = t;
        }
        return d->rc[0].n;
    }
    int n = route_path(d, src, dst, links, cap);
    if (n < 0)
        return n;
    sim_time l = kb_fabric_path_time(d->f, *links, n, 0);
    if (lnet)
        *lnet = l;
    if (r)
        r->has_lp = false;
    /* into the cache, the least recently used entry making room; a
     * cache that cannot grow an entry just does not keep the route (an
     * entry grown keeps its contents) */
    struct route_entry *slot = &d->rc[d->rc_n < ROUTE_CACHE ? d->rc_n : ROUTE_CACHE - 1];
    if (!links_room(&slot->links, &slot->cap, n > 0 ? n : 1) ||
        !lp_room(&slot->lp, &slot->cap_lp, n > 0 ? n : 1))
        return n;
    struct route_entry t = *slot;
    if (n > 0) {
        memcpy(t.links, *links, (size_t)n * sizeof *t.links);
        kb_fabric_path_links(d->f, t.links, n, t.lp);
    }
    if (r)
        req_links(r, t.lp, n);
    t.src = src;
    t.dst = dst;
    t.n = n;
    t.lnet = l;
    int used = d->rc_n < ROUTE_CACHE ? d->rc_n : ROUTE_CACHE - 1;
    memmove(&d->rc[1], &d->rc[0], (size_t)used * sizeof d->rc[0]);
    d->rc[0] = t;
    if (d->rc_n < ROUTE_CACHE)
        d->rc_n++;
    return n;
}

static int find_path(struct kb_dma *d, int src, int dst, int **links, int *cap)
{
    return find_path_lnet(d, src, dst, links, cap, NULL, NULL);
}

static int check_copy(struct kb_dma *d, const struct kb_dma_end *src,
                      const struct kb_dma_end *dst, uint64_t bytes, int **links,
                      int *cap, sim_time *lnet, struct req *r)
{
    int rc = check_end(d, "source", src, bytes);
    if (rc < 0)
        return rc;
    rc = check_end(d, "destination", dst, bytes);
    if (rc < 0)
        return rc;
    return find_path_lnet(d, src->node, dst->node, links, cap, lnet, r);
}

/* ---- closed form ----------------------------------------------------- */

sim_time kb_dma_time(struct kb_dma *d, struct kb_dma_end src,
                     struct kb_dma_end dst, uint64_t bytes)
{
    int n = check_copy(d, &src, &dst, bytes, &d->scratch, &d->cap_scratch, NULL, NULL);
    if (n < 0)
        return SIM_FOREVER;
    const int *links = d->scratch;
    sim_time ls = kb_mem_time(src.mem, src.addr, 0);
    sim_time ds = kb_mem_time(src.mem, src.addr, bytes) - ls;
    sim_time ld = kb_mem_time(dst.mem, dst.addr, 0);
    sim_time dd = kb_mem_time(dst.mem, dst.addr, bytes) - ld;
    sim_time tnet = kb_fabric_path_time(d->f, links, n, bytes);
    sim_time lnet = kb_fabric_path_time(d->f, links, n, 0);
    return ls + tmax(tnet, lnet + tmax(ds, dd)) + ld;
}

/* ---- payload --------------------------------------------------------- */

/* Page to page in the memories' own storage (kb_mem_copy also gets an
 * overlapping copy within one memory right). */
static int copy_bytes(struct kb_dma *d, const struct req *r)
{
    int rc = kb_mem_copy(r->dst.mem, r->dst.addr, r->src.mem, r->src.addr,
                         r->bytes);
    if (rc < 0)
        return seterr(d, rc, "%s", kb_mem_errmsg(r->dst.mem));
    return 0;
}

/* ---- channels -------------------------------------------------------- */

/* One end of a copy as "memory.kind+0xaddr". */
static void end_name(char *buf, size_t n, const struct kb_dma_end *e)
{
    snprintf(buf, n, "%s.%s+0x%" PRIx64, kb_mem_name(e->mem),
             kb_mem_kind_name(kb_mem_params(e->mem)->kind), e->addr);
}

/* A finished copy as a span on its channel's track, from the start of
 * service to the write of the last byte. */
static void trace_copy(struct chan *ch, const struct req *r, sim_time t0)
{
    struct kb_dma *d = ch->d;
    if (ch->trk < 0) {
        char nm[300];
        snprintf(nm, sizeof nm, "%s.dma.%s%td", d->name, class_names[ch->c],
                 ch - d->k[ch->c].chans);
        ch->trk = sim_trace_track_path(d->tr, nm);
    }
    char name[48], src[160], dst[160];
    snprintf(name, sizeof name, "%s %" PRIu64 " B", class_names[ch->c], r->bytes);
    end_name(src, sizeof src, &r->src);
    end_name(dst, sizeof dst, &r->dst);
    const struct sim_trace_arg a[] = {
        {"bytes", NULL, r->bytes}, {"src", src, 0}, {"dst", dst, 0},
        {"hops", NULL, (uint64_t)r->n_links}};
    sim_trace_span(d->tr, ch->trk, "dma", name, t0, sim_now(d->sim), a,
                   (int)(sizeof a / sizeof a[0]));
}

/* A channel is a method process that serves one copy at a time in the
 * steps of the file comment, each step one activation, and waits between
 * them (sim_next_trigger, or the fabric's call at the last flit) exactly
 * where a thread serving the copy in one call would wait: the same
 * activations at the same times and in the same order as such a thread,
 * without a stack or a context switch each. */

/* The copy is done (status 0) or has failed (negative): the callback and
 * the event, then the next copy. */
static void finish(struct chan *ch, struct req *r, int status)
{
    struct kb_dma *d = ch->d;
    if (status == 0) {
        ch->st.bytes += r->bytes;
        ch->st.transfers++;
        ch->st.busy_ps += sim_now(d->sim) - ch->t0;
        if (d->tr)
            trace_copy(ch, r, ch->t0);
    }
    ch->serving = NULL;
    ch->ph = PH_IDLE;
    d->pending--;
    kb_dma_done_fn fn = r->fn;
    void *ud = r->ud;
    struct sim_event *done = r->done;
    r->next = d->free_reqs;
    d->free_reqs = r;
    if (fn)
        fn(ud, status);
    if (done)
        sim_notify(done);
}

/* The fabric's call when the last flit of the copy arrives at `at`: the
 * channel goes on then, as a thread waiting for the fabric's event would
 * (the wake-up is queued where the event's notification would be). Out
 * of memory, sim_method_wake fails the run itself; `at` is a time the
 * run reaches, so there is no other error. */
static void net_done(void *ud, sim_time at)
{
    struct chan *ch = ud;
    (void)sim_method_wake(ch->proc, at - sim_now(ch->sim));
}

/* The source's setup is over: book the destination's write and put the
 * flits on the fabric. 1: they are in flight (net_done wakes the
 * channel), 0: there are none (a copy within a node), -1: the copy
 * failed and is finished. */
static int start_net(struct chan *ch, struct req *r)
{
    struct kb_dma *d = ch->d;
    ch->w_end = kb_mem_schedule(r->dst.mem, r->dst.addr, r->bytes, true);
    /* the route passed kb_fabric_check_path when it was found; adaptive
     * routing may take another one as the flits enter the fabric */
    const int *links = r->links;
    int n_links = r->n_links;
    uint32_t vc_class = 0;
    if (d->pick) {
        n_links = d->pick(d->pick_ud, r->src.node, r->dst.node, r->links, r->n_links, &links,
                          &vc_class);
        if (n_links < 0) {
            finish(ch, r, seterr(d, n_links, "no route chosen from '%s' to '%s'",
                                 kb_fabric_node_name(d->f, r->src.node),
                                 kb_fabric_node_name(d->f, r->dst.node)));
            return -1;
        }
        if (links != r->links)
            ch->lnet = kb_fabric_path_time(d->f, links, n_links, 0);
    }
    ch->ph = PH_NET;
    if (n_links == 0)
        return 0;
    int rc = links == r->links && n_links == r->n_links && r->has_lp
                 ? kb_fabric_send_cb_links(d->f, links, r->lp, n_links, r->bytes, vc_class,
                                           net_done, ch)
                 : kb_fabric_send_cb_checked(d->f, links, n_links, r->bytes, vc_class,
                                             net_done, ch);
    if (rc < 0) {
        finish(ch, r, seterr(d, rc, "%s", kb_fabric_errmsg(d->f)));
        return -1;
    }
    return 1;
}

/* One activation of a channel: the copy in service as far as it goes
 * now, then the next ones queued while they need no wait. */
static void chan_step(struct sim *s, void *arg)
{
    struct chan *ch = arg;
    struct kb_dma *d = ch->d;
    struct klass *k = &d->k[ch->c];
    for (;;) {
        struct req *r = ch->serving;
        if (ch->ph == PH_IDLE) {
            if (!(r = k->head)) {
                sim_next_trigger_event(s, k->work);
                return;
            }
            if (!(k->head = r->next))
                k->tail = NULL;
            ch->serving = r;
            ch->t0 = sim_now(s);
            sim_time ls = kb_mem_time(r->src.mem, r->src.addr, 0);
            ch->ld = kb_mem_time(r->dst.mem, r->dst.addr, 0);
            ch->lnet = r->lnet; /* kb_fabric_path_time(d->f, r->links, r->n_links, 0) */
            ch->r_end = kb_mem_schedule(r->src.mem, r->src.addr, r->bytes, false);
            ch->ph = PH_SETUP;
            if (ls > 0) {
                sim_next_trigger(s, ls);
                return;
            }
        }
        if (ch->ph == PH_SETUP) {
            int rc = start_net(ch, r);
            if (rc < 0)
                continue;
            if (rc > 0)
                return;
        }
        if (ch->ph == PH_NET) {
            sim_time now = sim_now(s);
            sim_time end = tmax(now + ch->ld, tmax(ch->r_end + ch->lnet + ch->ld,
                                                   ch->w_end + ch->lnet));
            ch->ph = PH_END;
            if (end > now) {
                sim_next_trigger(s, end - now);
                return;
            }
        }
        /* PH_END: the last byte is written */
        finish(ch, r, d->p.timing_only || r->nodata ? 0 : copy_bytes(d, r));
    }
}

/* ---- life cycle ------------------------------------------------------ */

/* ---- the module's export (kb_dma_if) ------------------------------------ */

static int if_copy_async(void *ctx, enum kb_dma_class c, struct kb_dma_end src,
                         struct kb_dma_end dst, uint64_t bytes, struct sim_event *done,
                         kb_dma_done_fn fn, void *ud)
{
    return kb_dma_copy_async(ctx, c, src, dst, bytes, done, fn, ud);
}
static int if_copy_timed_async(void *ctx, enum kb_dma_class c, struct kb_dma_end src,
                               struct kb_dma_end dst, uint64_t bytes, struct sim_event *done,
                               kb_dma_done_fn fn, void *ud)
{
    return kb_dma_copy_timed_async(ctx, c, src, dst, bytes, done, fn, ud);
}
static int if_copy(void *ctx, enum kb_dma_class c, struct kb_dma_end src, struct kb_dma_end dst,
                   uint64_t bytes)
{
    return kb_dma_copy(ctx, c, src, dst, bytes);
}
static sim_time if_time(void *ctx, struct kb_dma_end src, struct kb_dma_end dst,
                        uint64_t bytes)
{
    return kb_dma_time(ctx, src, dst, bytes);
}
void kb_dma_set_route_pick(struct kb_dma *d, kb_dma_pick_fn fn, void *ud)
{
    d->pick = fn;
    d->pick_ud = ud;
}

static int if_route(void *ctx, int src_node, int dst_node, const int **links)
{
    return kb_dma_route(ctx, src_node, dst_node, links);
}
static const char *if_errmsg(void *ctx) { return kb_dma_errmsg(ctx); }

struct sim_port *kb_dma_port(const struct kb_dma *d) { return d->port; }

struct kb_dma *kb_dma_new(struct sim *s, const char *name, struct kb_fabric *f,
                          kb_dma_route_fn route, void *route_ud,
                          const struct kb_dma_params *p, char *err,
                          size_t errlen)
{
    if (!name)
        name = "";
    const uint32_t counts[KB_DMA_NCLASSES] = {p->read_channels,
                                              p->write_channels,
                                              p->comm_channels};
    const char *bad = NULL;
    for (int c = 0; c < KB_DMA_NCLASSES && !bad; c++)
        if (counts[c] < 1)
            bad = class_names[c];
    if (bad || !f || !route ||
        p->node < 0 || p->node >= kb_fabric_node_count(f)) {
        if (err && errlen) {
            if (bad)
                snprintf(err, errlen, "dma of '%s': %s channels must be >= 1, "
                         "got 0", name, bad);
            else if (!f || !route)
                snprintf(err, errlen, "dma of '%s': needs a fabric and a route "
                         "function", name);
            else
                snprintf(err, errlen, "dma of '%s': unknown fabric node %d",
                         name, p->node);
        }
        return NULL;
    }
    struct kb_dma *d = calloc(1, sizeof *d);
    if (!d || !(d->name = malloc(strlen(name) + 1)))
        goto nomem;
    strcpy(d->name, name);
    d->sim = s;
    d->f = f;
    d->route = route;
    d->route_ud = route_ud;
    d->p = *p;
    d->tr = sim_tracer(s);
    size_t nl = strlen(name) + 32;
    char *pname = malloc(nl);
    if (!pname)
        goto nomem;
    for (int c = 0; c < KB_DMA_NCLASSES; c++) {
        struct klass *k = &d->k[c];
        k->n = counts[c];
        snprintf(pname, nl, "%s.dma.%s.work", name, class_names[c]);
        k->work = sim_event_new(s, pname);
        k->chans = calloc(k->n, sizeof *k->chans);
        if (!k->work || !k->chans) {
            free(pname);
            goto nomem;
        }
        for (uint32_t i = 0; i < k->n; i++) {
            struct chan *ch = &k->chans[i];
            ch->d = d;
            ch->sim = s;
            ch->c = (enum kb_dma_class)c;
            ch->trk = -1;
            snprintf(pname, nl, "%s.dma.%s%u", name, class_names[c], i);
            if (!(ch->proc = sim_method(s, pname, chan_step, ch, false))) {
                free(pname);
                goto nomem;
            }
        }
    }
    free(pname);
    d->iface = (struct kb_dma_if){.ctx = d,
                                  .node = d->p.node,
                                  .timing_only = d->p.timing_only,
                                  .fabric = f,
                                  .copy_async = if_copy_async,
                                  .copy = if_copy,
                                  .time = if_time,
                                  .route = if_route,
                                  .errmsg = if_errmsg,
                                  .copy_timed_async = if_copy_timed_async};
    if (!(d->port = kb_port_export(s, name, "dma", KB_DMA_IF, &d->iface, 4, err, errlen))) {
        kb_dma_free(d);
        return NULL;
    }
    return d;
nomem:
    if (err && errlen)
        snprintf(err, errlen, "dma of '%s': out of memory", name);
    kb_dma_free(d);
    return NULL;
}

static void free_req(struct req *r)
{
    if (r) {
        free(r->links);
        free(r->lp);
        free(r);
    }
}

static void free_reqs(struct req *r)
{
    for (struct req *nx; r; r = nx) {
        nx = r->next;
        free_req(r);
    }
}

void kb_dma_free(struct kb_dma *d)
{
    if (!d)
        return;
    for (int c = 0; c < KB_DMA_NCLASSES; c++) {
        free_reqs(d->k[c].head);
        /* a request in service when the run stops is only in its channel
         * (its next still points into the queue) */
        for (uint32_t i = 0; d->k[c].chans && i < d->k[c].n; i++)
            free_req(d->k[c].chans[i].serving);
        free(d->k[c].chans);
    }
    free_reqs(d->free_reqs);
    free(d->scratch);
    for (int i = 0; i < ROUTE_CACHE; i++) {
        free(d->rc[i].links);
        free(d->rc[i].lp);
    }
    for (size_t i = 0; i < d->n_waiters; i++)
        free(d->waiters[i]);
    free(d->waiters);
    free(d->name);
    free(d);
}

const char *kb_dma_errmsg(const struct kb_dma *d) { return d->err; }
const char *kb_dma_name(const struct kb_dma *d) { return d->name; }
int kb_dma_node(const struct kb_dma *d) { return d->p.node; }
bool kb_dma_timing_only(const struct kb_dma *d) { return d->p.timing_only; }
struct kb_fabric *kb_dma_fabric(const struct kb_dma *d) { return d->f; }

int kb_dma_route(struct kb_dma *d, int src_node, int dst_node, const int **links)
{
    int n = find_path(d, src_node, dst_node, &d->scratch, &d->cap_scratch);
    *links = d->scratch;
    return n;
}

/* ---- copies ---------------------------------------------------------- */

static int queue_copy(struct kb_dma *d, enum kb_dma_class c, struct kb_dma_end src,
                      struct kb_dma_end dst, uint64_t bytes, bool nodata,
                      struct sim_event *done, kb_dma_done_fn fn, void *ud);

int kb_dma_copy_async(struct kb_dma *d, enum kb_dma_class c,
                      struct kb_dma_end src, struct kb_dma_end dst,
                      uint64_t bytes, struct sim_event *done,
                      kb_dma_done_fn fn, void *ud)
{
    return queue_copy(d, c, src, dst, bytes, false, done, fn, ud);
}

int kb_dma_copy_timed_async(struct kb_dma *d, enum kb_dma_class c, struct kb_dma_end src,
                            struct kb_dma_end dst, uint64_t bytes, struct sim_event *done,
                            kb_dma_done_fn fn, void *ud)
{
    return queue_copy(d, c, src, dst, bytes, true, done, fn, ud);
}

static int queue_copy(struct kb_dma *d, enum kb_dma_class c, struct kb_dma_end src,
                      struct kb_dma_end dst, uint64_t bytes, bool nodata,
                      struct sim_event *done, kb_dma_done_fn fn, void *ud)
{
    if ((unsigned)c >= KB_DMA_NCLASSES)
        return seterr(d, SIM_EINVAL, "unknown channel class %d", (int)c);
    struct req *r = d->free_reqs;
    if (r)
        d->free_reqs = r->next;
    else if (!(r = calloc(1, sizeof *r)))
        return seterr(d, SIM_ENOMEM, "out of memory queuing a copy");
    int n = check_copy(d, &src, &dst, bytes, &r->links, &r->cap_links, &r->lnet, r);
    if (n < 0) {
        r->next = d->free_reqs;
        d->free_reqs = r;
        return n;
    }
    r->next = NULL;
    r->src = src;
    r->dst = dst;
    r->bytes = bytes;
    r->nodata = nodata;
    r->done = done;
    r->fn = fn;
    r->ud = ud;
    r->n_links = n;
    struct klass *k = &d->k[c];
    if (k->tail)
        k->tail->next = r;
    else
        k->head = r;
    k->tail = r;
    d->pending++;
    sim_notify(k->work);
    return 0;
}

static void waiter_done(void *ud, int status)
{
    struct waiter *w = ud;
    w->status = status;
}

int kb_dma_copy(struct kb_dma *d, enum kb_dma_class c, struct kb_dma_end src,
                struct kb_dma_end dst, uint64_t bytes)
{
    if (!sim_current(d->sim))
        return seterr(d, SIM_EPERM, "a blocking copy needs a thread process");
    struct waiter *w = d->free_waiters;
    if (w) {
        d->free_waiters = w->next;
    } else {
        if (d->n_waiters == d->cap_waiters) {
            size_t cap = d->cap_waiters ? 2 * d->cap_waiters : 8;
            struct waiter **a = realloc(d->waiters, cap * sizeof *a);
            if (!a)
                return seterr(d, SIM_ENOMEM, "out of memory for a waiter");
            d->waiters = a;
            d->cap_waiters = cap;
        }
        char nm[300];
        snprintf(nm, sizeof nm, "%s.dma.copy%zu", d->name, d->n_waiters);
        if (!(w = calloc(1, sizeof *w)) || !(w->ev = sim_event_new(d->sim, nm))) {
            free(w);
            return seterr(d, SIM_ENOMEM, "out of memory for a waiter");
        }
        d->waiters[d->n_waiters++] = w;
    }
    w->status = 1;
    int rc = kb_dma_copy_async(d, c, src, dst, bytes, w->ev, waiter_done, w);
    if (rc < 0) {
        w->next = d->free_waiters;
        d->free_waiters = w;
        return rc;
    }
    rc = sim_wait_event(d->sim, w->ev);
    if (rc < 0) {
        /* a method process: the copy goes on and will still write into w
         * and notify its event, so w is never reused (kb_dma_free frees it) */
        return seterr(d, rc, "a blocking copy needs a thread process");
    }
    rc = w->status;
    w->next = d->free_waiters;
    d->free_waiters = w;
    return rc;
}

/* ---- counters -------------------------------------------------------- */

void kb_dma_get_stats(const struct kb_dma *d, enum kb_dma_class c,
                      struct kb_dma_stats *out)
{
    memset(out, 0, sizeof *out);
    if ((unsigned)c >= KB_DMA_NCLASSES)
        return;
    for (uint32_t i = 0; i < d->k[c].n; i++) {
        const struct kb_dma_stats *st = &d->k[c].chans[i].st;
        out->bytes += st->bytes;
        out->transfers += st->transfers;
        out->busy_ps += st->busy_ps;
    }
}

int kb_dma_channel_stats(const struct kb_dma *d, enum kb_dma_class c, int i,
                         struct kb_dma_stats *out)
{
    if ((unsigned)c >= KB_DMA_NCLASSES || i < 0 || (uint32_t)i >= d->k[c].n)
        return SIM_EINVAL;
    *out = d->k[c].chans[i].st;
    return 0;
}

uint64_t kb_dma_pending(const struct kb_dma *d) { return d->pending; }
