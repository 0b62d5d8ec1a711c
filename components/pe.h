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

#include "memory.h"

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
};

/* The memory of `kind` and the fabric node it hangs off (*node may be
 * NULL). NULL and -1 when the PE has no such memory. */
struct kb_mem *kb_pe_mem(const struct kb_pe *pe, enum kb_mem_kind kind, int *node);

/* Frees the PE's own memories (TCM, HBM), not the shared SRAM. */
void kb_pe_release(struct kb_pe *pe);

#endif
