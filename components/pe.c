/* pe.c — kb_pe: the PE record's memory look-up and release */
#include "pe.h"

#include <stddef.h>

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

void kb_pe_release(struct kb_pe *pe)
{
    kb_mem_free(pe->tcm);
    kb_mem_free(pe->hbm);
    pe->tcm = pe->hbm = NULL;
    pe->sram = NULL;
}
