/* test_pe_dma.c — PE_DMA: copy time against the closed form over 0, 1 and 3
 * NoC hops, memory- and fabric-bound copies, channel FIFO and counts, two
 * DMAs serialising on one link, real bytes and timing-only mode, errors */
#include <math.h>

#include "fabric.h"
#include "memory.h"
#include "noc.h"
#include "pe_dma.h"
#include "sim.h"
#include "test.h"

/* ---- a small test system ------------------------------------------------ */

/* n routers in a line (a kb_noc mesh n×1), each with a TCM at the router
 * node itself, an HBM and an SRAM on nodes of their own joined to it by a
 * link each way. */
#define MAXR 8

struct tsys {
    struct sim *s;
    struct kb_fabric *f;
    struct kb_noc *noc;
    int n;
    /* per fabric node: its router (index) and the links to and from it,
     * -1 for the routers themselves */
    int router[64], up[64], down[64];
    struct kb_mem *tcm[MAXR], *hbm[MAXR], *sram[MAXR];
    int hbm_node[MAXR], sram_node[MAXR];
    struct kb_dma *dma[MAXR];
};

static const struct kb_link_params NOC = {
    .bw_gbps = 256, .latency_ns = 1.7, .overhead_ns = 0, .flit_bytes = 256};
static const struct kb_link_params HBM_LINK = {
    .bw_gbps = 256, .latency_ns = 0.5, .overhead_ns = 0, .flit_bytes = 256};
static const struct kb_link_params SRAM_LINK = {
    .bw_gbps = 128, .latency_ns = 0.5, .overhead_ns = 0, .flit_bytes = 256};

static const struct kb_mem_params TCM_P = {KB_MEM_TCM, 1 << 20, 512, 0, 1, 0};
static const struct kb_mem_params HBM_P = {KB_MEM_HBM, 1 << 24, 32, 6, 8, 256};
static const struct kb_mem_params SRAM_P = {KB_MEM_SRAM, 1 << 22, 128, 2, 1, 0};

static int tsys_route(void *ud, int src, int dst, int *links, int max)
{
    struct tsys *t = ud;
    if (src == dst)
        return 0;
    int n = 0;
    if (t->router[src] >= 0)
        links[n++] = t->up[src];
    int rs = t->router[src] >= 0 ? t->router[src] : src;
    int rd = t->router[dst] >= 0 ? t->router[dst] : dst;
    int k = kb_noc_route(t->noc, rs, rd, links + n, max - n - 1);
    if (k < 0)
        return k;
    n += k;
    if (t->router[dst] >= 0)
        links[n++] = t->down[dst];
    return n;
}

static int attach(struct tsys *t, int r, const char *what,
                  const struct kb_link_params *lp)
{
    char name[32];
    snprintf(name, sizeof name, "r%d.%s", r, what);
    int node = kb_fabric_add_node(t->f, name);
    t->router[node] = r;
    t->up[node] = kb_fabric_add_link(t->f, node, r, NULL, lp);
    t->down[node] = kb_fabric_add_link(t->f, r, node, NULL, lp);
    return node;
}

static struct tsys *tsys_new(int n, uint32_t channels, bool timing_only)
{
    struct tsys *t = T_OWN(calloc(1, sizeof *t), free);
    if (!t)
        return NULL;
    t->s = T_OWN(sim_new(NULL), sim_free);
    if (!t->s)
        return NULL;
    t->f = T_OWN(kb_fabric_new(t->s), kb_fabric_free);
    if (!t->f)
        return NULL;
    t->n = n;
    struct kb_noc_params np = {KB_NOC_MESH, "", n, 1, NOC, NULL};
    t->noc = T_OWN(kb_noc_new(t->f, &np, NULL, 0), kb_noc_free);
    if (!t->noc)
        return NULL;
    for (int i = 0; i < 64; i++)
        t->router[i] = t->up[i] = t->down[i] = -1;
    char name[32];
    for (int r = 0; r < n; r++) {
        snprintf(name, sizeof name, "pe%d", r);
        t->tcm[r] = T_OWN(kb_mem_new(t->s, name, &TCM_P, NULL, 0), kb_mem_free);
        if (!t->tcm[r])
            return NULL;
        t->hbm[r] = T_OWN(kb_mem_new(t->s, name, &HBM_P, NULL, 0), kb_mem_free);
        if (!t->hbm[r])
            return NULL;
        t->sram[r] = T_OWN(kb_mem_new(t->s, name, &SRAM_P, NULL, 0), kb_mem_free);
        if (!t->sram[r])
            return NULL;
        t->hbm_node[r] = attach(t, r, "hbm", &HBM_LINK);
        t->sram_node[r] = attach(t, r, "sram", &SRAM_LINK);
        struct kb_dma_params dp = {r, channels, channels, channels, timing_only};
        t->dma[r] = T_OWN(kb_dma_new(t->s, name, t->f, tsys_route, t, &dp, NULL, 0), kb_dma_free);
        if (!t->dma[r])
            return NULL;
    }
    return t;
}

static void tsys_free(struct tsys *t)
{
    for (int r = 0; r < t->n; r++) {
        T_FREE(kb_dma_free, t->dma[r]);
        T_FREE(kb_mem_free, t->tcm[r]);
        T_FREE(kb_mem_free, t->hbm[r]);
        T_FREE(kb_mem_free, t->sram[r]);
    }
    T_FREE(kb_noc_free, t->noc);
    T_FREE(kb_fabric_free, t->f);
    T_FREE(sim_free, t->s);
    T_FREE(free, t);
}

static struct kb_dma_end tcm_end(struct tsys *t, int r, uint64_t a)
{
    return (struct kb_dma_end){t->tcm[r], a, kb_noc_node(t->noc, r)};
}
static struct kb_dma_end hbm_end(struct tsys *t, int r, uint64_t a)
{
    return (struct kb_dma_end){t->hbm[r], a, t->hbm_node[r]};
}
static struct kb_dma_end sram_end(struct tsys *t, int r, uint64_t a)
{
    return (struct kb_dma_end){t->sram[r], a, t->sram_node[r]};
}

/* T = Ls + max(Tnet, Lnet + Ds, Lnet + Dd) + Ld from the memories' and the
 * fabric's own closed forms, written out here independently of pe_dma.c */
static sim_time closed_form(struct tsys *t, struct kb_dma_end a,
                            struct kb_dma_end b, uint64_t bytes)
{
    int links[64];
    int n = tsys_route(t, a.node, b.node, links, 64);
    sim_time ls = kb_mem_time(a.mem, a.addr, 0);
    sim_time ld = kb_mem_time(b.mem, b.addr, 0);
    sim_time ds = kb_mem_time(a.mem, a.addr, bytes) - ls;
    sim_time dd = kb_mem_time(b.mem, b.addr, bytes) - ld;
    sim_time tnet = kb_fabric_path_time(t->f, links, n, bytes);
    sim_time lnet = kb_fabric_path_time(t->f, links, n, 0);
    if (tnet == SIM_FOREVER || lnet == SIM_FOREVER) /* kb_fabric_errmsg says why */
        return SIM_FOREVER;
    sim_time mid = tnet;
    if (lnet + ds > mid)
        mid = lnet + ds;
    if (lnet + dd > mid)
        mid = lnet + dd;
    return ls + mid + ld;
}

/* closed_form, stopping the test where it fails (out of memory for a
 * link of the path, made on first use, under --failalloc) */
#define CLOSED_FORM(var, t, src, dst, bytes)                              \
    sim_time var = closed_form(t, src, dst, bytes);                      \
    if (var == SIM_FOREVER)                                              \
        ASSERT_STREQ(kb_fabric_errmsg((t)->f), "(a time)")

/* kb_dma_time, stopping the test where it fails: SIM_FOREVER is an error
 * (out of memory under --failalloc, for its route), which its message
 * says. */
#define DMA_TIME(var, d, src, dst, bytes)                                 \
    sim_time var = kb_dma_time(d, src, dst, bytes);                      \
    if (var == SIM_FOREVER)                                              \
        ASSERT_STREQ(kb_dma_errmsg(d), "(a time)")

/* A thread doing one blocking copy after `start`. */
struct job {
    struct kb_dma *d;
    enum kb_dma_class c;
    struct kb_dma_end src, dst;
    uint64_t bytes;
    sim_time start, end;
    int rc;
};

static void job_thread(struct sim *s, void *arg)
{
    struct job *j = arg;
    if (j->start)
        sim_wait(s, j->start);
    j->rc = kb_dma_copy(j->d, j->c, j->src, j->dst, j->bytes);
    j->end = sim_now(s);
}

static sim_time run_one(struct tsys *t, struct kb_dma *d, struct kb_dma_end a,
                        struct kb_dma_end b, uint64_t bytes, int *rc)
{
    struct job j = {d, KB_DMA_READ, a, b, bytes, 0, 0, -1};
    if (!sim_thread(t->s, "job", job_thread, &j, 0)) {
        *rc = SIM_ENOMEM;
        return 0;
    }
    int r = sim_run(t->s, SIM_FOREVER);
    *rc = r < 0 ? r : j.rc;
    return j.end;
}

/* ---- closed form ---------------------------------------------------------- */

TEST(closed_form_hops_and_sizes)
{
    static const uint64_t sizes[] = {1, 256, 1000, 4096, 65536 + 17};
    static const int dst_router[] = {0, 1, 3};
    for (size_t a = 0; a < sizeof dst_router / sizeof dst_router[0]; a++) {
        for (size_t b = 0; b < sizeof sizes / sizeof sizes[0]; b++) {
            /* HBM -> HBM: every link 256 GB/s, so the fabric's closed form is
             * exact for any size; small copies are bound by one HBM channel */
            struct tsys *t = T_OWN(tsys_new(4, 1, false), tsys_free);
            ASSERT_TRUE(t);
            struct kb_dma_end src = hbm_end(t, 0, 0x1000);
            struct kb_dma_end dst = hbm_end(t, dst_router[a], 0x20000);
            if (dst_router[a] == 0)
                dst = tcm_end(t, 0, 0x100);
            int rc;
            sim_time end = run_one(t, t->dma[0], src, dst, sizes[b], &rc);
            ASSERT_EQ(rc, 0);
            CLOSED_FORM(cf, t, src, dst, sizes[b]);
            ASSERT_U64_EQ(end, cf);
            DMA_TIME(want, t->dma[0], src, dst, sizes[b]);
            ASSERT_U64_EQ(end, want);
            T_FREE(tsys_free, t);
        }
    }
}

TEST(closed_form_by_hand)
{
    /* 256 B, HBM of pe0 at 0 -> TCM of pe1: one HBM channel, 8 ns data;
     * path hbm->r0 (0.5 + 1), r0->r1 (1.7 + 1): Tnet 4.2, Lnet 2.2 ns;
     * T = 6 + max(4.2, 2.2 + 8, 2.2 + 0.5) + 0 = 16.2 ns (memory-bound) */
    struct tsys *t = T_OWN(tsys_new(2, 1, false), tsys_free);
    ASSERT_TRUE(t);
    DMA_TIME(t1, t->dma[0], hbm_end(t, 0, 0), tcm_end(t, 1, 0), 256);
    ASSERT_U64_EQ(t1, 16200);
    /* 64 KiB TCM of pe0 -> TCM of pe1: 256 flits over one 256 GB/s hop:
     * Tnet = 1.7 + 256 = 257.7 ns against Ds = Dd = 128 ns: fabric-bound */
    DMA_TIME(t2, t->dma[0], tcm_end(t, 0, 0), tcm_end(t, 1, 0), 65536);
    ASSERT_U64_EQ(t2, 257700);
    T_FREE(tsys_free, t);
}

TEST(closed_form_sram_bank_hops)
{
    /* SRAM (128 GB/s link) -> HBM three routers away: mixed bandwidths,
     * exact for whole flits */
    static const uint64_t sizes[] = {256, 4096, 32768};
    for (size_t b = 0; b < sizeof sizes / sizeof sizes[0]; b++) {
        struct tsys *t = T_OWN(tsys_new(4, 1, false), tsys_free);
        ASSERT_TRUE(t);
        struct kb_dma_end src = sram_end(t, 0, 0), dst = hbm_end(t, 3, 0);
        int rc;
        sim_time end = run_one(t, t->dma[0], src, dst, sizes[b], &rc);
        ASSERT_EQ(rc, 0);
        CLOSED_FORM(cf, t, src, dst, sizes[b]);
        ASSERT_U64_EQ(end, cf);
        T_FREE(tsys_free, t);
    }
}

/* ---- queues and contention ------------------------------------------------ */

struct done_rec {
    struct sim *s;
    sim_time at;
    int status, calls;
};

static void on_done(void *ud, int status)
{
    struct done_rec *r = ud;
    r->at = sim_now(r->s);
    r->status = status;
    r->calls++;
}

TEST(channel_fifo_and_count)
{
    /* two 16 KiB copies on one DMA to different PEs (no shared link): with
     * one read channel the second starts when the first ends; with two they
     * run side by side */
    for (uint32_t ch = 1; ch <= 2; ch++) {
        struct tsys *t = T_OWN(tsys_new(3, ch, false), tsys_free);
        ASSERT_TRUE(t);
        struct kb_dma_end a = tcm_end(t, 1, 0), b = tcm_end(t, 1, 0x10000);
        struct kb_dma_end da = tcm_end(t, 0, 0), db = tcm_end(t, 2, 0);
        DMA_TIME(ta, t->dma[1], a, da, 16384);
        DMA_TIME(tb, t->dma[1], b, db, 16384);
        struct done_rec ra = {t->s, 0, 1, 0}, rb = {t->s, 0, 1, 0};
        ASSERT_EQ(kb_dma_copy_async(t->dma[1], KB_DMA_READ, a, da, 16384, NULL,
                                    on_done, &ra), 0);
        ASSERT_EQ(kb_dma_copy_async(t->dma[1], KB_DMA_READ, b, db, 16384, NULL,
                                    on_done, &rb), 0);
        ASSERT_U64_EQ(kb_dma_pending(t->dma[1]), 2);
        ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
        ASSERT_EQ(ra.calls, 1);
        ASSERT_EQ(rb.calls, 1);
        ASSERT_EQ(ra.status, 0);
        ASSERT_EQ(rb.status, 0);
        ASSERT_U64_EQ(ra.at, ta);
        /* both read the same TCM: the second read's data phase follows the
         * first (0..32 ns, then 32..64 ns), which still keeps ahead of its
         * 256 GB/s stream (ending at 1.7 + 64 ns) */
        ASSERT_U64_EQ(rb.at, ch == 1 ? ta + tb : tb);
        struct kb_dma_stats st;
        kb_dma_get_stats(t->dma[1], KB_DMA_READ, &st);
        ASSERT_U64_EQ(st.transfers, 2);
        ASSERT_U64_EQ(st.bytes, 32768);
        ASSERT_U64_EQ(st.busy_ps, ta + tb);
        ASSERT_EQ(kb_dma_channel_stats(t->dma[1], KB_DMA_READ, 0, &st), 0);
        ASSERT_U64_EQ(st.transfers, ch == 1 ? 2 : 1);
        ASSERT_EQ(kb_dma_channel_stats(t->dma[1], KB_DMA_READ, (int)ch, &st),
                  SIM_EINVAL);
        kb_dma_get_stats(t->dma[1], KB_DMA_WRITE, &st);
        ASSERT_U64_EQ(st.transfers, 0);
        ASSERT_U64_EQ(kb_dma_pending(t->dma[1]), 0);
        T_FREE(tsys_free, t);
    }
}

TEST(two_dmas_serialise_on_one_link)
{
    /* pe0 and pe1 each copy 32 KiB from their TCM to pe2 / pe3 on a line
     * 0-1-2-3: both worms need link r1->r2, which serves them whole, in
     * FIFO order. The one behind finishes one 32 KiB stream later. */
    struct tsys *t = T_OWN(tsys_new(4, 1, false), tsys_free);
    ASSERT_TRUE(t);
    uint64_t n = 32768;
    struct job a = {t->dma[0], KB_DMA_WRITE, tcm_end(t, 0, 0), tcm_end(t, 2, 0),
                    n, 0, 0, -1};
    struct job b = {t->dma[1], KB_DMA_WRITE, tcm_end(t, 1, 0), tcm_end(t, 3, 0),
                    n, 0, 0, -1};
    DMA_TIME(ta, t->dma[0], a.src, a.dst, n);
    DMA_TIME(tb, t->dma[1], b.src, b.dst, n);
    ASSERT_U64_EQ(ta, tb);
    ASSERT_TRUE(sim_thread(t->s, "a", job_thread, &a, 0));
    ASSERT_TRUE(sim_thread(t->s, "b", job_thread, &b, 0));
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(a.rc, 0);
    ASSERT_EQ(b.rc, 0);
    sim_time first = a.end < b.end ? a.end : b.end;
    sim_time second = a.end < b.end ? b.end : a.end;
    /* b's head reaches r1->r2 first (one hop nearer), so b goes first */
    ASSERT_U64_EQ(b.end, first);
    ASSERT_U64_EQ(first, tb);
    /* a's worm gets r1->r2 when b's last flit has left it (n / bw), then
     * streams its n bytes there (its flits are already waiting at r1) and
     * its last flit crosses the wire: 2 n / bw + 1.7 ns */
    ASSERT_U64_EQ(second, 2 * n * 1000 / 256 + 1700);
    struct kb_link_stats ls;
    kb_link_get_stats(kb_fabric_link(t->f, kb_noc_link(t->noc, 1, KB_NOC_E)), &ls);
    ASSERT_U64_EQ(ls.bytes, 2 * n);
    T_FREE(tsys_free, t);
}

/* ---- bytes ----------------------------------------------------------------- */

TEST(real_bytes_and_timing_only)
{
    uint64_t n = 10000;
    unsigned char *in = T_OWN(malloc(n), free), *out = T_OWN(malloc(n), free);
    unsigned char *zero = T_OWN(calloc(1, n), free);
    ASSERT_TRUE(in && out && zero);
    for (uint64_t i = 0; i < n; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    sim_time ends[2];
    for (int mode = 0; mode < 2; mode++) {
        struct tsys *t = T_OWN(tsys_new(3, 1, mode == 1), tsys_free);
        ASSERT_TRUE(t);
        ASSERT_TRUE(kb_dma_timing_only(t->dma[0]) == (mode == 1));
        ASSERT_EQ(kb_mem_write(t->hbm[0], 0x300, in, n), 0);
        /* HBM of pe0 -> SRAM of pe2 -> TCM of pe1 */
        struct job j1 = {t->dma[0], KB_DMA_WRITE, hbm_end(t, 0, 0x300),
                         sram_end(t, 2, 0x40), n, 0, 0, -1};
        struct job j2 = {t->dma[1], KB_DMA_READ, sram_end(t, 2, 0x40),
                         tcm_end(t, 1, 0x11), n, 0, 0, -1};
        CLOSED_FORM(t1, t, j1.src, j1.dst, n);
        j2.start = t1;
        ASSERT_TRUE(sim_thread(t->s, "j1", job_thread, &j1, 0));
        ASSERT_TRUE(sim_thread(t->s, "j2", job_thread, &j2, 0));
        ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
        ASSERT_EQ(j1.rc, 0);
        ASSERT_EQ(j2.rc, 0);
        ASSERT_U64_EQ(j1.end, t1);
        ends[mode] = j2.end;
        ASSERT_EQ(kb_mem_read(t->tcm[1], 0x11, out, n), 0);
        ASSERT_TRUE(memcmp(out, mode == 0 ? in : zero, n) == 0);
        ASSERT_EQ(kb_mem_read(t->sram[2], 0x40, out, n), 0);
        ASSERT_TRUE(memcmp(out, mode == 0 ? in : zero, n) == 0);
        struct kb_dma_stats st;
        kb_dma_get_stats(t->dma[0], KB_DMA_WRITE, &st);
        ASSERT_U64_EQ(st.bytes, n);
        T_FREE(tsys_free, t);
    }
    ASSERT_U64_EQ(ends[0], ends[1]);
    T_FREE(free, in);
    T_FREE(free, out);
    T_FREE(free, zero);
}

TEST(overlapping_copy_in_one_memory)
{
    /* memmove semantics; the two data phases share the TCM */
    struct tsys *t = T_OWN(tsys_new(1, 1, false), tsys_free);
    ASSERT_TRUE(t);
    unsigned char in[300], out[300];
    for (int i = 0; i < 300; i++)
        in[i] = (unsigned char)i;
    ASSERT_EQ(kb_mem_write(t->tcm[0], 0, in, 300), 0);
    int rc;
    sim_time end = run_one(t, t->dma[0], tcm_end(t, 0, 0), tcm_end(t, 0, 100),
                           200, &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(kb_mem_read(t->tcm[0], 100, out, 200), 0);
    ASSERT_TRUE(memcmp(out, in, 200) == 0);
    /* read 200/512 ns then write 200/512 ns on the one channel */
    ASSERT_U64_EQ(end, 2 * 391);
    T_FREE(tsys_free, t);
}

/* Payloads cross 64 KiB storage pages at unaligned addresses on both
 * ends (the copy goes page to page), and never-written source bytes arrive
 * as zeros over bytes written before. */
TEST(copy_across_pages_unaligned)
{
    struct tsys *t = T_OWN(tsys_new(2, 1, false), tsys_free);
    ASSERT_TRUE(t);
    uint64_t n = 200000; /* 4 pages and more */
    unsigned char *in = T_OWN(malloc(n), free), *out = T_OWN(malloc(n), free);
    ASSERT_TRUE(in && out);
    for (uint64_t i = 0; i < n; i++)
        in[i] = (unsigned char)(i * 13 + (i >> 9));
    ASSERT_EQ(kb_mem_write(t->hbm[0], 0x10003, in, n), 0);
    int rc;
    run_one(t, t->dma[0], hbm_end(t, 0, 0x10003), tcm_end(t, 1, 0xFFF1), n, &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(kb_mem_read(t->tcm[1], 0xFFF1, out, n), 0);
    ASSERT_TRUE(memcmp(out, in, n) == 0);
    run_one(t, t->dma[0], hbm_end(t, 0, 0x800005), tcm_end(t, 1, 0xFFF1 + 100),
            70000, &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(kb_mem_read(t->tcm[1], 0xFFF1, out, n), 0);
    for (uint64_t i = 0; i < n; i++)
        if (out[i] != (i >= 100 && i < 70100 ? 0 : in[i]))
            ASSERT_U64_EQ(i, UINT64_MAX);
    T_FREE(free, in);
    T_FREE(free, out);
    T_FREE(tsys_free, t);
}

/* ---- errors ---------------------------------------------------------------- */

static int no_route(void *ud, int src, int dst, int *links, int max)
{
    (void)ud, (void)src, (void)dst, (void)links, (void)max;
    return SIM_EINVAL;
}

TEST(errors)
{
    struct tsys *t = T_OWN(tsys_new(2, 1, false), tsys_free);
    ASSERT_TRUE(t);
    struct kb_dma *d = t->dma[0];
    struct done_rec r = {t->s, 0, 1, 0};
    ASSERT_EQ(kb_dma_copy_async(d, KB_DMA_READ, tcm_end(t, 0, (1 << 20) - 8),
                                tcm_end(t, 1, 0), 16, NULL, on_done, &r),
              SIM_EINVAL);
    ASSERT_STREQ(kb_dma_errmsg(d), "dma of 'pe0': source of 16 bytes at 0xffff8 "
                                   "is beyond the 1048576 bytes of tcm of 'pe0'");
    struct kb_dma_end bad = {t->tcm[1], 0, 99};
    ASSERT_EQ(kb_dma_copy_async(d, KB_DMA_READ, tcm_end(t, 0, 0), bad, 16, NULL,
                                on_done, &r), SIM_EINVAL);
    ASSERT_STREQ(kb_dma_errmsg(d),
                 "dma of 'pe0': destination of the copy is at unknown node 99");
    ASSERT_EQ(kb_dma_copy(d, KB_DMA_READ, tcm_end(t, 0, 0), tcm_end(t, 1, 0), 16),
              SIM_EPERM);
    ASSERT_U64_EQ(kb_dma_time(d, tcm_end(t, 0, 0), bad, 16), SIM_FOREVER);
    ASSERT_U64_EQ(kb_dma_pending(d), 0);

    char err[200] = "";
    struct kb_dma_params dp = {0, 1, 1, 0, false};
    ASSERT_TRUE(kb_dma_new(t->s, "pe9", t->f, no_route, NULL, &dp, err,
                           sizeof err) == NULL);
    ASSERT_STREQ(err, "dma of 'pe9': comm channels must be >= 1, got 0");
    dp.comm_channels = 1;
    struct kb_dma *nr = T_OWN(kb_dma_new(t->s, "pe9", t->f, no_route, NULL, &dp, err,
                                   sizeof err), kb_dma_free);
    ASSERT_TRUE(nr);
    ASSERT_EQ(kb_dma_copy_async(nr, KB_DMA_COMM, tcm_end(t, 0, 0),
                                tcm_end(t, 1, 0), 16, NULL, on_done, &r),
              SIM_EINVAL);
    ASSERT_STREQ(kb_dma_errmsg(nr), "dma of 'pe9': no route from 'r0' to 'r1'");
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(r.calls, 0);
    T_FREE(kb_dma_free, nr);
    T_FREE(tsys_free, t);
}

/* Copies queued before the run on one channel go back to back, each
 * through every step of its service (the source's setup, the flits, the
 * memory-bound end), and a copy within one node (no flits) alongside: each
 * ends at its closed form after the one before it, in FIFO order, and the
 * channels, method processes, map no stack. */
TEST(back_to_back_copies_on_method_channels)
{
    struct tsys *t = T_OWN(tsys_new(2, 1, false), tsys_free);
    ASSERT_TRUE(t);
    struct kb_dma_end src = hbm_end(t, 0, 0), dst = tcm_end(t, 1, 0);
    struct kb_dma_end near = tcm_end(t, 0, 0x8000);
    /* 16.2 ns by hand (closed_form_by_hand): HBM setup 6 ns, memory-bound */
    DMA_TIME(one, t->dma[0], src, dst, 256);
    ASSERT_U64_EQ(one, 16200);
    /* 512 B within pe0's TCM (512 GB/s, no setup): no flits, and the read
     * and the write book the same channel one after the other, 1 + 1 ns
     * (the idle closed form, the larger of the two, says 1 ns) */
    DMA_TIME(local, t->dma[0], tcm_end(t, 0, 0), near, 512);
    ASSERT_U64_EQ(local, 1000);
    static struct done_rec r[5];
    for (int i = 0; i < 4; i++) {
        r[i] = (struct done_rec){t->s, 0, 1, 0};
        ASSERT_EQ(kb_dma_copy_async(t->dma[0], KB_DMA_READ, src, dst, 256, NULL,
                                    on_done, &r[i]), 0);
    }
    r[4] = (struct done_rec){t->s, 0, 1, 0};
    ASSERT_EQ(kb_dma_copy_async(t->dma[0], KB_DMA_WRITE, tcm_end(t, 0, 0), near, 512, NULL,
                                on_done, &r[4]), 0);
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(r[i].calls, 1);
        ASSERT_EQ(r[i].status, 0);
        ASSERT_U64_EQ(r[i].at, (sim_time)(i + 1) * one);
    }
    ASSERT_EQ(r[4].calls, 1);
    ASSERT_U64_EQ(r[4].at, 2 * local);
    struct kb_dma_stats st;
    kb_dma_get_stats(t->dma[0], KB_DMA_READ, &st);
    ASSERT_U64_EQ(st.transfers, 4);
    ASSERT_U64_EQ(st.busy_ps, 4 * one);
    struct sim_stats ss;
    sim_get_stats(t->s, &ss);
    ASSERT_U64_EQ(ss.stack_bytes, 0);
    ASSERT_U64_EQ(ss.threads_alive, 0);
    ASSERT_U64_EQ(ss.switches, 0);
    T_FREE(tsys_free, t);
}

/* A run that ends with copies in service and queued (a process failed)
 * leaves them to kb_dma_free: none may leak (checked under ASan and
 * valgrind). */
TEST(run_stopped_with_copies_in_service)
{
    struct tsys *t = T_OWN(tsys_new(2, 1, false), tsys_free);
    ASSERT_TRUE(t);
    static struct done_rec r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = (struct done_rec){t->s, 0, 1, 0};
        ASSERT_EQ(kb_dma_copy_async(t->dma[0], KB_DMA_READ, hbm_end(t, 0, 0),
                                    tcm_end(t, 1, 0), 65536, NULL, on_done,
                                    &r[i]), 0);
    }
    ASSERT_EQ(sim_run(t->s, 10 * SIM_NS), SIM_UNTIL);
    for (int i = 0; i < 3; i++) /* a copy that failed (out of memory) ended */
        if (r[i].calls)
            ASSERT_EQ(r[i].status, 0);
    ASSERT_U64_EQ(kb_dma_pending(t->dma[0]), 3); /* one in service */
    T_FREE(tsys_free, t);
}

/* A timed copy (kb_dma_copy_timed_async) takes
 * the time, counts and callback of a copy and writes nothing. */
TEST(timed_copies_write_nothing)
{
    uint64_t n = 10000;
    unsigned char *in = T_OWN(malloc(n), free), *out = T_OWN(malloc(n), free);
    ASSERT_TRUE(in && out);
    for (uint64_t i = 0; i < n; i++)
        in[i] = (unsigned char)(i * 5 + 1);
    sim_time at[2];
    for (int timed = 0; timed < 2; timed++) {
        struct tsys *t = T_OWN(tsys_new(3, 1, false), tsys_free);
        ASSERT_TRUE(t);
        ASSERT_EQ(kb_mem_write(t->hbm[0], 0x300, in, n), 0);
        struct kb_dma_end src = hbm_end(t, 0, 0x300), dst = tcm_end(t, 1, 0x11);
        CLOSED_FORM(want, t, src, dst, n);
        struct done_rec r = {t->s, 0, 1, 0};
        ASSERT_EQ(timed ? kb_dma_copy_timed_async(t->dma[0], KB_DMA_COMM, src, dst, n, NULL,
                                                  on_done, &r)
                        : kb_dma_copy_async(t->dma[0], KB_DMA_COMM, src, dst, n, NULL,
                                            on_done, &r),
                  0);
        ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
        ASSERT_EQ(r.calls, 1);
        ASSERT_EQ(r.status, 0);
        ASSERT_U64_EQ(r.at, want);
        at[timed] = r.at;
        struct kb_dma_stats st;
        kb_dma_get_stats(t->dma[0], KB_DMA_COMM, &st);
        ASSERT_U64_EQ(st.bytes, n);
        ASSERT_U64_EQ(st.transfers, 1);
        ASSERT_EQ(kb_mem_read(t->tcm[1], 0x11, out, n), 0);
        if (timed) {
            ASSERT_U64_EQ(kb_mem_pages(t->tcm[1]), 0);
        } else {
            ASSERT_TRUE(memcmp(out, in, n) == 0);
        }
        T_FREE(tsys_free, t);
    }
    ASSERT_U64_EQ(at[0], at[1]);
    T_FREE(free, out);
    T_FREE(free, in);
}

TEST_MAIN(closed_form_hops_and_sizes, closed_form_by_hand,
          closed_form_sram_bank_hops, channel_fifo_and_count,
          two_dmas_serialise_on_one_link, real_bytes_and_timing_only,
          overlapping_copy_in_one_memory, copy_across_pages_unaligned, errors,
          back_to_back_copies_on_method_channels, run_stopped_with_copies_in_service,
          timed_copies_write_nothing)
