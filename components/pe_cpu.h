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

#endif
