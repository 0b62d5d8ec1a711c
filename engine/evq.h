/* evq.h — the timed event queue of the kernel (engine-internal)
 *
 * Entries come out in time order. Entries of equal time may come out in
 * any (deterministic) order: the scheduler pops all entries of a time
 * together and sorts them by seq, a per-simulation insertion counter, so
 * that ties are broken by insertion order. Comparing times alone keeps the
 * queue's work to 64-bit compares. Four structures hold them: a FIFO for
 * entries that arrive in non-decreasing time order while the wheel is
 * empty (the common case: every process waits the same delay, or one
 * clock); a timing wheel for the near
 * future (1024 buckets of 2^wshift ps each, a bucket a list sorted by
 * time and, among equal times, by insertion, the width adapted to the
 * traffic); a radix heap for the rest (simulated time
 * never goes back, so a push is an append to the bucket of the highest bit
 * in which the time differs from the last minimum taken); and a 4-ary
 * heap for the rare entries earlier than that minimum (pushed between
 * runs, or while the FIFO still holds earlier ones). Pop takes the
 * smallest head. Cancellation is lazy: an entry carries the
 * generation of its owner, and a stale entry is dropped when it surfaces.
 */
#ifndef KBSIM_EVQ_H
#define KBSIM_EVQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evq_entry {
    uint64_t t;
    uint64_t seq;
    void *obj;
    uint32_t kind;
    uint32_t gen;
};

struct evq_bucket {
    struct evq_entry *v;
    size_t n, cap;
};

struct evq_node {
    struct evq_entry e;
    uint32_t next; /* the next node of its bucket, or of the free list */
};

#define EVQ_NIL UINT32_MAX
#define EVQ_WBUCKETS 1024 /* timing wheel buckets; a power of two */

struct evq {
    struct evq_entry *fifo; /* ring buffer, capacity a power of two */
    size_t fifo_head, fifo_len, fifo_cap;
    uint64_t fifo_tail_t; /* time of the last entry the FIFO took (0 at
                             first): a later push extends its run. Kept
                             when the FIFO empties, as time never goes
                             back below it; an earlier push to an empty
                             FIFO goes through evq_push_any. */
    /* radix heap: bucket 0 holds entries at time rlast, bucket i > 0 those
     * whose time first differs from rlast in bit i-1 (from the top) */
    struct evq_bucket *rb; /* 65 buckets, allocated on first use */
    uint64_t rlast, rmask; /* rmask bit i-1: bucket i not empty */
    size_t r0_head; /* bucket 0's next entry: it is taken from the front */
    size_t rlen;
    struct evq_entry *heap; /* the rare entries earlier than rlast */
    size_t heap_len, heap_cap;
    /* timing wheel: bucket b holds, sorted, the entries of the one slot
     * (t >> wshift) in [floor slot, floor slot + EVQ_WBUCKETS) that is b
     * modulo EVQ_WBUCKETS */
    uint32_t *whead;        /* first node of each bucket; on first use */
    uint32_t *wtail;        /* last node of each non-empty bucket (same
                               allocation as whead) */
    uint64_t wbits[EVQ_WBUCKETS / 64]; /* non-empty buckets */
    uint32_t wsum;          /* non-zero words of wbits */
    unsigned wshift;        /* bucket width: 2^wshift ps */
    size_t wlen;
    struct evq_node *nodes; /* the wheel's entries, and a free list */
    size_t node_cap;
    uint32_t free_node;
    uint32_t a_in, a_walk, a_out; /* adaptation: pushes in the wheel, list
                                     steps they took, pushes beyond it */
    uint32_t a_hold;        /* looks left before it may widen again */
    uint64_t floor;         /* time of the last entry popped */
    int head_src; /* where the head is (EVQ_*), or EVQ_UNKNOWN */
    uint64_t head_t; /* its time, when head_src says where it is */
    uint32_t head_bucket; /* the wheel's first bucket, when head_src says */
    bool nomem; /* a reorganisation found no memory: see evq_nomem */
};

enum { EVQ_UNKNOWN = -2, EVQ_NONE = -1, EVQ_FIFO, EVQ_WHEEL, EVQ_RADIX,
       EVQ_HEAP };

void evq_init(struct evq *q);
void evq_release(struct evq *q);

/* Copies an entry field by field. A struct copy here (`*dst = *e`) is done
 * with two 16-byte loads of the entry the caller has just built on its
 * stack in 4- and 8-byte stores: a load that spans several pending stores
 * cannot be forwarded from them and waits until they retire, which was the
 * largest single stall of a timed wait (W1). Field by field, the compiler
 * stores the caller's values directly. */
static inline void evq_entry_store(struct evq_entry *dst, const struct evq_entry *e)
{
    dst->t = e->t;
    dst->seq = e->seq;
    dst->obj = e->obj;
    dst->kind = e->kind;
    dst->gen = e->gen;
}

/* evq_push's every case (evq.c) */
bool evq_push_any(struct evq *q, const struct evq_entry *e);

/* as in evq.c */
#define EVQ_ADAPT_EVERY 1024
#define EVQ_WHEEL_MAX_LEN (4 * EVQ_WBUCKETS)

/* Adds an entry; false when memory ran out. The two common cases inline:
 * an entry that extends the FIFO's monotone run while the wheel is empty,
 * and, while the wheel is in use, one that falls in the window at or
 * after the last of its bucket (a node free, no adaptation due): a push there
 * costs a few loads and stores, without the call and the registers the
 * other cases need saved. The rest is evq_push_any. */
static inline bool evq_push(struct evq *q, const struct evq_entry *e)
{
    uint64_t t = e->t;
    if (q->wlen == 0) {
        /* the FIFO takes a monotone run while the wheel is empty (as in
         * evq_push_any, which also grows it) */
        size_t n = q->fifo_len;
        if (n < q->fifo_cap && t >= q->fifo_tail_t) {
            if (q->head_src != EVQ_FIFO && !(q->head_src >= 0 && t >= q->head_t))
                q->head_src = EVQ_UNKNOWN; /* an append leaves the FIFO's head */
            evq_entry_store(&q->fifo[(q->fifo_head + n) & (q->fifo_cap - 1)], e);
            q->fifo_len = n + 1;
            q->fifo_tail_t = t;
            return true;
        }
        return evq_push_any(q, e);
    }
    uint32_t i = q->free_node, b, tl;
    if (i != EVQ_NIL && q->a_in + q->a_out < EVQ_ADAPT_EVERY &&
        q->fifo_len + q->wlen + q->rlen + q->heap_len < EVQ_WHEEL_MAX_LEN && t >= q->floor &&
        (t >> q->wshift) - (q->floor >> q->wshift) < EVQ_WBUCKETS &&
        q->whead[b = (uint32_t)(t >> q->wshift) & (EVQ_WBUCKETS - 1)] != EVQ_NIL &&
        q->nodes[tl = q->wtail[b]].e.t <= t) {
        /* a later entry leaves the remembered head where it is */
        if (!(q->head_src >= 0 && t >= q->head_t))
            q->head_src = EVQ_UNKNOWN;
        q->free_node = q->nodes[i].next;
        evq_entry_store(&q->nodes[i].e, e);
        q->nodes[i].next = EVQ_NIL;
        q->nodes[tl].next = i;
        q->wtail[b] = i;
        q->wlen++;
        q->a_in++;
        return true;
    }
    return evq_push_any(q, e);
}

static inline size_t evq_size(const struct evq *q)
{
    return q->fifo_len + q->wlen + q->rlen + q->heap_len;
}

/* An entry of the smallest time, or NULL when empty or when memory to
 * reorganise the queue ran out (evq_nomem then says so; no entry is lost).
 * Valid until the next push or pop. */
const struct evq_entry *evq_peek(struct evq *q);

static inline bool evq_nomem(const struct evq *q) { return q->nomem; }

/* Removes an entry of the smallest time into *out; false when empty (or
 * as evq_peek, out of memory). */
bool evq_pop(struct evq *q, struct evq_entry *out);

/* Removes an entry of time t into *out if the smallest time is t. */
bool evq_pop_at(struct evq *q, uint64_t t, struct evq_entry *out);

/* The FIFO's run of entries at time t, for a caller that fires them in
 * place (W1: a thousand processes waking at one time): when the FIFO is
 * the only structure in use and its head is at t, the number of its
 * entries, from the head, that may be at t (evq_fifo_at(q, i)->t says
 * where the run ends), else 0. Nothing is pushed or popped while the
 * caller walks them; evq_fifo_drop(q, n, t) then pops the first n, as n
 * evq_pop_fifo_at calls would. */
static inline size_t evq_fifo_run_at(const struct evq *q, uint64_t t)
{
    if (!q->fifo_len || q->wlen || q->rlen || q->heap_len ||
        q->fifo[q->fifo_head].t != t)
        return 0;
    return q->fifo_len;
}

static inline const struct evq_entry *evq_fifo_at(const struct evq *q, size_t i)
{
    return &q->fifo[(q->fifo_head + i) & (q->fifo_cap - 1)];
}

static inline void evq_fifo_drop(struct evq *q, size_t n, uint64_t t)
{
    q->fifo_head = (q->fifo_head + n) & (q->fifo_cap - 1);
    q->fifo_len -= n;
    q->head_src = q->fifo_len ? EVQ_FIFO : EVQ_UNKNOWN;
    q->head_t = UINT64_MAX;
    if (t > q->floor)
        q->floor = t;
}

/* evq_pop_at for the case of a queue that is the FIFO alone (entries
 * pushed in time order, as with many processes waiting the same delay):
 * pops the head into *out if the FIFO is the only structure in use and
 * its head is at time t, else returns false and changes nothing. The
 * FIFO's entries at t then come out in insertion order. One entry of the
 * run above (the scheduler fires whole runs in place). */
static inline bool evq_pop_fifo_at(struct evq *q, uint64_t t,
                                   struct evq_entry *out)
{
    if (!evq_fifo_run_at(q, t))
        return false;
    *out = *evq_fifo_at(q, 0);
    evq_fifo_drop(q, 1, t);
    return true;
}

/* evq_pop_at for the case of a queue that is the wheel alone: pops the
 * head into *out if the wheel is the only structure in use and its head is
 * at time t, else returns false and changes nothing. Entries of one time
 * share a bucket in insertion order, so they then come out in that order. */
bool evq_pop_wheel_at(struct evq *q, uint64_t t, struct evq_entry *out);

#endif
