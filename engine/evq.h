/* evq.h — the timed event queue of the kernel (engine-internal)
 *
 * Entries come out in time order. Entries of equal time may come out in
 * any (deterministic) order: the scheduler pops all entries of a time
 * together and sorts them by seq, a per-simulation insertion counter, so
 * that ties are broken by insertion order. Comparing times alone keeps the
 * heap walk to one 64-bit compare a step. Two structures hold them: a FIFO for entries
 * that arrive in non-decreasing key order (the common case: every process
 * waits the same delay, or one clock) and a 4-ary heap for the rest; pop
 * takes the smaller head. Cancellation is lazy: an entry carries the
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

struct evq {
    struct evq_entry *fifo; /* ring buffer, capacity a power of two */
    size_t fifo_head, fifo_len, fifo_cap;
    struct evq_entry *heap;
    size_t heap_len, heap_cap;
};

void evq_init(struct evq *q);
void evq_release(struct evq *q);

/* false when memory ran out */
bool evq_push(struct evq *q, const struct evq_entry *e);

static inline size_t evq_size(const struct evq *q)
{
    return q->fifo_len + q->heap_len;
}

/* An entry of the smallest time, or NULL when empty. */
const struct evq_entry *evq_peek(const struct evq *q);

/* Removes an entry of the smallest time into *out; false when empty. */
bool evq_pop(struct evq *q, struct evq_entry *out);

#endif
