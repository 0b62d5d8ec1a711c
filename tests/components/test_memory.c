/* test_memory.c — kb_mem: channel striping and serialisation against the
 * closed form, allocator and its capacity error, sparse storage, counters */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "memory.h"
#include "sim.h"
#include "test.h"

#define GiB ((uint64_t)1 << 30)

static const struct kb_mem_params HBM = {
    .kind = KB_MEM_HBM, .capacity = 2 * GiB, .bw_gbps = 32, .setup_ns = 6,
    .n_channels = 8, .burst_bytes = 256};

static const struct kb_mem_params TCM = {
    .kind = KB_MEM_TCM, .capacity = 16 << 20, .bw_gbps = 512, .setup_ns = 0,
    .n_channels = 1, .burst_bytes = 0};

static struct kb_mem *mem(struct sim *s, const struct kb_mem_params *p)
{
    char err[256];
    return T_OWN(kb_mem_new(s, "sip0.cube0.pe0", p, err, sizeof err),
                 kb_mem_free);
}

/* A thread that does one timed access after `start` and records its end. */
struct acc {
    struct kb_mem *m;
    uint64_t addr, bytes;
    sim_time start, end;
    int rc;
};

static void acc_thread(struct sim *s, void *arg)
{
    struct acc *a = arg;
    if (a->start)
        sim_wait(s, a->start);
    a->rc = kb_mem_access(a->m, a->addr, a->bytes, false);
    a->end = sim_now(s);
}

/* ---- timing ------------------------------------------------------------- */

TEST(closed_form)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *h = mem(s, &HBM), *t = mem(s, &TCM);
    ASSERT_TRUE(h && t);
    ASSERT_U64_EQ(kb_mem_time(h, 0, 256), 6000 + 8000);     /* one channel */
    ASSERT_U64_EQ(kb_mem_time(h, 0, 2048), 6000 + 8000);    /* all eight */
    ASSERT_U64_EQ(kb_mem_time(h, 0, 65536), 6000 + 256000); /* 8 KiB each */
    ASSERT_U64_EQ(kb_mem_time(h, 100, 1000), 6000 + 8000);  /* 156,256×3,76 */
    ASSERT_U64_EQ(kb_mem_time(h, 200, 100), 6000 + 1750);   /* 56 and 44 */
    ASSERT_U64_EQ(kb_mem_time(h, 256 * 7, 512), 6000 + 8000); /* ch 7, ch 0 */
    ASSERT_U64_EQ(kb_mem_time(h, 0, 2048 + 256), 6000 + 16000); /* ch 0 twice */
    ASSERT_U64_EQ(kb_mem_time(h, 0, 0), 6000);
    ASSERT_U64_EQ(kb_mem_time(t, 0, 65536), 128000);
    ASSERT_U64_EQ(kb_mem_time(t, 3, 1), 2); /* 1.953125 ps */
    T_FREE(kb_mem_free, h);
    T_FREE(kb_mem_free, t);
    T_FREE(sim_free, s);
}

TEST(striping_gives_eight_times_one_channel)
{
    /* the same 64 KiB from the 8-channel HBM and from one 32 GB/s channel */
    struct kb_mem_params one = HBM;
    one.n_channels = 1;
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *h8 = mem(s, &HBM), *h1 = mem(s, &one);
    ASSERT_TRUE(h8 && h1);
    struct acc a = {h8, 0, 65536, 0, 0, -1}, b = {h1, 0, 65536, 0, 0, -1};
    ASSERT_TRUE(sim_thread(s, "a", acc_thread, &a, 0));
    ASSERT_TRUE(sim_thread(s, "b", acc_thread, &b, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(a.rc, 0);
    ASSERT_U64_EQ(a.end, 6000 + 65536 * 1000 / 32 / 8);
    ASSERT_U64_EQ(b.end, 6000 + 65536 * 1000 / 32);
    ASSERT_U64_EQ(b.end - 6000, 8 * (a.end - 6000));
    T_FREE(kb_mem_free, h8);
    T_FREE(kb_mem_free, h1);
    T_FREE(sim_free, s);
}

TEST(same_channel_serialises)
{
    /* eight 256 B reads at t = 0: on eight channels they overlap, on one
     * channel (addresses 2 KiB apart) their data phases queue */
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *spread = mem(s, &HBM), *same = mem(s, &HBM);
    ASSERT_TRUE(spread && same);
    struct acc a[8], b[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (struct acc){spread, (uint64_t)i * 256, 256, 0, 0, -1};
        b[i] = (struct acc){same, (uint64_t)i * 2048, 256, 0, 0, -1};
        ASSERT_TRUE(sim_thread(s, "a", acc_thread, &a[i], 0));
        ASSERT_TRUE(sim_thread(s, "b", acc_thread, &b[i], 0));
    }
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    for (int i = 0; i < 8; i++) {
        ASSERT_U64_EQ(a[i].end, 14000);
        ASSERT_U64_EQ(b[i].end, 14000 + (sim_time)i * 8000);
    }
    struct kb_mem_stats st;
    kb_mem_get_stats(same, &st);
    ASSERT_U64_EQ(st.reads, 8);
    ASSERT_U64_EQ(st.bytes_read, 2048);
    ASSERT_U64_EQ(st.busy_ps, 8 * 8000);
    /* channel 0 busy 64 of 70 ns, the seven others idle */
    ASSERT_NEAR(kb_mem_utilisation(same, 0), 64000.0 / (70000.0 * 8), 1e-12);
    T_FREE(kb_mem_free, spread);
    T_FREE(kb_mem_free, same);
    T_FREE(sim_free, s);
}

TEST(setup_overlaps_earlier_transfers)
{
    /* a second access 10 ns later: its setup ends at 16, after the first
     * one's data (6..14), so it does not wait; a third at 12 ns waits for
     * the second's data phase (16..24) */
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *h = mem(s, &HBM);
    ASSERT_TRUE(h);
    struct acc a = {h, 0, 256, 0, 0, -1};
    struct acc b = {h, 2048, 256, 10 * SIM_NS, 0, -1};
    struct acc c = {h, 4096, 256, 12 * SIM_NS, 0, -1};
    ASSERT_TRUE(sim_thread(s, "a", acc_thread, &a, 0));
    ASSERT_TRUE(sim_thread(s, "b", acc_thread, &b, 0));
    ASSERT_TRUE(sim_thread(s, "c", acc_thread, &c, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_U64_EQ(a.end, 14000);
    ASSERT_U64_EQ(b.end, 24000);
    ASSERT_U64_EQ(c.end, 32000);
    T_FREE(kb_mem_free, h);
    T_FREE(sim_free, s);
}

TEST(schedule_without_waiting)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *h = mem(s, &HBM);
    ASSERT_TRUE(h);
    ASSERT_U64_EQ(kb_mem_schedule(h, 0, 2048, true), 14000);
    ASSERT_U64_EQ(kb_mem_schedule(h, 0, 2048, true), 22000);
    ASSERT_U64_EQ(kb_mem_schedule(h, 2 * GiB - 1, 2, false), SIM_FOREVER);
    ASSERT_CONTAINS(kb_mem_errmsg(h), "read of 2 bytes at 0x7fffffff is "
                    "beyond the 2147483648 bytes of hbm of 'sip0.cube0.pe0'");
    ASSERT_EQ(kb_mem_access(h, 0, 1, false), SIM_EPERM);
    ASSERT_CONTAINS(kb_mem_errmsg(h), "not called from a thread process");
    struct kb_mem_stats st;
    kb_mem_get_stats(h, &st);
    ASSERT_U64_EQ(st.writes, 2);
    ASSERT_U64_EQ(st.bytes_written, 4096);
    ASSERT_U64_EQ(st.reads, 0);
    T_FREE(kb_mem_free, h);
    T_FREE(sim_free, s);
}

/* ---- allocation --------------------------------------------------------- */

TEST(capacity_error)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *h = mem(s, &HBM);
    ASSERT_TRUE(h);
    uint64_t a, b;
    ASSERT_EQ(kb_mem_alloc(h, 2 * GiB - 8, 1, &a), 0);
    ASSERT_U64_EQ(a, 0);
    ASSERT_EQ(kb_mem_alloc(h, 16, 1, &b), SIM_ENOMEM);
    ASSERT_STREQ(kb_mem_errmsg(h), "hbm of 'sip0.cube0.pe0' is full: "
                 "2147483648 bytes, 16 requested, 8 free");
    ASSERT_EQ(kb_mem_alloc(h, 8, 8, &b), 0);
    ASSERT_U64_EQ(b, 2 * GiB - 8);
    ASSERT_U64_EQ(kb_mem_free_bytes(h), 0);
    ASSERT_EQ(kb_mem_alloc(h, 1, 1, &b), SIM_ENOMEM);
    ASSERT_CONTAINS(kb_mem_errmsg(h), "is full");
    T_FREE(kb_mem_free, h);
    T_FREE(sim_free, s);
}

TEST(first_fit_alignment_and_coalescing)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *t = mem(s, &TCM);
    ASSERT_TRUE(t);
    uint64_t a, b, c, d;
    ASSERT_EQ(kb_mem_alloc(t, 1, 0, &a), 0);
    ASSERT_EQ(kb_mem_alloc(t, 64, 4096, &b), 0);
    ASSERT_U64_EQ(a, 0);
    ASSERT_U64_EQ(b, 4096);
    ASSERT_EQ(kb_mem_alloc(t, 100, 1, &c), 0); /* into the gap 1..4096 */
    ASSERT_U64_EQ(c, 1);
    ASSERT_EQ(kb_mem_dealloc(t, c), 0);
    ASSERT_EQ(kb_mem_dealloc(t, c), SIM_EINVAL);
    ASSERT_CONTAINS(kb_mem_errmsg(t), "tcm of 'sip0.cube0.pe0': no block "
                    "allocated at 0x1");
    ASSERT_EQ(kb_mem_alloc(t, 3, 3, &d), SIM_EINVAL);
    ASSERT_CONTAINS(kb_mem_errmsg(t), "alignment 3 is not a power of two");
    ASSERT_EQ(kb_mem_alloc(t, 0, 1, &d), SIM_EINVAL);

    /* freeing everything joins the pieces into one block again */
    uint64_t cap = 16 << 20;
    ASSERT_EQ(kb_mem_dealloc(t, a), 0);
    ASSERT_EQ(kb_mem_dealloc(t, b), 0);
    ASSERT_U64_EQ(kb_mem_free_bytes(t), cap);
    ASSERT_EQ(kb_mem_alloc(t, cap, 1 << 20, &d), 0);
    ASSERT_U64_EQ(d, 0);
    ASSERT_EQ(kb_mem_dealloc(t, d), 0);

    /* fragmentation: three 1 KiB blocks and the rest; free the outer two */
    uint64_t x[3], rest;
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(kb_mem_alloc(t, 1024, 1, &x[i]), 0);
        ASSERT_U64_EQ(x[i], (uint64_t)i * 1024);
    }
    ASSERT_EQ(kb_mem_alloc(t, cap - 3072, 1, &rest), 0);
    ASSERT_EQ(kb_mem_dealloc(t, x[0]), 0);
    ASSERT_EQ(kb_mem_dealloc(t, x[2]), 0);
    ASSERT_U64_EQ(kb_mem_free_bytes(t), 2048);
    ASSERT_EQ(kb_mem_alloc(t, 1500, 1, &d), SIM_ENOMEM);
    ASSERT_STREQ(kb_mem_errmsg(t), "tcm of 'sip0.cube0.pe0' has no room for "
                 "1500 bytes aligned to 1: 16777216 bytes, 2048 free but "
                 "fragmented in 2 blocks");
    ASSERT_EQ(kb_mem_dealloc(t, x[1]), 0);
    ASSERT_EQ(kb_mem_alloc(t, 3072, 64, &d), 0);
    ASSERT_U64_EQ(d, 0);
    T_FREE(kb_mem_free, t);
    T_FREE(sim_free, s);
}

/* The peak counts bytes allocated at once, not the sum of allocations; a
 * failed allocation leaves it as it was. */
TEST(peak_allocation)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *t = mem(s, &TCM);
    ASSERT_TRUE(t);
    struct kb_mem_stats st;
    uint64_t a, b, c;
    kb_mem_get_stats(t, &st);
    ASSERT_U64_EQ(st.peak_alloc_bytes, 0);
    ASSERT_EQ(kb_mem_alloc(t, 1000, 1, &a), 0);
    ASSERT_EQ(kb_mem_alloc(t, 3000, 1, &b), 0);
    ASSERT_EQ(kb_mem_dealloc(t, a), 0);
    ASSERT_EQ(kb_mem_dealloc(t, b), 0);
    ASSERT_EQ(kb_mem_alloc(t, 2500, 1, &c), 0); /* 2500 < 4000 at once */
    kb_mem_get_stats(t, &st);
    ASSERT_U64_EQ(st.peak_alloc_bytes, 4000);
    ASSERT_EQ(kb_mem_alloc(t, 4096, 1024, &a), 0); /* at 3072: 6596 at once */
    ASSERT_EQ(kb_mem_alloc(t, (uint64_t)32 << 20, 1, &b), SIM_ENOMEM);
    kb_mem_get_stats(t, &st);
    ASSERT_U64_EQ(st.peak_alloc_bytes, 6596);
    T_FREE(kb_mem_free, t);
    T_FREE(sim_free, s);
}

/* ---- contents ----------------------------------------------------------- */

TEST(sparse_storage)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    /* 256 PEs' worth of 2 GiB HBMs cost nothing until written */
    struct kb_mem *h[256];
    for (int i = 0; i < 256; i++) {
        h[i] = mem(s, &HBM);
        ASSERT_TRUE(h[i]);
    }
    ASSERT_U64_EQ(kb_mem_pages(h[0]), 0);
    unsigned char *buf = T_OWN(malloc(1 << 20), free);
    ASSERT_TRUE(buf);
    memset(buf, 0xAB, 1 << 20);
    ASSERT_EQ(kb_mem_read(h[7], GiB, buf, 1 << 20), 0);
    int zeros = 1;
    for (int i = 0; i < 1 << 20; i++)
        zeros &= buf[i] == 0;
    ASSERT_TRUE(zeros);
    ASSERT_U64_EQ(kb_mem_pages(h[7]), 0);

    /* a write across a page boundary touches exactly two pages */
    unsigned char in[100], out[300];
    for (int i = 0; i < 100; i++)
        in[i] = (unsigned char)(i * 7 + 1);
    ASSERT_EQ(kb_mem_write(h[7], 65536 - 50, in, 100), 0);
    ASSERT_U64_EQ(kb_mem_pages(h[7]), 2);
    ASSERT_EQ(kb_mem_read(h[7], 65536 - 150, out, 300), 0);
    for (int i = 0; i < 300; i++) {
        int want = i >= 100 && i < 200 ? in[i - 100] : 0;
        ASSERT_EQ(out[i], want);
    }
    /* the last byte of the address space */
    ASSERT_EQ(kb_mem_write(h[7], 2 * GiB - 1, in, 1), 0);
    ASSERT_EQ(kb_mem_read(h[7], 2 * GiB - 1, out, 1), 0);
    ASSERT_EQ(out[0], in[0]);
    ASSERT_EQ(kb_mem_write(h[7], 2 * GiB - 1, in, 2), SIM_EINVAL);
    ASSERT_STREQ(kb_mem_errmsg(h[7]), "write of 2 bytes at 0x7fffffff is "
                 "beyond the 2147483648 bytes of hbm of 'sip0.cube0.pe0'");
    ASSERT_EQ(kb_mem_read(h[7], UINT64_MAX, out, 2), SIM_EINVAL);
    ASSERT_U64_EQ(kb_mem_pages(h[7]), 3);
    ASSERT_U64_EQ(kb_mem_pages(h[8]), 0);
    /* pages are small (KB_MEM_PAGE_BYTES): a ring of four pages costs four
     * pages, not a 64 KiB one */
    ASSERT_EQ(kb_mem_write(h[8], KB_MEM_PAGE_BYTES, buf, 4 * KB_MEM_PAGE_BYTES), 0);
    ASSERT_U64_EQ(kb_mem_pages(h[8]), 4);
    T_FREE(free, buf);
    for (int i = 0; i < 256; i++)
        T_FREE(kb_mem_free, h[i]);
    T_FREE(sim_free, s);
}

TEST(params_are_checked)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    struct kb_mem_params p = HBM;
    p.bw_gbps = 0;
    ASSERT_TRUE(kb_mem_new(s, "sip0.cube0.pe0", &p, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "hbm of 'sip0.cube0.pe0': bandwidth must be a positive "
                 "number of GB/s, got 0");
    p = HBM;
    p.n_channels = 6;
    ASSERT_TRUE(kb_mem_new(s, "x", &p, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "hbm of 'x': channels must be a power of two up to 64, "
                 "got 6");
    p = HBM;
    p.burst_bytes = 0;
    ASSERT_TRUE(kb_mem_new(s, "x", &p, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "hbm of 'x': burst must be a power of two bytes, got 0");
    p = TCM;
    p.capacity = 0;
    ASSERT_TRUE(kb_mem_new(s, "x", &p, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "tcm of 'x': capacity must be > 0 bytes, got 0");
    p = TCM;
    p.setup_ns = -2;
    p.kind = KB_MEM_SRAM;
    ASSERT_TRUE(kb_mem_new(s, "x", &p, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "sram of 'x': setup must be >= 0 ns, got -2");
    T_FREE(sim_free, s);
}

#define PAGE ((uint64_t)KB_MEM_PAGE_BYTES)

/* A byte pattern that differs at every offset of a few pages. */
static unsigned char pat(uint64_t i) { return (unsigned char)(i * 131 + (i >> 8) * 7 + 1); }

/* Walking a range by spans sees the written bytes in place, NULL for
 * pages never written, and spans that end at page boundaries. */
TEST(spans_read_and_write_in_place)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *m = mem(s, &TCM);
    ASSERT_TRUE(m);
    uint64_t base = 3 * PAGE - 1000, n = 2 * PAGE + 3000; /* 3 boundaries */
    uint64_t a = base, left = n, i = 0, spans = 0;
    while (left) {
        unsigned char *p;
        uint64_t len;
        ASSERT_EQ(kb_mem_write_span(m, a, left, &p, &len), 0);
        ASSERT_TRUE(len > 0 && len <= left);
        ASSERT_TRUE(((a + len) & (PAGE - 1)) == 0 || len == left);
        for (uint64_t j = 0; j < len; j++)
            p[j] = pat(i + j);
        a += len, left -= len, i += len, spans++;
    }
    ASSERT_U64_EQ(spans, 4);
    ASSERT_U64_EQ(kb_mem_pages(m), 4);
    unsigned char *out = T_OWN(malloc(n + 2000), free);
    ASSERT_TRUE(out);
    ASSERT_EQ(kb_mem_read(m, base - 1000, out, n + 2000), 0);
    for (uint64_t j = 0; j < 1000; j++) /* before: never written */
        ASSERT_EQ(out[j], 0);
    for (uint64_t j = 0; j < n; j++)
        if (out[1000 + j] != pat(j))
            ASSERT_EQ(out[1000 + j], pat(j));
    for (uint64_t j = 0; j < 1000; j++) /* after, in a page made whole */
        ASSERT_EQ(out[1000 + n + j], 0);
    /* reading back by spans: the same bytes, in place */
    a = base, left = n, i = 0;
    while (left) {
        const unsigned char *p;
        uint64_t len;
        ASSERT_EQ(kb_mem_read_span(m, a, left, &p, &len), 0);
        ASSERT_TRUE(p != NULL);
        ASSERT_TRUE(memcmp(p, out + 1000 + i, len) == 0);
        a += len, left -= len, i += len;
    }
    const unsigned char *p;
    uint64_t len;
    ASSERT_EQ(kb_mem_read_span(m, 9 * PAGE + 5, 3 * PAGE, &p, &len), 0);
    ASSERT_TRUE(p == NULL);
    ASSERT_U64_EQ(len, PAGE - 5);
    /* no page for an empty write span; range errors as read and write */
    unsigned char *w;
    ASSERT_EQ(kb_mem_write_span(m, 12 * PAGE, 0, &w, &len), 0);
    ASSERT_U64_EQ(len, 0);
    ASSERT_U64_EQ(kb_mem_pages(m), 4);
    ASSERT_EQ(kb_mem_read_span(m, (16 << 20) - 8, 16, &p, &len), SIM_EINVAL);
    ASSERT_STREQ(kb_mem_errmsg(m), "read of 16 bytes at 0xfffff8 is beyond the "
                                   "16777216 bytes of tcm of 'sip0.cube0.pe0'");
    ASSERT_EQ(kb_mem_write_span(m, (16 << 20) + 1, 0, &w, &len), SIM_EINVAL);
    ASSERT_STREQ(kb_mem_errmsg(m), "write of 0 bytes at 0x1000001 is beyond the "
                                   "16777216 bytes of tcm of 'sip0.cube0.pe0'");
    T_FREE(free, out);
    T_FREE(kb_mem_free, m);
    T_FREE(sim_free, s);
}

/* A page written whole skips its zero fill; a page written in part is
 * zero elsewhere, also after whole pages were freed and reused. */
TEST(whole_page_writes_keep_zeros_elsewhere)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    for (int round = 0; round < 3; round++) {
        struct kb_mem *m = mem(s, &TCM);
        ASSERT_TRUE(m);
        unsigned char *buf = T_OWN(malloc(3 * PAGE), free);
        ASSERT_TRUE(buf);
        memset(buf, 0xA5, 3 * PAGE);
        ASSERT_EQ(kb_mem_write(m, PAGE, buf, PAGE), 0);          /* whole */
        ASSERT_EQ(kb_mem_write(m, 3 * PAGE + 7, buf, 100), 0);   /* part */
        ASSERT_EQ(kb_mem_read(m, 0, buf, 3 * PAGE), 0);
        for (uint64_t j = 0; j < 3 * PAGE; j++)
            if (buf[j] != (j >= PAGE && j < 2 * PAGE ? 0xA5 : 0))
                ASSERT_U64_EQ(j, UINT64_MAX);
        ASSERT_EQ(kb_mem_read(m, 3 * PAGE, buf, PAGE), 0);
        for (uint64_t j = 0; j < PAGE; j++)
            if (buf[j] != (j >= 7 && j < 107 ? 0xA5 : 0))
                ASSERT_U64_EQ(j, UINT64_MAX);
        T_FREE(free, buf);
        T_FREE(kb_mem_free, m);
    }
    T_FREE(sim_free, s);
}

/* Freeing a block gives back the pages that lie wholly in free space and
 * clears its bytes in a page it shares with a live block, so a new block
 * reads as zeros and a page reused by another memory carries nothing. */
TEST(freed_blocks_read_as_zeros_and_give_pages_back)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *m = mem(s, &TCM), *other = mem(s, &TCM);
    ASSERT_TRUE(m && other);
    unsigned char *buf = T_OWN(malloc(4 * PAGE), free);
    ASSERT_TRUE(buf);
    uint64_t a, b, c;
    ASSERT_EQ(kb_mem_alloc(m, 3 * PAGE + 100, 0, &a), 0);
    ASSERT_EQ(kb_mem_alloc(m, 200, 0, &b), 0);
    ASSERT_U64_EQ(a, 0);
    ASSERT_U64_EQ(b, 3 * PAGE + 100);
    memset(buf, 0xA5, 4 * PAGE);
    ASSERT_EQ(kb_mem_write(m, 0, buf, 3 * PAGE + 300), 0);
    ASSERT_U64_EQ(kb_mem_pages(m), 4);
    ASSERT_EQ(kb_mem_dealloc(m, a), 0);
    ASSERT_U64_EQ(kb_mem_pages(m), 1); /* page 3 holds b */
    ASSERT_EQ(kb_mem_read(m, 0, buf, 4 * PAGE), 0);
    for (uint64_t j = 0; j < 4 * PAGE; j++)
        if (buf[j] != (j >= b && j < b + 200 ? 0xA5 : 0))
            ASSERT_U64_EQ(j, UINT64_MAX);
    ASSERT_EQ(kb_mem_dealloc(m, b), 0);
    ASSERT_U64_EQ(kb_mem_pages(m), 0);
    /* a new block over the same bytes, and another memory's partial
     * write into pages the first gave back, read as zeros */
    ASSERT_EQ(kb_mem_alloc(m, 4 * PAGE, 0, &c), 0);
    ASSERT_U64_EQ(c, 0);
    memset(buf, 0xFF, 4 * PAGE);
    ASSERT_EQ(kb_mem_read(m, c, buf, 4 * PAGE), 0);
    for (uint64_t j = 0; j < 4 * PAGE; j++)
        if (buf[j])
            ASSERT_U64_EQ(j, UINT64_MAX);
    unsigned char one = 7;
    for (uint64_t pg = 0; pg < 4; pg++)
        ASSERT_EQ(kb_mem_write(other, pg * PAGE + 5, &one, 1), 0);
    ASSERT_EQ(kb_mem_read(other, 0, buf, 4 * PAGE), 0);
    for (uint64_t j = 0; j < 4 * PAGE; j++)
        if (buf[j] != ((j & (PAGE - 1)) == 5 ? 7 : 0))
            ASSERT_U64_EQ(j, UINT64_MAX);
    /* a block freed in a memory that never stored anything */
    ASSERT_EQ(kb_mem_dealloc(m, c), 0);
    ASSERT_U64_EQ(kb_mem_pages(m), 0);
    T_FREE(free, buf);
    T_FREE(kb_mem_free, m);
    T_FREE(kb_mem_free, other);
    T_FREE(sim_free, s);
}

/* kb_mem_copy against a copy through a buffer: between memories and
 * within one, forwards and backwards overlapping, unaligned, across page
 * boundaries, from never-written pages. */
TEST(copy_page_to_page)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    uint64_t n = 3 * PAGE + 777;
    unsigned char *src = T_OWN(malloc(n), free);
    unsigned char *want = T_OWN(malloc(8 * PAGE), free);
    unsigned char *got = T_OWN(malloc(8 * PAGE), free);
    ASSERT_TRUE(src && want && got);
    for (uint64_t j = 0; j < n; j++)
        src[j] = pat(j);
    const struct { uint64_t from, to, bytes; } cases[] = {
        {5, PAGE - 3, n - 10},           /* forwards, overlapping */
        {PAGE - 3, 5, n - 10},           /* backwards-safe direction */
        {100, 101, n - 200},             /* overlap by all but one byte */
        {101, 100, n - 200},
        {0, 4 * PAGE + 1, n},            /* disjoint, unaligned */
        {PAGE, 2 * PAGE, PAGE},          /* whole pages */
        {6 * PAGE + 9, 10, PAGE + 50},   /* from a never-written page */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int same = 0; same < 2; same++) {
            struct kb_mem *a = mem(s, &TCM), *b = same ? a : mem(s, &TCM);
            ASSERT_TRUE(a && b);
            ASSERT_EQ(kb_mem_write(a, 0, src, n), 0);
            if (!same)
                ASSERT_EQ(kb_mem_write(b, 0, src, n), 0);
            ASSERT_EQ(kb_mem_read(b, 0, want, 8 * PAGE), 0);
            unsigned char *tmp = T_OWN(malloc(cases[c].bytes), free);
            ASSERT_TRUE(tmp);
            ASSERT_EQ(kb_mem_read(a, cases[c].from, tmp, cases[c].bytes), 0);
            memcpy(want + cases[c].to, tmp, cases[c].bytes);
            T_FREE(free, tmp);
            ASSERT_EQ(kb_mem_copy(b, cases[c].to, a, cases[c].from,
                                  cases[c].bytes), 0);
            ASSERT_EQ(kb_mem_read(b, 0, got, 8 * PAGE), 0);
            if (memcmp(got, want, 8 * PAGE) != 0)
                ASSERT_U64_EQ(c * 2 + (uint64_t)same, UINT64_MAX);
            if (!same)
                T_FREE(kb_mem_free, b);
            T_FREE(kb_mem_free, a);
        }
    }
    struct kb_mem *a = mem(s, &TCM), *h = mem(s, &HBM);
    ASSERT_TRUE(a && h);
    ASSERT_EQ(kb_mem_copy(h, 0, a, (16 << 20) - 8, 16), SIM_EINVAL);
    ASSERT_STREQ(kb_mem_errmsg(h), "read of 16 bytes at 0xfffff8 is beyond the "
                                   "16777216 bytes of tcm of 'sip0.cube0.pe0'");
    ASSERT_EQ(kb_mem_copy(a, (16 << 20) - 8, h, 0, 16), SIM_EINVAL);
    ASSERT_STREQ(kb_mem_errmsg(a), "write of 16 bytes at 0xfffff8 is beyond the "
                                   "16777216 bytes of tcm of 'sip0.cube0.pe0'");
    ASSERT_U64_EQ(kb_mem_pages(a), 0);
    T_FREE(kb_mem_free, a);
    T_FREE(kb_mem_free, h);
    T_FREE(free, src);
    T_FREE(free, want);
    T_FREE(free, got);
    T_FREE(sim_free, s);
}

/* Thousands of live blocks, freed and made again in a scrambled order:
 * every live block frees with its own size, a freed one is refused, and
 * everything joins into one free block at the end (the live blocks are a
 * hash table by address, which moves entries when one is removed) */
TEST(many_live_blocks_free_in_any_order)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *t = mem(s, &TCM);
    ASSERT_TRUE(t);
    enum { N = 3000 };
    static uint64_t addr[N], size[N];
    static bool live[N];
    uint64_t r = 2463534242u, cap = 16 << 20, used = 0;
    for (int i = 0; i < N; i++) {
        size[i] = 64 * (1 + i % 37);
        ASSERT_EQ(kb_mem_alloc(t, size[i], 64, &addr[i]), 0);
        live[i] = true;
        used += size[i];
    }
    ASSERT_U64_EQ(addr[1], 64); /* first fit, packed */
    for (int round = 0; round < 4 * N; round++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        int i = (int)(r % N);
        if (live[i]) {
            ASSERT_EQ(kb_mem_dealloc(t, addr[i]), 0);
            used -= size[i];
            live[i] = false;
            ASSERT_EQ(kb_mem_dealloc(t, addr[i]), SIM_EINVAL);
        } else {
            ASSERT_EQ(kb_mem_alloc(t, size[i], 64, &addr[i]), 0);
            used += size[i];
            live[i] = true;
        }
        ASSERT_U64_EQ(kb_mem_free_bytes(t), cap - used);
    }
    for (int i = 0; i < N; i++) {
        if (!live[i])
            continue;
        uint64_t before = kb_mem_free_bytes(t);
        ASSERT_EQ(kb_mem_dealloc(t, addr[i]), 0);
        ASSERT_U64_EQ(kb_mem_free_bytes(t), before + size[i]);
    }
    ASSERT_U64_EQ(kb_mem_free_bytes(t), cap);
    uint64_t all;
    ASSERT_EQ(kb_mem_alloc(t, cap, 1, &all), 0);
    ASSERT_U64_EQ(all, 0);
    T_FREE(kb_mem_free, t);
    T_FREE(sim_free, s);
}

/* ---- a reference allocator: first fit over a plain sorted array ---------- */

struct ref_block {
    uint64_t addr, size;
};

struct ref_alloc {
    struct ref_block fr[4096]; /* free blocks by address */
    int n_free;
    struct ref_block live[4096];
    int n_live;
    uint64_t cap, free_bytes, peak;
};

/* First fit as memory.h states it; the address, or UINT64_MAX (no room). */
static uint64_t ref_alloc(struct ref_alloc *r, uint64_t bytes, uint64_t align)
{
    for (int i = 0; i < r->n_free; i++) {
        struct ref_block b = r->fr[i];
        uint64_t a = (b.addr + align - 1) / align * align;
        if (a - b.addr >= b.size || b.size - (a - b.addr) < bytes)
            continue;
        struct ref_block lo = {b.addr, a - b.addr}, hi = {a + bytes, b.addr + b.size - a - bytes};
        memmove(&r->fr[i], &r->fr[i + 1], (size_t)(r->n_free - i - 1) * sizeof r->fr[0]);
        r->n_free--;
        struct ref_block parts[2] = {lo, hi};
        for (int k = 1; k >= 0; k--)
            if (parts[k].size) {
                memmove(&r->fr[i + 1], &r->fr[i], (size_t)(r->n_free - i) * sizeof r->fr[0]);
                r->fr[i] = parts[k];
                r->n_free++;
            }
        r->live[r->n_live++] = (struct ref_block){a, bytes};
        r->free_bytes -= bytes;
        if (r->cap - r->free_bytes > r->peak)
            r->peak = r->cap - r->free_bytes;
        return a;
    }
    return UINT64_MAX;
}

/* Frees live block k: back into the free array, then joined with its
 * neighbours. */
static void ref_free(struct ref_alloc *r, int k)
{
    struct ref_block b = r->live[k];
    r->live[k] = r->live[--r->n_live];
    int i = 0;
    while (i < r->n_free && r->fr[i].addr < b.addr)
        i++;
    memmove(&r->fr[i + 1], &r->fr[i], (size_t)(r->n_free - i) * sizeof r->fr[0]);
    r->fr[i] = b;
    r->n_free++;
    for (int j = 0; j + 1 < r->n_free;) {
        if (r->fr[j].addr + r->fr[j].size == r->fr[j + 1].addr) {
            r->fr[j].size += r->fr[j + 1].size;
            memmove(&r->fr[j + 1], &r->fr[j + 2], (size_t)(r->n_free - j - 2) * sizeof r->fr[0]);
            r->n_free--;
        } else {
            j++;
        }
    }
    r->free_bytes += b.size;
}

static uint64_t xorshift(uint64_t *r)
{
    *r ^= *r << 13;
    *r ^= *r >> 7;
    *r ^= *r << 17;
    return *r;
}

/* The allocator against the reference over random rounds: the same
 * address for every allocation (first fit is visible in outputs), the same
 * refusals with the same fragment count, frees of live blocks in any
 * order (the newest, kept beside the hot fields, and the older ones in the
 * table), every other address refused, free bytes and the peak. Sizes and
 * alignments mix 1 byte to 4 KiB, so the table's key shift changes, the
 * free list outgrows the struct and comes back, and the table grows. */
TEST(allocator_matches_a_reference_first_fit)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem_params p = TCM;
    p.capacity = 1 << 20;
    struct kb_mem *t = mem(s, &p);
    ASSERT_TRUE(t);
    struct ref_alloc *r = T_OWN(calloc(1, sizeof *r), free);
    ASSERT_TRUE(r);
    r->cap = r->free_bytes = p.capacity;
    r->fr[0] = (struct ref_block){0, p.capacity};
    r->n_free = 1;
    static const uint64_t aligns[] = {64, 64, 64, 256, 1, 2, 8, 4096};
    uint64_t seed = 88172645463325252ull;
    int rounds = test_failalloc_mode ? 3000 : 60000;
    for (int round = 0; round < rounds; round++) {
        uint64_t x = xorshift(&seed);
        /* phases: mostly allocating, then mostly freeing, so the number
         * of live blocks sweeps up to ~1000 and down again */
        int filling = (round / 5000) % 2 == 0;
        int op = (int)(x % 100);
        if (r->n_live && (op < (filling ? 30 : 70) || r->n_live >= 4000)) {
            /* free: mostly one of the newest (a scratch tile), else any */
            int k = (x >> 8) % 4 == 0 ? (int)((x >> 16) % (uint64_t)r->n_live)
                                      : r->n_live - 1 - (int)((x >> 16) % 3 % (uint64_t)r->n_live);
            struct ref_block b = r->live[k];
            ASSERT_EQ(kb_mem_dealloc(t, b.addr), 0);
            ref_free(r, k);
            ASSERT_EQ(kb_mem_dealloc(t, b.addr), SIM_EINVAL);
            ASSERT_CONTAINS(kb_mem_errmsg(t), "no block allocated at 0x");
        } else if (op < 95) {
            uint64_t bytes = (x >> 20) % 8 == 0 ? 1 + (x >> 24) % 20000 : 1 + (x >> 24) % 600;
            uint64_t align = aligns[(x >> 40) % 8], a;
            uint64_t want = ref_alloc(r, bytes, align);
            int rc = kb_mem_alloc(t, bytes, align, &a);
            if (want == UINT64_MAX) {
                ASSERT_EQ(rc, SIM_ENOMEM);
                if (r->free_bytes >= bytes) {
                    char frag[64];
                    snprintf(frag, sizeof frag, "fragmented in %d blocks", r->n_free);
                    ASSERT_CONTAINS(kb_mem_errmsg(t), frag);
                } else {
                    ASSERT_CONTAINS(kb_mem_errmsg(t), "is full");
                }
            } else {
                ASSERT_EQ(rc, 0);
                ASSERT_U64_EQ(a, want);
            }
        } else if (r->n_live) {
            /* an address inside a live block, not its start */
            struct ref_block b = r->live[(x >> 8) % (uint64_t)r->n_live];
            if (b.size > 1) {
                ASSERT_EQ(kb_mem_dealloc(t, b.addr + 1 + (x >> 32) % (b.size - 1)), SIM_EINVAL);
                ASSERT_CONTAINS(kb_mem_errmsg(t), "no block allocated at 0x");
            }
        }
        ASSERT_U64_EQ(kb_mem_free_bytes(t), r->free_bytes);
    }
    struct kb_mem_stats st;
    kb_mem_get_stats(t, &st);
    ASSERT_U64_EQ(st.peak_alloc_bytes, r->peak);
    while (r->n_live) {
        ASSERT_EQ(kb_mem_dealloc(t, r->live[r->n_live - 1].addr), 0);
        ref_free(r, r->n_live - 1);
    }
    uint64_t all;
    ASSERT_EQ(kb_mem_alloc(t, p.capacity, 1, &all), 0);
    ASSERT_U64_EQ(all, 0);
    T_FREE(free, r);
    T_FREE(kb_mem_free, t);
    T_FREE(sim_free, s);
}

/* Whether the test below makes the block at addr an owned one (a kernel
 * handle's, kb_mem_alloc_owned) rather than a recorded one: about half. */
static bool owned_at(uint64_t addr)
{
    return ((addr >> 6) ^ (addr >> 3) ^ addr) & 1;
}

/* Owned blocks (decision 0057) against the same reference, mixed with
 * recorded ones: the same first fit, so the same address for every
 * allocation whichever call makes it; an owned block is freed with its
 * size and touches no table, a second free of it (its bytes now free) is
 * refused, as is kb_mem_dealloc of it (the memory does not record it) and
 * an owned free beyond the capacity or of 0 bytes. */
TEST(owned_blocks_take_the_same_addresses)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem_params p = TCM;
    p.capacity = 1 << 20;
    struct kb_mem *t = mem(s, &p);
    ASSERT_TRUE(t);
    struct ref_alloc *r = T_OWN(calloc(1, sizeof *r), free);
    ASSERT_TRUE(r);
    r->cap = r->free_bytes = p.capacity;
    r->fr[0] = (struct ref_block){0, p.capacity};
    r->n_free = 1;
    static const uint64_t aligns[] = {64, 64, 64, 256, 1, 2, 8, 4096};
    uint64_t seed = 2463534242ull;
    int rounds = test_failalloc_mode ? 3000 : 40000;
    int owned = 0, recorded = 0;
    for (int round = 0; round < rounds; round++) {
        uint64_t x = xorshift(&seed);
        int filling = (round / 5000) % 2 == 0;
        int op = (int)(x % 100);
        if (r->n_live && (op < (filling ? 30 : 70) || r->n_live >= 4000)) {
            int k = (x >> 8) % 4 == 0 ? (int)((x >> 16) % (uint64_t)r->n_live)
                                      : r->n_live - 1 - (int)((x >> 16) % 3 % (uint64_t)r->n_live);
            struct ref_block b = r->live[k];
            if (owned_at(b.addr)) {
                ASSERT_EQ(kb_mem_dealloc(t, b.addr), SIM_EINVAL);
                ASSERT_EQ(kb_mem_dealloc_owned(t, b.addr, b.size), 0);
                ref_free(r, k);
                ASSERT_EQ(kb_mem_dealloc_owned(t, b.addr, b.size), SIM_EINVAL);
                ASSERT_CONTAINS(kb_mem_errmsg(t), "no block of");
            } else {
                ASSERT_EQ(kb_mem_dealloc(t, b.addr), 0);
                ref_free(r, k);
            }
        } else {
            uint64_t bytes = (x >> 20) % 8 == 0 ? 1 + (x >> 24) % 20000 : 1 + (x >> 24) % 600;
            uint64_t align = aligns[(x >> 40) % 8], a;
            uint64_t want = ref_alloc(r, bytes, align);
            bool own = want == UINT64_MAX ? (x >> 50) & 1 : owned_at(want);
            int rc = own ? kb_mem_alloc_owned(t, bytes, align, &a)
                         : kb_mem_alloc(t, bytes, align, &a);
            if (want == UINT64_MAX) {
                ASSERT_EQ(rc, SIM_ENOMEM);
            } else {
                ASSERT_EQ(rc, 0);
                ASSERT_U64_EQ(a, want);
                own ? owned++ : recorded++;
            }
        }
        ASSERT_U64_EQ(kb_mem_free_bytes(t), r->free_bytes);
    }
    ASSERT_TRUE(owned > rounds / 40 && recorded > rounds / 40);
    ASSERT_EQ(kb_mem_dealloc_owned(t, p.capacity - 8, 16), SIM_EINVAL);
    ASSERT_EQ(kb_mem_dealloc_owned(t, 0, 0), SIM_EINVAL);
    while (r->n_live) {
        struct ref_block b = r->live[r->n_live - 1];
        ASSERT_EQ(owned_at(b.addr) ? kb_mem_dealloc_owned(t, b.addr, b.size)
                                   : kb_mem_dealloc(t, b.addr), 0);
        ref_free(r, r->n_live - 1);
    }
    uint64_t all;
    ASSERT_EQ(kb_mem_alloc(t, p.capacity, 1, &all), 0);
    ASSERT_U64_EQ(all, 0);
    T_FREE(free, r);
    T_FREE(kb_mem_free, t);
    T_FREE(sim_free, s);
}

/* A page taken from the pool again carries what it held: a write or a copy
 * into part of a new page leaves zeros around the bytes it stores. */
TEST(reused_pages_read_as_zeros_around_a_write)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *m = mem(s, &TCM);
    ASSERT_TRUE(m);
    unsigned char *buf = T_OWN(malloc(4 * PAGE), free);
    ASSERT_TRUE(buf);
    uint64_t a;
    for (int round = 0; round < 2; round++) {
        /* fill two pages, free them: both go back to the pool, dirty */
        ASSERT_EQ(kb_mem_alloc(m, 2 * PAGE, PAGE, &a), 0);
        memset(buf, 0xEE, 2 * PAGE);
        ASSERT_EQ(kb_mem_write(m, a, buf, 2 * PAGE), 0);
        ASSERT_EQ(kb_mem_dealloc(m, a), 0);
        ASSERT_U64_EQ(kb_mem_pages(m), 0);
        ASSERT_EQ(kb_mem_alloc(m, 2 * PAGE, PAGE, &a), 0);
        unsigned char v[300];
        memset(v, 0x11, sizeof v);
        if (round == 0) {
            ASSERT_EQ(kb_mem_write(m, a + 1000, v, sizeof v), 0);
            ASSERT_EQ(kb_mem_write(m, a + 2 * PAGE - 96, v, 50), 0);
        } else { /* a copy from a written page into the new pages */
            ASSERT_EQ(kb_mem_write(m, 3 * PAGE, v, sizeof v), 0);
            ASSERT_EQ(kb_mem_copy(m, a + 1000, m, 3 * PAGE, sizeof v), 0);
            ASSERT_EQ(kb_mem_copy(m, a + 2 * PAGE - 96, m, 3 * PAGE, 50), 0);
        }
        ASSERT_EQ(kb_mem_read(m, a, buf, 2 * PAGE), 0);
        for (uint64_t j = 0; j < 2 * PAGE; j++) {
            bool in = (j >= 1000 && j < 1300) || (j >= 2 * PAGE - 96 && j < 2 * PAGE - 46);
            if (buf[j] != (in ? 0x11 : 0))
                ASSERT_U64_EQ(j, UINT64_MAX);
        }
        ASSERT_EQ(kb_mem_dealloc(m, a), 0);
    }
    T_FREE(free, buf);
    T_FREE(kb_mem_free, m);
    T_FREE(sim_free, s);
}

/* Reads all of [0, n) of m and checks it against want (n bytes). */
static bool reads_as(struct kb_mem *m, const unsigned char *want, uint64_t n)
{
    unsigned char *got = malloc(n);
    bool ok = got && kb_mem_read(m, 0, got, n) == 0 && memcmp(got, want, n) == 0;
    free(got);
    return ok;
}

/* A copy of whole pages between page boundaries shares them: no new
 * storage, and a write to either side (in place, a span, a copy into it,
 * a free clearing part of a page) copies the page first, so that each
 * memory reads what a copy through a buffer would give. A copy of pages
 * never written leaves none behind. */
TEST(whole_page_copies_share_pages_until_written)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *a = mem(s, &TCM), *b = mem(s, &HBM), *c = mem(s, &TCM);
    ASSERT_TRUE(a && b && c);
    enum { N = 4 * PAGE };
    unsigned char *wa = T_OWN(malloc(N), free), *wb = T_OWN(malloc(N), free);
    unsigned char *wc = T_OWN(malloc(N), free);
    ASSERT_TRUE(wa && wb && wc);
    for (uint64_t j = 0; j < N; j++)
        wa[j] = pat(j);
    uint64_t base = kb_mem_pool_pages();
    ASSERT_EQ(kb_mem_write(a, 0, wa, 3 * PAGE), 0);
    memset(wa + 3 * PAGE, 0, PAGE);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 3);
    /* a's pages 0..2 into b's 0..2 and page 1 again into b's 3 */
    ASSERT_EQ(kb_mem_copy(b, 0, a, 0, 3 * PAGE), 0);
    ASSERT_EQ(kb_mem_copy(b, 3 * PAGE, a, PAGE, PAGE), 0);
    memcpy(wb, wa, 3 * PAGE);
    memcpy(wb + 3 * PAGE, wa + PAGE, PAGE);
    ASSERT_U64_EQ(kb_mem_pages(b), 4);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 3);
    ASSERT_TRUE(reads_as(b, wb, N));
    /* a write to a's page 1 gives a its own copy; b's two keep the old */
    unsigned char x[3] = {0xEE, 0xEF, 0xF0};
    ASSERT_EQ(kb_mem_write(a, PAGE + 10, x, 3), 0);
    memcpy(wa + PAGE + 10, x, 3);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 4);
    ASSERT_TRUE(reads_as(a, wa, N) && reads_as(b, wb, N));
    /* b's pages 1 and 3 share one page: writing one leaves the other */
    ASSERT_EQ(kb_mem_write(b, 3 * PAGE + PAGE - 1, x, 1), 0);
    wb[N - 1] = x[0];
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 5);
    ASSERT_TRUE(reads_as(b, wb, N));
    /* b's page 1 now has one owner again: written in place */
    ASSERT_EQ(kb_mem_write(b, PAGE, x, 2), 0);
    memcpy(wb + PAGE, x, 2);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 5);
    ASSERT_TRUE(reads_as(a, wa, N) && reads_as(b, wb, N));
    /* a span of a shared page (a's 0, b's 0) is a's own */
    unsigned char *w;
    uint64_t len;
    ASSERT_EQ(kb_mem_write_span(a, 5, 1, &w, &len), 0);
    ASSERT_U64_EQ(len, 1);
    *w = 0x11;
    wa[5] = 0x11;
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 6);
    ASSERT_TRUE(reads_as(a, wa, N) && reads_as(b, wb, N));
    /* a partial copy into a shared page (a's 2, b's 2) */
    ASSERT_EQ(kb_mem_copy(a, 2 * PAGE + 100, b, 3 * PAGE, 50), 0);
    memcpy(wa + 2 * PAGE + 100, wb + 3 * PAGE, 50);
    ASSERT_TRUE(reads_as(a, wa, N) && reads_as(b, wb, N));
    /* within one memory, onto a page it shares with another memory */
    ASSERT_EQ(kb_mem_copy(c, 0, b, 0, N), 0);
    memcpy(wc, wb, N);
    ASSERT_EQ(kb_mem_copy(b, PAGE, b, 2 * PAGE, 2 * PAGE), 0);
    memmove(wb + PAGE, wb + 2 * PAGE, 2 * PAGE);
    ASSERT_TRUE(reads_as(b, wb, N) && reads_as(c, wc, N));
    /* a free that clears part of a shared page: the other memory keeps
     * its bytes (c's pages are b's) */
    uint64_t lo, hi;
    ASSERT_EQ(kb_mem_alloc(b, PAGE + 100, 0, &lo), 0);
    ASSERT_EQ(kb_mem_alloc(b, 200, 0, &hi), 0);
    ASSERT_EQ(kb_mem_dealloc(b, lo), 0);
    memset(wb, 0, PAGE + 100);
    ASSERT_TRUE(reads_as(b, wb, N));
    ASSERT_TRUE(reads_as(c, wc, N));
    ASSERT_EQ(kb_mem_dealloc(b, hi), 0); /* page 1 now lies in free space */
    memset(wb, 0, 2 * PAGE);
    ASSERT_TRUE(reads_as(b, wb, N) && reads_as(c, wc, N));
    /* never-written pages copied over written ones leave no page */
    uint64_t before = kb_mem_pages(c);
    ASSERT_EQ(kb_mem_copy(c, PAGE, a, 8 * PAGE, 2 * PAGE), 0);
    memset(wc + PAGE, 0, 2 * PAGE);
    ASSERT_U64_EQ(kb_mem_pages(c), before - 2);
    ASSERT_TRUE(reads_as(c, wc, N));
    /* freeing a memory leaves what it shared to the others */
    T_FREE(kb_mem_free, a);
    ASSERT_TRUE(reads_as(b, wb, N) && reads_as(c, wc, N));
    T_FREE(kb_mem_free, b);
    ASSERT_TRUE(reads_as(c, wc, N));
    T_FREE(kb_mem_free, c);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base);
    T_FREE(free, wa);
    T_FREE(free, wb);
    T_FREE(free, wc);
    T_FREE(sim_free, s);
}

/* The page tables of memories of any size: a one-page memory, the 2 GiB
 * HBM at both ends and across the tables' node boundaries (64 pages,
 * 4096 pages), with pages counted and given back. */
TEST(page_tables_reach_every_page)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem_params tiny = TCM;
    tiny.capacity = 100;
    struct kb_mem *t = mem(s, &tiny), *h = mem(s, &HBM);
    ASSERT_TRUE(t && h);
    unsigned char v = 9, r = 0;
    ASSERT_EQ(kb_mem_write(t, 99, &v, 1), 0);
    ASSERT_EQ(kb_mem_read(t, 99, &r, 1), 0);
    ASSERT_EQ(r, 9);
    ASSERT_U64_EQ(kb_mem_pages(t), 1);
    const uint64_t at[] = {0, 64 * PAGE - 1, 64 * PAGE, 4096 * PAGE - 2, 4096 * PAGE,
                           GiB, 2 * GiB - 1};
    enum { K = sizeof at / sizeof at[0] };
    for (int i = 0; i < K; i++) {
        v = (unsigned char)(i + 1);
        ASSERT_EQ(kb_mem_write(h, at[i], &v, 1), 0);
    }
    ASSERT_U64_EQ(kb_mem_pages(h), K);
    for (int i = 0; i < K; i++) {
        ASSERT_EQ(kb_mem_read(h, at[i], &r, 1), 0);
        ASSERT_EQ(r, i + 1);
        ASSERT_EQ(kb_mem_read(h, at[i] ^ 1, &r, 1), 0); /* its neighbour */
        ASSERT_EQ(r, 0);
    }
    /* a block over all of it, freed: every page back */
    uint64_t a;
    ASSERT_EQ(kb_mem_alloc(h, 2 * GiB, 0, &a), 0);
    ASSERT_EQ(kb_mem_dealloc(h, a), 0);
    ASSERT_U64_EQ(kb_mem_pages(h), 0);
    T_FREE(kb_mem_free, t);
    T_FREE(kb_mem_free, h);
    T_FREE(sim_free, s);
}

/* A snapshot on the heap, owned by the harness (an early return frees
 * its pages). */
static void snap_del(struct kb_mem_snap *s)
{
    kb_mem_snap_free(s);
    free(s);
}

/* The bytes of snapshot s, all of them, against want (s->bytes bytes):
 * read out whole and span by span. */
static bool snap_is(const struct kb_mem_snap *s, const unsigned char *want)
{
    unsigned char *got = malloc(s->bytes + 1);
    bool ok = got && kb_mem_snap_read(s, 0, got, s->bytes) == 0 &&
              memcmp(got, want, s->bytes) == 0;
    for (uint64_t off = 0; ok && off < s->bytes;) {
        const unsigned char *p;
        uint64_t len;
        ok = kb_mem_snap_span(s, off, s->bytes - off, &p, &len) == 0 && len > 0;
        for (uint64_t j = 0; ok && j < len; j++)
            ok = (p ? p[j] : 0) == want[off + j];
        off += len;
    }
    free(got);
    return ok;
}

/* A snapshot keeps the bytes of its ranges as they were when taken: its
 * pages by reference (no new storage), a write to the source copying the
 * page; pieces appended in order; zeros without a page; short pieces
 * copied. Written into a memory it shares whole pages at page boundaries
 * and copies anything else; freed, it gives its pages back. */
TEST(snapshots_keep_the_bytes_as_taken)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *a = mem(s, &TCM), *b = mem(s, &HBM);
    ASSERT_TRUE(a && b);
    enum { N = 6 * PAGE };
    unsigned char *wa = T_OWN(malloc(N), free), *want = T_OWN(malloc(2 * N), free);
    unsigned char *wb = T_OWN(calloc(1, 2 * N), free);
    ASSERT_TRUE(wa && want && wb);
    for (uint64_t j = 0; j < N; j++)
        wa[j] = pat(j);
    memset(wa + 4 * PAGE, 0, 2 * PAGE); /* pages 4, 5 never written */
    uint64_t base = kb_mem_pool_pages();
    ASSERT_EQ(kb_mem_write(a, 0, wa, 4 * PAGE), 0);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 4);

    /* three pieces: pages 0..1 whole, 100 bytes inside page 2 (copied),
     * and from the middle of page 3 into the never-written page 5 */
    struct kb_mem_snap *snp = T_OWN(calloc(1, sizeof *snp), snap_del);
    ASSERT_TRUE(snp);
#define sn (*snp)
    ASSERT_EQ(kb_mem_snap_take(a, 0, 2 * PAGE, &sn), 0);
    ASSERT_EQ(kb_mem_snap_take(a, 2 * PAGE + 7, 100, &sn), 0);
    ASSERT_EQ(kb_mem_snap_take(a, 3 * PAGE + PAGE / 2, PAGE / 2 + 2 * PAGE, &sn), 0);
    uint64_t len = 2 * PAGE + 100 + PAGE / 2 + 2 * PAGE;
    ASSERT_U64_EQ(sn.bytes, len);
    memcpy(want, wa, 2 * PAGE);
    memcpy(want + 2 * PAGE, wa + 2 * PAGE + 7, 100);
    memcpy(want + 2 * PAGE + 100, wa + 3 * PAGE + PAGE / 2, PAGE / 2 + 2 * PAGE);
    ASSERT_TRUE(snap_is(&sn, want));
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 4); /* references, no copies */

    /* the source written everywhere: the snapshot keeps the old bytes */
    unsigned char *junk = T_OWN(malloc(N), free);
    ASSERT_TRUE(junk);
    memset(junk, 0x5A, N);
    ASSERT_EQ(kb_mem_write(a, 0, junk, N), 0);
    ASSERT_TRUE(snap_is(&sn, want));
    /* pages 0, 1, 3 were shared: copied; 2 (its piece copied), 4, 5 new */
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 4 + 3 + 2);

    /* written into b at a page boundary: pages 0..1 shared with the
     * snapshot (no new page); the rest copied */
    uint64_t before = kb_mem_pool_pages();
    ASSERT_EQ(kb_mem_snap_write(b, 0, &sn, 0, 2 * PAGE), 0);
    ASSERT_U64_EQ(kb_mem_pool_pages(), before);
    ASSERT_U64_EQ(kb_mem_pages(b), 2);
    /* and at an unaligned address, from an offset inside the snapshot */
    ASSERT_EQ(kb_mem_snap_write(b, 5 * PAGE + 33, &sn, 50, len - 50), 0);
    memcpy(wb, want, 2 * PAGE);
    memcpy(wb + 5 * PAGE + 33, want + 50, len - 50);
    ASSERT_TRUE(reads_as(b, wb, 2 * N));
    /* a whole zero page of the snapshot onto a page boundary of b leaves
     * no page there (b's page 0 goes: the snapshot's page 4 is zeros) */
    uint64_t z = 2 * PAGE + 100 + PAGE / 2 + PAGE; /* where page 5 starts in sn */
    ASSERT_EQ(kb_mem_snap_write(b, 0, &sn, z, PAGE), 0);
    memset(wb, 0, PAGE);
    ASSERT_U64_EQ(kb_mem_pages(b), 1 + 5); /* page 1, and the unaligned copy's 5..9 */
    ASSERT_TRUE(reads_as(b, wb, 2 * N));
    /* b writes its page 1, shared with the snapshot: the snapshot keeps it */
    ASSERT_EQ(kb_mem_write(b, PAGE + 1, junk, 10), 0);
    ASSERT_TRUE(snap_is(&sn, want));
    /* beyond the snapshot or the memory */
    ASSERT_EQ(kb_mem_snap_write(b, 0, &sn, len - 1, 2), SIM_EINVAL);
    ASSERT_EQ(kb_mem_snap_take(a, TCM.capacity - 1, 2, &sn), SIM_EINVAL);
    ASSERT_U64_EQ(sn.bytes, len);
    const unsigned char *p;
    ASSERT_EQ(kb_mem_snap_span(&sn, len, 1, &p, &len), SIM_EINVAL);

    /* freed, its pages go back: a's are its own again, b's page 1 */
    before = kb_mem_pool_pages();
    kb_mem_snap_free(&sn);
    ASSERT_U64_EQ(sn.bytes, 0);
    ASSERT_U64_EQ(kb_mem_pool_pages(), before - 3); /* a's old 0, 1 and 3 */
    /* an empty snapshot: nothing to read, nothing held */
    ASSERT_EQ(kb_mem_snap_take(a, 0, 0, &sn), 0);
    ASSERT_U64_EQ(sn.bytes, 0);
#undef sn
    T_FREE(snap_del, snp);
    T_FREE(free, junk);
    T_FREE(free, wb);
    T_FREE(free, want);
    T_FREE(free, wa);
    T_FREE(kb_mem_free, b);
    T_FREE(kb_mem_free, a);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base);
    T_FREE(sim_free, s);
}

/* Bytes in flight (decision 0060): a part of a snapshot added to another
 * is a copy, so the source page is not held and its memory's next write
 * copies nothing; a whole page is held by reference; host bytes and zeros
 * are appended; a move hands pieces over without a page more. */
TEST(snapshots_carry_bytes_in_flight)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *a = mem(s, &TCM);
    ASSERT_TRUE(a);
    enum { N = 3 * PAGE };
    unsigned char *wa = T_OWN(malloc(N), free), *want = T_OWN(calloc(1, 4 * N), free);
    ASSERT_TRUE(wa && want);
    for (uint64_t j = 0; j < N; j++)
        wa[j] = pat(j);
    uint64_t base = kb_mem_pool_pages();
    ASSERT_EQ(kb_mem_write(a, 0, wa, N), 0);
    struct kb_mem_snap *src = T_OWN(calloc(1, sizeof *src), snap_del);
    struct kb_mem_snap *fly = T_OWN(calloc(1, sizeof *fly), snap_del);
    struct kb_mem_snap *dst = T_OWN(calloc(1, sizeof *dst), snap_del);
    ASSERT_TRUE(src && fly && dst);
    /* src: page 0 whole, then 2 KiB of page 1, then 100 bytes of page 2 */
    ASSERT_EQ(kb_mem_snap_take(a, 0, PAGE, src), 0);
    ASSERT_EQ(kb_mem_snap_take(a, PAGE + 512, 2048, src), 0);
    ASSERT_EQ(kb_mem_snap_take(a, 2 * PAGE + 9, 100, src), 0);
    uint64_t len = PAGE + 2048 + 100;
    memcpy(want, wa, PAGE);
    memcpy(want + PAGE, wa + PAGE + 512, 2048);
    memcpy(want + PAGE + 2048, wa + 2 * PAGE + 9, 100);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 3);
    /* all of it added: page 0 by reference, the 2 KiB into a page of its own */
    ASSERT_EQ(kb_mem_snap_add(fly, src, 0, len), 0);
    ASSERT_U64_EQ(fly->bytes, len);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 3 + 1);
    ASSERT_TRUE(snap_is(fly, want));
    /* and a part from inside a piece */
    ASSERT_EQ(kb_mem_snap_add(dst, src, PAGE + 7, 30), 0);
    ASSERT_TRUE(snap_is(dst, want + PAGE + 7));
    kb_mem_snap_clear(dst);
    /* src let go: page 1 was never held by fly, so writing it copies no
     * page; page 0 is fly's too, so its write does */
    kb_mem_snap_clear(src);
    uint64_t before = kb_mem_pool_pages();
    ASSERT_EQ(kb_mem_write(a, PAGE, "x", 1), 0);
    ASSERT_U64_EQ(kb_mem_pool_pages(), before);
    ASSERT_EQ(kb_mem_write(a, 0, "y", 1), 0);
    ASSERT_U64_EQ(kb_mem_pool_pages(), before + 1);
    ASSERT_TRUE(snap_is(fly, want));
    /* host bytes (a page and a bit) and zeros appended */
    ASSERT_EQ(kb_mem_snap_add_bytes(fly, wa + 5, PAGE + 10), 0);
    memcpy(want + len, wa + 5, PAGE + 10);
    len += PAGE + 10;
    ASSERT_EQ(kb_mem_snap_add_bytes(fly, NULL, 3000), 0);
    len += 3000; /* want is zeros there */
    ASSERT_U64_EQ(fly->bytes, len);
    ASSERT_TRUE(snap_is(fly, want));
    /* moved behind dst's own bytes: no page more, fly empty */
    ASSERT_EQ(kb_mem_snap_add_bytes(dst, wa, 64), 0);
    before = kb_mem_pool_pages();
    ASSERT_EQ(kb_mem_snap_move(dst, fly), 0);
    ASSERT_U64_EQ(kb_mem_pool_pages(), before);
    ASSERT_U64_EQ(fly->bytes, 0);
    ASSERT_U64_EQ(dst->bytes, 64 + len);
    unsigned char *want2 = T_OWN(malloc(64 + len), free);
    ASSERT_TRUE(want2);
    memcpy(want2, wa, 64);
    memcpy(want2 + 64, want, len);
    ASSERT_TRUE(snap_is(dst, want2));
    /* beyond the source */
    ASSERT_EQ(kb_mem_snap_add(fly, dst, dst->bytes, 1), SIM_EINVAL);
    ASSERT_U64_EQ(fly->bytes, 0);
    T_FREE(free, want2);
    T_FREE(snap_del, dst);
    T_FREE(snap_del, fly);
    T_FREE(snap_del, src);
    T_FREE(kb_mem_free, a);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base);
    T_FREE(free, want);
    T_FREE(free, wa);
    T_FREE(sim_free, s);
}

TEST_MAIN(closed_form, striping_gives_eight_times_one_channel,
          same_channel_serialises, setup_overlaps_earlier_transfers,
          schedule_without_waiting, capacity_error,
          first_fit_alignment_and_coalescing, peak_allocation, sparse_storage,
          spans_read_and_write_in_place, whole_page_writes_keep_zeros_elsewhere,
          copy_page_to_page, freed_blocks_read_as_zeros_and_give_pages_back,
          params_are_checked, many_live_blocks_free_in_any_order,
          allocator_matches_a_reference_first_fit, owned_blocks_take_the_same_addresses,
          reused_pages_read_as_zeros_around_a_write,
          whole_page_copies_share_pages_until_written, page_tables_reach_every_page,
          snapshots_keep_the_bytes_as_taken, snapshots_carry_bytes_in_flight)
