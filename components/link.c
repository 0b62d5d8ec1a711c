/* link.c — kb_link: a directed wormhole link, one method process a link
 *
 * Per flit and hop the link applies one rule: flit i of the worm that holds
 * the link starts at max(its arrival at the link's input, the end of flit
 * i-1 on this link), occupies the link for ser(f_i) = f_i / bw and reaches
 * the next input `latency` later; the head additionally arrives `overhead`
 * late. The end-to-end closed form that follows from this rule is stated
 * in fabric.c.
 *
 * The rule is applied to a whole worm at once, when its head starts:
 * S_0 = max(head arrival, link free). With d the full-flit time on this
 * hop, unrolling it gives S_i = max_{k<=i} (A_k + (i-k)·d) for every flit
 * but the last, A_0 read as S_0. The arrivals of the full body flits
 * (1 <= i <= n-2) are kept as a maximum of lines anchored at i = 1,
 * A_i = max_k (v_k + (i-1)·d_k), one for each earlier hop k whose flit time
 * d_k set the slope, so the maximum over earlier flits is closed: a line
 * slower than this link stays as it is (its newest flit decides), any
 * other becomes v_k + (i-1)·d (its first flit decides) and merges with the
 * head's line S_0 + i·d. The last flit, partial or not, is kept
 * as one time. All of it is integer arithmetic on the per-flit rounded
 * times, so times, counters and trace spans are those of the flit-by-flit
 * rule, with a few activations per message and hop instead of one a flit.
 */
#include "link.h"
#include "link_impl.h"

#include "huge_pages.h"
#include "kb_err.h"
#include "kb_port.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

int kb_link_params_check(const struct kb_link_params *p, const char *name,
                         char *err, size_t errlen)
{
    /* !(x > 0) also rejects NaN */
    if (!(p->bw_gbps > 0) || isinf(p->bw_gbps)) {
        kb_errf(err, errlen, "link '%s': bandwidth must be a positive number of "
             "GB/s, got %g", name, p->bw_gbps);
        return SIM_EINVAL;
    }
    if (!(p->latency_ns >= 0) || isinf(p->latency_ns)) {
        kb_errf(err, errlen, "link '%s': latency must be >= 0 ns, got %g", name,
             p->latency_ns);
        return SIM_EINVAL;
    }
    if (!(p->overhead_ns >= 0) || isinf(p->overhead_ns)) {
        kb_errf(err, errlen, "link '%s': overhead must be >= 0 ns, got %g", name,
             p->overhead_ns);
        return SIM_EINVAL;
    }
    if (p->flit_bytes == 0) {
        kb_errf(err, errlen, "link '%s': flit size must be > 0 bytes, got 0",
             name);
        return SIM_EINVAL;
    }
    if (!p->buffer_flits)
        return 0;
    if (p->buffer_flits > KB_LINK_MAX_BUFFER_FLITS) {
        kb_errf(err, errlen, "link '%s': buffer must be 1..%d flits, got %u", name,
                KB_LINK_MAX_BUFFER_FLITS, p->buffer_flits);
        return SIM_EINVAL;
    }
    if (p->vc_classes < 1 || p->vc_classes > KB_LINK_MAX_VCS) {
        kb_errf(err, errlen, "link '%s': VC classes must be 1..%d, got %u", name,
                KB_LINK_MAX_VCS, p->vc_classes);
        return SIM_EINVAL;
    }
    if (p->vcs < p->vc_classes || p->vcs > KB_LINK_MAX_VCS) {
        kb_errf(err, errlen, "link '%s': %u virtual channel%s for %u VC class%s: "
                "need %u..%d (one VC per class at least)", name, p->vcs,
                p->vcs == 1 ? "" : "s", p->vc_classes, p->vc_classes == 1 ? "" : "es",
                p->vc_classes, KB_LINK_MAX_VCS);
        return SIM_EINVAL;
    }
    if (!(p->credit_ns >= 0) || isinf(p->credit_ns)) {
        kb_errf(err, errlen, "link '%s': credit delay must be >= 0 ns, got %g", name,
                p->credit_ns);
        return SIM_EINVAL;
    }
    return 0;
}

static sim_time ns_to_ps(double ns) { return (sim_time)llround(ns * 1000.0); }

static void link_serve(struct sim *s, void *arg);
static int link_head(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now);

/* Port `out` was bound: cache the peer's interface (one load a hand-off). */
static void out_bound(void *ud, struct sim_port *p)
{
    kb_link_set_out(ud, sim_port_peer_iface(p, 0));
}

/* l's rarely used part, made on first use; NULL when out of memory. */
static struct kb_link_ext *ext_of(struct kb_link *l)
{
    if (!l->ext && (l->ext = calloc(1, sizeof *l->ext))) {
        l->ext->in_if = (struct kb_flit_if){l, link_head, NULL};
        l->ext->trk = -1;
    }
    return l->ext;
}

/* The link's ports "name.in" (its export) and "name.out" (decision 0038). */
static int make_ports(struct sim *s, struct kb_link *l, const char *name, char *err,
                      size_t errlen)
{
    struct kb_link_ext *x = ext_of(l);
    if (!x) {
        kb_errf(err, errlen, "link '%s': out of memory", name);
        return SIM_ENOMEM;
    }
    /* each once: the fabric calls again after running out of memory */
    if (!x->in_port) {
        x->in_port = kb_port_new(s, NULL, name, "in", SIM_PORT_IN, KB_FLIT_IF, 0, 1, err, errlen);
        if (!x->in_port)
            return SIM_ENOMEM;
        sim_port_set_iface(x->in_port, &x->in_if);
    }
    if (!x->out_port) {
        x->out_port =
            kb_port_new(s, NULL, name, "out", SIM_PORT_OUT, KB_FLIT_IF, 1, 1, err, errlen);
        if (!x->out_port)
            return SIM_ENOMEM;
        sim_port_on_bind(x->out_port, out_bound, l);
    }
    return 0;
}

struct kb_link_kind *kb_link_kind_new(struct sim *s, const struct kb_link_params *p,
                                      const char *name, char *err, size_t errlen)
{
    if (kb_link_params_check(p, name, err, errlen) < 0)
        return NULL;
    struct kb_link_kind *k = calloc(1, sizeof *k);
    if (!k) {
        kb_errf(err, errlen, "link '%s': out of memory", name);
        return NULL;
    }
    k->p = *p;
    k->ps_per_byte = 1000.0 / p->bw_gbps;
    k->ser_full = sim_round_ps((double)p->flit_bytes * k->ps_per_byte);
    k->lat_ps = ns_to_ps(p->latency_ns);
    k->ovh_ps = ns_to_ps(p->overhead_ns);
    k->sim = s;
    return k;
}

void kb_link_kind_free(struct kb_link_kind *k) { free(k); }

/* Links by the chunk, each on its own cache lines: the first POOL_SMALL
 * links in chunks of POOL_CHUNK, then chunks of POOL_BIG links, 2 MiB
 * each, aligned and marked for transparent huge pages where the system
 * has them. A hop touches two links far apart in memory (decision 0054):
 * at system scale, with 4 KiB pages, most of those touches also missed
 * the TLB. */
static_assert(sizeof(struct kb_link) % 64 == 0, "a link is whole cache lines");
static_assert(offsetof(struct kb_link_msg, done) == 56,
              "what a hop reads of a message is its first 64 bytes (link.h)");
static_assert(offsetof(struct kb_link, heap_in) == 64 && offsetof(struct kb_link, n_fifo) == 128 &&
                  offsetof(struct kb_link, fifo) == 192 && sizeof(struct kb_link) == 256,
              "the lines of struct kb_link are those link_impl.h states");
#define POOL_CHUNK 64
#define POOL_SMALL 8192 /* in POOL_SMALL / POOL_CHUNK chunks */
#define POOL_BIG 8192   /* links in a 2 MiB chunk */
#define POOL_BIG_BYTES ((size_t)POOL_BIG * sizeof(struct kb_link))
static_assert(POOL_BIG_BYTES == KB_HUGE_PAGE, "a big chunk is one 2 MiB page");

/* A 2 MiB-aligned chunk of POOL_BIG_BYTES, NULL when out of memory. */
static struct kb_link *big_chunk_new(void)
{
    struct kb_link *p = aligned_alloc(KB_HUGE_PAGE, POOL_BIG_BYTES);
    if (p)
        kb_huge_hint(p, POOL_BIG_BYTES);
    return p;
}

struct kb_link_pool {
    struct kb_link **chunks;
    size_t n_chunks, cap_chunks;
    size_t used; /* links handed out of the last chunk */
};

struct kb_link_pool *kb_link_pool_new(void) { return calloc(1, sizeof(struct kb_link_pool)); }

void kb_link_pool_free(struct kb_link_pool *pool)
{
    if (!pool)
        return;
    for (size_t i = 0; i < pool->n_chunks; i++)
        free(pool->chunks[i]);
    free(pool->chunks);
    free(pool);
}

size_t kb_link_pool_count(const struct kb_link_pool *pool)
{
    size_t n = pool->n_chunks, small = POOL_SMALL / POOL_CHUNK;
    if (!n)
        return 0;
    if (n <= small)
        return (n - 1) * POOL_CHUNK + pool->used;
    return POOL_SMALL + (n - 1 - small) * POOL_BIG + pool->used;
}

struct kb_link *kb_link_pool_at(const struct kb_link_pool *pool, size_t i)
{
    if (i < POOL_SMALL)
        return &pool->chunks[i / POOL_CHUNK][i % POOL_CHUNK];
    i -= POOL_SMALL;
    return &pool->chunks[POOL_SMALL / POOL_CHUNK + i / POOL_BIG][i % POOL_BIG];
}

static struct kb_link *pool_take(struct kb_link_pool *pool)
{
    size_t small = POOL_SMALL / POOL_CHUNK;
    if (!pool->n_chunks || pool->used == (pool->n_chunks > small ? POOL_BIG : POOL_CHUNK)) {
        bool big = pool->n_chunks >= small; /* the chunk made now */
        if (pool->n_chunks == pool->cap_chunks) {
            size_t cap = pool->cap_chunks ? 2 * pool->cap_chunks : 16;
            struct kb_link **c = realloc(pool->chunks, cap * sizeof *c);
            if (!c)
                return NULL;
            pool->chunks = c;
            pool->cap_chunks = cap;
        }
        struct kb_link *chunk = big ? big_chunk_new()
                                    : aligned_alloc(64, POOL_CHUNK * sizeof *chunk);
        if (!chunk)
            return NULL;
        pool->chunks[pool->n_chunks++] = chunk;
        pool->used = 0;
    }
    struct kb_link *l = &pool->chunks[pool->n_chunks - 1][pool->used++];
    memset(l, 0, sizeof *l);
    l->pooled = 1;
    return l;
}

/* Fills the zeroed link l of kind k; -1 (l freed) on error. */
static int link_init(struct kb_link *l, const struct kb_link_kind *k, bool owns_kind,
                     const char *name, char *err, size_t errlen)
{
    struct sim *s = k->sim;
    l->k = k;
    l->cap_heap = LINK_INLINE;
    l->fifo = l->fifo_in;
    l->cap_fifo = LINK_INLINE; /* a power of two: indices are masked */
    l->wake_req = SIM_FOREVER;
    struct sim_trace *tr = sim_tracer(s);
    l->credit = k->p.buffer_flits != 0;
    if (tr || l->credit || owns_kind) {
        struct kb_link_ext *x = ext_of(l);
        if (!x || (l->credit && !(x->cr = kb_link_credit_new(&k->p)))) {
            kb_errf(err, errlen, "link '%s': out of memory", name);
            if (x)
                x->owns_kind = owns_kind;
            else if (owns_kind)
                free((void *)k);
            kb_link_free(l);
            return -1;
        }
        x->tr = tr;
        x->owns_kind = owns_kind;
        if (l->credit)
            x->in_if = (struct kb_flit_if){l, kb_link_credit_head, kb_link_credit_flit};
    }
    l->traced = tr != NULL;
    /* the process keeps the link's name; its wake-ups are timed
     * activations of the process itself (sim_method_wake), no event */
    l->proc = sim_method(s, name, l->credit ? kb_link_credit_serve : link_serve, l, true);
    if (!l->proc) {
        kb_errf(err, errlen, "link '%s': %s", name, sim_errmsg(s));
        kb_link_free(l);
        return -1;
    }
    return 0;
}

struct kb_link *kb_link_new(struct sim *s, const char *name,
                            const struct kb_link_params *p, char *err,
                            size_t errlen)
{
    struct kb_link_kind *k = kb_link_kind_new(s, p, name, err, errlen);
    if (!k)
        return NULL;
    struct kb_link *l = aligned_alloc(64, sizeof *l);
    if (!l) {
        kb_errf(err, errlen, "link '%s': out of memory", name);
        free(k);
        return NULL;
    }
    memset(l, 0, sizeof *l);
    if (link_init(l, k, true, name, err, errlen) < 0)
        return NULL;
    if (make_ports(s, l, name, err, errlen) < 0) {
        kb_link_free(l);
        return NULL;
    }
    return l;
}

int kb_link_make_ports(struct kb_link *l, char *err, size_t errlen)
{
    return make_ports(l->k->sim, l, kb_link_name(l), err, errlen);
}

void kb_link_set_out(struct kb_link *l, const struct kb_flit_if *out)
{
    l->out = out;
    l->routed = out && out->head == kb_link_route_head;
}

struct kb_link *kb_link_new_unported(const struct kb_link_kind *k, struct kb_link_pool *pool,
                                     const char *name, char *err, size_t errlen)
{
    struct kb_link *l = pool_take(pool);
    if (!l) {
        kb_errf(err, errlen, "link '%s': out of memory", name);
        return NULL;
    }
    if (link_init(l, k, false, name, err, errlen) < 0) {
        pool->used--; /* the slot goes back */
        return NULL;
    }
    return l;
}

void kb_link_free(struct kb_link *l)
{
    if (!l)
        return;
    if (l->cap_heap != LINK_INLINE)
        free(l->heap_out);
    if (l->fifo != l->fifo_in)
        free(l->fifo);
    if (l->ext) {
        kb_link_credit_free(l->ext->cr);
        if (l->ext->owns_kind)
            free((void *)l->k);
        free(l->ext);
    }
    if (!l->pooled)
        free(l);
}

const char *kb_link_name(const struct kb_link *l) { return sim_proc_name(l->proc); }
struct sim_port *kb_link_in_port(const struct kb_link *l)
{
    return l->ext ? l->ext->in_port : NULL;
}
struct sim_port *kb_link_out_port(const struct kb_link *l)
{
    return l->ext ? l->ext->out_port : NULL;
}
const struct kb_flit_if *kb_link_in(const struct kb_link *l)
{
    struct kb_link_ext *x = ext_of((struct kb_link *)l);
    return x ? &x->in_if : NULL;
}
const struct kb_link_params *kb_link_params(const struct kb_link *l)
{
    return &l->k->p;
}

sim_time kb_link_ser_ps(const struct kb_link *l, uint64_t bytes)
{
    return sim_round_ps((double)bytes * l->k->ps_per_byte);
}

sim_time kb_link_latency_ps(const struct kb_link *l) { return l->k->lat_ps; }
sim_time kb_link_overhead_ps(const struct kb_link *l) { return l->k->ovh_ps; }

/* ---- the arrival heap -------------------------------------------------- */

static int arr_before(const struct arrival *a, const struct arrival *b)
{
    return a->t < b->t || (a->t == b->t && (int32_t)(a->seq - b->seq) < 0);
}

static int heap_push(struct kb_link *l, sim_time t, struct kb_link_msg *m,
                     uint32_t hop)
{
    if (l->n_heap == l->cap_heap) {
        uint32_t cap = 2 * l->cap_heap;
        if (cap < l->cap_heap)
            return SIM_ENOMEM;
        bool in = l->cap_heap == LINK_INLINE;
        struct arrival *h = in ? malloc(cap * sizeof *h) : realloc(l->heap_out, cap * sizeof *h);
        if (!h)
            return SIM_ENOMEM;
        if (in)
            memcpy(h, l->heap_in, sizeof l->heap_in);
        l->heap_out = h;
        l->cap_heap = cap;
    }
    struct arrival a = {t, m, hop, l->seq++}, *heap = link_heap(l);
    size_t i = l->n_heap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!arr_before(&a, &heap[up]))
            break;
        heap[i] = heap[up];
        i = up;
    }
    heap[i] = a;
    if (i == 0) /* the first to arrive now */
        l->next_hint = m->next_link;
    return 0;
}

static struct arrival heap_pop(struct kb_link *l)
{
    l->next_hint = NULL; /* it named this head's next link (heap_push sets it again) */
    struct arrival *heap = link_heap(l);
    struct arrival top = heap[0];
    struct arrival last = heap[--l->n_heap];
    size_t n = l->n_heap, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && arr_before(&heap[c + 1], &heap[c]))
            c++;
        if (!arr_before(&heap[c], &last))
            break;
        heap[i] = heap[c];
        i = c;
    }
    if (n)
        heap[i] = last;
    return top;
}

static int fifo_push(struct kb_link *l, struct kb_link_msg *m, uint32_t hop)
{
    if (l->n_fifo == l->cap_fifo) {
        uint32_t cap = 2 * l->cap_fifo; /* a power of two: indices are masked */
        if (cap < l->cap_fifo)
            return SIM_ENOMEM;
        struct waiting *w = malloc(cap * sizeof *w);
        if (!w)
            return SIM_ENOMEM;
        for (size_t i = 0; i < l->n_fifo; i++)
            w[i] = l->fifo[(l->fifo_head + i) & (l->cap_fifo - 1)];
        if (l->fifo != l->fifo_in)
            free(l->fifo);
        l->fifo = w;
        l->cap_fifo = cap;
        l->fifo_head = 0;
    }
    l->fifo[(l->fifo_head + l->n_fifo++) & (l->cap_fifo - 1)] =
        (struct waiting){m, hop};
    return 0;
}

/* ---- worm movement ----------------------------------------------------- */

/* Makes `t` (absolute, >= now) a wake-up time of l. The link asks the
 * kernel for a timed activation of its process (sim_method_wake) only when
 * t is earlier than the one pending, wake_req; the activation served voids
 * any later one, and link_serve asks again for the next time it needs each
 * time it runs, so no due time is lost. Only the link's own code wakes its
 * process, so wake_req mirrors the kernel's pending time and spares the
 * call when a head arrives as the link frees up. */
void kb_link_wake_at(struct kb_link *l, sim_time t, sim_time now)
{
    if (l->wake_req <= t)
        return;
    l->wake_req = t;
    sim_method_wake(l->proc, t - now);
}

/* release() of a worm whose tail's wake-up was not made: the worm may
 * have left the fabric since, and its counts are in st already, so only
 * line 0 is touched */
static void release_lazy(struct kb_link *l)
{
    l->lazy = false;
    l->cur = NULL;
}

/* The tail's wake-up. When a worm's last flit starts (cur_tail) the link
 * releases it and asks for its next time. If by then nothing waits for
 * the link, the worm is not the last hop's (whose release calls done) and
 * the link is not traced, that activation does nothing another process
 * can see (the worm's counts are kept from its start), and asks for
 * nothing. So the link
 * does not ask for it: it reserves the sequence number the wake-up would
 * have taken (sim_seq_reserve) and sets lazy. What happens next decides,
 * exactly as the activation would have gone (decision 0032):
 * - a head due before cur_tail: that earlier activation would have voided
 *   the tail's one, which is dropped, and the head is posted as usual;
 * - a head due at or after cur_tail, posted before the tail's activation
 *   would have run: the wake-up is made with its reserved number
 *   (sim_method_wake_reserved), in its place among the equal-time ones;
 * - posted after it would have run, or an observer asking after it
 *   (backlog, stats): the release is done now, and nothing asked. */
static void catch_up(struct kb_link *l)
{
    if (l->lazy && sim_seq_passed(l->k->sim, l->cur_tail, l->lazy_seq))
        release_lazy(l);
}

static int settle(struct kb_link *l, sim_time t)
{
    if (t < l->cur_tail) {
        l->lazy = false;
        return 0;
    }
    catch_up(l); /* the common case, told without reading the process */
    if (!l->lazy)
        return 0;
    int rc = sim_method_wake_reserved(l->proc, l->cur_tail, l->lazy_seq);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        l->lazy = false;
        l->wake_req = l->cur_tail;
    } else {
        release_lazy(l);
    }
    return 0;
}

static int post(struct kb_link *l, sim_time t, sim_time now,
                struct kb_link_msg *m, uint32_t hop)
{
    /* the wake-up reads the process: its line comes while the arrival is
     * written */
    __builtin_prefetch(l->proc);
    if (l->lazy && settle(l, t) < 0)
        return SIM_ENOMEM;
    if (heap_push(l, t, m, hop) < 0)
        return SIM_ENOMEM;
    kb_link_wake_at(l, t, now);
    return 0;
}

/* kb_flit_if.head of a wormhole_unbounded link: the head joins the
 * arrivals at t. */
static int link_head(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now)
{
    return post(ctx, t, now, m, hop);
}

int kb_link_route_head(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now)
{
    (void)ctx;
    struct kb_link *nl = m->path[hop];
    if (!nl->credit) /* the common case, without the call */
        return post(nl, t, now, m, hop);
    return kb_link_credit_head(nl, m, hop, t, now);
}

void kb_link_route_flit(void *ctx, struct kb_link_msg *m, uint32_t hop, sim_time t, sim_time now)
{
    (void)ctx;
    kb_link_credit_flit(m->path[hop], m, hop, t, now);
}

int kb_link_inject(struct kb_link_msg *m)
{
    if (m->n_hops == 0 || m->n_flits == 0)
        return SIM_EINVAL;
    struct kb_link *l = m->path[0];
    if (l->credit)
        return kb_link_credit_inject(m);
    sim_time now = sim_now(l->k->sim);
    m->next_link = m->n_hops > 1 ? m->path[1] : NULL;
    /* The source holds the whole message: the body is at the first input
     * already, only the head has to pass through arbitration. */
    return post(l, now + l->k->ovh_ps, now, m, 0);
}

int kb_link_credit_mode(const struct kb_link *l) { return l->credit; }

int kb_link_backlog(const struct kb_link *l)
{
    if (l->credit)
        return kb_link_credit_backlog(l->ext->cr);
    catch_up((struct kb_link *)l);
    return (int)(l->n_heap + l->n_fifo) + (l->cur != NULL);
}

/* ser() of a full flit of m, as the links charge it */
static sim_time full_ser(const struct kb_link *l, const struct kb_link_msg *m)
{
    return m->flit_bytes == l->k->p.flit_bytes ? l->k->ser_full
                                               : kb_link_ser_ps(l, m->flit_bytes);
}

/* m's head starts on hop j now: works out when each of its flits starts
 * here (the rule above), reserves the link to the end of the last one and
 * sends the head on. The lines not yet merged are kept compact, as
 * m->n_lines pairs (line, slope d_k) in m->body in the order of their
 * hops, so a hop reads only the live ones (a merged line never returns;
 * the maximum over the lines does not depend on their order), and
 * m->last_in holds the last flit's arrival at hop j; on hop 0 the whole
 * body is at the source before the head starts, so nothing bounds it. */
static int acquire(struct kb_link *l, struct kb_link_msg *m, uint32_t j,
                   sim_time now)
{
    /* The next link's lines, which the hand-off below reads (line 0) and
     * writes (line 1), come while the worm's stream is worked out. Its
     * address is in m's first line (a hint: a head from a credit-mode
     * link has none), the path is read beside it. */
    if (m->next_link) {
        __builtin_prefetch(m->next_link);
        __builtin_prefetch((const char *)m->next_link + 64, 1);
        __builtin_prefetch(m->next_link->proc);
    }
    struct kb_link *nl = j + 1 < m->n_hops ? m->path[j + 1] : NULL;
    uint64_t n = m->n_flits;
    sim_time d = full_ser(l, m), dl = kb_link_ser_ps(l, m->last_bytes), lat = l->k->lat_ps;
    sim_time tail = now; /* S_{n-1} */
    if (n >= 2) {
        sim_time last_in = j ? m->last_in : 0;
        sim_time before = now; /* S_{n-2} */
        if (n >= 3) {
            uint64_t span = n - 3; /* i - 1 at i = n - 2 */
            sim_time v = now + d;  /* this hop's line, S_0 + i·d at i = 1 */
            sim_time *ln = m->body;
            uint32_t keep = 0;
            for (uint32_t i = 0; i < m->n_lines; i++) {
                sim_time at0 = ln[2 * i], dk = ln[2 * i + 1];
                if (dk > d) { /* slower than this link: its newest flit decides */
                    sim_time at = at0 + span * dk;
                    if (at > before)
                        before = at;
                    ln[2 * keep] = at0 + d + lat;
                    ln[2 * keep + 1] = dk;
                    keep++;
                } else if (at0 > v) { /* merges with this hop's line */
                    v = at0;
                }
            }
            if (v + span * d > before)
                before = v + span * d;
            ln[2 * keep] = v + d + lat;
            ln[2 * keep + 1] = d;
            m->n_lines = keep + 1;
        }
        tail = last_in > before + d ? last_in : before + d;
    }
    l->cur = m;
    l->cur_hop = j;
    if (l->traced)
        l->ext->cur_start = now;
    l->cur_tail = tail;
    l->free_at = tail + dl;
    /* counted now, in the line this touches anyway (link_impl.h) */
    l->cur_busy = (n - 1) * d + dl;
    l->cur_bytes = kb_link_msg_bytes(m);
    l->cur_flits = n;
    l->st.messages++;
    l->st.bytes += l->cur_bytes;
    l->st.flits += n;
    l->st.busy_ps += l->cur_busy;
    if (!nl)
        return 0;
    m->last_in = l->free_at + lat;
    m->next_link = j + 2 < m->n_hops ? m->path[j + 2] : NULL;
    sim_time head = now + (n == 1 ? dl : d) + lat + nl->k->ovh_ps;
    /* through port `out`: the node at the far end hands the head to the
     * route's next link (a fabric's node without reading `out`) */
    if (l->routed)
        return kb_link_route_head(NULL, m, j + 1, head, now);
    return l->out->head(l->out->ctx, m, j + 1, head, now);
}

/* The worm's occupancy of the link, from its acquisition to the end of
 * its last flit, as a trace span named by its size. */
static void trace_msg(struct kb_link *l, const struct kb_link_msg *m)
{
    struct kb_link_ext *x = l->ext;
    if (x->trk < 0)
        x->trk = sim_trace_track_path(x->tr, kb_link_name(l));
    uint64_t bytes = kb_link_msg_bytes(m);
    char name[32];
    snprintf(name, sizeof name, "%" PRIu64 " B", bytes);
    const struct sim_trace_arg a[] = {
        {"bytes", NULL, bytes},
        {"flits", NULL, m->n_flits},
        {"hop", NULL, l->cur_hop},
        {"first_link", kb_link_name(m->path[0]), 0},
        {"last_link", kb_link_name(m->path[m->n_hops - 1]), 0},
    };
    sim_trace_span(x->tr, x->trk, "link", name, x->cur_start, l->free_at, a,
                   (int)(sizeof a / sizeof a[0]));
}

/* The worm's last flit starts now (it was counted when it started): the
 * link is free for the next worm from free_at on, when that flit is
 * serialised. */
static void release(struct kb_link *l)
{
    struct kb_link_msg *m = l->cur;
    if (l->traced)
        trace_msg(l, m);
    /* nothing here refers to m any more */
    l->cur = NULL;
    if (l->cur_hop + 1 == m->n_hops)
        m->done(m, l->free_at + l->k->lat_ps);
}

static void link_serve(struct sim *s, void *arg)
{
    struct kb_link *l = arg;
    sim_time now = sim_now(s);
    /* lines 1-2 are read and written below: fetched together with line 0,
     * and the next link of the head that arrived first (acquire) */
    __builtin_prefetch((const char *)l + 64, 1);
    __builtin_prefetch((const char *)l + 128, 1);
    if (l->next_hint) {
        __builtin_prefetch(l->next_hint);
        __builtin_prefetch((const char *)l->next_hint + 64, 1);
        /* and its process, which the hand-off wakes: its address comes
         * with line 0 while this activation runs */
        __builtin_prefetch(l->next_hint->proc);
    }
    l->wake_req = SIM_FOREVER; /* the pending notification is the one served */

    /* The heads due by now join the waiting ones in arrival order. The
     * first goes straight to the link when nothing waits before it and
     * the link is free (the common case: the waiting heads' line is not
     * touched); it starts before the loop as it would in it. */
    struct arrival first = {0};
    if (l->n_heap && link_heap(l)[0].t <= now) {
        first = heap_pop(l);
        __builtin_prefetch(first.m); /* the 64 bytes a hop reads */
        if (l->n_fifo || l->cur || l->free_at > now) {
            if (fifo_push(l, first.m, first.hop) < 0)
                goto nomem;
            first.m = NULL;
        }
    }
    while (l->n_heap && link_heap(l)[0].t <= now) {
        struct arrival a = heap_pop(l);
        if (fifo_push(l, a.m, a.hop) < 0)
            goto nomem;
    }
    if (first.m && acquire(l, first.m, first.hop, now) < 0) {
        sim_fail(s, "link '%s': out of memory", kb_link_name(first.m->path[first.hop + 1]));
        return;
    }

    for (;;) {
        if (l->cur) {
            if (l->cur_tail > now)
                break;
            release(l);
            continue;
        }
        if (l->free_at > now || !l->n_fifo)
            break;
        struct waiting w = l->fifo[l->fifo_head];
        l->fifo_head = (l->fifo_head + 1) & (l->cap_fifo - 1);
        l->n_fifo--;
        if (acquire(l, w.m, w.hop, now) < 0) {
            sim_fail(s, "link '%s': out of memory",
                     kb_link_name(w.m->path[w.hop + 1]));
            return;
        }
    }

    sim_time t = SIM_FOREVER;
    if (l->cur) {
        if (!l->n_fifo && !l->n_heap && !l->traced && l->cur_hop + 1 != l->cur->n_hops) {
            /* the tail's wake-up would carry no work: see catch_up */
            l->lazy_seq = sim_seq_reserve(s);
            l->lazy = true;
            return;
        }
        t = l->cur_tail;
    } else if (l->n_fifo)
        t = l->free_at;
    if (l->n_heap && link_heap(l)[0].t < t)
        t = link_heap(l)[0].t;
    if (t != SIM_FOREVER)
        kb_link_wake_at(l, t, now);
    return;
nomem:
    sim_fail(s, "link '%s': out of memory", kb_link_name(l));
}

/* The counts without those of a worm holding the link and not released
 * yet (they are added when it starts: link_impl.h). */
static struct kb_link_stats released_stats(const struct kb_link *l)
{
    struct kb_link_stats st = l->st;
    if (!l->credit && l->cur) {
        st.bytes -= l->cur_bytes;
        st.flits -= l->cur_flits;
        st.busy_ps -= l->cur_busy;
    }
    return st;
}

void kb_link_get_stats(const struct kb_link *l, struct kb_link_stats *out)
{
    catch_up((struct kb_link *)l);
    *out = released_stats(l);
}

double kb_link_utilisation(const struct kb_link *l, sim_time elapsed)
{
    catch_up((struct kb_link *)l);
    if (!elapsed)
        elapsed = sim_now(l->k->sim);
    return elapsed ? (double)released_stats(l).busy_ps / (double)elapsed : 0.0;
}
