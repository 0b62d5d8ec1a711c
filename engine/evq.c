/* evq.c — the timed event queue: a monotone FIFO, a radix heap and a 4-ary heap */
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

void evq_init(struct evq *q)
{
    *q = (struct evq){.head_src = EVQ_UNKNOWN};
}

void evq_release(struct evq *q)
{
    free(q->fifo);
    if (q->rb)
        for (int i = 0; i < 65; i++)
            free(q->rb[i].v);
    free(q->rb);
    free(q->heap);
    *q = (struct evq){.head_src = EVQ_UNKNOWN};
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

static bool heap_push(struct evq *q, const struct evq_entry *e)
{
    if (q->heap_len == q->heap_cap) {
        size_t cap = q->heap_cap ? q->heap_cap * 2 : 64;
        struct evq_entry *n = realloc(q->heap, cap * sizeof *n);
        if (!n)
            return false;
        q->heap = n;
        q->heap_cap = cap;
    }
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
static void heap_pop(struct evq *q)
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

static bool bucket_add(struct evq *q, int i, const struct evq_entry *e)
{
    struct evq_bucket *b = &q->rb[i];
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        struct evq_entry *v = realloc(b->v, cap * sizeof *v);
        if (!v)
            return false;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = *e;
    if (i)
        q->rmask |= 1ull << (i - 1);
    return true;
}

/* Makes bucket 0 hold the radix heap's minimum time, if it has entries. */
static void radix_settle(struct evq *q)
{
    if (q->rb[0].n || !q->rmask)
        return;
    int i = __builtin_ctzll(q->rmask) + 1;
    struct evq_bucket *b = &q->rb[i];
    uint64_t m = b->v[0].t;
    for (size_t k = 1; k < b->n; k++)
        m = b->v[k].t < m ? b->v[k].t : m;
    q->rlast = m;
    q->rmask &= ~(1ull << (i - 1));
    /* every entry lands in a lower bucket, which has room: grown before */
    for (size_t k = 0; k < b->n; k++) {
        int j = bucket_of(b->v[k].t, m);
        struct evq_bucket *d = &q->rb[j];
        if (d->n == d->cap) {
            size_t cap = d->cap ? d->cap * 2 : 16;
            while (cap < d->n + b->n)
                cap *= 2;
            struct evq_entry *v = realloc(d->v, cap * sizeof *v);
            if (!v)
                abort(); /* the kernel treats memory exhaustion as fatal */
            d->v = v;
            d->cap = cap;
        }
        d->v[d->n++] = b->v[k];
        if (j)
            q->rmask |= 1ull << (j - 1);
    }
    b->n = 0;
}

bool evq_push(struct evq *q, const struct evq_entry *e)
{
    q->head_src = EVQ_UNKNOWN;
    if (q->fifo_len == 0 ||
        !key_less(e, &q->fifo[(q->fifo_head + q->fifo_len - 1) &
                              (q->fifo_cap - 1)])) {
        if (q->fifo_len == q->fifo_cap && !fifo_grow(q))
            return false;
        q->fifo[(q->fifo_head + q->fifo_len) & (q->fifo_cap - 1)] = *e;
        q->fifo_len++;
        return true;
    }
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

/* Finds the structure holding the smallest time (EVQ_FIFO, EVQ_RADIX,
 * EVQ_HEAP; EVQ_NONE when empty) and remembers it until the next push or
 * pop, so that a peek, a pop and the next peek look it up once. */
static int find_head(struct evq *q)
{
    int which = EVQ_NONE;
    uint64_t best = 0;
    if (q->fifo_len) {
        which = EVQ_FIFO;
        best = q->fifo[q->fifo_head].t;
    }
    if (q->rlen) {
        radix_settle(q);
        if (which == EVQ_NONE || q->rlast < best) {
            which = EVQ_RADIX;
            best = q->rlast;
        }
    }
    if (q->heap_len && (which == EVQ_NONE || q->heap[0].t < best))
        which = EVQ_HEAP;
    q->head_src = which;
    return which;
}

static inline int head_src(struct evq *q)
{
    return q->head_src != EVQ_UNKNOWN ? q->head_src : find_head(q);
}

const struct evq_entry *evq_peek(struct evq *q)
{
    switch (head_src(q)) {
    case EVQ_FIFO:
        return &q->fifo[q->fifo_head];
    case EVQ_RADIX:
        return &q->rb[0].v[q->rb[0].n - 1];
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
        if (--q->fifo_len && !q->rlen && !q->heap_len)
            q->head_src = EVQ_FIFO; /* the common case: a FIFO only */
        return true;
    case EVQ_RADIX:
        *out = q->rb[0].v[--q->rb[0].n];
        q->rlen--;
        return true;
    case EVQ_HEAP:
        *out = q->heap[0];
        heap_pop(q);
        return true;
    }
    return false;
}

bool evq_pop_at(struct evq *q, uint64_t t, struct evq_entry *out)
{
    const struct evq_entry *e = evq_peek(q);
    if (!e || e->t != t)
        return false;
    return evq_pop(q, out);
}
