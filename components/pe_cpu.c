/* pe_cpu.c — kb_cpu: dispatch overhead per kernel op (formula in pe_cpu.h) */
#include "pe_cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kb_cpu {
    struct sim *sim;
    char *name;
    struct kb_cpu_params p;
    sim_time dispatch_ps;
    struct kb_cpu_stats st;
};

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
    return c;
}

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
