/* evq.c — the timed event queue: a monotone FIFO beside a binary heap */
#include "evq.h"

#include <stdlib.h>

static inline bool key_less(const struct evq_entry *a,
                            const struct evq_entry *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
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
    size_t i = q->heap_len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!key_less(e, &q->heap[parent]))
            break;
        q->heap[i] = q->heap[parent];
        i = parent;
    }
    q->heap[i] = *e;
    return true;
}

/* Floyd's variant: walk the hole down to a leaf along smaller children,
 * then sift the last element up from there; fewer compares than a
 * classic sift-down because the last element usually belongs low. */
static void heap_pop(struct evq *q)
{
    size_t n = --q->heap_len;
    if (n == 0)
        return;
    struct evq_entry last = q->heap[n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && key_less(&q->heap[c + 1], &q->heap[c]))
            c++;
        q->heap[i] = q->heap[c];
        i = c;
    }
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!key_less(&last, &q->heap[parent]))
            break;
        q->heap[i] = q->heap[parent];
        i = parent;
    }
    q->heap[i] = last;
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
