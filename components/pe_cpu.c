/* pe_cpu.c — kb_cpu: dispatch overhead per kernel op (formula in pe_cpu.h) */
#include "pe_cpu.h"

#include "kb_port.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a dispatch reads and writes first (at system scale a PE's CPU is
 * cold at each op). */
struct kb_cpu {
    struct sim *sim;
    sim_time dispatch_ps;
    struct kb_cpu_stats st;
    char *name;
    struct kb_cpu_params p;
    struct kb_cpu_if iface;
    struct sim_port *port;              /* "NAME.cpu.in" */
    struct sim_port *out[KB_CPU_NOUTS]; /* "NAME.cpu.dma", ... */
    void *bound[KB_CPU_NOUTS];          /* their peers' interfaces */
};

static const char *const out_names[KB_CPU_NOUTS] = {"dma", "math", "gemm", "ipcq"};
static const char *const out_types[KB_CPU_NOUTS] = {KB_DMA_IF, KB_MATH_IF, KB_GEMM_IF,
                                                    KB_IPCQ_IF};

static int if_dispatch(void *ctx) { return kb_cpu_dispatch(ctx); }
static sim_time if_dispatch_time(void *ctx) { return kb_cpu_dispatch_time(ctx); }

/* An OUT port was bound: cache its peer's interface. */
static void out_bound(void *ud, struct sim_port *p)
{
    struct kb_cpu *c = ud;
    for (int i = 0; i < KB_CPU_NOUTS; i++)
        if (c->out[i] == p)
            c->bound[i] = sim_port_peer_iface(p, 0);
}

struct kb_cpu *kb_cpu_new(struct sim *s, const char *name,
                          const struct kb_cpu_params *p, char *err,
                          size_t errlen)
{
    if (!name)
        name = "";
    if (!(p->clock_ghz > 0) || isinf(p->clock_ghz)) {
        if (err && errlen)
            snprintf(err, errlen, "cpu of '%s': clock must be > 0 GHz, got %g",
                     name, p->clock_ghz);
        return NULL;
    }
    struct kb_cpu *c = calloc(1, sizeof *c);
    char *nm = malloc(strlen(name) + 1);
    if (!c || !nm) {
        free(c);
        free(nm);
        if (err && errlen)
            snprintf(err, errlen, "cpu of '%s': out of memory", name);
        return NULL;
    }
    c->sim = s;
    c->name = strcpy(nm, name);
    c->p = *p;
    /* cycles / GHz = ns; one rounding, so every op costs the same */
    c->dispatch_ps = (sim_time)llround((double)p->dispatch_cycles * 1000.0 /
                                       p->clock_ghz);
    c->iface = (struct kb_cpu_if){c, if_dispatch, if_dispatch_time};
    if (!(c->port = kb_port_export(s, name, "cpu", KB_CPU_IF, &c->iface, 1, err, errlen))) {
        kb_cpu_free(c);
        return NULL;
    }
    for (int i = 0; i < KB_CPU_NOUTS; i++) {
        c->out[i] = kb_port_new(s, name, "cpu", out_names[i], SIM_PORT_OUT, out_types[i], 0, 1,
                                err, errlen);
        if (!c->out[i]) {
            kb_cpu_free(c);
            return NULL;
        }
        sim_port_on_bind(c->out[i], out_bound, c);
    }
    return c;
}

struct sim_port *kb_cpu_port(const struct kb_cpu *c) { return c->port; }
struct sim_port *kb_cpu_out_port(const struct kb_cpu *c, enum kb_cpu_out which)
{
    return which < KB_CPU_NOUTS ? c->out[which] : NULL;
}
const struct kb_dma_if *kb_cpu_dma(const struct kb_cpu *c) { return c->bound[KB_CPU_DMA]; }
const struct kb_math_if *kb_cpu_math(const struct kb_cpu *c) { return c->bound[KB_CPU_MATH]; }
const struct kb_gemm_if *kb_cpu_gemm(const struct kb_cpu *c) { return c->bound[KB_CPU_GEMM]; }
const struct kb_ipcq_if *kb_cpu_ipcq(const struct kb_cpu *c) { return c->bound[KB_CPU_IPCQ]; }

void kb_cpu_free(struct kb_cpu *c)
{
    if (!c)
        return;
    free(c->name);
    free(c);
}

const char *kb_cpu_name(const struct kb_cpu *c) { return c->name; }

sim_time kb_cpu_dispatch_time(const struct kb_cpu *c) { return c->dispatch_ps; }

int kb_cpu_dispatch(struct kb_cpu *c)
{
    if (c->dispatch_ps) {
        int rc = sim_wait(c->sim, c->dispatch_ps);
        if (rc < 0)
            return rc;
    } else if (!sim_current(c->sim)) {
        return SIM_EPERM;
    }
    c->st.ops++;
    c->st.busy_ps += c->dispatch_ps;
    return 0;
}

void kb_cpu_get_stats(const struct kb_cpu *c, struct kb_cpu_stats *out)
{
    *out = c->st;
}
