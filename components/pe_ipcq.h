/* pe_ipcq.h — kb_ipcq: a PE's inter-PE queues, one per named direction,
 * as credit-controlled ring buffers carried by the PE_DMA's vc_comm channel
 *
 * Directions are names: N, S, E, W, global_E, parent, child_left, or any
 * name a collective uses. kb_ipcq_wire(a, "E", b, "W") makes a channel
 * from a's tx "E" to b's rx "W": a ring of n_slots × slot_size on each side
 * (tx in a's buffer memory, rx in b's), a tail (next slot to send) and a
 * head (next slot to read), and n_slots credits held by the sender.
 *
 * A send takes one credit per slot; it returns at once (fire-and-forget)
 * unless no credit is left, when it blocks: backpressure "sleep" waits for
 * the credit's arrival, "poll" re-checks every poll_ns and so returns at
 * the first poll at or after the arrival. The sender's DMA (vc_comm)
 * copies each slot from the tx ring to the rx ring, booked and timed as
 * any copy; the slot's bytes, taken at the send, travel with the slot
 * (decision 0060: the rings' memory holds none), and data and metadata
 * become visible together at the instant the last byte would be written. A recv waits for its slot, reads it (the memory read,
 * plus the bank-to-PE path when the buffer is not at the PE's node), frees
 * it and emits a credit whose latency is the no-contention path time of
 * credit_bytes back to the sender's DMA node; the receiver is busy for the
 * credit's latency and the sender sees it when it arrives.
 *
 * Messages longer than slot_size are split into ceil(bytes / slot_size)
 * slots, each with its own credit, so a message may be longer than the
 * whole ring: the receiver consumes slots as they land. One sending and
 * one receiving process per direction at a time.
 *
 * Errors: int functions return 0 (or a byte count) or a negative SIM_E*
 * code and kb_ipcq_errmsg() names the PE and the direction. */
#ifndef KBSIM_PE_IPCQ_H
#define KBSIM_PE_IPCQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory.h"
#include "pe_dma.h"
#include "sim.h"

enum kb_ipcq_backpressure { KB_IPCQ_SLEEP, KB_IPCQ_POLL };

struct kb_ipcq_params {
    uint32_t n_slots;   /* >= 1; both sides of a channel must agree */
    uint32_t slot_size; /* bytes, >= 1; both sides must agree */
    enum kb_ipcq_backpressure backpressure; /* of this PE's sends */
    double poll_ns;        /* poll: re-check interval, > 0 */
    uint32_t credit_bytes; /* the credit message this PE returns, >= 1 */
};

/* Carried with the data, verbatim; the meaning is the caller's (the Lua
 * layer puts the element type and count here to check them on recv). */
struct kb_ipcq_meta {
    uint64_t tag;
    uint32_t dtype;
    uint32_t count;
};

struct kb_ipcq_stats {
    uint64_t tx_messages, tx_bytes; /* sent */
    uint64_t rx_messages, rx_bytes; /* received */
    sim_time blocked_ps;   /* senders waiting (or polling) for credits */
    sim_time recv_wait_ps; /* receivers waiting for a slot to fill */
    sim_time recv_busy_ps; /* receivers reading slots and emitting credits */
    uint32_t occupancy_hwm; /* most rx slots holding visible data at once */
};

enum kb_ipcq_slot_state { KB_IPCQ_EMPTY, KB_IPCQ_FILLING, KB_IPCQ_FULL };

/* What a receiver can see of one rx slot. meta, bytes and msg_bytes are
 * zero unless the slot is FULL. */
struct kb_ipcq_slot {
    enum kb_ipcq_slot_state state;
    uint64_t addr;      /* the slot in the receiver's buffer memory */
    uint64_t bytes;     /* bytes in this slot */
    uint64_t msg_bytes; /* bytes of the whole message */
    struct kb_ipcq_meta meta;
    /* the slot's bytes (empty in a timing-only run), valid until the slot
     * is read: they travel with the slot, the rings' memory holds none
     * (decision 0060) */
    const struct kb_mem_snap *data;
};

struct kb_ipcq;

/* The IPCQ of a PE named `name`. It is a module with three ports (decision
 * 0027), which its builder binds before any kb_ipcq_wire:
 *   "NAME.ipcq.in"  : kb_ipcq_if (IN, 0..1)  what it does, for the PE_CPU
 *   "NAME.ipcq.dma" : kb_dma_if  (OUT, 1)    the DMA it sends with (whose
 *                                            node is the PE's)
 *   "NAME.ipcq.buf" : kb_mem_if  (OUT, 1)    the memory of its rings (its
 *                                            TCM, the cube's SRAM or its HBM)
 * NULL on a bad parameter ("ipcq of 'NAME': ...") or no memory, with err
 * set. */
struct kb_ipcq *kb_ipcq_new(struct sim *s, const char *name, const struct kb_ipcq_params *p,
                            char *err, size_t errlen);
/* Its port "in", "dma" or "buf"; NULL for another name. */
struct sim_port *kb_ipcq_port(const struct kb_ipcq *q, const char *which);
/* Call when the simulation no longer runs; ring memory is not returned. */
void kb_ipcq_free(struct kb_ipcq *q);

const char *kb_ipcq_errmsg(const struct kb_ipcq *q);
const char *kb_ipcq_name(const struct kb_ipcq *q);

/* A channel from a's tx direction a_dir to b's rx direction b_dir (a may
 * be b). Both must have their ports bound (SIM_EINVAL naming the unbound
 * port otherwise). Allocates both rings; each direction can be wired once per side.
 * On error the message is in kb_ipcq_errmsg(a). */
int kb_ipcq_wire(struct kb_ipcq *a, const char *a_dir, struct kb_ipcq *b,
                 const char *b_dir);
/* Whether dir is wired for sending (tx) or receiving (!tx). */
bool kb_ipcq_wired(const struct kb_ipcq *q, const char *dir, bool tx);

/* Sends bytes with meta (NULL: zeros) on dir. Thread processes only. The
 * data is copied when the call returns (the caller may reuse it). */
int kb_ipcq_send(struct kb_ipcq *q, const char *dir, const void *data,
                 uint64_t bytes, const struct kb_ipcq_meta *meta);

/* Receives the next message on dir into out (NULL in timing-only runs or
 * to drop the bytes) and its metadata (meta may be NULL); returns its
 * length. A message longer than bytes_max is SIM_EINVAL and stays queued.
 * Thread processes only. */
int64_t kb_ipcq_recv(struct kb_ipcq *q, const char *dir, void *out,
                     uint64_t bytes_max, struct kb_ipcq_meta *meta);

/* Directions by index, for a caller that names the same direction on
 * every message (a kernel's ring step): kb_ipcq_dir is dir's index (stable
 * for the IPCQ's life; wiring adds directions at the end) or -1 when it
 * was never wired; the _at calls are the calls above on that index (an
 * index that is not a direction is "not wired"). */
int kb_ipcq_dir(const struct kb_ipcq *q, const char *dir);
bool kb_ipcq_wired_at(const struct kb_ipcq *q, int dir, bool tx);
int kb_ipcq_send_at(struct kb_ipcq *q, int dir, const void *data, uint64_t bytes,
                    const struct kb_ipcq_meta *meta);
int64_t kb_ipcq_recv_at(struct kb_ipcq *q, int dir, void *out, uint64_t bytes_max,
                        struct kb_ipcq_meta *meta);

/* Payloads as snapshots of memory (kb_mem_snap), not host buffers: the
 * same sends and receives, at the same times, whose bytes go memory to
 * memory. A send writes each tx slot from bytes [off, off + len) of data
 * (a whole page at a page boundary of the ring shared, not copied); data
 * may be NULL (timing only), and must stay unchanged until the call
 * returns. A receive appends each rx slot it reads to out (NULL: the
 * bytes dropped), holding the slot's pages by reference (decision 0056);
 * out is cleared first. Otherwise as kb_ipcq_send / kb_ipcq_recv. */
int kb_ipcq_send_snap(struct kb_ipcq *q, const char *dir, const struct kb_mem_snap *data,
                      uint64_t bytes, const struct kb_ipcq_meta *meta);
int kb_ipcq_send_snap_at(struct kb_ipcq *q, int dir, const struct kb_mem_snap *data,
                         uint64_t bytes, const struct kb_ipcq_meta *meta);
int64_t kb_ipcq_recv_snap(struct kb_ipcq *q, const char *dir, struct kb_mem_snap *out,
                          uint64_t bytes_max, struct kb_ipcq_meta *meta);
int64_t kb_ipcq_recv_snap_at(struct kb_ipcq *q, int dir, struct kb_mem_snap *out,
                             uint64_t bytes_max, struct kb_ipcq_meta *meta);

/* A receive served by a method process, step by step: what
 * kb_ipcq_recv_at does, with each of its waits (for the slot, for the
 * slot's read, for the credit's flight) asked as the process's next
 * trigger (sim_next_trigger_event / sim_next_trigger) where the thread
 * would have blocked, so that the process runs at the same times, in the
 * same deltas and at the same places in them as a thread in
 * kb_ipcq_recv_at would; it takes no stack and no context switch.
 * kb_ipcq_recv_begin sets op up (no effect, no time); then each
 * activation calls kb_ipcq_recv_step, which returns 0 when the receive
 * waits (the process's next trigger is set) and 1 when it has ended,
 * *result being what kb_ipcq_recv_at returns (the message's length, or a
 * negative code and kb_ipcq_errmsg). op is the caller's storage and must
 * stay put until the end; its fields past meta are the IPCQ's. */
struct kb_ipcq_recv_op {
    int dir; /* kb_ipcq_dir's index */
    void *out;
    uint64_t bytes_max;
    struct kb_ipcq_meta *meta; /* may be NULL */
    struct kb_mem_snap *snap;  /* kb_ipcq_recv_begin_snap's out, else NULL */
    int state;
    uint64_t got, total, first, len;
    sim_time t0, t_w, t_r;
};
void kb_ipcq_recv_begin(struct kb_ipcq_recv_op *op, int dir, void *out, uint64_t bytes_max,
                        struct kb_ipcq_meta *meta);
int kb_ipcq_recv_step(struct kb_ipcq *q, struct kb_ipcq_recv_op *op, int64_t *result);
/* kb_ipcq_recv_begin for a receive into a snapshot (kb_ipcq_recv_snap's
 * out), cleared now. */
void kb_ipcq_recv_begin_snap(struct kb_ipcq_recv_op *op, int dir, struct kb_mem_snap *out,
                             uint64_t bytes_max, struct kb_ipcq_meta *meta);

/* Without blocking: 1 and the message's length and metadata when the
 * next message on dir has its first slot visible, else 0. */
int kb_ipcq_probe(struct kb_ipcq *q, const char *dir, uint64_t *bytes,
                  struct kb_ipcq_meta *meta);

/* rx slot i (0 .. n_slots-1) of dir, as a receiver polling it sees it. */
int kb_ipcq_slot_info(struct kb_ipcq *q, const char *dir, uint32_t i,
                      struct kb_ipcq_slot *out);

/* The credit latency of dir's channel, ps: the path time of credit_bytes
 * from this PE (the receiver) back to the sender's DMA node. */
sim_time kb_ipcq_credit_time(struct kb_ipcq *q, const char *dir);

/* What the IPCQ does for the unit that issues sends and receives (the
 * PE_CPU): the functions above, each taking ctx (the kb_ipcq).
 *
 * The by-index operations (kb_ipcq_dir and the _at calls) are optional:
 * an export that has no directions by index leaves all four NULL (it may
 * not fill some and leave others) and a caller then uses the by-name calls
 * (the kernel language does: docs/modules.md). The kb_ipcq fills all. */
struct kb_ipcq_if {
    void *ctx;
    int (*send)(void *ctx, const char *dir, const void *data, uint64_t bytes,
                const struct kb_ipcq_meta *meta);
    int64_t (*recv)(void *ctx, const char *dir, void *out, uint64_t bytes_max,
                    struct kb_ipcq_meta *meta);
    int (*probe)(void *ctx, const char *dir, uint64_t *bytes, struct kb_ipcq_meta *meta);
    bool (*wired)(void *ctx, const char *dir, bool tx);
    const char *(*errmsg)(void *ctx);
    /* optional, all or none */
    int (*dir)(void *ctx, const char *dir);
    bool (*wired_at)(void *ctx, int dir, bool tx);
    int (*send_at)(void *ctx, int dir, const void *data, uint64_t bytes,
                   const struct kb_ipcq_meta *meta);
    int64_t (*recv_at)(void *ctx, int dir, void *out, uint64_t bytes_max,
                       struct kb_ipcq_meta *meta);
    /* optional (NULL: none; needs the by-index ones): kb_ipcq_recv_step,
     * op set up by kb_ipcq_recv_begin */
    int (*recv_step)(void *ctx, struct kb_ipcq_recv_op *op, int64_t *result);
    /* optional, all or none (NULL: the caller uses host buffers; needs
     * the by-index ones): the snapshot calls above */
    int (*send_snap)(void *ctx, const char *dir, const struct kb_mem_snap *data,
                     uint64_t bytes, const struct kb_ipcq_meta *meta);
    int (*send_snap_at)(void *ctx, int dir, const struct kb_mem_snap *data, uint64_t bytes,
                        const struct kb_ipcq_meta *meta);
    int64_t (*recv_snap)(void *ctx, const char *dir, struct kb_mem_snap *out,
                         uint64_t bytes_max, struct kb_ipcq_meta *meta);
    int64_t (*recv_snap_at)(void *ctx, int dir, struct kb_mem_snap *out, uint64_t bytes_max,
                            struct kb_ipcq_meta *meta);
};

/* Counters of one direction (both its sides), or of every direction when
 * dir is NULL. SIM_EINVAL for an unknown direction. */
int kb_ipcq_get_stats(const struct kb_ipcq *q, const char *dir,
                      struct kb_ipcq_stats *out);

#endif
