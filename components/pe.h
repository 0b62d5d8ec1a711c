/* pe.h — kb_pe: one PE of a system: where it sits (SIP, cube, local index,
 * rank), the fabric nodes its memories hang off, its memories, and the
 * units that act for it
 *
 * A PE is a plain record owned by its system (system.h): the builder fills
 * it, the units (PE_DMA, PE_IPCQ, PE_MATH, ...) read their place and memory
 * from it. Ranks count PEs across the whole system:
 *
 *     rank = (sip × cubes_per_sip + cube) × pes_per_cube + local_pe
 *
 * so within one SIP rank = cube × pes_per_cube + local_pe, as in the
 * original model. */
#ifndef KBSIM_PE_H
#define KBSIM_PE_H

#include <stdbool.h>
#include <stddef.h>

#include "fabric.h"
#include "memory.h"
#include "pe_cpu.h"
#include "pe_dma.h"
#include "pe_gemm.h"
#include "pe_ipcq.h"
#include "pe_math.h"
#include "topology_schema.h"

struct kb_pe {
    int rank;
    int sip;      /* -1 in a graph system */
    int cube;     /* index in its SIP's cube mesh, y × w + x; -1 in a graph */
    int local_pe; /* index in its cube; corner = local_pe / pes_per_corner */
    const char *name; /* fabric node name, "sip0.cube5.pe3" */

    /* Fabric nodes: the PE's own (its NoC port; the TCM hangs off it), its
     * HBM controller's and its cube's SRAM's; -1 where there is none. */
    int node, hbm_node, sram_node;

    /* Memories: TCM and HBM are the PE's own, the SRAM is shared by the
     * PEs of one cube; NULL where there is none. */
    struct kb_mem *tcm, *hbm, *sram;

    /* The units, NULL until kb_pe_units_new made them (a system makes them
     * on first use: kb_system_pe_units). */
    struct kb_cpu *cpu;
    struct kb_dma *dma;
    struct kb_math *math;
    struct kb_gemm *gemm;
    struct kb_ipcq *ipcq;
    bool bound; /* kb_pe_bind done */
    /* CPU OUT ports (bits 1 << KB_CPU_DMA, ...) its builder leaves unbound:
     * a CPU that issues none of that unit's ops (decision 0045) */
    unsigned cpu_unbound;
};

/* The memory of `kind` and the fabric node it hangs off (*node may be
 * NULL). NULL and -1 when the PE has no such memory. */
struct kb_mem *kb_pe_mem(const struct kb_pe *pe, enum kb_mem_kind kind, int *node);

/* The parameters of a PE's units, mapped from the topology configuration
 * in this one place: pe.cpu, pe.dma (node and timing_only are the
 * builder's), pe.math, pe.gemm, ipcq and clock_ghz. */
struct kb_pe_params {
    struct kb_cpu_params cpu;
    struct kb_dma_params dma;
    struct kb_math_params math;
    struct kb_gemm_params gemm;
    struct kb_ipcq_params ipcq;
};
void kb_pe_params_from_cfg(struct kb_pe_params *p, const struct kb_topology_cfg *cfg);

/* Makes the PE's units from cfg (pe.cpu, pe.dma, pe.math, pe.gemm, ipcq,
 * clock_ghz): the DMA at pe->node on fabric f with the route callback,
 * the IPCQ sending with that DMA and keeping its rings in the memory of
 * ipcq.buffer_kind. A polling IPCQ sender re-checks once per PE_CPU
 * dispatch (a poll is one kernel op). 0, or SIM_EINVAL with err set (the
 * units made so far stay, kb_pe_release frees them). */
int kb_pe_units_new(struct kb_pe *pe, struct sim *s, struct kb_fabric *f,
                    kb_dma_route_fn route, void *route_ud,
                    const struct kb_topology_cfg *cfg, bool timing_only, char *err,
                    size_t errlen);

/* Binds the ports of the PE's units (decision 0027): the CPU's dma, math,
 * gemm and ipcq ports to those units' exports, the IPCQ's dma port to the
 * DMA and its buf port to the memory of ipcq.buffer_kind. A CPU port its
 * builder bound already (to another export: a unit of its own, a wrapper)
 * or marked in cpu_unbound is left as it is (decision 0045). Once; 0, or
 * SIM_EBIND / SIM_EINVAL with err naming both ports or the missing memory.
 * kb_pe_units_new calls it. */
int kb_pe_bind(struct kb_pe *pe, struct sim *s, const struct kb_topology_cfg *cfg, char *err,
               size_t errlen);

/* Frees the units and the PE's own memories (TCM, HBM), not the shared
 * SRAM. Call when the simulation no longer runs. */
void kb_pe_release(struct kb_pe *pe);

#endif
