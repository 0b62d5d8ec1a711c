/* kb_port.h — making the typed ports of a component module
 *
 * A module's ports are engine ports (sim.h) named "OWNER.UNIT.PORT"
 * ("sip0.cube0.pe0.ipcq.dma"): the module is "OWNER.UNIT", the last part
 * names the port. Each port carries an interface type tag, the name of
 * the C struct of function pointers + context a peer calls through
 * ("kb_dma_if"). By convention a module exports what it does on an IN
 * port named "in" and reaches what it uses through OUT ports named after
 * the peer's role ("dma", "buf", "math"). Decision 0027. */
#ifndef KBSIM_KB_PORT_H
#define KBSIM_KB_PORT_H

#include <stddef.h>

#include "sim.h"

/* Interface type tags: one per interface struct. */
#define KB_MEM_IF "kb_mem_if"
#define KB_DMA_IF "kb_dma_if"
#define KB_CPU_IF "kb_cpu_if"
#define KB_MATH_IF "kb_math_if"
#define KB_GEMM_IF "kb_gemm_if"
#define KB_IPCQ_IF "kb_ipcq_if"

/* No upper limit on the bindings of a shared export (an SRAM). */
#define KB_PORT_MANY 1000000

/* A port "owner.unit.port" ("unit.port" when owner is NULL or ""). NULL with the reason in err (sim_errmsg's,
 * prefixed with the port's name) on a bad argument or no memory. */
struct sim_port *kb_port_new(struct sim *s, const char *owner, const char *unit,
                             const char *port, enum sim_port_dir dir, const char *type,
                             int min_bind, int max_bind, char *err, size_t errlen);

/* An export: kb_port_new(IN, 0..max_bind) with its interface set. */
struct sim_port *kb_port_export(struct sim *s, const char *owner, const char *unit,
                                const char *type, void *iface, int max_bind, char *err,
                                size_t errlen);

/* Binds OUT port `from` to IN port `to`; 0, or SIM_EBIND / SIM_ENOMEM
 * with sim_errmsg (naming both ports) copied to err. */
int kb_port_bind(struct sim *s, struct sim_port *from, struct sim_port *to, char *err,
                 size_t errlen);

#endif
