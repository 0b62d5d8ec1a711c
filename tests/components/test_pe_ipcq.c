/* test_pe_ipcq.c — PE_IPCQ: credits and backpressure (sleep, poll) with
 * exact times, slot cost per buffer kind against the closed form,
 * ping-pong latency, atomic visibility of data and metadata, split
 * messages, timing-only mode, wiring and recv errors, trace spans */
#include <inttypes.h>
#include <math.h>

#include "fabric.h"
#include "memory.h"
#include "noc.h"
#include "pe_dma.h"
#include "pe_ipcq.h"
#include "sim.h"
#include "test.h"
#include "trace.h"

/* ---- a small test system ------------------------------------------------ */

/* n routers in a line, each a PE: its TCM at the router node, an HBM and an
 * SRAM on nodes of their own joined to it by a link each way; one DMA and
 * one IPCQ per PE, the rings in the buffer kind chosen. */
#define MAXR 4

struct tsys {
    struct sim *s;
    struct kb_fabric *f;
    struct kb_noc *noc;
    int n;
    int router[64], up[64], down[64];
    struct kb_mem *mem[MAXR][3]; /* by kind */
    int mem_node[MAXR][3];
    struct kb_dma *dma[MAXR];
    struct kb_ipcq *q[MAXR];
    enum kb_mem_kind kind;
};

static const struct kb_link_params NOC = {
    .bw_gbps = 256, .latency_ns = 1.7, .overhead_ns = 0, .flit_bytes = 256};
static const struct kb_link_params HBM_LINK = {
    .bw_gbps = 256, .latency_ns = 0.5, .overhead_ns = 0, .flit_bytes = 256};
static const struct kb_link_params SRAM_LINK = {
    .bw_gbps = 128, .latency_ns = 0.5, .overhead_ns = 0, .flit_bytes = 256};

static const struct kb_mem_params MEM_P[3] = {
    {KB_MEM_TCM, 1 << 20, 512, 0, 1, 0},
    {KB_MEM_SRAM, 1 << 22, 128, 2, 1, 0},
    {KB_MEM_HBM, 1 << 24, 32, 6, 8, 256},
};

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
    if (node < 0) /* out of memory */
        return -1;
    t->router[node] = r;
    t->up[node] = kb_fabric_add_link(t->f, node, r, NULL, lp);
    t->down[node] = kb_fabric_add_link(t->f, r, node, NULL, lp);
    return t->up[node] < 0 || t->down[node] < 0 ? -1 : node;
}

static struct kb_ipcq_params ipcq_params(enum kb_ipcq_backpressure bp,
                                         double poll_ns)
{
    return (struct kb_ipcq_params){4, 4096, bp, poll_ns, 16};
}

/* The same, traced into `trace` when it is set (opened before the units
 * are made, so that they find the recorder). */
/* An IPCQ whose ports are bound to dma and to mem (at fabric node node),
 * as a system builder binds them. */
static struct kb_ipcq *ipcq_bound(struct sim *s, const char *name, struct kb_dma *dma,
                                  struct kb_mem *mem, int node,
                                  const struct kb_ipcq_params *qp, char *err, size_t errlen)
{
    kb_mem_set_node(mem, node);
    struct kb_ipcq *q = kb_ipcq_new(s, name, qp, err, errlen);
    struct sim_port *mp = q ? kb_mem_port(mem) : NULL; /* made on first use */
    if (q && (!mp || sim_port_bind(kb_ipcq_port(q, "dma"), kb_dma_port(dma)) < 0 ||
              sim_port_bind(kb_ipcq_port(q, "buf"), mp) < 0)) {
        kb_ipcq_free(q); /* out of memory */
        return NULL;
    }
    return q;
}

static struct tsys *tsys_new_traced(int n, enum kb_mem_kind kind,
                                    bool timing_only,
                                    const struct kb_ipcq_params *qp,
                                    FILE *trace)
{
    struct tsys *t = T_OWN(calloc(1, sizeof *t), free);
    if (!t)
        return NULL;
    t->s = T_OWN(sim_new(NULL), sim_free);
    if (!t->s)
        return NULL;
    if (trace && sim_trace_open_file(t->s, trace, "trace", NULL, 0) < 0)
        return NULL; /* out of memory */
    t->f = T_OWN(kb_fabric_new(t->s), kb_fabric_free);
    if (!t->f)
        return NULL;
    t->n = n;
    t->kind = kind;
    struct kb_noc_params np = {KB_NOC_MESH, "", n, 1, NOC, NULL};
    t->noc = T_OWN(kb_noc_new(t->f, &np, NULL, 0), kb_noc_free);
    if (!t->noc)
        return NULL;
    for (int i = 0; i < 64; i++)
        t->router[i] = t->up[i] = t->down[i] = -1;
    char name[32];
    for (int r = 0; r < n; r++) {
        snprintf(name, sizeof name, "pe%d", r);
        for (int k = 0; k < 3; k++)
            if (!(t->mem[r][k] = T_OWN(kb_mem_new(t->s, name, &MEM_P[k], NULL, 0),
                                       kb_mem_free)))
                return NULL;
        t->mem_node[r][KB_MEM_TCM] = kb_noc_node(t->noc, r);
        t->mem_node[r][KB_MEM_SRAM] = attach(t, r, "sram", &SRAM_LINK);
        t->mem_node[r][KB_MEM_HBM] = attach(t, r, "hbm", &HBM_LINK);
        if (t->mem_node[r][KB_MEM_SRAM] < 0 || t->mem_node[r][KB_MEM_HBM] < 0)
            return NULL;
        struct kb_dma_params dp = {r, 1, 1, 1, timing_only};
        t->dma[r] = T_OWN(kb_dma_new(t->s, name, t->f, tsys_route, t, &dp, NULL, 0), kb_dma_free);
        if (!t->dma[r])
            return NULL;
        t->q[r] = T_OWN(ipcq_bound(t->s, name, t->dma[r], t->mem[r][kind],
                              t->mem_node[r][kind], qp, NULL, 0), kb_ipcq_free);
        if (!t->q[r])
            return NULL;
    }
    return t;
}

static struct tsys *tsys_new(int n, enum kb_mem_kind kind, bool timing_only,
                             const struct kb_ipcq_params *qp)
{
    return tsys_new_traced(n, kind, timing_only, qp, NULL);
}

static void tsys_free(struct tsys *t)
{
    for (int r = 0; r < t->n; r++) {
        T_FREE(kb_ipcq_free, t->q[r]);
        T_FREE(kb_dma_free, t->dma[r]);
        for (int k = 0; k < 3; k++)
            T_FREE(kb_mem_free, t->mem[r][k]);
    }
    T_FREE(kb_noc_free, t->noc);
    T_FREE(kb_fabric_free, t->f);
    T_FREE(sim_free, t->s);
    T_FREE(free, t);
}

static sim_time path_time(struct tsys *t, int a, int b, uint64_t bytes)
{
    int links[32];
    int n = tsys_route(t, a, b, links, 32);
    return kb_fabric_path_time(t->f, links, n, bytes);
}

/* The one-way time of a slot of `bytes` from PE a to PE b, found full by a
 * waiting receiver: T_dma + slot read + credit, from the memories' and the
 * fabric's closed forms (slot 0 of fresh rings: both at address 0). */
static sim_time slot_time(struct tsys *t, int a, int b, uint64_t bytes,
                          sim_time *t_dma, sim_time *t_read, sim_time *t_credit)
{
    int k = t->kind;
    struct kb_mem *ms = t->mem[a][k], *md = t->mem[b][k];
    int ns = t->mem_node[a][k], nd = t->mem_node[b][k];
    sim_time ls = kb_mem_time(ms, 0, 0), ld = kb_mem_time(md, 0, 0);
    sim_time ds = kb_mem_time(ms, 0, bytes) - ls;
    sim_time dd = kb_mem_time(md, 0, bytes) - ld;
    sim_time tnet = path_time(t, ns, nd, bytes), lnet = path_time(t, ns, nd, 0);
    sim_time mid = tnet;
    if (lnet + ds > mid)
        mid = lnet + ds;
    if (lnet + dd > mid)
        mid = lnet + dd;
    sim_time dma = ls + mid + ld;
    sim_time rp = path_time(t, nd, b, bytes);
    sim_time rd = kb_mem_time(md, 0, bytes) + rp;
    sim_time cr = path_time(t, b, a, 16);
    /* a link of a path could not be made (out of memory): kb_fabric_errmsg */
    if (tnet == SIM_FOREVER || lnet == SIM_FOREVER || rp == SIM_FOREVER || cr == SIM_FOREVER)
        return SIM_FOREVER;
    if (t_dma)
        *t_dma = dma;
    if (t_read)
        *t_read = rd;
    if (t_credit)
        *t_credit = cr;
    return dma + rd + cr;
}

/* A closed form that failed stops the test at its error (out of memory
 * under --failalloc, which the fabric's message says). */
#define TIME_OK(t, v)                                                     \
    if ((v) == SIM_FOREVER)                                               \
    ASSERT_STREQ(kb_fabric_errmsg((t)->f), "(a time)")

static void fill(unsigned char *p, uint64_t n, unsigned seed)
{
    for (uint64_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 8));
}

/* ---- backpressure -------------------------------------------------------- */

struct bp {
    struct tsys *t;
    sim_time recv_start;
    sim_time sent[5], recvd[5];
    int rc;
};

static void bp_sender(struct sim *s, void *arg)
{
    struct bp *b = arg;
    unsigned char buf[4096];
    for (int i = 0; i < 5 && b->rc == 0; i++) {
        fill(buf, sizeof buf, (unsigned)i);
        struct kb_ipcq_meta m = {(uint64_t)i, 1, 2048};
        b->rc = kb_ipcq_send(b->t->q[0], "E", buf, sizeof buf, &m);
        b->sent[i] = sim_now(s);
    }
}

static void bp_receiver(struct sim *s, void *arg)
{
    struct bp *b = arg;
    unsigned char buf[4096], want[4096];
    sim_wait(s, b->recv_start);
    for (int i = 0; i < 5; i++) {
        struct kb_ipcq_meta m;
        int64_t n = kb_ipcq_recv(b->t->q[1], "W", buf, sizeof buf, &m);
        fill(want, sizeof want, (unsigned)i);
        if (n != 4096 || m.tag != (uint64_t)i || memcmp(buf, want, 4096) != 0) {
            b->rc = -1000 - i;
            return;
        }
        b->recvd[i] = sim_now(s);
    }
}

static void fifth_send_blocks(enum kb_ipcq_backpressure mode, double poll_ns)
{
    struct kb_ipcq_params qp = ipcq_params(mode, poll_ns);
    struct tsys *t = T_OWN(tsys_new(2, KB_MEM_TCM, false, &qp), tsys_free);
    ASSERT_TRUE(t);
    ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[1], "W"), 0);
    struct bp b = {t, 1000 * SIM_NS, {0}, {0}, 0};
    ASSERT_TRUE(sim_thread(t->s, "sender", bp_sender, &b, 0));
    ASSERT_TRUE(sim_thread(t->s, "receiver", bp_receiver, &b, 0));
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(b.rc, 0);

    sim_time dma, rd, cr;
    sim_time one = slot_time(t, 0, 1, 4096, &dma, &rd, &cr);
    TIME_OK(t, one);
    /* TCM -> TCM one hop: 1.7 + 1 + 15 ns of flits; 8 ns TCM read; the
     * credit 1.7 + 16/256 ns */
    ASSERT_U64_EQ(dma, 17700);
    ASSERT_U64_EQ(rd, 8000);
    ASSERT_U64_EQ(cr, 1763);
    ASSERT_U64_EQ(kb_ipcq_credit_time(t->q[1], "W"), cr);
    ASSERT_U64_EQ(one, 27463);
    for (int i = 0; i < 4; i++)
        ASSERT_U64_EQ(b.sent[i], 0); /* fire-and-forget while credits last */
    /* the first credit comes back when the first recv ends */
    sim_time credit = b.recv_start + rd + cr;
    ASSERT_U64_EQ(b.recvd[0], credit);
    sim_time wake = credit;
    if (mode == KB_IPCQ_POLL) {
        sim_time poll = (sim_time)llround(poll_ns * 1000);
        wake = (credit + poll - 1) / poll * poll; /* first poll >= arrival */
        ASSERT_TRUE(wake > credit);
    }
    ASSERT_U64_EQ(b.sent[4], wake);
    /* slots 1..3 are full already. The fifth slot's write (8 ns on pe1's
     * one TCM channel) is booked when its DMA starts at `wake`, behind recv
     * 1's read, and so holds the TCM when recv 2 wants to read: contention
     * on the memory, and the only one. The fifth lands at wake + dma,
     * before the receiver gets to it. */
    ASSERT_U64_EQ(b.recvd[1], b.recvd[0] + rd + cr);
    sim_time w5 = (wake > b.recvd[0] + rd ? wake : b.recvd[0] + rd) + rd;
    ASSERT_TRUE(w5 > b.recvd[1]);
    ASSERT_U64_EQ(b.recvd[2], w5 + rd + cr);
    ASSERT_U64_EQ(b.recvd[3], b.recvd[2] + rd + cr);
    ASSERT_U64_EQ(b.recvd[4], b.recvd[3] + rd + cr);
    ASSERT_TRUE(wake + dma < b.recvd[3]);

    struct kb_ipcq_stats st;
    ASSERT_EQ(kb_ipcq_get_stats(t->q[0], "E", &st), 0);
    ASSERT_U64_EQ(st.tx_messages, 5);
    ASSERT_U64_EQ(st.tx_bytes, 5 * 4096);
    ASSERT_U64_EQ(st.blocked_ps, wake);
    ASSERT_EQ(kb_ipcq_get_stats(t->q[1], NULL, &st), 0);
    ASSERT_U64_EQ(st.rx_messages, 5);
    ASSERT_U64_EQ(st.rx_bytes, 5 * 4096);
    ASSERT_EQ(st.occupancy_hwm, 4);
    ASSERT_U64_EQ(st.recv_busy_ps, 5 * (rd + cr) + (w5 - b.recvd[1]));
    ASSERT_U64_EQ(st.recv_wait_ps, 0); /* every slot full before its recv */
    struct kb_dma_stats ds;
    kb_dma_get_stats(t->dma[0], KB_DMA_COMM, &ds);
    ASSERT_U64_EQ(ds.transfers, 5);
    ASSERT_U64_EQ(ds.busy_ps, 5 * dma);
    T_FREE(tsys_free, t);
}

TEST(fifth_send_blocks_sleep) { fifth_send_blocks(KB_IPCQ_SLEEP, 0); }
TEST(fifth_send_blocks_poll) { fifth_send_blocks(KB_IPCQ_POLL, 7); }

/* ---- slot cost per buffer kind --------------------------------------------- */

struct one {
    struct tsys *t;
    int from, to;
    const char *tx, *rx;
    uint64_t bytes;
    sim_time end;
    int64_t got;
    int rc;
    unsigned char *in, *out;
};

static void one_sender(struct sim *s, void *arg)
{
    (void)s;
    struct one *o = arg;
    struct kb_ipcq_meta m = {7, 3, (uint32_t)o->bytes};
    o->rc = kb_ipcq_send(o->t->q[o->from], o->tx, o->in, o->bytes, &m);
}

static void one_receiver(struct sim *s, void *arg)
{
    struct one *o = arg;
    struct kb_ipcq_meta m;
    o->got = kb_ipcq_recv(o->t->q[o->to], o->rx, o->out, o->bytes, &m);
    o->end = sim_now(s);
    if (o->got >= 0 && (m.tag != 7 || m.dtype != 3 || m.count != o->bytes))
        o->got = -999;
}

TEST(slot_cost_per_buffer_kind)
{
    static const enum kb_mem_kind kinds[] = {KB_MEM_TCM, KB_MEM_SRAM, KB_MEM_HBM};
    /* by hand, 4096 B one hop (see the comments for each kind) */
    static const sim_time by_hand[] = {
        /* tcm: dma 17.7 + read 8 + credit 1.763 */
        27463,
        /* sram: dma 2 + (0.5+2 + 1.7+1 + 0.5+2 + 15×2 flits at 128) + 2 = 41.7;
         * read 2 + 32 + (0.5 + 32) = 66.5; credit 1.763 */
        41700 + 66500 + 1763,
        /* hbm: dma 6 + (0.5+1.7+0.5 + 3 head + 15 flits at 256) + 6 = 32.7;
         * read 6 + 16 + (0.5 + 16) = 38.5; credit 1.763 */
        32700 + 38500 + 1763,
    };
    for (int k = 0; k < 3; k++) {
        struct kb_ipcq_params qp = ipcq_params(KB_IPCQ_SLEEP, 0);
        struct tsys *t = T_OWN(tsys_new(2, kinds[k], false, &qp), tsys_free);
        ASSERT_TRUE(t);
        ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[1], "W"), 0);
        struct kb_ipcq_slot si;
        ASSERT_EQ(kb_ipcq_slot_info(t->q[1], "W", 0, &si), 0);
        ASSERT_U64_EQ(si.addr, 0);
        unsigned char in[4096], out[4096];
        fill(in, sizeof in, 5);
        struct one o = {t, 0, 1, "E", "W", 4096, 0, 0, 0, in, out};
        ASSERT_TRUE(sim_thread(t->s, "send", one_sender, &o, 0));
        ASSERT_TRUE(sim_thread(t->s, "recv", one_receiver, &o, 0));
        ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
        ASSERT_EQ(o.rc, 0);
        ASSERT_EQ(o.got, 4096);
        ASSERT_TRUE(memcmp(in, out, sizeof in) == 0);
        sim_time dma;
        sim_time want = slot_time(t, 0, 1, 4096, &dma, NULL, NULL);
        TIME_OK(t, want);
        ASSERT_U64_EQ(o.end, want);
        ASSERT_U64_EQ(o.end, by_hand[k]);
        struct kb_ipcq_stats st;
        kb_ipcq_get_stats(t->q[1], "W", &st);
        ASSERT_U64_EQ(st.recv_wait_ps, dma);
        ASSERT_U64_EQ(st.recv_busy_ps, want - dma);
        T_FREE(tsys_free, t);
    }
}

/* ---- ping-pong ------------------------------------------------------------- */

struct pp {
    struct tsys *t;
    int rounds;
    sim_time end;
    int rc;
};

static void pp_side(struct tsys *t, int me, const char *dir, int rounds,
                    bool first, int *rc)
{
    unsigned char buf[1024], want[1024];
    for (int i = 0; i < rounds && *rc == 0; i++) {
        if (!first || i > 0) {
            struct kb_ipcq_meta m;
            int64_t n = kb_ipcq_recv(t->q[me], dir, buf, sizeof buf, &m);
            fill(want, sizeof want, (unsigned)m.tag);
            if (n != 1024 || memcmp(buf, want, 1024) != 0) {
                *rc = -1;
                return;
            }
        }
        struct kb_ipcq_meta m = {(uint64_t)(me * 100 + i), 0, 0};
        fill(buf, sizeof buf, (unsigned)m.tag);
        *rc = kb_ipcq_send(t->q[me], dir, buf, sizeof buf, &m);
    }
    if (first && *rc == 0) {
        struct kb_ipcq_meta m;
        if (kb_ipcq_recv(t->q[me], dir, buf, sizeof buf, &m) != 1024 ||
            m.tag != (uint64_t)(200 + rounds - 1))
            *rc = -2;
    }
}

static void pp_a(struct sim *s, void *arg)
{
    struct pp *p = arg;
    pp_side(p->t, 0, "E", p->rounds, true, &p->rc);
    p->end = sim_now(s);
}

static void pp_b(struct sim *s, void *arg)
{
    (void)s;
    struct pp *p = arg;
    int rc = 0;
    pp_side(p->t, 2, "W", p->rounds, false, &rc);
    if (rc)
        p->rc = rc;
}

TEST(ping_pong_latency)
{
    struct kb_ipcq_params qp = ipcq_params(KB_IPCQ_SLEEP, 0);
    struct tsys *t = T_OWN(tsys_new(3, KB_MEM_TCM, false, &qp), tsys_free);
    ASSERT_TRUE(t);
    /* pe0 and pe2, two hops apart; "E" and "W" both ways */
    ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[2], "W"), 0);
    ASSERT_EQ(kb_ipcq_wire(t->q[2], "W", t->q[0], "E"), 0);
    struct pp p = {t, 3, 0, 0};
    ASSERT_TRUE(sim_thread(t->s, "a", pp_a, &p, 0));
    ASSERT_TRUE(sim_thread(t->s, "b", pp_b, &p, 0));
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(p.rc, 0);
    sim_time one = slot_time(t, 0, 2, 1024, NULL, NULL, NULL);
    TIME_OK(t, one);
    sim_time back = slot_time(t, 2, 0, 1024, NULL, NULL, NULL);
    TIME_OK(t, back);
    ASSERT_U64_EQ(one, back);
    /* dma 2 × 1.7 + 2 × 1 + 3 flits = 8.4; read 2; credit 2 × (1.7 + 0.063),
     * the 16 B serialised (and rounded to the ps) on each hop */
    ASSERT_U64_EQ(one, 8400 + 2000 + 3526);
    ASSERT_U64_EQ(p.end, 3 * 2 * one);
    T_FREE(tsys_free, t);
}

/* ---- atomic visibility ----------------------------------------------------- */

struct vis {
    struct tsys *t;
    int violations, seen_full;
    sim_time first_full[3];
    bool stop;
    int rc; /* the sender's first error */
};

static void vis_sender(struct sim *s, void *arg)
{
    (void)s;
    struct vis *v = arg;
    unsigned char buf[4096];
    for (int i = 0; i < 3; i++) {
        fill(buf, sizeof buf, (unsigned)(i + 1));
        struct kb_ipcq_meta m = {(uint64_t)(i + 1), 9, 4096};
        if ((v->rc = kb_ipcq_send(v->t->q[0], "E", buf, sizeof buf, &m)) < 0)
            return;
    }
}

/* Polls every rx slot every 50 ps: a FULL slot must hold its message's
 * bytes and metadata; any other slot neither. The bytes travel with the
 * slot (decision 0060): the rings' memory holds none, ever. */
static void vis_poller(struct sim *s, void *arg)
{
    struct vis *v = arg;
    static unsigned char raw[4096], want[4096];
    while (sim_now(s) < 120 * SIM_NS) {
        for (uint32_t i = 0; i < 3; i++) {
            struct kb_ipcq_slot si;
            kb_ipcq_slot_info(v->t->q[1], "W", i, &si);
            fill(want, sizeof want, i + 1);
            bool data = si.data && si.data->bytes == sizeof raw &&
                        kb_mem_snap_read(si.data, 0, raw, sizeof raw) == 0 &&
                        memcmp(raw, want, sizeof raw) == 0;
            bool meta = si.meta.tag == i + 1 && si.meta.dtype == 9 &&
                        si.bytes == 4096;
            bool full = si.state == KB_IPCQ_FULL;
            if (full != data || full != meta || (!full && (si.data || si.meta.tag)) ||
                kb_mem_pages(v->t->mem[0][KB_MEM_TCM]) || kb_mem_pages(v->t->mem[1][KB_MEM_TCM]))
                v->violations++;
            if (full && !v->first_full[i]) {
                v->first_full[i] = sim_now(s);
                v->seen_full++;
            }
        }
        sim_wait(s, 50);
    }
}

TEST(data_and_metadata_visible_together)
{
    struct kb_ipcq_params qp = ipcq_params(KB_IPCQ_SLEEP, 0);
    struct tsys *t = T_OWN(tsys_new(2, KB_MEM_TCM, false, &qp), tsys_free);
    ASSERT_TRUE(t);
    ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[1], "W"), 0);
    struct vis v = {t, 0, 0, {0}, false, 0};
    ASSERT_TRUE(sim_thread(t->s, "send", vis_sender, &v, 0));
    ASSERT_TRUE(sim_thread(t->s, "poll", vis_poller, &v, 0));
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_OK(v.rc);
    ASSERT_EQ(v.violations, 0);
    ASSERT_EQ(v.seen_full, 3);
    /* slot i lands at (i + 1) × 17.7 ns; the poller, every 50 ps, sees it
     * at the first poll at or after that */
    for (int i = 0; i < 3; i++) {
        sim_time land = (sim_time)(i + 1) * 17700;
        ASSERT_TRUE(v.first_full[i] >= land && v.first_full[i] <= land + 50);
    }
    uint64_t bytes;
    struct kb_ipcq_meta m;
    ASSERT_EQ(kb_ipcq_probe(t->q[1], "W", &bytes, &m), 1);
    ASSERT_U64_EQ(bytes, 4096);
    ASSERT_U64_EQ(m.tag, 1);
    T_FREE(tsys_free, t);
}

/* ---- split messages and timing-only mode ----------------------------------- */

TEST(split_messages_and_timing_only)
{
    /* 20000 B = 5 slots of 4096 (the last 3616) through a 4-slot ring */
    uint64_t n = 20000;
    unsigned char *in = T_OWN(malloc(n), free), *out = T_OWN(malloc(n), free);
    unsigned char *zero = T_OWN(calloc(1, n), free);
    ASSERT_TRUE(in && out && zero);
    fill(in, n, 42);
    sim_time ends[2];
    for (int mode = 0; mode < 2; mode++) {
        struct kb_ipcq_params qp = ipcq_params(KB_IPCQ_SLEEP, 0);
        struct tsys *t = T_OWN(tsys_new(2, KB_MEM_HBM, mode == 1, &qp), tsys_free);
        ASSERT_TRUE(t);
        ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[1], "W"), 0);
        memset(out, 0, n);
        struct one o = {t, 0, 1, "E", "W", n, 0, 0, 0, in, out};
        ASSERT_TRUE(sim_thread(t->s, "send", one_sender, &o, 0));
        ASSERT_TRUE(sim_thread(t->s, "recv", one_receiver, &o, 0));
        ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
        ASSERT_EQ(o.rc, 0);
        ASSERT_EQ(o.got, (int64_t)n);
        ASSERT_TRUE(memcmp(out, mode == 0 ? in : zero, n) == 0);
        ends[mode] = o.end;
        struct kb_ipcq_stats st;
        kb_ipcq_get_stats(t->q[0], NULL, &st);
        ASSERT_U64_EQ(st.tx_messages, 1);
        ASSERT_U64_EQ(st.tx_bytes, n);
        struct kb_dma_stats ds;
        kb_dma_get_stats(t->dma[0], KB_DMA_COMM, &ds);
        ASSERT_U64_EQ(ds.transfers, 5);
        ASSERT_U64_EQ(ds.bytes, n);
        T_FREE(tsys_free, t);
    }
    ASSERT_U64_EQ(ends[0], ends[1]);
    T_FREE(free, in);
    T_FREE(free, out);
    T_FREE(free, zero);
}

/* ---- errors ---------------------------------------------------------------- */

struct big {
    struct tsys *t;
    int64_t first, second;
    char msg[256];
};

static void big_sender(struct sim *s, void *arg)
{
    (void)s;
    struct big *b = arg;
    unsigned char buf[5000];
    fill(buf, sizeof buf, 1);
    kb_ipcq_send(b->t->q[0], "E", buf, sizeof buf, NULL);
}

static void big_receiver(struct sim *s, void *arg)
{
    (void)s;
    struct big *b = arg;
    unsigned char buf[5000];
    b->first = kb_ipcq_recv(b->t->q[1], "W", buf, 4096, NULL);
    snprintf(b->msg, sizeof b->msg, "%s", kb_ipcq_errmsg(b->t->q[1]));
    b->second = kb_ipcq_recv(b->t->q[1], "W", buf, sizeof buf, NULL);
}

static void unwired_receiver(struct sim *s, void *arg)
{
    (void)s;
    struct big *b = arg;
    b->first = kb_ipcq_recv(b->t->q[1], "child_left", NULL, 16, NULL);
    snprintf(b->msg, sizeof b->msg, "%s", kb_ipcq_errmsg(b->t->q[1]));
}

TEST(errors)
{
    struct kb_ipcq_params qp = ipcq_params(KB_IPCQ_SLEEP, 0);
    struct tsys *t = T_OWN(tsys_new(3, KB_MEM_TCM, false, &qp), tsys_free);
    ASSERT_TRUE(t);
    ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[1], "W"), 0);
    ASSERT_TRUE(kb_ipcq_wired(t->q[0], "E", true));
    ASSERT_TRUE(!kb_ipcq_wired(t->q[0], "E", false));
    ASSERT_TRUE(kb_ipcq_wired(t->q[1], "W", false));
    /* each side of a direction is wired once */
    ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[2], "W"), SIM_EINVAL);
    ASSERT_STREQ(kb_ipcq_errmsg(t->q[0]),
                 "direction 'E' of 'pe0' is already wired for sending");
    ASSERT_EQ(kb_ipcq_wire(t->q[2], "E", t->q[1], "W"), SIM_EINVAL);
    ASSERT_STREQ(kb_ipcq_errmsg(t->q[2]),
                 "direction 'W' of 'pe1' is already wired for receiving");
    /* the reverse direction of a wired name is still free */
    ASSERT_EQ(kb_ipcq_wire(t->q[1], "W", t->q[0], "E"), 0);

    struct big b = {t, 0, 0, ""};
    ASSERT_TRUE(sim_thread(t->s, "send", big_sender, &b, 0));
    ASSERT_TRUE(sim_thread(t->s, "recv", big_receiver, &b, 0));
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(b.first, SIM_EINVAL);
    ASSERT_STREQ(b.msg, "message of 5000 bytes on direction 'W' of 'pe1' is "
                        "larger than the 4096 bytes asked for");
    ASSERT_EQ(b.second, 5000); /* the message stayed queued */

    ASSERT_TRUE(sim_thread(t->s, "recv2", unwired_receiver, &b, 0));
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(b.first, SIM_EINVAL);
    ASSERT_STREQ(b.msg, "recv on direction 'child_left' of 'pe1', which is not "
                        "wired");
    ASSERT_EQ(kb_ipcq_send(t->q[2], "N", "x", 1, NULL), SIM_EINVAL);
    ASSERT_STREQ(kb_ipcq_errmsg(t->q[2]),
                 "send on direction 'N' of 'pe2', which is not wired");
    ASSERT_EQ(kb_ipcq_send(t->q[0], "E", "x", 1, NULL), SIM_EPERM);
    ASSERT_EQ(kb_ipcq_get_stats(t->q[0], "S", &(struct kb_ipcq_stats){0}),
              SIM_EINVAL);

    /* rings that do not match; parameters */
    char err[200] = "";
    struct kb_ipcq_params small = {2, 4096, KB_IPCQ_SLEEP, 0, 16};
    struct kb_ipcq *q9 = T_OWN(ipcq_bound(t->s, "pe9", t->dma[2], t->mem[2][0],
                                     t->mem_node[2][0], &small, err, sizeof err), kb_ipcq_free);
    ASSERT_TRUE(q9);
    ASSERT_EQ(kb_ipcq_wire(t->q[2], "global_E", q9, "global_W"), SIM_EINVAL);
    ASSERT_STREQ(kb_ipcq_errmsg(t->q[2]), "cannot wire 'pe2' 'global_E' to 'pe9' "
                 "'global_W': rings of 4 x 4096 and 2 x 4096 bytes");
    T_FREE(kb_ipcq_free, q9);
    struct kb_ipcq_params bad = {4, 4096, KB_IPCQ_POLL, 0, 16};
    ASSERT_TRUE(ipcq_bound(t->s, "pe8", t->dma[2], t->mem[2][0],
                            t->mem_node[2][0], &bad, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "ipcq of 'pe8': poll interval must be >= 0.001 ns, got 0");
    bad = (struct kb_ipcq_params){0, 4096, KB_IPCQ_SLEEP, 0, 16};
    ASSERT_TRUE(ipcq_bound(t->s, "pe8", t->dma[2], t->mem[2][0],
                            t->mem_node[2][0], &bad, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "ipcq of 'pe8': slots must be >= 1, got 0");
    /* a ring that does not fit its memory */
    struct kb_ipcq_params huge = {200, 4096, KB_IPCQ_SLEEP, 0, 16};
    struct kb_ipcq *h1 = T_OWN(ipcq_bound(t->s, "h1", t->dma[2], t->mem[2][0],
                                     t->mem_node[2][0], &huge, NULL, 0), kb_ipcq_free);
    ASSERT_TRUE(h1);
    ASSERT_EQ(kb_ipcq_wire(h1, "E", h1, "W"), SIM_ENOMEM);
    ASSERT_CONTAINS(kb_ipcq_errmsg(h1), "rx ring of 'h1' 'W': ");
    T_FREE(kb_ipcq_free, h1);
    T_FREE(tsys_free, t);
}

static int five_sends_rc; /* the first error of five_sends */

static void five_sends(struct sim *s, void *arg)
{
    (void)s;
    struct kb_ipcq *q = arg;
    for (int i = 0; i < 5; i++)
        if ((five_sends_rc = kb_ipcq_send(q, "E", NULL, 64, NULL)) < 0)
            return;
}

TEST(sleeping_sender_without_receiver_deadlocks)
{
    struct kb_ipcq_params qp = ipcq_params(KB_IPCQ_SLEEP, 0);
    struct tsys *t = T_OWN(tsys_new(2, KB_MEM_TCM, false, &qp), tsys_free);
    ASSERT_TRUE(t);
    ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[1], "W"), 0);
    five_sends_rc = 0;
    ASSERT_TRUE(sim_thread(t->s, "sender", five_sends, t->q[0], 0));
    int rc = sim_run(t->s, SIM_FOREVER);
    ASSERT_OK(five_sends_rc);
    ASSERT_EQ(rc, SIM_EDEADLOCK);
    ASSERT_CONTAINS(sim_errmsg(t->s), "sender");
    ASSERT_CONTAINS(sim_errmsg(t->s), "pe0.ipcq.E.credit");
    struct kb_ipcq_stats st;
    kb_ipcq_get_stats(t->q[1], "W", &st);
    ASSERT_EQ(st.occupancy_hwm, 4);
    T_FREE(tsys_free, t);
}

/* ---- trace spans ---------------------------------------------------------- */

struct tr {
    struct tsys *t;
    sim_time sent[2], recv_start[2], recvd[2];
    int64_t got[2];
    int rc[2];
};

static void tr_sender(struct sim *s, void *arg)
{
    struct tr *x = arg;
    x->rc[0] = kb_ipcq_send(x->t->q[0], "E", NULL, 3 * 4096, NULL);
    x->sent[0] = sim_now(s);
    x->rc[1] = kb_ipcq_send(x->t->q[0], "E", NULL, 100, NULL);
    x->sent[1] = sim_now(s);
}

static void tr_receiver(struct sim *s, void *arg)
{
    struct tr *x = arg;
    sim_wait(s, 1000 * SIM_NS);
    for (int i = 0; i < 2; i++) {
        x->recv_start[i] = sim_now(s);
        x->got[i] = kb_ipcq_recv(x->t->q[1], "W", NULL, 3 * 4096, NULL);
        x->recvd[i] = sim_now(s);
    }
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* The trace's form of a span from a to b: "ts":..,"dur":.. in us. */
static void span_at(char *buf, size_t n, sim_time a, sim_time b)
{
    snprintf(buf, n, "\"ts\":%" PRIu64 ".%06" PRIu64 ",\"dur\":%" PRIu64
             ".%06" PRIu64 ",", a / SIM_US, a % SIM_US, (b - a) / SIM_US,
             (b - a) % SIM_US);
}

/* The trace j holds an IPCQ span from a to b: `what` ("send" or "recv")
 * of message msg, `bytes` long, with the peer's direction, in `slots`
 * slots from `slot`. */
static void expect_ipcq_span(const char *j, sim_time a, sim_time b,
                             const char *what, int bytes, const char *peer,
                             int msg, int slot, int slots)
{
    char want[400], at[100];
    span_at(at, sizeof at, a, b);
    snprintf(want, sizeof want, "%s\"cat\":\"ipcq\",\"name\":\"%s %d B\","
             "\"args\":{\"bytes\":%d,\"peer\":\"%s\",\"msg\":%d,"
             "\"slot\":%d,\"slots\":%d}}", at, what, bytes, bytes, peer, msg,
             slot, slots);
    ASSERT_CONTAINS(j, want);
}

/* A message of three slots on a ring of two, then one of 100 bytes, the
 * receiver late: the first send's span lasts until the credit of its
 * third slot comes back; each side's spans are on its own row, numbered
 * 0 and 1 on the channel, with their first slot and slot count; the
 * receiving ring's occupancy counter follows every slot in and out. */
TEST(trace_spans)
{
    struct kb_ipcq_params qp = {2, 4096, KB_IPCQ_SLEEP, 0, 16};
    FILE *f = T_OWN(tmpfile(), test_fclose);
    ASSERT_TRUE(f != NULL);
    struct tsys *t = T_OWN(tsys_new_traced(2, KB_MEM_TCM, true, &qp, f), tsys_free);
    ASSERT_TRUE(t);
    ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[1], "W"), 0);
    struct tr x = {t, {0}, {0}, {0}, {0}, {0}};
    ASSERT_TRUE(sim_thread(t->s, "sender", tr_sender, &x, 0));
    ASSERT_TRUE(sim_thread(t->s, "receiver", tr_receiver, &x, 0));
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(x.rc[0], 0);
    ASSERT_EQ(x.rc[1], 0);
    ASSERT_EQ(x.got[0], 3 * 4096);
    ASSERT_EQ(x.got[1], 100);
    sim_time rd, cr;
    sim_time one = slot_time(t, 0, 1, 4096, NULL, &rd, &cr);
    TIME_OK(t, one);
    /* the third slot's credit: the first slot's read and credit at 1 us */
    ASSERT_U64_EQ(x.sent[0], 1000 * SIM_NS + rd + cr);
    ASSERT_TRUE(x.sent[1] > x.sent[0]); /* waits for the second slot's */
    ASSERT_EQ(sim_trace_close(t->s, NULL, 0), 0);
    char *j = T_OWN(test_slurp(f), free);
    T_FREE(test_fclose, f);
    ASSERT_TRUE(j);

    ASSERT_CONTAINS(j, "\"name\":\"process_name\",\"args\":{\"name\":\"pe0\"}");
    ASSERT_CONTAINS(j, "\"name\":\"thread_name\",\"args\":{\"name\":\"ipcq.E.send\"}");
    ASSERT_CONTAINS(j, "\"name\":\"thread_name\",\"args\":{\"name\":\"ipcq.W.recv\"}");
    ASSERT_EQ(count(j, "\"cat\":\"ipcq\""), 4);
    expect_ipcq_span(j, 0, x.sent[0], "send", 12288, "pe1.ipcq.W", 0, 0, 3);
    expect_ipcq_span(j, x.sent[0], x.sent[1], "send", 100, "pe1.ipcq.W", 1, 1, 1);
    expect_ipcq_span(j, x.recv_start[0], x.recvd[0], "recv", 12288, "pe0.ipcq.E", 0, 0, 3);
    expect_ipcq_span(j, x.recv_start[1], x.recvd[1], "recv", 100, "pe0.ipcq.E", 1, 1, 1);

    /* the receiving ring's occupancy: a sample at each change, in order of
     * time. Slots 0 and 1 land while the receiver sleeps (the ring full),
     * it reads them at 1 us (+ read, + credit + read); slot 2 and the
     * 100 B message's slot land and are read within the recvs. */
    ASSERT_CONTAINS(j, "\"name\":\"thread_name\",\"args\":{\"name\":\"ipcq.W.slots\"}");
    ASSERT_EQ(count(j, "\"ph\":\"C\""), 8);
    ASSERT_EQ(count(j, "\"name\":\"ipcq.W.slots\",\"args\":{\"value\":"), 8);
    sim_time dma;
    sim_time two = slot_time(t, 0, 1, 4096, &dma, NULL, NULL);
    TIME_OK(t, two);
    static const int want_v[8] = {1, 2, 1, 0, 1, 2, 1, 0};
    sim_time ct[8];
    const char *p = j;
    for (int i = 0; i < 8; i++) {
        p = strstr(p, "{\"ph\":\"C\"");
        ASSERT_TRUE(p != NULL);
        uint64_t us, frac;
        int v;
        ASSERT_EQ(sscanf(p, "{\"ph\":\"C\",\"pid\":%*u,\"tid\":%*u,\"ts\":%" SCNu64
                         ".%6" SCNu64 ",\"name\":\"ipcq.W.slots\",\"args\":"
                         "{\"value\":%d}}", &us, &frac, &v), 3);
        ct[i] = us * SIM_US + frac;
        ASSERT_EQ(v, want_v[i]);
        if (i)
            ASSERT_TRUE(ct[i] >= ct[i - 1]);
        p++;
    }
    ASSERT_U64_EQ(ct[0], dma);
    ASSERT_U64_EQ(ct[1], 2 * dma); /* the DMA copies one slot at a time */
    ASSERT_U64_EQ(ct[2], 1000 * SIM_NS + rd);
    ASSERT_U64_EQ(ct[3], 1000 * SIM_NS + 2 * rd + cr);
    ASSERT_U64_EQ(ct[4], x.sent[0] + dma); /* the third slot, sent then */
    ASSERT_TRUE(ct[5] > x.sent[1] && ct[5] < ct[6]); /* the 100 B slot */
    ASSERT_TRUE(ct[6] <= x.recvd[0]);
    ASSERT_TRUE(ct[7] >= x.recv_start[1] && ct[7] <= x.recvd[1]);
    T_FREE(free, j);
    T_FREE(tsys_free, t);
}

/* ---- directions by index --------------------------------------------------- */

struct by_ix {
    struct tsys *t;
    int tx, rx;
    unsigned char *in, *out;
    int rc;
    int64_t got;
    sim_time end;
};

static void ix_sender(struct sim *s, void *arg)
{
    (void)s;
    struct by_ix *o = arg;
    struct kb_ipcq_meta m = {7, 3, 4096};
    o->rc = kb_ipcq_send_at(o->t->q[0], o->tx, o->in, 4096, &m);
}

static void ix_receiver(struct sim *s, void *arg)
{
    struct by_ix *o = arg;
    struct kb_ipcq_meta m;
    o->got = kb_ipcq_recv_at(o->t->q[1], o->rx, o->out, 4096, &m);
    o->end = sim_now(s);
    if (o->got >= 0 && (m.tag != 7 || m.dtype != 3 || m.count != 4096))
        o->got = -999;
}

/* The _at calls are the named calls on a direction's index: the same
 * bytes and the same time as slot_cost_per_buffer_kind's TCM case; an
 * index that is not a direction is "not wired" */
TEST(directions_by_index)
{
    struct kb_ipcq_params qp = ipcq_params(KB_IPCQ_SLEEP, 0);
    struct tsys *t = T_OWN(tsys_new(2, KB_MEM_TCM, false, &qp), tsys_free);
    ASSERT_TRUE(t);
    ASSERT_EQ(kb_ipcq_dir(t->q[0], "E"), -1);
    ASSERT_EQ(kb_ipcq_wire(t->q[0], "N", t->q[1], "S"), 0);
    ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[1], "W"), 0);
    int tx = kb_ipcq_dir(t->q[0], "E"), rx = kb_ipcq_dir(t->q[1], "W");
    ASSERT_EQ(tx, 1);
    ASSERT_EQ(rx, 1);
    ASSERT_EQ(kb_ipcq_dir(t->q[0], "nowhere"), -1);
    ASSERT_TRUE(kb_ipcq_wired_at(t->q[0], tx, true));
    ASSERT_TRUE(!kb_ipcq_wired_at(t->q[0], tx, false));
    ASSERT_TRUE(kb_ipcq_wired_at(t->q[1], rx, false));
    ASSERT_TRUE(!kb_ipcq_wired_at(t->q[1], -1, false));
    ASSERT_TRUE(!kb_ipcq_wired_at(t->q[1], 2, false));
    unsigned char in[4096], out[4096];
    fill(in, sizeof in, 9);
    struct by_ix o = {t, tx, rx, in, out, 0, 0, 0};
    ASSERT_TRUE(sim_thread(t->s, "send", ix_sender, &o, 0));
    ASSERT_TRUE(sim_thread(t->s, "recv", ix_receiver, &o, 0));
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(o.rc, 0);
    ASSERT_EQ(o.got, 4096);
    ASSERT_TRUE(memcmp(in, out, sizeof in) == 0);
    ASSERT_U64_EQ(o.end, 27463); /* as slot_cost_per_buffer_kind, tcm */
    struct by_ix bad = {t, 5, -1, in, out, 0, 0, 0};
    ASSERT_TRUE(sim_thread(t->s, "send2", ix_sender, &bad, 0));
    ASSERT_TRUE(sim_thread(t->s, "recv2", ix_receiver, &bad, 0));
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(bad.rc, SIM_EINVAL);
    ASSERT_EQ(bad.got, SIM_EINVAL);
    ASSERT_CONTAINS(kb_ipcq_errmsg(t->q[1]), "which is not wired");
    T_FREE(tsys_free, t);
}

/* ---- a receive served by a method process (decision 0052) ---------------- */

struct mrecv {
    struct kb_ipcq *q;
    struct kb_ipcq_recv_op op;
    struct kb_ipcq_meta m;
    int64_t got;
    sim_time end;
    int activations;
    bool done;
};

static void m_receiver(struct sim *s, void *arg)
{
    struct mrecv *r = arg;
    r->activations++;
    if (!r->done && kb_ipcq_recv_step(r->q, &r->op, &r->got)) {
        r->done = true;
        r->end = sim_now(s);
    }
}

/* kb_ipcq_recv_step in a method process is kb_ipcq_recv_at in a thread:
 * the same bytes, metadata, end and counters for one slot from each
 * kind of buffer (SRAM and HBM read over the fabric) and for a message of
 * 5 slots through a 4-slot ring; a message longer than asked for fails
 * and stays queued, and a second receive on the direction then takes it */
TEST(recv_step_in_a_method)
{
    static const enum kb_mem_kind kinds[] = {KB_MEM_TCM, KB_MEM_SRAM, KB_MEM_HBM,
                                             KB_MEM_HBM};
    static const uint64_t sizes[] = {4096, 4096, 4096, 20000};
    unsigned char *in = T_OWN(malloc(20000), free), *out[2];
    out[0] = T_OWN(malloc(20000), free);
    out[1] = T_OWN(malloc(20000), free);
    ASSERT_TRUE(in && out[0] && out[1]);
    fill(in, 20000, 11);
    for (int k = 0; k < 4; k++) {
        sim_time end[2];
        struct kb_ipcq_stats st[2];
        for (int method = 0; method < 2; method++) {
            struct kb_ipcq_params qp = ipcq_params(KB_IPCQ_SLEEP, 0);
            struct tsys *t = T_OWN(tsys_new(2, kinds[k], false, &qp), tsys_free);
            ASSERT_TRUE(t);
            ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[1], "W"), 0);
            memset(out[method], 0, 20000);
            struct one o = {t, 0, 1, "E", "W", sizes[k], 0, 0, 0, in, out[method]};
            struct mrecv r = {.q = t->q[1]};
            kb_ipcq_recv_begin(&r.op, kb_ipcq_dir(t->q[1], "W"), out[method], sizes[k], &r.m);
            ASSERT_TRUE(sim_thread(t->s, "send", one_sender, &o, 0));
            if (method)
                ASSERT_TRUE(sim_method(t->s, "recv", m_receiver, &r, false));
            else
                ASSERT_TRUE(sim_thread(t->s, "recv", one_receiver, &o, 0));
            ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
            ASSERT_EQ(o.rc, 0);
            if (method) {
                ASSERT_TRUE(r.done);
                ASSERT_EQ(r.got, (int64_t)sizes[k]);
                ASSERT_TRUE(r.m.tag == 7 && r.m.dtype == 3 && r.m.count == sizes[k]);
                ASSERT_TRUE(r.activations >= 2);
                end[1] = r.end;
            } else {
                ASSERT_EQ(o.got, (int64_t)sizes[k]);
                end[0] = o.end;
            }
            ASSERT_TRUE(memcmp(in, out[method], sizes[k]) == 0);
            kb_ipcq_get_stats(t->q[1], "W", &st[method]);
            T_FREE(tsys_free, t);
        }
        ASSERT_U64_EQ(end[1], end[0]);
        ASSERT_U64_EQ(st[1].recv_wait_ps, st[0].recv_wait_ps);
        ASSERT_U64_EQ(st[1].recv_busy_ps, st[0].recv_busy_ps);
        ASSERT_U64_EQ(st[1].rx_messages, 1);
        ASSERT_U64_EQ(st[1].rx_bytes, sizes[k]);
        if (k == 0)
            ASSERT_U64_EQ(end[1], 27463); /* as slot_cost_per_buffer_kind, tcm */
    }
    /* too long: 4096 B asked as 2048 */
    struct kb_ipcq_params qp = ipcq_params(KB_IPCQ_SLEEP, 0);
    struct tsys *t = T_OWN(tsys_new(2, KB_MEM_TCM, false, &qp), tsys_free);
    ASSERT_TRUE(t);
    ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[1], "W"), 0);
    struct one o = {t, 0, 1, "E", "W", 4096, 0, 0, 0, in, out[0]};
    struct mrecv r = {.q = t->q[1]};
    kb_ipcq_recv_begin(&r.op, kb_ipcq_dir(t->q[1], "W"), out[0], 2048, &r.m);
    ASSERT_TRUE(sim_thread(t->s, "send", one_sender, &o, 0));
    ASSERT_TRUE(sim_method(t->s, "recv", m_receiver, &r, false));
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_TRUE(r.done);
    ASSERT_EQ(r.got, SIM_EINVAL);
    ASSERT_CONTAINS(kb_ipcq_errmsg(t->q[1]), "message of 4096 bytes on direction 'W' of "
                                            "'pe1' is larger than the 2048 bytes asked for");
    uint64_t len = 0;
    ASSERT_EQ(kb_ipcq_probe(t->q[1], "W", &len, NULL), 1);
    ASSERT_U64_EQ(len, 4096);
    struct mrecv r2 = {.q = t->q[1]};
    kb_ipcq_recv_begin(&r2.op, kb_ipcq_dir(t->q[1], "W"), out[0], 4096, &r2.m);
    ASSERT_TRUE(sim_method(t->s, "recv2", m_receiver, &r2, false));
    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(r2.got, 4096);
    ASSERT_TRUE(memcmp(in, out[0], 4096) == 0);
    /* a step outside a method process cannot wait */
    struct mrecv r3 = {.q = t->q[1]};
    kb_ipcq_recv_begin(&r3.op, kb_ipcq_dir(t->q[1], "W"), NULL, 4096, &r3.m);
    int64_t got = 0;
    ASSERT_EQ(kb_ipcq_recv_step(t->q[1], &r3.op, &got), 1);
    ASSERT_EQ(got, SIM_EPERM);
    T_FREE(tsys_free, t);
    T_FREE(free, in);
    T_FREE(free, out[0]);
    T_FREE(free, out[1]);
}

/* ---- payloads as snapshots (decision 0056) ------------------------------- */

/* A snapshot on the heap, owned by the harness. */
static void snap_del(struct kb_mem_snap *s)
{
    kb_mem_snap_free(s);
    free(s);
}

struct snapio {
    struct tsys *t;
    uint64_t bytes;
    bool send_snap;
    int recv_mode; /* 0: host buffer, 1: snapshot (thread), 2: snapshot (method) */
    const struct kb_mem_snap *src;
    const unsigned char *in;
    unsigned char *out;
    struct kb_mem_snap *got_snap;
    struct kb_ipcq_recv_op op;
    struct kb_ipcq_meta m;
    int64_t got;
    sim_time end;
    int rc;
    bool done;
};

static void snap_sender(struct sim *s, void *arg)
{
    (void)s;
    struct snapio *o = arg;
    struct kb_ipcq_meta m = {7, 3, (uint32_t)o->bytes};
    o->rc = o->send_snap ? kb_ipcq_send_snap_at(o->t->q[0], kb_ipcq_dir(o->t->q[0], "E"),
                                                o->src, o->bytes, &m)
                         : kb_ipcq_send(o->t->q[0], "E", o->in, o->bytes, &m);
}

static void snap_receiver(struct sim *s, void *arg)
{
    struct snapio *o = arg;
    o->got = o->recv_mode ? kb_ipcq_recv_snap(o->t->q[1], "W", o->got_snap, o->bytes, &o->m)
                          : kb_ipcq_recv(o->t->q[1], "W", o->out, o->bytes, &o->m);
    o->end = sim_now(s);
}

static void snap_method(struct sim *s, void *arg)
{
    struct snapio *o = arg;
    if (!o->done && kb_ipcq_recv_step(o->t->q[1], &o->op, &o->got)) {
        o->done = true;
        o->end = sim_now(s);
    }
}

/* A send from a snapshot and a receive into one move the bytes a send and
 * a receive of host buffers move, at the same times, with either driver
 * of the receive: one slot, part of a slot, and a message of 5 slots
 * through a 4-slot ring; from a page-aligned source and an unaligned one;
 * rings in TCM and in HBM. Received into a snapshot, a whole slot's page
 * is held by reference: no page is copied, and the rx ring keeps none. */
TEST(snapshot_payloads_match_host_buffers)
{
    static const uint64_t sizes[] = {4096, 3000, 20000};
    static const enum kb_mem_kind kinds[] = {KB_MEM_TCM, KB_MEM_HBM};
    uint64_t nmax = 20000;
    unsigned char *in = T_OWN(malloc(nmax), free), *out = T_OWN(malloc(nmax), free);
    unsigned char *back = T_OWN(malloc(nmax), free);
    ASSERT_TRUE(in && out && back);
    fill(in, nmax, 5);
    for (int k = 0; k < 2; k++)
        for (int z = 0; z < 3; z++)
            for (int shift = 0; shift < 2; shift++) {
                sim_time end0 = 0;
                for (int mode = 0; mode < 4; mode++) {
                    /* mode 0: host to host; 1: snapshot to host; 2: snapshot
                     * to snapshot (thread); 3: host to snapshot (method) */
                    uint64_t n = sizes[z];
                    struct kb_ipcq_params qp = ipcq_params(KB_IPCQ_SLEEP, 0);
                    struct tsys *t = T_OWN(tsys_new(2, kinds[k], false, &qp), tsys_free);
                    ASSERT_TRUE(t);
                    ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[1], "W"), 0);
                    /* the source: pe0's SRAM, page-aligned or 64 bytes on */
                    struct kb_mem *sm = t->mem[0][KB_MEM_SRAM];
                    uint64_t a;
                    ASSERT_EQ(kb_mem_alloc(sm, n + 64, 4096, &a), 0);
                    a += 64 * (uint64_t)shift;
                    ASSERT_EQ(kb_mem_write(sm, a, in, n), 0);
                    struct kb_mem_snap *src = T_OWN(calloc(1, sizeof *src), snap_del);
                    struct kb_mem_snap *got = T_OWN(calloc(1, sizeof *got), snap_del);
                    ASSERT_TRUE(src && got);
                    ASSERT_EQ(kb_mem_snap_take(sm, a, n, src), 0);
                    /* the source written after the snapshot: the send
                     * carries the bytes as they were */
                    ASSERT_EQ(kb_mem_write(sm, a, out, n), 0);
                    memset(out, 0, nmax);
                    struct snapio o = {.t = t, .bytes = n, .send_snap = mode == 1 || mode == 2,
                                       .recv_mode = mode == 2 ? 1 : mode == 3 ? 2 : 0,
                                       .src = src, .in = in, .out = out, .got_snap = got};
                    ASSERT_TRUE(sim_thread(t->s, "send", snap_sender, &o, 0));
                    if (o.recv_mode == 2) {
                        kb_ipcq_recv_begin_snap(&o.op, kb_ipcq_dir(t->q[1], "W"), got,
                                                n, &o.m);
                        ASSERT_TRUE(sim_method(t->s, "recv", snap_method, &o, false));
                    } else {
                        ASSERT_TRUE(sim_thread(t->s, "recv", snap_receiver, &o, 0));
                    }
                    ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
                    ASSERT_EQ(o.rc, 0);
                    ASSERT_EQ(o.got, (int64_t)n);
                    ASSERT_TRUE(o.m.tag == 7 && o.m.dtype == 3 && o.m.count == n);
                    if (o.recv_mode) {
                        ASSERT_U64_EQ(got->bytes, n);
                        ASSERT_EQ(kb_mem_snap_read(got, 0, out, n), 0);
                        /* a whole slot of a page-aligned ring: by reference,
                         * and the rx ring holds no page once read */
                        struct kb_mem *rx = t->mem[1][kinds[k]];
                        if (n == 4096 && k == 0) {
                            ASSERT_U64_EQ(kb_mem_pages(rx), 0);
                        }
                    }
                    ASSERT_TRUE(memcmp(out, in, n) == 0);
                    if (mode == 0)
                        end0 = o.end;
                    ASSERT_U64_EQ(o.end, end0);
                    /* the snapshot written back: the bytes received */
                    if (o.recv_mode) {
                        ASSERT_EQ(kb_mem_snap_write(sm, a, got, 0, n), 0);
                        ASSERT_EQ(kb_mem_read(sm, a, back, n), 0);
                        ASSERT_TRUE(memcmp(back, in, n) == 0);
                    }
                    T_FREE(snap_del, got);
                    T_FREE(snap_del, src);
                    T_FREE(tsys_free, t);
                }
            }
    T_FREE(free, back);
    T_FREE(free, out);
    T_FREE(free, in);
}

/* A stream of messages of random sizes through a ring, sent from
 * snapshots or host buffers and received into snapshots or host buffers
 * in any mix, with the sender's source rewritten after every send and the
 * received snapshots written into the receiver's memory: every message's
 * bytes as sent, and, once everything is freed, the page pool back where
 * it was (the ring slots' dropped pages, the snapshots' references).
 * Slots of a page and of 3000 bytes (slots sharing pages). */
#define STREAM_N 40
struct stream {
    struct tsys *t;
    uint64_t seed;
    uint64_t len[STREAM_N];
    unsigned char *sent, *recvd; /* STREAM_N * 20000 bytes */
    struct kb_mem_snap *snap;     /* the sender's */
    struct kb_mem_snap *rsnap;    /* the receiver's */
    uint64_t src, dst;            /* the sender's and receiver's blocks */
    int rc_send, rc_recv, got;
};

static uint64_t stream_rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void stream_sender(struct sim *s, void *arg)
{
    (void)s;
    struct stream *o = arg;
    struct kb_mem *sm = o->t->mem[0][KB_MEM_SRAM];
    uint64_t x = o->seed;
    for (int i = 0; i < STREAM_N; i++) {
        uint64_t n = o->len[i], r = stream_rnd(&x);
        unsigned char *msg = o->sent + (uint64_t)i * 20000;
        uint64_t at = o->src + ((r >> 8) % 2 ? 0 : (r >> 16) % 4096);
        struct kb_ipcq_meta m = {(uint64_t)i, 0, (uint32_t)n};
        if (kb_mem_write(sm, at, msg, n) < 0) {
            o->rc_send = -1;
            return;
        }
        int rc;
        if (r % 3) {
            kb_mem_snap_clear(o->snap);
            if ((rc = kb_mem_snap_take(sm, at, n, o->snap)) == 0) {
                /* rewritten after the take: the send carries the old bytes */
                unsigned char junk[512];
                memset(junk, 0xEE, sizeof junk);
                for (uint64_t j = 0; j < n && rc == 0; j += sizeof junk)
                    rc = kb_mem_write(sm, at + j, junk, n - j < sizeof junk ? n - j : sizeof junk);
            }
            if (rc == 0)
                rc = kb_ipcq_send_snap(o->t->q[0], "E", o->snap, n, &m);
        } else {
            rc = kb_ipcq_send(o->t->q[0], "E", msg, n, &m);
        }
        if (rc < 0) {
            o->rc_send = rc;
            return;
        }
    }
}

static void stream_receiver(struct sim *s, void *arg)
{
    (void)s;
    struct stream *o = arg;
    struct kb_mem *dm = o->t->mem[1][KB_MEM_TCM];
    uint64_t x = o->seed ^ 0x5555;
    for (int i = 0; i < STREAM_N; i++) {
        unsigned char *out = o->recvd + (uint64_t)i * 20000;
        struct kb_ipcq_meta m;
        int64_t got;
        if (stream_rnd(&x) % 3) {
            got = kb_ipcq_recv_snap(o->t->q[1], "W", o->rsnap, 20000, &m);
            uint64_t at = o->dst + (stream_rnd(&x) % 2 ? 0 : 64);
            if (got < 0 || kb_mem_snap_write(dm, at, o->rsnap, 0, (uint64_t)got) < 0 ||
                kb_mem_read(dm, at, out, (uint64_t)got) < 0) {
                o->rc_recv = -1;
                return;
            }
        } else {
            got = kb_ipcq_recv(o->t->q[1], "W", out, 20000, &m);
        }
        if (got < 0 || m.tag != (uint64_t)i || (uint64_t)got != o->len[i]) {
            o->rc_recv = -2;
            return;
        }
        o->got++;
    }
}

TEST(a_stream_of_snapshot_messages)
{
    static const uint32_t slots[] = {4096, 3000};
    for (int z = 0; z < 2; z++)
        for (int k = 0; k < 2; k++) {
            uint64_t base = kb_mem_pool_pages();
            struct kb_ipcq_params qp = ipcq_params(KB_IPCQ_SLEEP, 0);
            qp.slot_size = slots[z];
            struct stream *o = T_OWN(calloc(1, sizeof *o), free);
            ASSERT_TRUE(o);
            o->seed = 88172645463325252ull + (uint64_t)(2 * z + k);
            o->sent = T_OWN(malloc(STREAM_N * 20000), free);
            o->recvd = T_OWN(calloc(1, STREAM_N * 20000), free);
            o->snap = T_OWN(calloc(1, sizeof *o->snap), snap_del);
            o->rsnap = T_OWN(calloc(1, sizeof *o->rsnap), snap_del);
            ASSERT_TRUE(o->sent && o->recvd && o->snap && o->rsnap);
            uint64_t x = o->seed;
            for (int i = 0; i < STREAM_N; i++) {
                uint64_t r = stream_rnd(&x);
                o->len[i] = r % 4 == 0 ? 4096 * (1 + (r >> 8) % 4) : 1 + (r >> 8) % 20000;
                fill(o->sent + (uint64_t)i * 20000, o->len[i], (unsigned)i + 1);
            }
            struct tsys *t = T_OWN(tsys_new(2, k ? KB_MEM_HBM : KB_MEM_TCM, false, &qp),
                                   tsys_free);
            ASSERT_TRUE(t);
            o->t = t;
            ASSERT_EQ(kb_ipcq_wire(t->q[0], "E", t->q[1], "W"), 0);
            ASSERT_EQ(kb_mem_alloc(t->mem[0][KB_MEM_SRAM], 20000 + 4096, 4096, &o->src), 0);
            ASSERT_EQ(kb_mem_alloc(t->mem[1][KB_MEM_TCM], 20000 + 64, 4096, &o->dst), 0);
            ASSERT_TRUE(sim_thread(t->s, "send", stream_sender, o, 0));
            ASSERT_TRUE(sim_thread(t->s, "recv", stream_receiver, o, 0));
            ASSERT_EQ(sim_run(t->s, SIM_FOREVER), SIM_DONE);
            ASSERT_EQ(o->rc_send, 0);
            ASSERT_EQ(o->rc_recv, 0);
            ASSERT_EQ(o->got, STREAM_N);
            for (int i = 0; i < STREAM_N; i++)
                ASSERT_TRUE(memcmp(o->sent + (uint64_t)i * 20000, o->recvd + (uint64_t)i * 20000,
                                   o->len[i]) == 0);
            T_FREE(snap_del, o->rsnap);
            T_FREE(snap_del, o->snap);
            T_FREE(tsys_free, t);
            ASSERT_U64_EQ(kb_mem_pool_pages(), base);
            T_FREE(free, o->recvd);
            T_FREE(free, o->sent);
            T_FREE(free, o);
        }
}

TEST_MAIN(fifth_send_blocks_sleep, fifth_send_blocks_poll,
          sleeping_sender_without_receiver_deadlocks,
          slot_cost_per_buffer_kind, ping_pong_latency,
          data_and_metadata_visible_together, split_messages_and_timing_only,
          errors, trace_spans, directions_by_index, recv_step_in_a_method,
          snapshot_payloads_match_host_buffers, a_stream_of_snapshot_messages)
