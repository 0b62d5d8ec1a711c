/* pe_dma.h — kb_dma: the PE's DMA engine, moving real bytes between
 * memories along routed fabric paths
 *
 * A DMA has three classes of channels: read (loads into the PE), write
 * (stores out of it) and vc_comm (IPCQ traffic), with a configurable count
 * of each. Each class is one queue served in FIFO order by its channels,
 * each channel one copy at a time. A copy names its two ends as a memory,
 * an address and the fabric node the memory hangs off; the DMA books the
 * source read, carries the bytes flit by flit along the routed path from
 * the source node to the destination node (so contention with other
 * traffic emerges from the links), books the destination write, and then
 * copies the bytes — or, in timing-only mode, copies nothing and takes the
 * same time. The timing formula is stated once, in pe_dma.c.
 *
 * The DMA knows nothing of the system: it is given a fabric and a route
 * callback. Errors: int functions return 0 or a negative SIM_E* code and
 * kb_dma_errmsg() says what went wrong; a copy that fails to start never
 * calls its callback nor notifies its event. */
#ifndef KBSIM_PE_DMA_H
#define KBSIM_PE_DMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric.h"
#include "memory.h"
#include "sim.h"

enum kb_dma_class { KB_DMA_READ, KB_DMA_WRITE, KB_DMA_COMM, KB_DMA_NCLASSES };

/* The route from fabric node src to dst as link ids: returns its number of
 * links (0 when src == dst) or a negative error, and writes the first
 * min(that, max_links) of them to links. A route longer than max_links is
 * not an error: the DMA asks again with a buffer that long (like
 * snprintf), so routes have no length limit. */
typedef int (*kb_dma_route_fn)(void *ud, int src_node, int dst_node,
                               int *links, int max_links);

struct kb_dma_params {
    int node;                /* the fabric node of the DMA engine (its PE) */
    uint32_t read_channels;  /* >= 1 each */
    uint32_t write_channels;
    uint32_t comm_channels;
    bool timing_only;        /* move no payload bytes */
};

/* One end of a copy: bytes [addr, addr + bytes) of mem, which hangs off
 * fabric node `node`. */
struct kb_dma_end {
    struct kb_mem *mem;
    uint64_t addr;
    int node;
};

struct kb_dma_stats {
    uint64_t bytes;     /* payload bytes of finished copies */
    uint64_t transfers; /* finished copies */
    sim_time busy_ps;   /* time from the start of service to the end */
};

struct kb_dma;

/* Called once when a copy ends (status 0) or fails while in service
 * (negative; kb_dma_errmsg says why), from the channel's process at the
 * instant the last byte is written — after the bytes are copied, so the
 * callback may publish them atomically. It must not block. */
typedef void (*kb_dma_done_fn)(void *ud, int status);

/* A DMA named after its PE ("sip0.cube0.pe0"); its channel processes are
 * method processes "NAME.dma.read0", "NAME.dma.comm0", ... NULL on a bad
 * parameter ("dma of 'NAME': ...") or no memory, with err set. */
struct kb_dma *kb_dma_new(struct sim *s, const char *name, struct kb_fabric *f,
                          kb_dma_route_fn route, void *route_ud,
                          const struct kb_dma_params *p, char *err,
                          size_t errlen);
/* Frees the DMA; copies still queued are dropped without a callback. */
void kb_dma_free(struct kb_dma *d);

/* Route selection per copy (optional; fabric.routing adaptive): called
 * when a copy's flits are about to enter the fabric with the route the
 * DMA keeps for (src_node, dst_node), n links. Returns the number of links
 * of the route to take and sets *out to it (links itself, or a route that
 * has passed kb_fabric_check_path, valid until the next call) and
 * *vc_class to its VC class (kb_fabric_transfer_class); a negative error
 * fails the copy. */
typedef int (*kb_dma_pick_fn)(void *ud, int src_node, int dst_node, const int *links, int n,
                              const int **out, uint32_t *vc_class);
void kb_dma_set_route_pick(struct kb_dma *d, kb_dma_pick_fn fn, void *ud);

const char *kb_dma_errmsg(const struct kb_dma *d);
const char *kb_dma_name(const struct kb_dma *d);
int kb_dma_node(const struct kb_dma *d);
bool kb_dma_timing_only(const struct kb_dma *d);
struct kb_fabric *kb_dma_fabric(const struct kb_dma *d);

/* The route from src_node to dst_node by the DMA's route callback, for
 * units that share the DMA's view of the fabric (PE_IPCQ): the number of
 * links, *links pointing at them in the DMA's scratch buffer (valid until
 * the next call on this DMA), or a negative error (kb_dma_errmsg). */
int kb_dma_route(struct kb_dma *d, int src_node, int dst_node, const int **links);

/* Queues a copy on class c and returns at once; when it ends, fn(ud, 0)
 * runs (if fn is set) and `done` is notified (if set; one event per
 * outstanding copy). Checks the ends (address range, route) first and
 * fails without queuing. Any process, or before the run. */
int kb_dma_copy_async(struct kb_dma *d, enum kb_dma_class c,
                      struct kb_dma_end src, struct kb_dma_end dst,
                      uint64_t bytes, struct sim_event *done,
                      kb_dma_done_fn fn, void *ud);

/* kb_dma_copy_async that moves no bytes: the copy is checked, queued,
 * booked, carried over the links, timed, counted and traced as any other,
 * and its callback runs at the same instant, but the destination is not
 * written. For a caller that carries the bytes itself (the PE_IPCQ: a
 * slot's bytes travel with the slot, decision 0060). */
int kb_dma_copy_timed_async(struct kb_dma *d, enum kb_dma_class c, struct kb_dma_end src,
                            struct kb_dma_end dst, uint64_t bytes, struct sim_event *done,
                            kb_dma_done_fn fn, void *ud);

/* kb_dma_copy_async, then waits until the copy ends; returns its status.
 * Thread processes only: SIM_EPERM outside any process (nothing queued)
 * or from a method process (queued but not waited for: methods use
 * kb_dma_copy_async). */
int kb_dma_copy(struct kb_dma *d, enum kb_dma_class c, struct kb_dma_end src,
                struct kb_dma_end dst, uint64_t bytes);

/* The copy's time on an idle system: the closed form of pe_dma.c from
 * kb_mem_time and kb_fabric_path_time. SIM_FOREVER when the ends or the
 * route are invalid. */
sim_time kb_dma_time(struct kb_dma *d, struct kb_dma_end src,
                     struct kb_dma_end dst, uint64_t bytes);

/* ---- the module: its port and interface ------------------------------- */

/* What a DMA does for a unit bound to it (the PE_CPU, the PE_IPCQ): the
 * functions above, each taking ctx (the kb_dma), and its fixed facts.
 * Exported on "NAME.dma.in" : kb_dma_if (at most 4 bindings). */
struct kb_dma_if {
    void *ctx;
    int node;                 /* kb_dma_node */
    bool timing_only;         /* kb_dma_timing_only */
    struct kb_fabric *fabric; /* kb_dma_fabric */
    int (*copy_async)(void *ctx, enum kb_dma_class c, struct kb_dma_end src,
                      struct kb_dma_end dst, uint64_t bytes, struct sim_event *done,
                      kb_dma_done_fn fn, void *ud);
    int (*copy)(void *ctx, enum kb_dma_class c, struct kb_dma_end src, struct kb_dma_end dst,
                uint64_t bytes);
    sim_time (*time)(void *ctx, struct kb_dma_end src, struct kb_dma_end dst, uint64_t bytes);
    int (*route)(void *ctx, int src_node, int dst_node, const int **links);
    const char *(*errmsg)(void *ctx);
    /* optional (NULL: none): kb_dma_copy_timed_async */
    int (*copy_timed_async)(void *ctx, enum kb_dma_class c, struct kb_dma_end src,
                            struct kb_dma_end dst, uint64_t bytes, struct sim_event *done,
                            kb_dma_done_fn fn, void *ud);
};

struct sim_port *kb_dma_port(const struct kb_dma *d);

/* Counters of class c summed over its channels, or of its i-th channel. */
void kb_dma_get_stats(const struct kb_dma *d, enum kb_dma_class c,
                      struct kb_dma_stats *out);
int kb_dma_channel_stats(const struct kb_dma *d, enum kb_dma_class c, int i,
                         struct kb_dma_stats *out);
/* Copies queued or in service. */
uint64_t kb_dma_pending(const struct kb_dma *d);

#endif
