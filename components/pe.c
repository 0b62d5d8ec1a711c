/* pe.c — kb_pe: the PE record's memory look-up, its units, release */
#include "pe.h"

#include <stdio.h>

#include "kb_err.h"
#include "kb_port.h"

struct kb_mem *kb_pe_mem(const struct kb_pe *pe, enum kb_mem_kind kind, int *node)
{
    struct kb_mem *m = NULL;
    int at = -1;
    switch (kind) {
    case KB_MEM_TCM: m = pe->tcm, at = pe->node; break;
    case KB_MEM_SRAM: m = pe->sram, at = pe->sram_node; break;
    case KB_MEM_HBM: m = pe->hbm, at = pe->hbm_node; break;
    }
    if (!m)
        at = -1;
    if (node)
        *node = at;
    return m;
}

void kb_pe_params_from_cfg(struct kb_pe_params *p, const struct kb_topology_cfg *cfg)
{
    double ghz = cfg->clock_ghz;
    p->cpu = (struct kb_cpu_params){(uint32_t)cfg->pe.cpu.dispatch_cycles, ghz};
    p->dma = (struct kb_dma_params){-1, (uint32_t)cfg->pe.dma.read_channels,
                                    (uint32_t)cfg->pe.dma.write_channels,
                                    (uint32_t)cfg->pe.dma.comm_channels, false};
    p->math = (struct kb_math_params){.vector_bytes_per_cycle =
                                          (uint32_t)cfg->pe.math.vector_bytes_per_cycle,
                                      .clock_ghz = ghz,
                                      .transcendental_cycles =
                                          (uint32_t)cfg->pe.math.transcendental_cycles};
    p->gemm.mac.m = (uint32_t)cfg->pe.gemm.mac.m;
    p->gemm.mac.n = (uint32_t)cfg->pe.gemm.mac.n;
    p->gemm.mac.k = (uint32_t)cfg->pe.gemm.mac.k;
    p->gemm.tile.m = (uint32_t)cfg->pe.gemm.tile.m;
    p->gemm.tile.n = (uint32_t)cfg->pe.gemm.tile.n;
    p->gemm.tile.k = (uint32_t)cfg->pe.gemm.tile.k;
    p->gemm.clock_ghz = ghz;
    /* a polling IPCQ sender re-checks once per PE_CPU dispatch (a poll is
     * one kernel op), or every cycle when dispatch is free */
    p->ipcq = (struct kb_ipcq_params){
        (uint32_t)cfg->ipcq.n_slots, (uint32_t)cfg->ipcq.slot_size,
        cfg->ipcq.backpressure == KB_TOPO_BP_POLL ? KB_IPCQ_POLL : KB_IPCQ_SLEEP,
        cfg->pe.cpu.dispatch_cycles > 0 ? cfg->pe.cpu.dispatch_cycles / ghz : 1 / ghz,
        (uint32_t)cfg->ipcq.credit_bytes};
}

int kb_pe_units_new(struct kb_pe *pe, struct sim *s, struct kb_fabric *f,
                    kb_dma_route_fn route, void *route_ud,
                    const struct kb_topology_cfg *cfg, bool timing_only, char *err,
                    size_t errlen)
{
    struct kb_pe_params p;
    kb_pe_params_from_cfg(&p, cfg);
    p.dma.node = pe->node;
    p.dma.timing_only = timing_only;
    if (!pe->cpu && !(pe->cpu = kb_cpu_new(s, pe->name, &p.cpu, err, errlen)))
        return SIM_EINVAL;
    if (!pe->dma && !(pe->dma = kb_dma_new(s, pe->name, f, route, route_ud, &p.dma, err, errlen)))
        return SIM_EINVAL;
    if (!pe->math && !(pe->math = kb_math_new(s, pe->name, &p.math, err, errlen)))
        return SIM_EINVAL;
    if (!pe->gemm && !(pe->gemm = kb_gemm_new(s, pe->name, &p.gemm, err, errlen)))
        return SIM_EINVAL;
    if (!pe->ipcq && !(pe->ipcq = kb_ipcq_new(s, pe->name, &p.ipcq, err, errlen)))
        return SIM_EINVAL;
    return kb_pe_bind(pe, s, cfg, err, errlen);
}

/* The port of memory m, or an error naming the PE. */
static struct sim_port *mem_port(struct kb_pe *pe, struct kb_mem *m, char *err, size_t errlen)
{
    struct sim_port *p = kb_mem_port(m);
    if (!p)
        kb_errf(err, errlen, "%s", kb_mem_errmsg(m));
    return p;
}

int kb_pe_bind(struct kb_pe *pe, struct sim *s, const struct kb_topology_cfg *cfg, char *err,
               size_t errlen)
{
    if (pe->bound)
        return 0;
    static const enum kb_mem_kind kinds[] = {KB_MEM_TCM, KB_MEM_SRAM, KB_MEM_HBM};
    enum kb_mem_kind k = kinds[cfg->ipcq.buffer_kind];
    struct kb_mem *buf = kb_pe_mem(pe, k, NULL);
    if (!buf) {
        kb_errf(err, errlen, "ipcq of '%s': buffer_kind '%s' but the PE has no %s", pe->name,
                kb_mem_kind_name(k), kb_mem_kind_name(k));
        return SIM_EINVAL;
    }
    struct sim_port *bufp = mem_port(pe, buf, err, errlen);
    if (!bufp)
        return SIM_ENOMEM;
    const struct {
        struct sim_port *from, *to;
    } b[] = {
        {kb_cpu_out_port(pe->cpu, KB_CPU_DMA), kb_dma_port(pe->dma)},
        {kb_cpu_out_port(pe->cpu, KB_CPU_MATH), kb_math_port(pe->math)},
        {kb_cpu_out_port(pe->cpu, KB_CPU_GEMM), kb_gemm_port(pe->gemm)},
        {kb_cpu_out_port(pe->cpu, KB_CPU_IPCQ), kb_ipcq_port(pe->ipcq, "in")},
        {kb_ipcq_port(pe->ipcq, "dma"), kb_dma_port(pe->dma)},
        {kb_ipcq_port(pe->ipcq, "buf"), bufp},
    };
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        /* the first KB_CPU_NOUTS are the CPU's: a builder's binding stays */
        if (i < KB_CPU_NOUTS &&
            (sim_port_bound_count(b[i].from) > 0 || (pe->cpu_unbound & (1u << i))))
            continue;
        int rc = kb_port_bind(s, b[i].from, b[i].to, err, errlen);
        if (rc < 0)
            return rc;
    }
    pe->bound = true;
    return 0;
}

void kb_pe_release(struct kb_pe *pe)
{
    kb_ipcq_free(pe->ipcq);
    kb_dma_free(pe->dma);
    kb_gemm_free(pe->gemm);
    kb_math_free(pe->math);
    kb_cpu_free(pe->cpu);
    pe->ipcq = NULL;
    pe->dma = NULL;
    pe->gemm = NULL;
    pe->math = NULL;
    pe->cpu = NULL;
    kb_mem_free(pe->tcm);
    kb_mem_free(pe->hbm);
    pe->tcm = pe->hbm = NULL;
    pe->sram = NULL;
}
