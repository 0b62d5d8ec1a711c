/* evq.c — the timed event queue: a monotone FIFO, a timing wheel, a radix heap and a 4-ary heap */
#include "evq.h"

#include <stdlib.h>

/* Entries are ordered by time alone: one 64-bit compare per step. Entries
 * of equal time may come out in any order; the scheduler takes all
 * entries of one time together and restores their insertion order. */
typedef uint64_t evq_key;

static inline evq_key key_of(const struct evq_entry *e)
{
    return e->t;
}

static inline bool key_less(const struct evq_entry *a,
                            const struct evq_entry *b)
{
    return a->t < b->t;
}

/* The wheel's first bucket width, 1.024 ns: delays of a few ns to a
 * microsecond, the common case, then fall in the wheel at once. */
#define WSHIFT_INIT 10
#define WSHIFT_MAX 40
/* pushes between two looks at the wheel's width, and the looks after a
 * narrowing during which it does not widen again (a mix of very short and
 * very long delays would otherwise flip it back and forth) */
#define ADAPT_EVERY EVQ_ADAPT_EVERY
/* With more entries pending than this, 1024 buckets cannot be both narrow
 * enough to stay short and wide enough to hold the near future: new
 * entries go to the radix heap, whose cost grows only with the bits of
 * the delays (measured: 100,000 pending, the wheel 1.5-2x slower). */
#define WHEEL_MAX_LEN EVQ_WHEEL_MAX_LEN
#define ADAPT_HOLD 8

void evq_init(struct evq *q)
{
    *q = (struct evq){.head_src = EVQ_UNKNOWN, .wshift = WSHIFT_INIT,
                      .free_node = EVQ_NIL};
}

void evq_release(struct evq *q)
{
    free(q->fifo);
    if (q->rb)
        for (int i = 0; i < 65; i++)
            free(q->rb[i].v);
    free(q->rb);
    free(q->heap);
    free(q->whead);
    free(q->nodes);
    *q = (struct evq){.head_src = EVQ_UNKNOWN, .wshift = WSHIFT_INIT,
                      .free_node = EVQ_NIL};
}

static bool fifo_grow(struct evq *q)
{
    size_t cap = q->fifo_cap ? q->fifo_cap * 2 : 64;
    struct evq_entry *n = malloc(cap * sizeof *n);
    if (!n)
        return false;
    for (size_t i = 0; i < q->fifo_len; i++)
        n[i] = q->fifo[(q->fifo_head + i) & (q->fifo_cap - 1)];
    free(q->fifo);
    q->fifo = n;
    q->fifo_cap = cap;
    q->fifo_head = 0;
    return true;
}

/* A 4-ary heap: half the depth of a binary one, and the smallest of four
 * children is picked without branches, which matters on machines where a
 * mispredicted branch costs more than the comparisons. */
#define ARITY 4

/* Room for `need` entries in the array *v of *cap (first size `first`);
 * its contents stay as they are whether or not it succeeds. */
static bool entries_reserve(struct evq_entry **v, size_t *cap, size_t need,
                            size_t first)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap * 2 : first;
    while (n < need)
        n *= 2;
    struct evq_entry *p = realloc(*v, n * sizeof *p);
    if (!p)
        return false;
    *v = p;
    *cap = n;
    return true;
}

static bool heap_reserve(struct evq *q, size_t need)
{
    return entries_reserve(&q->heap, &q->heap_cap, need, 64);
}

static bool heap_push(struct evq *q, const struct evq_entry *e)
{
    if (!heap_reserve(q, q->heap_len + 1))
        return false;
    evq_key k = key_of(e);
    size_t i = q->heap_len++;
    while (i > 0) {
        size_t parent = (i - 1) / ARITY;
        if (k >= key_of(&q->heap[parent]))
            break;
        q->heap[i] = q->heap[parent];
        i = parent;
    }
    q->heap[i] = *e;
    return true;
}

/* Floyd's variant: walk the hole down to a leaf along the smallest child,
 * then sift the last element up from there; the last element usually
 * belongs low, so this saves comparisons against it. */
static __attribute__((noinline)) void heap_pop(struct evq *q)
{
    size_t n = --q->heap_len;
    if (n == 0)
        return;
    struct evq_entry *h = q->heap;
    struct evq_entry last = h[n];
    evq_key lk = key_of(&last);
    size_t i = 0;
    for (;;) {
        size_t c = ARITY * i + 1;
        if (c >= n)
            break;
        size_t best;
        if (c + 3 < n) {
            /* all four children: a two-round tournament, so the chain of
             * dependent compares is two long, not three */
            evq_key k0 = key_of(&h[c]), k1 = key_of(&h[c + 1]);
            evq_key k2 = key_of(&h[c + 2]), k3 = key_of(&h[c + 3]);
            size_t a = k1 < k0 ? c + 1 : c, b = k3 < k2 ? c + 3 : c + 2;
            evq_key ka = k1 < k0 ? k1 : k0, kb = k3 < k2 ? k3 : k2;
            best = kb < ka ? b : a;
        } else {
            best = c;
            evq_key bk = key_of(&h[c]);
            for (size_t j = c + 1; j < n; j++) {
                evq_key kj = key_of(&h[j]);
                bool lt = kj < bk;
                best = lt ? j : best;
                bk = lt ? kj : bk;
            }
        }
        h[i] = h[best];
        i = best;
    }
    while (i > 0) {
        size_t parent = (i - 1) / ARITY;
        if (lk >= key_of(&h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = last;
}

/* ---- the radix heap ---------------------------------------------------
 * Simulated time never goes back, so (nearly) every new entry is no
 * earlier than the last minimum taken, rlast. An entry goes to the bucket
 * of the highest bit in which its time differs from rlast: a push is an
 * append. When bucket 0 (time == rlast) is empty, the first non-empty
 * bucket is split: its minimum becomes rlast and its entries fall into
 * lower buckets. An entry falls at most 64 times, and there are no chains
 * of dependent compares as in a heap walk. */

static inline int bucket_of(uint64_t t, uint64_t last)
{
    return t == last ? 0 : 64 - __builtin_clzll(t ^ last);
}

static bool bucket_reserve(struct evq_bucket *b, size_t need)
{
    return entries_reserve(&b->v, &b->cap, need, 16);
}

static bool bucket_add(struct evq *q, int i, const struct evq_entry *e)
{
    struct evq_bucket *b = &q->rb[i];
    if (!bucket_reserve(b, b->n + 1))
        return false;
    b->v[b->n++] = *e;
    if (i)
        q->rmask |= 1ull << (i - 1);
    return true;
}

/* Makes bucket 0 hold the radix heap's minimum time, if it has entries.
 * False, with nothing moved, if memory ran out. */
static bool radix_settle(struct evq *q)
{
    if (q->rb[0].n || !q->rmask)
        return true;
    int i = __builtin_ctzll(q->rmask) + 1;
    struct evq_bucket *b = &q->rb[i];
    uint64_t m = b->v[0].t;
    for (size_t k = 1; k < b->n; k++)
        m = b->v[k].t < m ? b->v[k].t : m;
    /* every entry lands in a lower bucket: make room in all of them first */
    size_t count[64] = {0};
    for (size_t k = 0; k < b->n; k++)
        count[bucket_of(b->v[k].t, m)]++;
    for (int j = 0; j < i; j++)
        if (count[j] && !bucket_reserve(&q->rb[j], q->rb[j].n + count[j]))
            return false;
    q->rlast = m;
    q->rmask &= ~(1ull << (i - 1));
    for (size_t k = 0; k < b->n; k++) {
        int j = bucket_of(b->v[k].t, m);
        struct evq_bucket *d = &q->rb[j];
        d->v[d->n++] = b->v[k];
        if (j)
            q->rmask |= 1ull << (j - 1);
    }
    b->n = 0;
    return true;
}

/* ---- the timing wheel -------------------------------------------------
 * Bucket b holds the entries of one slot (time >> wshift) in a window of
 * EVQ_WBUCKETS slots starting at the slot of the last time popped, the
 * floor: every entry left is at or after the floor, so no two slots of the
 * window share a bucket. A bucket is a list sorted by time through a pool
 * of nodes, equal times in insertion order; a push appends at the tail,
 * or walks past the entries of its slot no later than it, so a batch of
 * one time costs no walk and comes out in order. A pop takes
 * the head of the first non-empty bucket from the floor's, found with the
 * bitmaps. The width adapts: when pushes walk more than two steps on
 * average the buckets halve; when more than one push in eight lands
 * beyond the window (in the radix heap) they double. A change rebuckets
 * the wheel's entries, at most once per ADAPT_EVERY pushes. */

/* Room for one more node (and the buckets, on first use). */
static __attribute__((noinline, cold)) bool wheel_grow(struct evq *q)
{
    if (!q->whead) {
        q->whead = malloc(2 * EVQ_WBUCKETS * sizeof *q->whead);
        if (!q->whead)
            return false;
        q->wtail = q->whead + EVQ_WBUCKETS;
        for (int b = 0; b < EVQ_WBUCKETS; b++)
            q->whead[b] = EVQ_NIL;
    }
    size_t cap = q->node_cap ? q->node_cap * 2 : 64;
    if (cap >= EVQ_NIL)
        return false;
    struct evq_node *n = realloc(q->nodes, cap * sizeof *n);
    if (!n)
        return false;
    for (size_t k = q->node_cap; k < cap; k++)
        n[k].next = k + 1 < cap ? (uint32_t)(k + 1) : EVQ_NIL;
    q->nodes = n;
    q->free_node = (uint32_t)q->node_cap;
    q->node_cap = cap;
    return true;
}

/* Whether time t falls in the window of buckets of 2^shift ps. */
static inline bool fits_at(const struct evq *q, uint64_t t, unsigned shift)
{
    return t >= q->floor &&
           (t >> shift) - (q->floor >> shift) < EVQ_WBUCKETS;
}

/* Whether time t falls in the wheel's window. */
static inline bool wheel_fits(const struct evq *q, uint64_t t)
{
    return fits_at(q, t, q->wshift);
}

/* Links node i (its time in the window) into its bucket, after every
 * entry of its bucket no later than it: entries of one time keep their
 * insertion order, so the scheduler, which fires them in that order, has
 * nothing to sort. The common case, a time no earlier than the bucket's
 * last, appends at the tail without a walk. */
static inline __attribute__((always_inline)) void wheel_link(struct evq *q,
                                                          uint32_t i)
{
    uint64_t t = q->nodes[i].e.t;
    uint32_t b = (uint32_t)(t >> q->wshift) & (EVQ_WBUCKETS - 1);
    uint32_t h = q->whead[b];
    if (h == EVQ_NIL) {
        q->nodes[i].next = EVQ_NIL;
        q->whead[b] = q->wtail[b] = i;
        q->wbits[b >> 6] |= 1ull << (b & 63);
        q->wsum |= 1u << (b >> 6);
    } else if (q->nodes[q->wtail[b]].e.t <= t) {
        q->nodes[i].next = EVQ_NIL;
        q->nodes[q->wtail[b]].next = i;
        q->wtail[b] = i;
    } else {
        /* earlier than the tail: the tail stays where it is */
        uint32_t *link = &q->whead[b];
        uint32_t walk = 0;
        while (q->nodes[*link].e.t <= t) {
            link = &q->nodes[*link].next;
            walk++;
        }
        q->nodes[i].next = *link;
        *link = i;
        q->a_walk += walk;
    }
    q->wlen++;
}

static inline __attribute__((always_inline)) bool
wheel_add(struct evq *q, const struct evq_entry *e)
{
    if (q->free_node == EVQ_NIL && !wheel_grow(q))
        return false;
    uint32_t i = q->free_node;
    q->free_node = q->nodes[i].next;
    q->nodes[i].e = *e;
    wheel_link(q, i);
    q->a_in++;
    return true;
}

/* The first non-empty bucket from the floor's, circularly; wlen > 0. */
static uint32_t wheel_first(const struct evq *q)
{
    uint32_t b = (uint32_t)(q->floor >> q->wshift) & (EVQ_WBUCKETS - 1);
    uint32_t w = b >> 6;
    uint64_t m = q->wbits[w] & (~0ull << (b & 63));
    if (m)
        return (w << 6) | (uint32_t)__builtin_ctzll(m);
    uint32_t later = q->wsum & ~((2u << w) - 1); /* words after w */
    w = (uint32_t)__builtin_ctz(later ? later : q->wsum);
    return (w << 6) | (uint32_t)__builtin_ctzll(q->wbits[w]);
}

static void wheel_pop_head(struct evq *q, uint32_t b, struct evq_entry *out)
{
    uint32_t i = q->whead[b];
    *out = q->nodes[i].e;
    q->whead[b] = q->nodes[i].next;
    q->nodes[i].next = q->free_node;
    q->free_node = i;
    q->wlen--;
    if (q->whead[b] == EVQ_NIL && !(q->wbits[b >> 6] &= ~(1ull << (b & 63))))
        q->wsum &= ~(1u << (b >> 6));
}

/* The radix heap, or the side heap for entries earlier than its floor. */
static bool radix_push(struct evq *q, const struct evq_entry *e)
{
    if (e->t >= q->rlast) {
        if (!q->rb && !(q->rb = calloc(65, sizeof *q->rb)))
            return false;
        if (!bucket_add(q, bucket_of(e->t, q->rlast), e))
            return false;
        q->rlen++;
        return true;
    }
    return heap_push(q, e);
}

/* Room in the radix heap (and the side heap) for every entry of the wheel
 * that a width of 2^shift ps puts out of the window; nothing moves. */
static bool rewidth_reserve(struct evq *q, unsigned shift)
{
    size_t count[65] = {0}, to_heap = 0, out = 0;
    for (uint32_t b = 0; b < EVQ_WBUCKETS; b++)
        for (uint32_t i = q->whead[b]; i != EVQ_NIL; i = q->nodes[i].next) {
            uint64_t t = q->nodes[i].e.t;
            if (fits_at(q, t, shift))
                continue;
            out++;
            if (t >= q->rlast)
                count[bucket_of(t, q->rlast)]++;
            else
                to_heap++;
        }
    if (!out)
        return true;
    if (!q->rb && !(q->rb = calloc(65, sizeof *q->rb)))
        return false;
    for (int j = 0; j < 65; j++)
        if (count[j] && !bucket_reserve(&q->rb[j], q->rb[j].n + count[j]))
            return false;
    return heap_reserve(q, q->heap_len + to_heap);
}

/* Rebuckets the wheel with buckets of 2^shift ps; entries that leave the
 * window move to the radix heap, which rewidth_reserve made room in. */
static void wheel_rewidth(struct evq *q, unsigned shift)
{
    /* every node, chained bucket by bucket in list order, so that entries
     * of one time (all in one bucket) are linked again in their order */
    uint32_t list = EVQ_NIL, *end = &list;
    for (uint32_t b = 0; b < EVQ_WBUCKETS; b++) {
        if (q->whead[b] == EVQ_NIL)
            continue;
        *end = q->whead[b];
        end = &q->nodes[q->wtail[b]].next;
        q->whead[b] = EVQ_NIL;
    }
    *end = EVQ_NIL;
    for (uint32_t w = 0; w < EVQ_WBUCKETS / 64; w++)
        q->wbits[w] = 0;
    q->wsum = 0;
    q->wlen = 0;
    q->wshift = shift;
    while (list != EVQ_NIL) {
        uint32_t i = list;
        list = q->nodes[i].next;
        if (wheel_fits(q, q->nodes[i].e.t)) {
            wheel_link(q, i);
        } else {
            radix_push(q, &q->nodes[i].e); /* cannot fail: reserved */
            q->nodes[i].next = q->free_node;
            q->free_node = i;
        }
    }
}

static void wheel_adapt(struct evq *q)
{
    unsigned shift = q->wshift;
    if (q->a_walk > 2 * q->a_in && shift > 0) {
        shift--;
        q->a_hold = ADAPT_HOLD;
    } else if (q->a_hold) {
        q->a_hold--;
    } else if (q->a_out > (q->a_in + q->a_out) / 8 && shift < WSHIFT_MAX) {
        shift++;
    }
    q->a_in = q->a_walk = q->a_out = 0;
    if (shift == q->wshift)
        return;
    /* without memory for the entries it would evict, keep the width: it
     * only tunes speed */
    if (!q->whead)
        q->wshift = shift;
    else if (rewidth_reserve(q, shift))
        wheel_rewidth(q, shift);
}

bool evq_push_any(struct evq *q, const struct evq_entry *e)
{
    /* An entry no earlier than the remembered head leaves it the head:
     * every structure keeps its head in place when a later entry joins.
     * (head_t is UINT64_MAX when only the FIFO's head is known.) */
    bool later = q->head_src >= 0 && e->t >= q->head_t;
    /* the FIFO takes a monotone run only while the wheel is empty: were
     * both in use at once, which one holds the head would change at random
     * from pop to pop, and the branch deciding it would mispredict */
    if (q->wlen == 0 &&
        (q->fifo_len == 0 ||
         !key_less(e, &q->fifo[(q->fifo_head + q->fifo_len - 1) &
                               (q->fifo_cap - 1)]))) {
        if (q->head_src != EVQ_FIFO && !later)
            q->head_src = EVQ_UNKNOWN; /* an append leaves the FIFO's head */
        if (q->fifo_len == q->fifo_cap && !fifo_grow(q))
            return false;
        q->fifo[(q->fifo_head + q->fifo_len) & (q->fifo_cap - 1)] = *e;
        q->fifo_len++;
        q->fifo_tail_t = e->t;
        return true;
    }
    if (!later)
        q->head_src = EVQ_UNKNOWN;
    if (q->a_in + q->a_out >= ADAPT_EVERY) {
        q->head_src = EVQ_UNKNOWN; /* a new width moves entries */
        wheel_adapt(q);
    }
    if (evq_size(q) < WHEEL_MAX_LEN) {
        if (wheel_fits(q, e->t))
            return wheel_add(q, e);
        if (e->t >= q->floor)
            q->a_out++;
    }
    return radix_push(q, e);
}

/* Finds the structure holding the smallest time (EVQ_FIFO, EVQ_WHEEL,
 * EVQ_RADIX, EVQ_HEAP; EVQ_NONE when empty) and remembers it, and its time,
 * until a pop or a push of an earlier entry, so that a peek, a pop and
 * the next peek look it up once. */
static __attribute__((noinline)) int find_head(struct evq *q)
{
    int which = EVQ_NONE;
    uint64_t best = 0;
    if (q->fifo_len) {
        which = EVQ_FIFO;
        best = q->fifo[q->fifo_head].t;
    }
    if (q->wlen) {
        uint32_t b = wheel_first(q);
        uint64_t t = q->nodes[q->whead[b]].e.t;
        q->head_bucket = b;
        if (which == EVQ_NONE || t < best) {
            which = EVQ_WHEEL;
            best = t;
        }
    }
    if (q->rlen) {
        if (!radix_settle(q)) {
            q->nomem = true; /* reported by evq_peek; nothing was lost */
            return EVQ_NONE;
        }
        if (which == EVQ_NONE || q->rlast < best) {
            which = EVQ_RADIX;
            best = q->rlast;
        }
    }
    if (q->heap_len && (which == EVQ_NONE || q->heap[0].t < best))
        which = EVQ_HEAP;
    q->head_src = which;
    q->head_t = best;
    return which;
}

static inline int head_src(struct evq *q)
{
    if (q->head_src != EVQ_UNKNOWN)
        return q->head_src;
    int which = find_head(q);
    if (q->nomem)
        q->head_src = EVQ_UNKNOWN; /* look again next time */
    return which;
}

const struct evq_entry *evq_peek(struct evq *q)
{
    switch (head_src(q)) {
    case EVQ_FIFO:
        return &q->fifo[q->fifo_head];
    case EVQ_WHEEL:
        return &q->nodes[q->whead[q->head_bucket]].e;
    case EVQ_RADIX:
        return &q->rb[0].v[q->r0_head];
    case EVQ_HEAP:
        return &q->heap[0];
    }
    return NULL;
}

bool evq_pop(struct evq *q, struct evq_entry *out)
{
    int which = head_src(q);
    q->head_src = EVQ_UNKNOWN;
    switch (which) {
    case EVQ_FIFO:
        *out = q->fifo[q->fifo_head];
        q->fifo_head = (q->fifo_head + 1) & (q->fifo_cap - 1);
        if (--q->fifo_len && !q->wlen && !q->rlen && !q->heap_len) {
            q->head_src = EVQ_FIFO; /* the common case: a FIFO only */
            q->head_t = UINT64_MAX;   /* its time not looked at */
        }
        break;
    case EVQ_WHEEL: {
        uint32_t b = q->head_bucket;
        wheel_pop_head(q, b, out);
        /* the wheel alone, and its first bucket not empty: that bucket
         * still holds the head (it is the one slot at the floor) */
        if (q->whead[b] != EVQ_NIL && !q->rlen && !q->heap_len && !q->fifo_len) {
            q->head_src = EVQ_WHEEL;
            q->head_t = q->nodes[q->whead[b]].e.t;
        }
        break;
    }
    case EVQ_RADIX:
        /* from the front: entries of one time come out in the order
         * they went in */
        *out = q->rb[0].v[q->r0_head++];
        if (q->r0_head == q->rb[0].n)
            q->rb[0].n = q->r0_head = 0;
        q->rlen--;
        break;
    case EVQ_HEAP:
        *out = q->heap[0];
        heap_pop(q);
        break;
    default:
        return false;
    }
    if (out->t > q->floor)
        q->floor = out->t;
    return true;
}

bool evq_pop_at(struct evq *q, uint64_t t, struct evq_entry *out)
{
    const struct evq_entry *e = evq_peek(q);
    if (!e || e->t != t)
        return false;
    return evq_pop(q, out);
}

bool evq_pop_wheel_at(struct evq *q, uint64_t t, struct evq_entry *out)
{
    if (!q->wlen || q->fifo_len || q->rlen || q->heap_len)
        return false;
    uint32_t b = q->head_src == EVQ_WHEEL ? q->head_bucket : wheel_first(q);
    if (q->nodes[q->whead[b]].e.t != t)
        return false;
    wheel_pop_head(q, b, out);
    q->head_src = EVQ_UNKNOWN;
    if (q->whead[b] != EVQ_NIL) {
        /* the wheel alone: its first bucket still holds the head */
        q->head_src = EVQ_WHEEL;
        q->head_bucket = b;
        q->head_t = q->nodes[q->whead[b]].e.t;
    }
    if (t > q->floor)
        q->floor = t;
    return true;
}
