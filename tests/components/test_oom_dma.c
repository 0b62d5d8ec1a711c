/* test_oom_dma.c — allocation failure in the components a DMA copy uses
 * (fabric, NoC, memories, PE_DMA): every allocation of a small system that
 * copies between two PEs fails in turn (failalloc.h). Each run must end in
 * the right bytes at the right place or an error, never a crash or (under
 * ASan or valgrind) a leak. */
#include "fabric.h"
#include "failalloc.h"
#include "memory.h"
#include "noc.h"
#include "pe_dma.h"
#include "sim.h"
#include "test.h"

static const struct kb_link_params LINK = {
    .bw_gbps = 256, .latency_ns = 1.7, .overhead_ns = 0, .flit_bytes = 256};
static const struct kb_mem_params TCM = {KB_MEM_TCM, 1 << 20, 512, 0, 1, 0};

struct sys {
    struct sim *s;
    struct kb_fabric *f;
    struct kb_noc *noc;
    struct kb_mem *tcm[2];
    struct kb_dma *dma[2];
    int copies_ok;
};

static int route(void *ud, int src, int dst, int *links, int max)
{
    struct sys *y = ud;
    return src == dst ? 0 : kb_noc_route(y->noc, src, dst, links, max);
}

static struct kb_dma_end end_of(struct sys *y, int pe, uint64_t addr)
{
    return (struct kb_dma_end){y->tcm[pe], addr, kb_noc_node(y->noc, pe)};
}

/* A queued copy's status: an error fails the run, as a script's would. */
static void async_done(void *ud, int status)
{
    struct sys *y = ud;
    if (status != 0)
        sim_fail(y->s, "queued copy: %s", kb_dma_errmsg(y->dma[1]));
}

/* Blocking copies one way, queued ones the other; an error fails the run
 * as an error in a Lua process does. */
static void copier(struct sim *s, void *arg)
{
    struct sys *y = arg;
    for (int i = 0; i < 4; i++) {
        if (kb_dma_copy_async(y->dma[1], KB_DMA_COMM, end_of(y, 1, 0),
                              end_of(y, 0, 8192 * (uint64_t)(i + 1)), 4096,
                              NULL, async_done, y) < 0) {
            sim_fail(s, "%s", kb_dma_errmsg(y->dma[1]));
            return;
        }
        if (kb_dma_copy(y->dma[0], KB_DMA_WRITE, end_of(y, 0, 0),
                        end_of(y, 1, 4096 * (uint64_t)i), 4096) != 0) {
            sim_fail(s, "%s", kb_dma_errmsg(y->dma[0]));
            return;
        }
        y->copies_ok++;
    }
}

static int scenario(void *unused)
{
    (void)unused;
    struct sys y = {0};
    int rc = SIM_ENOMEM;
    char err[256];
    if (!(y.s = sim_new(NULL)) || !(y.f = kb_fabric_new(y.s)))
        goto out;
    struct kb_noc_params np = {KB_NOC_MESH, "", 2, 1, LINK, NULL};
    if (!(y.noc = kb_noc_new(y.f, &np, err, sizeof err)))
        goto out;
    for (int i = 0; i < 2; i++) {
        char name[8] = {'p', 'e', (char)('0' + i), 0};
        struct kb_dma_params dp = {kb_noc_node(y.noc, i), 1, 1, 1, false};
        if (!(y.tcm[i] = kb_mem_new(y.s, name, &TCM, err, sizeof err)) ||
            !(y.dma[i] = kb_dma_new(y.s, name, y.f, route, &y, &dp, err,
                                    sizeof err)))
            goto out;
    }
    unsigned char pattern[4096];
    for (int i = 0; i < 4096; i++)
        pattern[i] = (unsigned char)(i * 7);
    if ((rc = kb_mem_write(y.tcm[0], 0, pattern, sizeof pattern)) < 0)
        goto out;
    if (!sim_thread(y.s, "copier", copier, &y, 0)) {
        rc = SIM_ENOMEM;
        goto out;
    }
    rc = sim_run(y.s, SIM_FOREVER);
    if (rc == SIM_DONE) {
        unsigned char got[4096];
        if (y.copies_ok != 4 ||
            kb_mem_read(y.tcm[1], 3 * 4096, got, sizeof got) < 0 ||
            memcmp(got, pattern, sizeof got) != 0)
            rc = 1; /* a failure went unreported */
    }
out:
    for (int i = 0; i < 2; i++) {
        kb_dma_free(y.dma[i]);
        kb_mem_free(y.tcm[i]);
    }
    kb_noc_free(y.noc);
    kb_fabric_free(y.f);
    sim_free(y.s);
    return rc;
}

TEST(copies_without_failures)
{
    failalloc_arm(0);
    ASSERT_EQ(scenario(NULL), SIM_DONE);
}

TEST(every_allocation_fails_in_turn)
{
    unsigned long n;
    int errors = 0;
    for (n = 1;; n++) {
        bool fired;
        int rc = failalloc_run(n, scenario, NULL, &fired);
        if (!fired) {
            ASSERT_EQ(rc, SIM_DONE);
            break;
        }
        if (rc == 1)
            TEST__FAIL("allocation %lu failed and the copies were wrong, "
                       "with no error", n);
        errors += rc < 0;
    }
    printf("note: %lu allocations failed in turn, %d reported as errors\n",
           n - 1, errors);
    ASSERT_TRUE(n > 20 && errors > 0);
}

TEST_MAIN(copies_without_failures, every_allocation_fails_in_turn)
