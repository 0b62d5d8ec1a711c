/* pe_cpu.h — kb_cpu: the PE's control processor, charged as a fixed
 * dispatch overhead per kernel op
 *
 * Every op a kernel issues (a load, a math op, a send) first passes
 * through the PE_CPU, which spends dispatch_cycles clock cycles on it:
 *
 *     t_dispatch = dispatch_cycles / clock_ghz  ns
 *
 * rounded once to the ps. The defaults (4 cycles at 1 GHz = 4 ns) live in
 * configs/topology.yaml (pe.cpu.dispatch_cycles, clock_ghz).
 *
 * Errors: kb_cpu_new returns NULL with the reason in err; kb_cpu_dispatch
 * returns a negative SIM_E* code. */
#ifndef KBSIM_PE_CPU_H
#define KBSIM_PE_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "sim.h"

struct kb_cpu_params {
    uint32_t dispatch_cycles; /* cycles per kernel op, >= 0 */
    double clock_ghz;         /* > 0 */
};

struct kb_cpu_stats {
    uint64_t ops;     /* ops dispatched */
    sim_time busy_ps; /* time spent dispatching */
};

struct kb_cpu;

/* A PE_CPU named after its PE ("sip0.cube0.pe0"). NULL on a bad parameter
 * (message "cpu of 'NAME': ...") or no memory, with err set. */
struct kb_cpu *kb_cpu_new(struct sim *s, const char *name,
                          const struct kb_cpu_params *p, char *err,
                          size_t errlen);
void kb_cpu_free(struct kb_cpu *c);

const char *kb_cpu_name(const struct kb_cpu *c);

/* The dispatch overhead of one op in ps (the formula above). */
sim_time kb_cpu_dispatch_time(const struct kb_cpu *c);

/* Waits the dispatch overhead and counts the op. Thread processes only:
 * SIM_EPERM (nothing counted) elsewhere. */
int kb_cpu_dispatch(struct kb_cpu *c);

void kb_cpu_get_stats(const struct kb_cpu *c, struct kb_cpu_stats *out);

/* ---- the module: its ports and interface ------------------------------ */

/* What the CPU does for whoever runs kernels on it: kb_cpu_dispatch and
 * kb_cpu_dispatch_time, each taking ctx (the kb_cpu). Exported on
 * "NAME.cpu.in" : kb_cpu_if (one binding). */
struct kb_cpu_if {
    void *ctx;
    int (*dispatch)(void *ctx);
    sim_time (*dispatch_time)(void *ctx);
};

struct sim_port *kb_cpu_port(const struct kb_cpu *c);

/* The units the CPU issues a kernel's ops to, each an OUT port of the CPU
 * bound to the unit's export: "NAME.cpu.dma" : kb_dma_if, "NAME.cpu.math"
 * : kb_math_if, "NAME.cpu.gemm" : kb_gemm_if, "NAME.cpu.ipcq" : kb_ipcq_if
 * (0..1 each: a CPU alone dispatches but issues nothing). */
enum kb_cpu_out { KB_CPU_DMA, KB_CPU_MATH, KB_CPU_GEMM, KB_CPU_IPCQ, KB_CPU_NOUTS };
struct sim_port *kb_cpu_out_port(const struct kb_cpu *c, enum kb_cpu_out which);

/* The bound interfaces, NULL while unbound: one load each (the pointers
 * are cached when the ports are bound). */
struct kb_dma_if;
struct kb_math_if;
struct kb_gemm_if;
struct kb_ipcq_if;
const struct kb_dma_if *kb_cpu_dma(const struct kb_cpu *c);
const struct kb_math_if *kb_cpu_math(const struct kb_cpu *c);
const struct kb_gemm_if *kb_cpu_gemm(const struct kb_cpu *c);
const struct kb_ipcq_if *kb_cpu_ipcq(const struct kb_cpu *c);

#endif
