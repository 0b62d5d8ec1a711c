/* memory.h — kb_mem: a TCM, SRAM or HBM bank with real bytes, an allocator
 * and an access-time model with address-interleaved channels
 *
 * Contents are stored sparsely in 2 KiB pages allocated on first write;
 * untouched bytes read as zero, so a 2 GiB HBM costs nothing until used.
 * A copy of whole pages between page boundaries (kb_mem_copy: a DMA)
 * shares the source's pages, copied on the next write to either side, and
 * a copy of never-written pages leaves none (decision 0053).
 * Freed bytes read as zero too: freeing a block gives its pages back (those
 * wholly in free space; its bytes in a page it shares are cleared), so a
 * new block always starts as zeros and storage follows what is allocated,
 * not what ever was. Pages come from a pool the process's memories share
 * (decision 0034).
 *
 * Timing: an access pays the setup latency, then moves its bytes. The
 * address space is interleaved over n_channels channels (a power of two)
 * in bursts of burst_bytes: channel(addr) = (addr / burst) & (n - 1); for
 * the HBM, burst 256 B and 8 pseudo-channels give (addr >> 8) & 7. Each
 * channel moves bw_gbps bytes/ns and serves one access at a time. With
 * b_c the bytes of the access that fall in channel c, an access issued at
 * t0 ends at
 *
 *     max over c with b_c > 0 of  max(t0 + setup, busy_c) + b_c / bw
 *
 * and sets busy_c to its channel's end: setup is a pipelined latency that
 * overlaps earlier transfers, the data phases on one channel serialise.
 * On an idle memory this is setup + max_c b_c / bw, so an access spread
 * evenly over all channels sees n times the bandwidth of one. Each b_c / bw
 * is rounded to the nearest ps.
 *
 * Errors: int functions return 0 or a negative SIM_E* code, and
 * kb_mem_errmsg() says what went wrong. */
#ifndef KBSIM_MEMORY_H
#define KBSIM_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim.h"

enum kb_mem_kind { KB_MEM_TCM, KB_MEM_SRAM, KB_MEM_HBM };

#define KB_MEM_MAX_CHANNELS 64
/* a memory's storage page: a span (kb_mem_read_span, kb_mem_snap_span) is
 * at most this long */
#define KB_MEM_PAGE_BYTES 2048 /* decision 0063 */

struct kb_mem_params {
    enum kb_mem_kind kind;
    uint64_t capacity;    /* bytes, > 0 */
    double bw_gbps;       /* per channel, bytes/ns, > 0 */
    double setup_ns;      /* >= 0 */
    uint32_t n_channels;  /* power of two up to KB_MEM_MAX_CHANNELS; 0 means 1 */
    uint32_t burst_bytes; /* interleave unit, power of two (multi-channel) */
};

struct kb_mem_stats {
    uint64_t bytes_read, bytes_written;
    uint64_t reads, writes;  /* timed accesses */
    sim_time busy_ps;        /* data-phase time summed over channels */
    uint64_t peak_alloc_bytes; /* most bytes allocated at once */
};

struct kb_mem;

/* "tcm", "sram" or "hbm". */
const char *kb_mem_kind_name(enum kb_mem_kind k);

/* A memory named after its owner ("sip0.cube0.pe0"), so that messages read
 * "hbm of 'sip0.cube0.pe0' ...". NULL on a bad parameter, with err set. */
struct kb_mem *kb_mem_new(struct sim *s, const char *name,
                          const struct kb_mem_params *p, char *err,
                          size_t errlen);
void kb_mem_free(struct kb_mem *m);

const char *kb_mem_errmsg(const struct kb_mem *m);
const char *kb_mem_name(const struct kb_mem *m);
const struct kb_mem_params *kb_mem_params(const struct kb_mem *m);
/* kb_mem_params(m)->capacity, from the line an allocation and an access
 * read anyway (the parameters are a line of their own) */
uint64_t kb_mem_capacity(const struct kb_mem *m);

/* ---- allocation -------------------------------------------------------- */

/* First fit: the lowest address with `bytes` free bytes aligned to `align`
 * (a power of two; 0 means 1). SIM_ENOMEM when nothing fits, with a message
 * giving capacity, request and free bytes. */
int kb_mem_alloc(struct kb_mem *m, uint64_t bytes, uint64_t align,
                 uint64_t *addr);
/* Returns a block from kb_mem_alloc; SIM_EINVAL for any other address.
 * Its bytes read as zeros from then on; SIM_ENOMEM (the block freed all
 * the same) when the host ran out of memory copying a page it shares with
 * another memory to clear it, whose bytes then keep their values. */
int kb_mem_dealloc(struct kb_mem *m, uint64_t addr);
/* An owned block: the same first fit as kb_mem_alloc (the same addresses
 * in any mix of the two), but the memory does not record it among its live
 * blocks, so that its free touches no table: its owner keeps its address
 * and size and returns it once with kb_mem_dealloc_owned, which refuses
 * (SIM_EINVAL) a block that overlaps a free one (a second free) or lies
 * beyond the capacity; other wrong sizes are the owner's error. Kernel
 * handles use these: at system scale a PE's table is cold at every free
 * (decision 0057). */
int kb_mem_alloc_owned(struct kb_mem *m, uint64_t bytes, uint64_t align, uint64_t *addr);
int kb_mem_dealloc_owned(struct kb_mem *m, uint64_t addr, uint64_t bytes);
uint64_t kb_mem_free_bytes(const struct kb_mem *m);

/* ---- contents ---------------------------------------------------------- */

/* Copy bytes in or out; no time passes. SIM_EINVAL beyond the capacity. */
int kb_mem_write(struct kb_mem *m, uint64_t addr, const void *src,
                 uint64_t bytes);
int kb_mem_read(struct kb_mem *m, uint64_t addr, void *dst, uint64_t bytes);
/* Copies `bytes` from src at src_addr to dst at dst_addr page to page,
 * without an intermediate buffer; no time passes. Within one memory the
 * ranges may overlap (the result is that of a copy through a buffer).
 * Never-written source bytes arrive as zeros. SIM_EINVAL when either range
 * is beyond its memory, SIM_ENOMEM; the message is dst's either way. */
int kb_mem_copy(struct kb_mem *dst, uint64_t dst_addr, struct kb_mem *src,
                uint64_t src_addr, uint64_t bytes);

/* In-place access, one span at a time, for callers that convert or copy
 * while walking a range: the span at addr is the longest run of
 * [addr, addr + bytes) that is contiguous in storage (it ends at a page
 * boundary or at addr + bytes), *len bytes. A caller walks the range by
 * advancing addr by *len and reducing bytes by it. Both check the whole of
 * [addr, addr + bytes) first (SIM_EINVAL beyond the capacity, with the
 * message kb_mem_read or kb_mem_write would give).
 *
 * kb_mem_read_span sets *p to the stored bytes, or to NULL when the span
 * was never written (it reads as zeros). kb_mem_write_span sets *p to where
 * the span's bytes go, making its page (SIM_ENOMEM); the bytes of a span
 * that covers a whole page are undefined until written (a new page is not
 * zero-filled, a shared one not copied), so the caller must write all of
 * such a span. A pointer is valid until the next change to the memory or
 * copy from it (a write, copy or free may give the span another page, and
 * a copy from it shares the page with another memory). */
int kb_mem_read_span(struct kb_mem *m, uint64_t addr, uint64_t bytes,
                     const unsigned char **p, uint64_t *len);
int kb_mem_write_span(struct kb_mem *m, uint64_t addr, uint64_t bytes,
                      unsigned char **p, uint64_t *len);

/* Pages of storage held now (KB_MEM_PAGE_BYTES each): written, not freed since. A
 * page two memories share after a copy counts in both. */
uint64_t kb_mem_pages(const struct kb_mem *m);
/* Pages the process's memories hold, each once however many memories
 * share it (every simulation of the process: a sweep's threads too). */
uint64_t kb_mem_pool_pages(void);

/* ---- snapshots ---------------------------------------------------------
 *
 * The bytes of memory ranges as they were when taken, without copying
 * whole pages: a snapshot holds the source's pages by reference (each one
 * more owner of its page, decision 0053), so a later write to the source
 * copies the page and the snapshot keeps the old bytes; a never-written
 * page is kept as zeros, without a page. A piece much smaller than a page
 * (under KB_MEM_SNAP_REF_MIN bytes) is copied instead, so that a short
 * piece of a busy page does not make its next write copy a page (decision
 * 0056). Pages are shared only within one thread, as memories' are.
 *
 * A snapshot is the caller's struct, zeroed to start (or after
 * kb_mem_snap_free); kb_mem_snap_take appends a range to it (a message
 * assembled from several ring slots), so its bytes are the ranges taken,
 * in order. */
#define KB_MEM_SNAP_REF_MIN 1024

struct kb_mem_snap_piece;
struct kb_mem_snap {
    uint64_t bytes;              /* its length: the bytes of the ranges taken */
    uint32_t n, cap;             /* pieces */
    struct kb_mem_snap_piece *pc; /* (the memory module's) */
};

/* Appends [addr, addr + bytes) of m as it is now. SIM_EINVAL beyond the
 * capacity, SIM_ENOMEM (kb_mem_errmsg(m) says which); the snapshot is
 * unchanged then. */
int kb_mem_snap_take(struct kb_mem *m, uint64_t addr, uint64_t bytes, struct kb_mem_snap *s);
/* Whether a write of [addr, addr + bytes) would copy a page first: a page
 * there has another owner (a snapshot's piece, another memory). False
 * beyond the capacity. */
bool kb_mem_shared(const struct kb_mem *m, uint64_t addr, uint64_t bytes);
/* Appends bytes [off, off + bytes) of snapshot s to d, for d to outlive
 * s (a message in flight, decision 0060): a whole page of s is held by
 * reference (one more owner), any part of a page copied (into a page of
 * the pool from KB_MEM_SNAP_REF_MIN bytes), so that d never holds a page
 * that a memory goes on writing around the part d keeps. SIM_EINVAL
 * beyond s, SIM_ENOMEM; d is unchanged then. */
int kb_mem_snap_add(struct kb_mem_snap *d, const struct kb_mem_snap *s, uint64_t off,
                    uint64_t bytes);
/* Appends a copy of bytes [data, data + bytes) on the host to d (data
 * NULL: that many zeros). SIM_ENOMEM (d unchanged). */
int kb_mem_snap_add_bytes(struct kb_mem_snap *d, const void *data, uint64_t bytes);
/* Appends all of s to d and leaves s empty (its pieces change hands: no
 * page is copied or counted again). SIM_ENOMEM (both unchanged). */
int kb_mem_snap_move(struct kb_mem_snap *d, struct kb_mem_snap *s);
/* Writes bytes [off, off + bytes) of s into m at addr, as kb_mem_write
 * would: a whole page of s landing on a page boundary of m is shared (or,
 * zeros, leaves no page), anything else copied. SIM_EINVAL beyond m's
 * capacity or s's length, SIM_ENOMEM. */
int kb_mem_snap_write(struct kb_mem *m, uint64_t addr, const struct kb_mem_snap *s,
                      uint64_t off, uint64_t bytes);
/* Reading a snapshot on the host, a span at a time: the span at off is
 * the longest run of [off, off + bytes) stored contiguously, *len bytes;
 * *p is NULL when it reads as zeros. Valid until s changes. SIM_EINVAL
 * when [off, off + bytes) is beyond s. */
int kb_mem_snap_span(const struct kb_mem_snap *s, uint64_t off, uint64_t bytes,
                     const unsigned char **p, uint64_t *len);
/* Copies bytes [off, off + bytes) of s out; SIM_EINVAL beyond s. */
int kb_mem_snap_read(const struct kb_mem_snap *s, uint64_t off, void *dst, uint64_t bytes);
/* Lets go of its pages: s is empty again (its piece array kept for the
 * next take) ... */
void kb_mem_snap_clear(struct kb_mem_snap *s);
/* ... or gone, zeroed (its array freed too). */
void kb_mem_snap_free(struct kb_mem_snap *s);


/* ---- timing ------------------------------------------------------------ */

/* The closed form on an idle memory: setup + max_c b_c / bw, in ps. */
sim_time kb_mem_time(const struct kb_mem *m, uint64_t addr, uint64_t bytes);

/* Books an access issued now on its channels and returns the absolute time
 * it ends, without waiting (for DMA engines that overlap requests);
 * SIM_FOREVER beyond the capacity. Any process, or before the run. */
sim_time kb_mem_schedule(struct kb_mem *m, uint64_t addr, uint64_t bytes,
                         bool is_write);

/* kb_mem_schedule, then waits until the access ends. Thread processes
 * only: SIM_EPERM outside any process (nothing booked) or from a method
 * process (booked but not waited for: methods use kb_mem_schedule). */
int kb_mem_access(struct kb_mem *m, uint64_t addr, uint64_t bytes,
                  bool is_write);

/* ---- the module: its port and interface ------------------------------- */

/* What a memory does for a unit bound to it (a PE_IPCQ's ring buffer): the
 * functions above, each taking ctx (the kb_mem). node is the fabric node
 * the memory hangs off (-1: none), bank the memory a DMA copy names as an
 * end. Decision 0027. */
struct kb_mem_if {
    void *ctx;
    int node;
    struct kb_mem *bank;
    int (*access)(void *ctx, uint64_t addr, uint64_t bytes, bool is_write);
    int (*read)(void *ctx, uint64_t addr, void *dst, uint64_t bytes);
    int (*write)(void *ctx, uint64_t addr, const void *src, uint64_t bytes);
    int (*alloc)(void *ctx, uint64_t bytes, uint64_t align, uint64_t *addr);
    int (*dealloc)(void *ctx, uint64_t addr);
    const char *(*errmsg)(void *ctx);
};

/* Sets the fabric node the memory hangs off (the system builder does). */
void kb_mem_set_node(struct kb_mem *m, int node);
int kb_mem_node(const struct kb_mem *m);

/* The memory's export "OWNER.KIND.in" : kb_mem_if (IN, any number of
 * bindings), made on the first call so that memories nobody binds cost
 * nothing. NULL on no memory (kb_mem_errmsg says so). */
struct sim_port *kb_mem_port(struct kb_mem *m);

void kb_mem_get_stats(const struct kb_mem *m, struct kb_mem_stats *out);
/* busy / (elapsed × n_channels); elapsed 0 means the current time. */
double kb_mem_utilisation(const struct kb_mem *m, sim_time elapsed);

#endif
