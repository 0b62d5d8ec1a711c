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

int kb_pe_units_new(struct kb_pe *pe, struct sim *s, struct kb_fabric *f,
                    kb_dma_route_fn route, void *route_ud,
                    const struct kb_topology_cfg *cfg, bool timing_only, char *err,
                    size_t errlen)
{
    struct kb_cpu_params cp = {(uint32_t)cfg->pe.cpu.dispatch_cycles, cfg->clock_ghz};
    struct kb_dma_params dp = {pe->node, (uint32_t)cfg->pe.dma.read_channels,
                               (uint32_t)cfg->pe.dma.write_channels,
                               (uint32_t)cfg->pe.dma.comm_channels, timing_only};
    struct kb_math_params mp;
    struct kb_gemm_params gp;
    kb_math_params_from_cfg(&mp, cfg);
    kb_gemm_params_from_cfg(&gp, cfg);
    if (!pe->cpu && !(pe->cpu = kb_cpu_new(s, pe->name, &cp, err, errlen)))
        return SIM_EINVAL;
    if (!pe->dma && !(pe->dma = kb_dma_new(s, pe->name, f, route, route_ud, &dp, err, errlen)))
        return SIM_EINVAL;
    if (!pe->math && !(pe->math = kb_math_new(s, pe->name, &mp, err, errlen)))
        return SIM_EINVAL;
    if (!pe->gemm && !(pe->gemm = kb_gemm_new(s, pe->name, &gp, err, errlen)))
        return SIM_EINVAL;
    if (!pe->ipcq) {
        struct kb_ipcq_params ip = {
            (uint32_t)cfg->ipcq.n_slots, (uint32_t)cfg->ipcq.slot_size,
            cfg->ipcq.backpressure == KB_TOPO_BP_POLL ? KB_IPCQ_POLL : KB_IPCQ_SLEEP,
            cfg->pe.cpu.dispatch_cycles > 0 ? cfg->pe.cpu.dispatch_cycles / cfg->clock_ghz
                                            : 1 / cfg->clock_ghz,
            (uint32_t)cfg->ipcq.credit_bytes};
        if (!(pe->ipcq = kb_ipcq_new(s, pe->name, &ip, err, errlen)))
            return SIM_EINVAL;
    }
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
