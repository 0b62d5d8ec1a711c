/* evq.c — the timed event queue: a monotone FIFO beside a 4-ary heap */
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
    *q = (struct evq){0};
}

void evq_release(struct evq *q)
{
    free(q->fifo);
    free(q->heap);
    *q = (struct evq){0};
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

bool evq_push(struct evq *q, const struct evq_entry *e)
{
    if (q->fifo_len == 0 ||
        !key_less(e, &q->fifo[(q->fifo_head + q->fifo_len - 1) &
                              (q->fifo_cap - 1)])) {
        if (q->fifo_len == q->fifo_cap && !fifo_grow(q))
            return false;
        q->fifo[(q->fifo_head + q->fifo_len) & (q->fifo_cap - 1)] = *e;
        q->fifo_len++;
        return true;
    }
    return heap_push(q, e);
}

const struct evq_entry *evq_peek(const struct evq *q)
{
    const struct evq_entry *f = q->fifo_len ? &q->fifo[q->fifo_head] : NULL;
    const struct evq_entry *h = q->heap_len ? &q->heap[0] : NULL;
    if (!f)
        return h;
    if (!h)
        return f;
    return key_less(h, f) ? h : f;
}

bool evq_pop(struct evq *q, struct evq_entry *out)
{
    const struct evq_entry *m = evq_peek(q);
    if (!m)
        return false;
    *out = *m;
    if (q->fifo_len && m == &q->fifo[q->fifo_head]) {
        q->fifo_head = (q->fifo_head + 1) & (q->fifo_cap - 1);
        q->fifo_len--;
    } else {
        heap_pop(q);
    }
    return true;
}
