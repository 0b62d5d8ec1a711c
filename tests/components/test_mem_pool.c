/* test_mem_pool.c — the page pool behind every kb_mem (components/memory.c,
 * decisions 0034, 0053 and 0058): a page given back is the next one made,
 * last in first out, before any fresh page; a shared page's count is kept
 * per page over many chunks. What is counted here is which page a memory
 * gets (its address) and how many pages the pool holds, not time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memory.h"
#include "sim.h"
#include "test.h"

#define PAGE ((uint64_t)KB_MEM_PAGE_BYTES)

static const struct kb_mem_params TCM = {
    .kind = KB_MEM_TCM, .capacity = 16 << 20, .bw_gbps = 512, .setup_ns = 0,
    .n_channels = 1, .burst_bytes = 0};

static struct kb_mem *mem(struct sim *s)
{
    char err[256];
    return T_OWN(kb_mem_new(s, "sip0.cube0.pe0", &TCM, err, sizeof err), kb_mem_free);
}

/* The address of the page holding addr in m (NULL: never written). */
static const unsigned char *page_of(struct kb_mem *m, uint64_t addr)
{
    const unsigned char *p = NULL;
    uint64_t len;
    if (kb_mem_read_span(m, addr, 1, &p, &len) != 0 || !p)
        return NULL;
    return p - (addr & (PAGE - 1));
}

/* Pages freed go back last in first out: the next pages any memory makes
 * are those, newest first, and the pool holds no more pages than before.
 * (While some page is in use: with none, the pool gives its memory back
 * to malloc.) */
TEST(the_last_page_freed_is_the_next_made)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *a = mem(s), *b = mem(s), *hold = mem(s);
    ASSERT_TRUE(a && b && hold);
    unsigned char h = 9;
    ASSERT_EQ(kb_mem_write(hold, 0, &h, 1), 0);
    uint64_t base = kb_mem_pool_pages();
    uint64_t x, y;
    ASSERT_EQ(kb_mem_alloc(a, PAGE, 0, &x), 0);
    ASSERT_EQ(kb_mem_alloc(a, PAGE, 0, &y), 0);
    unsigned char v = 0x5A;
    ASSERT_EQ(kb_mem_write(a, x, &v, 1), 0);
    ASSERT_EQ(kb_mem_write(a, y, &v, 1), 0);
    const unsigned char *px = page_of(a, x), *py = page_of(a, y);
    ASSERT_TRUE(px && py && px != py);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 2);
    ASSERT_EQ(kb_mem_dealloc(a, x), 0); /* x's page back, then y's */
    ASSERT_EQ(kb_mem_dealloc(a, y), 0);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base);
    /* another memory's next pages: y's, then x's; they read as zeros
     * around what is written */
    unsigned char w = 0xC3;
    ASSERT_EQ(kb_mem_write(b, 100, &w, 1), 0);
    ASSERT_EQ(kb_mem_write(b, 3 * PAGE + 7, &w, 1), 0);
    ASSERT_TRUE(page_of(b, 0) == py);
    ASSERT_TRUE(page_of(b, 3 * PAGE) == px);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + 2);
    unsigned char got[2 * PAGE];
    ASSERT_EQ(kb_mem_read(b, 0, got, PAGE), 0);
    ASSERT_EQ(kb_mem_read(b, 3 * PAGE, got + PAGE, PAGE), 0);
    for (uint64_t j = 0; j < 2 * PAGE; j++)
        if (got[j] != (j == 100 || j == PAGE + 7 ? 0xC3 : 0))
            ASSERT_U64_EQ(j, UINT64_MAX);
    T_FREE(kb_mem_free, b);
    T_FREE(kb_mem_free, a);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base);
    T_FREE(kb_mem_free, hold);
    T_FREE(sim_free, s);
}

/* Many pages (over several of the pool's 2 MiB chunks, whose first page
 * holds their counts) copied whole to two other memories share them, and
 * each one written is copied first: every count is found and kept per
 * page, and a page goes back with its last owner. */
TEST(shared_pages_counted_over_many_chunks)
{
    enum { N = 1200 }; /* 4.7 MiB */
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct kb_mem *a = mem(s), *b = mem(s), *c = mem(s);
    ASSERT_TRUE(a && b && c);
    uint64_t base = kb_mem_pool_pages();
    for (uint64_t i = 0; i < N; i++) {
        unsigned char v = (unsigned char)(i * 7 + 1);
        ASSERT_EQ(kb_mem_write(a, i * PAGE + i % 61, &v, 1), 0);
    }
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + N);
    ASSERT_EQ(kb_mem_copy(b, 0, a, 0, N * PAGE), 0); /* b shares a's pages */
    ASSERT_EQ(kb_mem_copy(c, 0, a, 0, N * PAGE), 0); /* and c */
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + N);
    for (uint64_t i = 0; i < N; i += 2) { /* every other page of b written */
        unsigned char v = 0xEE;
        ASSERT_EQ(kb_mem_write(b, i * PAGE + 100, &v, 1), 0);
    }
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + N + N / 2);
    T_FREE(kb_mem_free, a); /* c still holds every page a had */
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + N + N / 2);
    for (uint64_t i = 0; i < N; i++) {
        unsigned char vb[2], vc[2];
        ASSERT_EQ(kb_mem_read(b, i * PAGE + i % 61, &vb[0], 1), 0);
        ASSERT_EQ(kb_mem_read(b, i * PAGE + 100, &vb[1], 1), 0);
        ASSERT_EQ(kb_mem_read(c, i * PAGE + i % 61, &vc[0], 1), 0);
        ASSERT_EQ(kb_mem_read(c, i * PAGE + 100, &vc[1], 1), 0);
        unsigned char v = (unsigned char)(i * 7 + 1);
        ASSERT_EQ(vb[0], v);
        ASSERT_EQ(vb[1], i % 2 == 0 ? 0xEE : 0);
        ASSERT_EQ(vc[0], v);
        ASSERT_EQ(vc[1], 0);
    }
    /* c's pages it shared with b's odd pages go when c goes; b's own
     * copies stay */
    T_FREE(kb_mem_free, c);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base + N);
    T_FREE(kb_mem_free, b);
    ASSERT_U64_EQ(kb_mem_pool_pages(), base);
    T_FREE(sim_free, s);
}

TEST_MAIN(the_last_page_freed_is_the_next_made, shared_pages_counted_over_many_chunks)
