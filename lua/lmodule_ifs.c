/* lmodule_ifs.c — the C interfaces and units a Lua module calls
 *
 * What m:peer(...) gives a Lua module for a C export (lmodule.c makes the
 * ports and binds): a wrapper of the interface struct (kb_dma_if,
 * kb_mem_if, kb_cpu_if, kb_math_if, kb_gemm_if, kb_ipcq_if: the functions
 * a C caller has, one indirect call after the wrapper's checks of the
 * arguments). And what a script places for modules to bind to:
 * kb.memory(sys, node, params), a C memory (a kb_mem with its kb_mem_if
 * export) at a fabric node, e.g. a switch's buffer; kb.unit(sys, name,
 * kind), a C cpu, math, gemm or ipcq unit with the system's parameters.
 * Decision 0035; docs/modules.md, "Writing a module in Lua". */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_port.h"
#include "lkb_internal.h"
#include "lmodule.h"
#include "memory.h"
#include "pe.h"
#include "pe_cpu.h"
#include "pe_dma.h"
#include "pe_gemm.h"
#include "pe_ipcq.h"
#include "pe_math.h"
#include "system.h"

#define KB_CIF "kbsim.iface"
#define KB_MEMORY "kbsim.memory"

/* Registry keys of the types' metatables, by address (lkb_testud). */
static const char cif_key = 'c', mem_key = 'y';

/* A C interface seen from Lua: a peer's struct. User value 1: the system. */
enum cif_kind { CIF_DMA, CIF_MEM, CIF_CPU, CIF_MATH, CIF_GEMM, CIF_IPCQ, CIF_KINDS };
const char *const lkb_cif_types[] = {KB_DMA_IF,  KB_MEM_IF,  KB_CPU_IF, KB_MATH_IF,
                                     KB_GEMM_IF, KB_IPCQ_IF, NULL};
struct lcif {
    const void *iface;
    enum cif_kind kind;
    char port[]; /* the export's name, for messages */
};

/* A memory placed by kb.memory. User value 1: the system. */
struct lmem {
    struct kb_mem *m;
    struct sim_port *port;
};

/* The functions a Lua export of a C interface type must implement: those
 * its C wrapper offers a Lua caller, so that a caller does not know which
 * it got. */
static const char *const dma_fns[] = {"copy", "time", "node", NULL};
static const char *const mem_fns[] = {"read", "write", "access", "alloc", "dealloc", "node", NULL};
static const char *const cpu_fns[] = {"dispatch", "dispatch_time", NULL};
static const char *const math_fns[] = {"run", "time", "params", NULL};
static const char *const gemm_fns[] = {"run", "time", "params", NULL};
static const char *const ipcq_fns[] = {"send", "recv", "probe", "wired", NULL};
static const char *const *const cif_fns[] = {dma_fns,  mem_fns,  cpu_fns,
                                             math_fns, gemm_fns, ipcq_fns};

int lkb_cif_kind_of(const char *type)
{
    for (int k = 0; lkb_cif_types[k]; k++)
        if (strcmp(type, lkb_cif_types[k]) == 0)
            return k;
    return -1;
}

const char *const *lkb_cif_fns(const char *type)
{
    int k = lkb_cif_kind_of(type);
    return k < 0 ? NULL : cif_fns[k];
}

/* ---- kb.memory ------------------------------------------------------------ */

static double optnum(lua_State *L, int t, const char *key, double def, double lo, double hi)
{
    lua_getfield(L, t, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return def;
    }
    int ok;
    double v = lua_tonumberx(L, -1, &ok);
    if (!ok || !(v >= lo && v <= hi)) {
        char msg[200];
        snprintf(msg, sizeof msg, "kb.memory: '%s' must be a number in %g..%g, got ", key, lo, hi);
        luaL_error(L, "%s%s", msg, ok ? lua_tostring(L, -1) : luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    return v;
}

/* kb.memory(sys, node, {kind = "sram", capacity =, bandwidth_gbps =,
 * setup_ns =, channels =, burst_bytes =}) -> a memory "NODE" of that kind
 * hanging off fabric node NODE, exported on "NODE.KIND.in" : kb_mem_if. */
int lkb_module_memory(lua_State *L)
{
    static const char *const kinds[] = {"tcm", "sram", "hbm", NULL};
    struct kb_system *sys = lkb_checksystem(L, 1);
    const char *node = luaL_checkstring(L, 2);
    int fnode = kb_fabric_find_node(kb_system_fabric(sys), node);
    if (fnode < 0)
        return luaL_error(L, "kb.memory: no node '%s'", node);
    luaL_checktype(L, 3, LUA_TTABLE);
    static const char *const known[] = {"kind", "capacity", "bandwidth_gbps", "setup_ns",
                                        "channels", "burst_bytes", NULL};
    lkb_check_keys(L, 3, "kb.memory", known);
    lua_getfield(L, 3, "kind");
    int kind = 1; /* sram */
    if (!lua_isnil(L, -1)) {
        const char *k = lua_tostring(L, -1);
        for (kind = 0; k && kinds[kind] && strcmp(k, kinds[kind]) != 0; kind++)
            ;
        if (!k || !kinds[kind])
            return luaL_error(L, "kb.memory: 'kind' must be tcm, sram or hbm, got %s",
                              k ? k : luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    struct kb_mem_params p = {
        .kind = (enum kb_mem_kind)kind,
        .capacity = (uint64_t)optnum(L, 3, "capacity", 1 << 20, 1, 1099511627776.0),
        .bw_gbps = optnum(L, 3, "bandwidth_gbps", 128, 0.001, 1e6),
        .setup_ns = optnum(L, 3, "setup_ns", 0, 0, 1e9),
        .n_channels = (uint32_t)optnum(L, 3, "channels", 1, 1, KB_MEM_MAX_CHANNELS),
        .burst_bytes = (uint32_t)optnum(L, 3, "burst_bytes", 256, 1, 1 << 20),
    };
    struct sim *s = kb_system_sim(sys);
    char name[256];
    snprintf(name, sizeof name, "%s.%s.in", node, kinds[kind]);
    if (lkb_find_port(s, name))
        return luaL_error(L, "kb.memory: '%s' already exists", name);
    struct lmem *h = lua_newuserdatauv(L, sizeof *h, 1);
    h->m = NULL;
    h->port = NULL;
    luaL_setmetatable(L, KB_MEMORY);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    char err[256];
    h->m = kb_mem_new(s, node, &p, err, sizeof err);
    if (!h->m)
        return luaL_error(L, "kb.memory: %s", err);
    kb_mem_set_node(h->m, fnode);
    if (!(h->port = kb_mem_port(h->m)))
        return luaL_error(L, "kb.memory: %s", kb_mem_errmsg(h->m));
    /* it lives as long as the simulation, whose ports point at it */
    lua_getiuservalue(L, 1, 1);
    lkb_anchor(L, -1, -2);
    lua_pop(L, 1);
    return 1;
}

static struct lmem *checkmem(lua_State *L, int i)
{
    struct lmem *h = lkb_checkud(L, i, &mem_key, KB_MEMORY);
    lkb_module_system(L, i);
    return h;
}

struct sim_port *lkb_memory_port(lua_State *L, int i)
{
    return lkb_testud(L, i, &mem_key) ? checkmem(L, i)->port : NULL;
}

/* mem:read(addr, n) -> string, mem:write(addr, s): contents, no time */
static int mem_read(lua_State *L)
{
    struct lmem *h = checkmem(L, 1);
    lua_Integer a = luaL_checkinteger(L, 2), n = luaL_checkinteger(L, 3);
    luaL_argcheck(L, a >= 0, 2, "negative address");
    luaL_argcheck(L, n >= 0 && (uint64_t)n <= kb_mem_params(h->m)->capacity, 3,
                  "more bytes than the memory has");
    luaL_Buffer b;
    char *p = luaL_buffinitsize(L, &b, (size_t)n);
    if (kb_mem_read(h->m, (uint64_t)a, p, (uint64_t)n) < 0)
        return luaL_error(L, "%s", kb_mem_errmsg(h->m));
    luaL_pushresultsize(&b, (size_t)n);
    return 1;
}

static int mem_write(lua_State *L)
{
    struct lmem *h = checkmem(L, 1);
    lua_Integer a = luaL_checkinteger(L, 2);
    size_t len;
    const char *v = luaL_checklstring(L, 3, &len);
    luaL_argcheck(L, a >= 0, 2, "negative address");
    if (kb_mem_write(h->m, (uint64_t)a, v, len) < 0)
        return luaL_error(L, "%s", kb_mem_errmsg(h->m));
    return 0;
}

/* mem:stats() -> {bytes_read, bytes_written, reads, writes, busy_ns} */
static int mem_stats(lua_State *L)
{
    struct lmem *h = checkmem(L, 1);
    struct kb_mem_stats st;
    kb_mem_get_stats(h->m, &st);
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, (lua_Integer)st.bytes_read);
    lua_setfield(L, -2, "bytes_read");
    lua_pushinteger(L, (lua_Integer)st.bytes_written);
    lua_setfield(L, -2, "bytes_written");
    lua_pushinteger(L, (lua_Integer)st.reads);
    lua_setfield(L, -2, "reads");
    lua_pushinteger(L, (lua_Integer)st.writes);
    lua_setfield(L, -2, "writes");
    lua_pushnumber(L, (lua_Number)st.busy_ps / 1000.0);
    lua_setfield(L, -2, "busy_ns");
    return 1;
}

/* mem:port() -> the name of its export, "NODE.KIND.in" */
static int mem_port(lua_State *L)
{
    struct lmem *h = checkmem(L, 1);
    lua_pushstring(L, sim_port_name(h->port));
    return 1;
}

static int mem_gc(lua_State *L)
{
    struct lmem *h = lkb_checkud(L, 1, &mem_key, KB_MEMORY);
    kb_mem_free(h->m);
    h->m = NULL;
    return 0;
}

static int mem_tostring(lua_State *L)
{
    struct lmem *h = lkb_checkud(L, 1, &mem_key, KB_MEMORY);
    if (!h->port || !lkb_module_system_open(L, 1))
        lua_pushliteral(L, "memory of a closed system");
    else
        lua_pushfstring(L, "memory '%s'", sim_port_name(h->port));
    return 1;
}

/* ---- kb.unit --------------------------------------------------------------- */

/* A C unit placed by kb.unit. User value 1: the system. */
enum unit_kind { UNIT_CPU, UNIT_MATH, UNIT_GEMM, UNIT_IPCQ };
static const char *const unit_kinds[] = {"cpu", "math", "gemm", "ipcq", NULL};
struct lunit {
    enum unit_kind kind;
    void *u;
    struct sim_port *port; /* its export, "NAME.KIND.in" */
};

static const char unit_key = 'u';
#define KB_UNIT "kbsim.unit"

static struct lunit *checkunit(lua_State *L, int i)
{
    struct lunit *h = lkb_checkud(L, i, &unit_key, KB_UNIT);
    lkb_module_system(L, i);
    return h;
}

/* Raises unless the unit's OUT port `what` can bind to C export `to` of
 * type `type`: checked before the unit is made, so that a refusal leaves
 * no half-made unit (with unbound ports) in the simulation. */
static void check_target(lua_State *L, struct sim_port *to, const char *what, const char *type)
{
    int mn, mx;
    sim_port_multiplicity(to, &mn, &mx);
    if (sim_port_dir(to) != SIM_PORT_IN || strcmp(sim_port_type(to), type) != 0)
        luaL_error(L, "kb.unit: %s: '%s' is not a %s export (it is %s %s port)", what,
                   sim_port_name(to), type, sim_port_dir(to) == SIM_PORT_IN ? "an IN" : "an OUT",
                   sim_port_type(to));
    if (sim_port_bound_count(to) >= mx)
        luaL_error(L, "kb.unit: %s: '%s' accepts at most %d binding%s and has them", what,
                   sim_port_name(to), mx, mx == 1 ? "" : "s");
}

/* The C port a unit's OUT port binds to: a port name of the system (a
 * PE's units and memories made on first use) or a kbsim.memory; not a Lua
 * module's export, which has no C struct for a C unit to call. */
static struct sim_port *c_target(lua_State *L, struct kb_system *sys, int sysidx, int i,
                                 const char *what, const char *type)
{
    struct sim *s = kb_system_sim(sys);
    if (lua_type(L, i) == LUA_TSTRING) {
        const char *name = lua_tostring(L, i);
        if (lkb_is_module_port(L, sysidx, name))
            luaL_error(L, "kb.unit: %s: '%s' is a Lua module's port; a C unit binds to C "
                          "exports only", what, name);
        struct sim_port *to = lkb_find_port(s, name);
        if (!to) {
            lkb_make_ports_for(L, sys, name);
            to = lkb_find_port(s, name);
        }
        if (!to)
            luaL_error(L, "kb.unit: %s: the system has no port '%s'", what, name);
        check_target(L, to, what, type);
        return to;
    }
    struct lmem *mh = lkb_testud(L, i, &mem_key);
    if (!mh)
        luaL_error(L, "kb.unit: %s must be a port name or a kbsim.memory, got %s", what,
                   luaL_typename(L, i));
    checkmem(L, i);
    lua_getiuservalue(L, i, 1);
    if (!lua_rawequal(L, -1, sysidx))
        luaL_error(L, "kb.unit: %s: another system's memory", what);
    lua_pop(L, 1);
    check_target(L, mh->port, what, type);
    return mh->port;
}

/* kb.unit(sys, name, kind[, {dma =, buf =}]) -> a C unit ("cpu", "math",
 * "gemm" or "ipcq") named NAME with the system's parameters (pe.* and
 * ipcq.* of its topology), exported on "NAME.KIND.in" for a Lua module's
 * port: a PE's own math, gemm and ipcq exports take one binding, their
 * CPU's. An ipcq sends with the DMA `dma` (a kb_dma_if export such as
 * "a.dma.in", whose node is where it sits) and keeps its rings in `buf` (a
 * kb_mem_if export or a kbsim.memory); unit:wire makes its channels. */
int lkb_module_unit(lua_State *L)
{
    struct kb_system *sys = lkb_checksystem(L, 1);
    size_t len;
    const char *name = luaL_checklstring(L, 2, &len);
    if (len == 0 || len > 200 || name[0] == '.' || name[len - 1] == '.' || strstr(name, ".."))
        return luaL_argerror(L, 2, "a unit name is not empty, has no empty part and at most "
                                   "200 characters");
    enum unit_kind kind = (enum unit_kind)luaL_checkoption(L, 3, NULL, unit_kinds);
    if (!lua_isnoneornil(L, 4)) {
        luaL_checktype(L, 4, LUA_TTABLE);
        static const char *const known[] = {"dma", "buf", NULL};
        lkb_check_keys(L, 4, "kb.unit", known);
    }
    lua_settop(L, 4);
    struct sim *s = kb_system_sim(sys);
    char pname[256];
    snprintf(pname, sizeof pname, "%s.%s.in", name, unit_kinds[kind]);
    if (lkb_find_port(s, pname))
        return luaL_error(L, "kb.unit: '%s' already exists", pname);
    struct sim_port *dma = NULL, *buf = NULL;
    if (kind == UNIT_IPCQ) {
        if (lua_isnil(L, 4))
            return luaL_error(L, "kb.unit: an ipcq needs {dma = a kb_dma_if export, buf = a "
                                 "kb_mem_if export}");
        lua_getfield(L, 4, "dma");
        lua_getfield(L, 4, "buf");
        if (lua_isnil(L, 5) || lua_isnil(L, 6))
            return luaL_error(L, "kb.unit: an ipcq needs both 'dma' and 'buf'");
        dma = c_target(L, sys, 1, 5, "dma", KB_DMA_IF);
        buf = c_target(L, sys, 1, 6, "buf", KB_MEM_IF);
    } else if (!lua_isnil(L, 4) && (lua_getfield(L, 4, "dma") != LUA_TNIL ||
                                    lua_getfield(L, 4, "buf") != LUA_TNIL)) {
        return luaL_error(L, "kb.unit: only an ipcq takes 'dma' and 'buf'");
    }
    struct kb_pe_params p;
    kb_pe_params_from_cfg(&p, kb_system_config(sys));
    struct lunit *h = lua_newuserdatauv(L, sizeof *h, 1);
    h->kind = kind;
    h->u = NULL;
    h->port = NULL;
    luaL_setmetatable(L, KB_UNIT);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    char err[300];
    switch (kind) {
    case UNIT_CPU:
        if ((h->u = kb_cpu_new(s, name, &p.cpu, err, sizeof err)))
            h->port = kb_cpu_port(h->u);
        break;
    case UNIT_MATH:
        if ((h->u = kb_math_new(s, name, &p.math, err, sizeof err)))
            h->port = kb_math_port(h->u);
        break;
    case UNIT_GEMM:
        if ((h->u = kb_gemm_new(s, name, &p.gemm, err, sizeof err)))
            h->port = kb_gemm_port(h->u);
        break;
    case UNIT_IPCQ:
        if ((h->u = kb_ipcq_new(s, name, &p.ipcq, err, sizeof err)))
            h->port = kb_ipcq_port(h->u, "in");
        break;
    }
    if (!h->u)
        return luaL_error(L, "kb.unit: %s", err);
    if (kind == UNIT_IPCQ && (kb_port_bind(s, kb_ipcq_port(h->u, "dma"), dma, err, sizeof err) < 0 ||
                              kb_port_bind(s, kb_ipcq_port(h->u, "buf"), buf, err, sizeof err) < 0))
        return luaL_error(L, "kb.unit: %s", err);
    /* it lives as long as the simulation, whose ports point at it */
    lua_getiuservalue(L, 1, 1);
    lkb_anchor(L, -1, -2);
    lua_pop(L, 1);
    return 1;
}

/* unit:port() -> the name of its export, "NAME.KIND.in" */
static int unit_port(lua_State *L)
{
    lua_pushstring(L, sim_port_name(checkunit(L, 1)->port));
    return 1;
}

/* ipcq unit:wire(dir, other, other_dir): a channel from this unit's tx
 * dir to the ipcq unit other's rx other_dir (other may be this unit) */
static int unit_wire(lua_State *L)
{
    struct lunit *a = checkunit(L, 1);
    const char *ad = luaL_checkstring(L, 2);
    struct lunit *b = checkunit(L, 3);
    const char *bd = luaL_checkstring(L, 4);
    if (a->kind != UNIT_IPCQ || b->kind != UNIT_IPCQ)
        return luaL_error(L, "unit:wire joins two ipcq units, not '%s' and '%s'",
                          sim_port_name(a->port), sim_port_name(b->port));
    lua_getiuservalue(L, 1, 1);
    lua_getiuservalue(L, 3, 1);
    if (!lua_rawequal(L, -1, -2))
        return luaL_error(L, "unit:wire: the units belong to two systems");
    if (kb_ipcq_wire(a->u, ad, b->u, bd) < 0)
        return luaL_error(L, "unit:wire: %s", kb_ipcq_errmsg(a->u));
    return 0;
}

static int unit_gc(lua_State *L)
{
    struct lunit *h = lkb_checkud(L, 1, &unit_key, KB_UNIT);
    switch (h->kind) {
    case UNIT_CPU: kb_cpu_free(h->u); break;
    case UNIT_MATH: kb_math_free(h->u); break;
    case UNIT_GEMM: kb_gemm_free(h->u); break;
    case UNIT_IPCQ: kb_ipcq_free(h->u); break;
    }
    h->u = NULL;
    return 0;
}

static int unit_tostring(lua_State *L)
{
    struct lunit *h = lkb_checkud(L, 1, &unit_key, KB_UNIT);
    if (!h->port || !lkb_module_system_open(L, 1))
        lua_pushfstring(L, "%s unit of a closed system", unit_kinds[h->kind]);
    else
        lua_pushfstring(L, "%s unit '%s'", unit_kinds[h->kind], sim_port_name(h->port));
    return 1;
}

/* ---- C interfaces called from Lua ------------------------------------------ */

void lkb_push_cif(lua_State *L, int kind, const void *iface, const char *port, int sysidx)
{
    sysidx = lua_absindex(L, sysidx);
    size_t len = strlen(port);
    struct lcif *c = lua_newuserdatauv(L, sizeof *c + len + 1, 1);
    c->iface = iface;
    c->kind = (enum cif_kind)kind;
    memcpy(c->port, port, len + 1);
    luaL_setmetatable(L, KB_CIF);
    lua_pushvalue(L, sysidx);
    lua_setiuservalue(L, -2, 1);
}

static struct lcif *checkcif(lua_State *L, int i, enum cif_kind kind, const char *fn)
{
    struct lcif *c = lkb_checkud(L, i, &cif_key, KB_CIF);
    if (c->kind != kind)
        luaL_error(L, "'%s' (%s) has no function '%s'", c->port, lkb_cif_types[c->kind], fn);
    lkb_module_system(L, i);
    return c;
}

static uint64_t checku64(lua_State *L, int i)
{
    lua_Integer v = luaL_checkinteger(L, i);
    luaL_argcheck(L, v >= 0, i, "must not be negative");
    return (uint64_t)v;
}

/* A copy's end {mem = memory interface or kbsim.memory, addr = 0}. */
static struct kb_dma_end checkend(lua_State *L, int i)
{
    luaL_checktype(L, i, LUA_TTABLE);
    struct kb_dma_end e = {0};
    lua_getfield(L, i, "mem");
    struct lcif *c = lkb_testud(L, -1, &cif_key);
    struct lmem *mh = lkb_testud(L, -1, &mem_key);
    if (c && c->kind == CIF_MEM) {
        lkb_module_system(L, lua_gettop(L));
        const struct kb_mem_if *m = c->iface;
        e.mem = m->bank;
        e.node = m->node;
    } else if (mh) {
        checkmem(L, lua_gettop(L));
        e.mem = mh->m;
        e.node = kb_mem_node(mh->m);
    } else {
        luaL_argerror(L, i, "'mem' must be a kb_mem_if peer or a kbsim.memory");
    }
    if (!e.mem)
        luaL_argerror(L, i, "the memory is not a bank a DMA can copy to or from");
    lua_getfield(L, i, "addr");
    if (!lua_isnil(L, -1)) {
        int ok;
        lua_Integer a = lua_tointegerx(L, -1, &ok);
        if (!ok || a < 0)
            luaL_argerror(L, i, "'addr' must be a non-negative integer");
        e.addr = (uint64_t)a;
    }
    lua_pop(L, 2);
    return e;
}

/* dma:copy(src, dst, bytes[, class = "write"]) -> ns; thread processes */
static int dma_copy(lua_State *L)
{
    static const char *const classes[] = {"read", "write", "comm", NULL};
    struct lcif *c = checkcif(L, 1, CIF_DMA, "copy");
    struct kb_dma_end src = checkend(L, 2), dst = checkend(L, 3);
    uint64_t bytes = checku64(L, 4);
    enum kb_dma_class cl = (enum kb_dma_class)luaL_checkoption(L, 5, "write", classes);
    const struct kb_dma_if *d = c->iface;
    struct sim *s = kb_system_sim(lkb_module_system(L, 1));
    void *proc = lkb_block_begin(L, s, "dma:copy");
    sim_time t0 = sim_now(s);
    int rc = d->copy(d->ctx, cl, src, dst, bytes);
    lkb_block_end(proc);
    if (rc < 0)
        return luaL_error(L, "copy through '%s': %s", c->port, d->errmsg(d->ctx));
    lua_pushnumber(L, (lua_Number)(sim_now(s) - t0) / 1000.0);
    return 1;
}

/* dma:time(src, dst, bytes) -> ns, the closed form on an idle system */
static int dma_time(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_DMA, "time");
    struct kb_dma_end src = checkend(L, 2), dst = checkend(L, 3);
    uint64_t bytes = checku64(L, 4);
    const struct kb_dma_if *d = c->iface;
    sim_time t = d->time(d->ctx, src, dst, bytes);
    if (t == SIM_FOREVER)
        return luaL_error(L, "time through '%s': %s", c->port, d->errmsg(d->ctx));
    lua_pushnumber(L, (lua_Number)t / 1000.0);
    return 1;
}

/* dma:node(), mem:node() -> the fabric node */
static int cif_node(lua_State *L)
{
    struct lcif *c = lkb_checkud(L, 1, &cif_key, KB_CIF);
    if (c->kind != CIF_DMA && c->kind != CIF_MEM)
        return luaL_error(L, "'%s' (%s) has no function 'node'", c->port, lkb_cif_types[c->kind]);
    lkb_module_system(L, 1);
    lua_pushinteger(L, c->kind == CIF_DMA ? ((const struct kb_dma_if *)c->iface)->node
                                          : ((const struct kb_mem_if *)c->iface)->node);
    return 1;
}

/* mem:read(addr, n) -> string; no time passes */
static int cmem_read(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_MEM, "read");
    uint64_t a = checku64(L, 2), n = checku64(L, 3);
    const struct kb_mem_if *m = c->iface;
    luaL_argcheck(L, n <= (uint64_t)1 << 40, 3, "too many bytes");
    luaL_Buffer b;
    char *p = luaL_buffinitsize(L, &b, (size_t)n);
    if (m->read(m->ctx, a, p, n) < 0)
        return luaL_error(L, "read through '%s': %s", c->port, m->errmsg(m->ctx));
    luaL_pushresultsize(&b, (size_t)n);
    return 1;
}

/* mem:write(addr, s); no time passes */
static int cmem_write(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_MEM, "write");
    uint64_t a = checku64(L, 2);
    size_t len;
    const char *v = luaL_checklstring(L, 3, &len);
    const struct kb_mem_if *m = c->iface;
    if (m->write(m->ctx, a, v, len) < 0)
        return luaL_error(L, "write through '%s': %s", c->port, m->errmsg(m->ctx));
    return 0;
}

/* mem:access(addr, bytes, "read" | "write") -> ns: a timed access (the
 * memory's closed form, with contention); thread processes */
static int cmem_access(lua_State *L)
{
    static const char *const ops[] = {"read", "write", NULL};
    struct lcif *c = checkcif(L, 1, CIF_MEM, "access");
    uint64_t a = checku64(L, 2), n = checku64(L, 3);
    bool w = luaL_checkoption(L, 4, NULL, ops) == 1;
    const struct kb_mem_if *m = c->iface;
    struct sim *s = kb_system_sim(lkb_module_system(L, 1));
    void *proc = lkb_block_begin(L, s, "mem:access");
    sim_time t0 = sim_now(s);
    int rc = m->access(m->ctx, a, n, w);
    lkb_block_end(proc);
    if (rc < 0)
        return luaL_error(L, "access through '%s': %s", c->port, m->errmsg(m->ctx));
    lua_pushnumber(L, (lua_Number)(sim_now(s) - t0) / 1000.0);
    return 1;
}

/* mem:alloc(bytes[, align]) -> addr; mem:dealloc(addr) */
static int cmem_alloc(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_MEM, "alloc");
    uint64_t n = checku64(L, 2), al = lua_isnoneornil(L, 3) ? 0 : checku64(L, 3);
    const struct kb_mem_if *m = c->iface;
    uint64_t addr;
    if (m->alloc(m->ctx, n, al, &addr) < 0)
        return luaL_error(L, "alloc through '%s': %s", c->port, m->errmsg(m->ctx));
    lua_pushinteger(L, (lua_Integer)addr);
    return 1;
}

static int cmem_dealloc(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_MEM, "dealloc");
    uint64_t a = checku64(L, 2);
    const struct kb_mem_if *m = c->iface;
    if (m->dealloc(m->ctx, a) < 0)
        return luaL_error(L, "dealloc through '%s': %s", c->port, m->errmsg(m->ctx));
    return 0;
}

/* ---- kb_cpu_if, kb_math_if, kb_gemm_if, kb_ipcq_if from Lua ---------------- */

/* cpu:dispatch() -> ns: one op's dispatch overhead, waited; thread processes */
static int cpu_dispatch(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_CPU, "dispatch");
    const struct kb_cpu_if *f = c->iface;
    struct sim *s = kb_system_sim(lkb_module_system(L, 1));
    void *proc = lkb_block_begin(L, s, "cpu:dispatch");
    sim_time t0 = sim_now(s);
    int rc = f->dispatch(f->ctx);
    lkb_block_end(proc);
    if (rc < 0)
        return luaL_error(L, "dispatch through '%s' failed (%d)", c->port, rc);
    lua_pushnumber(L, (lua_Number)(sim_now(s) - t0) / 1000.0);
    return 1;
}

/* cpu:dispatch_time() -> ns, the closed form */
static int cpu_dispatch_time(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_CPU, "dispatch_time");
    const struct kb_cpu_if *f = c->iface;
    lua_pushnumber(L, (lua_Number)f->dispatch_time(f->ctx) / 1000.0);
    return 1;
}

static enum kb_dtype checkdtype(lua_State *L, int i, const char *def)
{
    const char *name = def ? luaL_optstring(L, i, def) : luaL_checkstring(L, i);
    enum kb_dtype dt;
    if (kb_dtype_parse(name, &dt) != 0)
        luaL_argerror(L, i, lua_pushfstring(L, "unknown dtype '%s' (f16, bf16, f32)", name));
    return dt;
}

/* gemm:run's option `key` of the table at t, f32 when absent */
static enum kb_dtype optdtype(lua_State *L, int t, const char *key)
{
    enum kb_dtype dt = KB_DTYPE_F32;
    lua_getfield(L, t, key);
    const char *name = lua_tostring(L, -1);
    if (!lua_isnil(L, -1) && (!name || kb_dtype_parse(name, &dt) != 0))
        luaL_error(L, "gemm:run: '%s' must be f16, bf16 or f32, got %s", key,
                   name ? name : luaL_typename(L, -1));
    lua_pop(L, 1);
    return dt;
}

static enum kb_math_op checkop(lua_State *L, int i)
{
    const char *name = luaL_checkstring(L, i);
    enum kb_math_op op;
    if (kb_math_op_parse(name, &op) != 0) {
        const char *names[KB_MATH_OP_COUNT + 1];
        for (int k = 0; k < KB_MATH_OP_COUNT; k++)
            names[k] = kb_math_op_name((enum kb_math_op)k);
        names[KB_MATH_OP_COUNT] = NULL;
        lkb_push_names(L, names);
        luaL_argerror(L, i, lua_pushfstring(L, "unknown op '%s' (%s)", name, lua_tostring(L, -1)));
    }
    return op;
}

/* The most elements of a vector or matrix passed from Lua. */
#define CIF_MAX_ELEMS ((lua_Integer)1 << 24)

/* A buffer of n elements of dt, GC-owned, pushed. */
static void *pushbuf(lua_State *L, size_t n, enum kb_dtype dt)
{
    return lua_newuserdatauv(L, (n ? n : 1) * kb_dtype_size(dt), 0);
}

/* The array of numbers at i (n of them, n < 0: any length, set) rounded
 * into a new buffer of dt, pushed; `what` names it in errors. */
static void *checkarray_arg(lua_State *L, int i, int arg, lua_Integer *n, enum kb_dtype dt,
                            const char *what)
{
    if (!lua_istable(L, i))
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must be an array of numbers", what));
    lua_Integer len = (lua_Integer)lua_rawlen(L, i);
    if (*n < 0) {
        if (len < 1 || len > CIF_MAX_ELEMS)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s must have 1..%I numbers, has %I", what,
                                                CIF_MAX_ELEMS, len));
        *n = len;
    } else if (len != *n) {
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must have %I numbers, has %I", what, *n, len));
    }
    void *buf = pushbuf(L, (size_t)*n, dt);
    for (lua_Integer k = 1; k <= *n; k++) {
        int ok;
        lua_rawgeti(L, i, k);
        double v = lua_tonumberx(L, -1, &ok);
        if (!ok)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s[%I] is not a number", what, k));
        lua_pop(L, 1);
        kb_dtype_store(buf, (size_t)(k - 1), dt, v);
    }
    return buf;
}

static void *checkarray(lua_State *L, int i, lua_Integer *n, enum kb_dtype dt, const char *what)
{
    return checkarray_arg(L, i, i, n, dt, what);
}

static void pusharray(lua_State *L, const void *buf, size_t n, enum kb_dtype dt)
{
    lua_createtable(L, (int)n, 0);
    for (size_t k = 0; k < n; k++) {
        lua_pushnumber(L, kb_dtype_load(buf, k, dt));
        lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
}

/* math:run(op, dtype, a[, b[, c]]) -> out, ns: out[i] = op(a[i], b[i], c[i])
 * on arrays of numbers of one length (rounded to dtype; "sum" gives one
 * element), the unit held for its closed form. math:run(op, dtype, n): the
 * time alone, as a timing-only run -> nil, ns. Thread processes. */
static int math_run(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_MATH, "run");
    enum kb_math_op op = checkop(L, 2);
    enum kb_dtype dt = checkdtype(L, 3, NULL);
    const struct kb_math_if *m = c->iface;
    int arity = kb_math_op_arity(op);
    void *in[3] = {NULL, NULL, NULL}, *out = NULL;
    lua_Integer n = -1;
    if (lua_isinteger(L, 4)) {
        n = lua_tointeger(L, 4);
        luaL_argcheck(L, n >= 1 && n <= CIF_MAX_ELEMS, 4, "the element count is out of range");
    } else {
        static const char *const names[] = {"a", "b", "c"};
        for (int k = 0; k < arity; k++)
            in[k] = checkarray(L, 4 + k, &n, dt, names[k]);
        out = pushbuf(L, (size_t)n, dt);
    }
    struct sim *s = kb_system_sim(lkb_module_system(L, 1));
    void *proc = lkb_block_begin(L, s, "math:run");
    sim_time t0 = sim_now(s);
    int rc = m->run(m->ctx, op, in[0], in[1], in[2], out, (size_t)n, dt);
    lkb_block_end(proc);
    if (rc < 0)
        return luaL_error(L, "run through '%s': %s", c->port, m->errmsg(m->ctx));
    if (out)
        pusharray(L, out, op == KB_MATH_SUM ? 1 : (size_t)n, dt);
    else
        lua_pushnil(L);
    lua_pushnumber(L, (lua_Number)(sim_now(s) - t0) / 1000.0);
    return 2;
}

/* math:params() -> {vector_bytes_per_cycle, clock_ghz, transcendental_cycles} */
static int math_params(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_MATH, "params");
    const struct kb_math_if *m = c->iface;
    const struct kb_math_params *p = m->params(m->ctx);
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, p->vector_bytes_per_cycle);
    lua_setfield(L, -2, "vector_bytes_per_cycle");
    lua_pushnumber(L, p->clock_ghz);
    lua_setfield(L, -2, "clock_ghz");
    lua_pushinteger(L, p->transcendental_cycles);
    lua_setfield(L, -2, "transcendental_cycles");
    return 1;
}

/* gemm:run(M, N, K, A, B[, {dtype = "f32", c_dtype = "f32", C =,
 * accumulate = false}]) -> C, ns: C (+)= A·B with A M×K, B K×N and C M×N
 * flat row-major arrays; A and B nil: the time alone (timing-only) -> nil,
 * ns. Thread processes. */
static int gemm_run(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_GEMM, "run");
    lua_Integer dim[3];
    for (int k = 0; k < 3; k++) {
        dim[k] = luaL_checkinteger(L, 2 + k);
        luaL_argcheck(L, dim[k] >= 1 && dim[k] <= CIF_MAX_ELEMS, 2 + k, "out of range");
    }
    lua_Integer M = dim[0], N = dim[1], K = dim[2];
    luaL_argcheck(L, M * K <= CIF_MAX_ELEMS && K * N <= CIF_MAX_ELEMS && M * N <= CIF_MAX_ELEMS,
                  2, "a matrix of more than 2^24 elements");
    enum kb_dtype dt = KB_DTYPE_F32, cdt = KB_DTYPE_F32;
    bool acc = false;
    int opts = 0;
    if (!lua_isnoneornil(L, 7)) {
        luaL_checktype(L, 7, LUA_TTABLE);
        static const char *const known[] = {"dtype", "c_dtype", "C", "accumulate", NULL};
        lkb_check_keys(L, 7, "gemm:run", known);
        opts = 7;
        dt = optdtype(L, 7, "dtype");
        cdt = optdtype(L, 7, "c_dtype");
        lua_getfield(L, 7, "accumulate");
        acc = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    const void *A = NULL, *B = NULL;
    void *C = NULL;
    if (!lua_isnil(L, 5) || !lua_isnil(L, 6)) {
        lua_Integer na = M * K, nb = K * N, nc = M * N;
        A = checkarray(L, 5, &na, dt, "A");
        B = checkarray(L, 6, &nb, dt, "B");
        if (acc) {
            lua_getfield(L, opts, "C");
            C = checkarray_arg(L, lua_gettop(L), opts, &nc, cdt, "C");
        } else {
            C = pushbuf(L, (size_t)nc, cdt);
        }
    } else if (acc) {
        return luaL_error(L, "gemm:run: accumulate needs A, B and C");
    }
    const struct kb_gemm_if *g = c->iface;
    struct sim *s = kb_system_sim(lkb_module_system(L, 1));
    void *proc = lkb_block_begin(L, s, "gemm:run");
    sim_time t0 = sim_now(s);
    int rc = g->run(g->ctx, (size_t)M, (size_t)N, (size_t)K, A, (size_t)K, B, (size_t)N, C,
                    (size_t)N, dt, cdt, acc);
    lkb_block_end(proc);
    if (rc < 0)
        return luaL_error(L, "run through '%s': %s", c->port, g->errmsg(g->ctx));
    if (C)
        pusharray(L, C, (size_t)(M * N), cdt);
    else
        lua_pushnil(L);
    lua_pushnumber(L, (lua_Number)(sim_now(s) - t0) / 1000.0);
    return 2;
}

/* gemm:params() -> {mac = {m, n, k}, tile = {m, n, k}, clock_ghz} */
static int gemm_params(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_GEMM, "params");
    const struct kb_gemm_if *g = c->iface;
    const struct kb_gemm_params *p = g->params(g->ctx);
    lua_createtable(L, 0, 3);
    const uint32_t v[2][3] = {{p->mac.m, p->mac.n, p->mac.k}, {p->tile.m, p->tile.n, p->tile.k}};
    for (int t = 0; t < 2; t++) {
        lua_createtable(L, 0, 3);
        lua_pushinteger(L, v[t][0]);
        lua_setfield(L, -2, "m");
        lua_pushinteger(L, v[t][1]);
        lua_setfield(L, -2, "n");
        lua_pushinteger(L, v[t][2]);
        lua_setfield(L, -2, "k");
        lua_setfield(L, -2, t ? "tile" : "mac");
    }
    lua_pushnumber(L, p->clock_ghz);
    lua_setfield(L, -2, "clock_ghz");
    return 1;
}

/* dma:time(src, dst, bytes), math:time(op, n, dtype), gemm:time(M, N, K)
 * -> ns: each unit's own closed form on an idle unit */
static int cif_time(lua_State *L)
{
    struct lcif *c = lkb_checkud(L, 1, &cif_key, KB_CIF);
    if (c->kind == CIF_MATH) {
        checkcif(L, 1, CIF_MATH, "time");
        enum kb_math_op op = checkop(L, 2);
        lua_Integer n = luaL_checkinteger(L, 3);
        luaL_argcheck(L, n >= 0 && n <= CIF_MAX_ELEMS, 3, "out of range");
        enum kb_dtype dt = checkdtype(L, 4, NULL);
        const struct kb_math_if *m = c->iface;
        lua_pushnumber(L, (lua_Number)kb_math_time(m->params(m->ctx), op, (size_t)n, dt) / 1000.0);
        return 1;
    }
    if (c->kind == CIF_GEMM) {
        checkcif(L, 1, CIF_GEMM, "time");
        uint64_t d[3];
        for (int k = 0; k < 3; k++)
            d[k] = checku64(L, 2 + k);
        const struct kb_gemm_if *g = c->iface;
        const struct kb_gemm_params *gp = g->params(g->ctx);
        if ((double)d[0] * (double)d[1] * (double)d[2] > (double)KB_GEMM_MAX_MNK)
            return luaL_error(L, "gemm:time: M*N*K = %f is more than 2^48",
                              (double)d[0] * (double)d[1] * (double)d[2]);
        if (!kb_gemm_time_fits(gp, d[0], d[1], d[2]))
            return luaL_error(L, "gemm:time: %I x %I x %I takes longer than a simulation "
                                 "can count", (lua_Integer)d[0], (lua_Integer)d[1],
                              (lua_Integer)d[2]);
        lua_pushnumber(L, (lua_Number)kb_gemm_time(gp, d[0], d[1], d[2]) / 1000.0);
        return 1;
    }
    return dma_time(L);
}

/* math:run / gemm:run, math:params / gemm:params: by the peer's kind */
static int cif_run(lua_State *L)
{
    struct lcif *c = lkb_checkud(L, 1, &cif_key, KB_CIF);
    return c->kind == CIF_GEMM ? gemm_run(L) : math_run(L);
}

static int cif_params(lua_State *L)
{
    struct lcif *c = lkb_checkud(L, 1, &cif_key, KB_CIF);
    return c->kind == CIF_GEMM ? gemm_params(L) : math_params(L);
}

/* {tag =, dtype =, count =} at i (absent: zeros) */
static struct kb_ipcq_meta checkmeta(lua_State *L, int i)
{
    struct kb_ipcq_meta m = {0};
    if (lua_isnoneornil(L, i))
        return m;
    luaL_checktype(L, i, LUA_TTABLE);
    static const char *const known[] = {"tag", "dtype", "count", NULL};
    lkb_check_keys(L, i, "ipcq meta", known);
    const char *const *k = known;
    for (int j = 0; k[j]; j++) {
        lua_getfield(L, i, k[j]);
        if (!lua_isnil(L, -1)) {
            int ok;
            lua_Integer v = lua_tointegerx(L, -1, &ok);
            if (!ok || v < 0 || (j > 0 && v > UINT32_MAX))
                luaL_argerror(L, i, lua_pushfstring(L, "'%s' must be a non-negative integer",
                                                    k[j]));
            if (j == 0)
                m.tag = (uint64_t)v;
            else if (j == 1)
                m.dtype = (uint32_t)v;
            else
                m.count = (uint32_t)v;
        }
        lua_pop(L, 1);
    }
    return m;
}

static void pushmeta(lua_State *L, const struct kb_ipcq_meta *m)
{
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, (lua_Integer)m->tag);
    lua_setfield(L, -2, "tag");
    lua_pushinteger(L, m->dtype);
    lua_setfield(L, -2, "dtype");
    lua_pushinteger(L, m->count);
    lua_setfield(L, -2, "count");
}

/* ipcq:send(dir, bytes[, meta]) -> ns: the string's bytes on direction
 * dir; returns at once unless no credit is left. Thread processes. */
static int ipcq_send(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_IPCQ, "send");
    const char *dir = luaL_checkstring(L, 2);
    size_t len;
    const char *data = luaL_checklstring(L, 3, &len);
    struct kb_ipcq_meta meta = checkmeta(L, 4);
    const struct kb_ipcq_if *q = c->iface;
    struct sim *s = kb_system_sim(lkb_module_system(L, 1));
    void *proc = lkb_block_begin(L, s, "ipcq:send");
    sim_time t0 = sim_now(s);
    int rc = q->send(q->ctx, dir, data, len, &meta);
    lkb_block_end(proc);
    if (rc < 0)
        return luaL_error(L, "send through '%s': %s", c->port, q->errmsg(q->ctx));
    lua_pushnumber(L, (lua_Number)(sim_now(s) - t0) / 1000.0);
    return 1;
}

/* ipcq:recv(dir, bytes_max) -> bytes, meta, ns: the next message on dir,
 * waited for. Thread processes. */
static int ipcq_recv(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_IPCQ, "recv");
    const char *dir = luaL_checkstring(L, 2);
    lua_Integer max = luaL_checkinteger(L, 3);
    luaL_argcheck(L, max >= 0 && max <= CIF_MAX_ELEMS * 4, 3, "out of range");
    char *out = lua_newuserdatauv(L, (size_t)(max ? max : 1), 0);
    const struct kb_ipcq_if *q = c->iface;
    struct sim *s = kb_system_sim(lkb_module_system(L, 1));
    struct kb_ipcq_meta meta = {0};
    void *proc = lkb_block_begin(L, s, "ipcq:recv");
    sim_time t0 = sim_now(s);
    int64_t n = q->recv(q->ctx, dir, out, (uint64_t)max, &meta);
    lkb_block_end(proc);
    if (n < 0)
        return luaL_error(L, "recv through '%s': %s", c->port, q->errmsg(q->ctx));
    lua_pushlstring(L, out, (size_t)n);
    pushmeta(L, &meta);
    lua_pushnumber(L, (lua_Number)(sim_now(s) - t0) / 1000.0);
    return 3;
}

/* ipcq:probe(dir) -> bytes, meta of the next message, or false; no time */
static int ipcq_probe(lua_State *L)
{
    struct lcif *c = checkcif(L, 1, CIF_IPCQ, "probe");
    const char *dir = luaL_checkstring(L, 2);
    const struct kb_ipcq_if *q = c->iface;
    uint64_t bytes = 0;
    struct kb_ipcq_meta meta = {0};
    int rc = q->probe(q->ctx, dir, &bytes, &meta);
    if (rc < 0)
        return luaL_error(L, "probe through '%s': %s", c->port, q->errmsg(q->ctx));
    if (rc == 0) {
        lua_pushboolean(L, 0);
        return 1;
    }
    lua_pushinteger(L, (lua_Integer)bytes);
    pushmeta(L, &meta);
    return 2;
}

/* ipcq:wired(dir, "tx" | "rx") -> whether dir is wired that way */
static int ipcq_wired(lua_State *L)
{
    static const char *const sides[] = {"tx", "rx", NULL};
    struct lcif *c = checkcif(L, 1, CIF_IPCQ, "wired");
    const char *dir = luaL_checkstring(L, 2);
    bool tx = luaL_checkoption(L, 3, NULL, sides) == 0;
    const struct kb_ipcq_if *q = c->iface;
    lua_pushboolean(L, q->wired(q->ctx, dir, tx));
    return 1;
}

static int cif_tostring(lua_State *L)
{
    struct lcif *c = lkb_checkud(L, 1, &cif_key, KB_CIF);
    lua_pushfstring(L, "%s of '%s'", lkb_cif_types[c->kind], c->port);
    return 1;
}

/* ---- registration ------------------------------------------------------------ */

static const luaL_Reg cif_methods[] = {
    {"copy", dma_copy},       {"time", cif_time},       {"node", cif_node},
    {"read", cmem_read},      {"write", cmem_write},    {"access", cmem_access},
    {"alloc", cmem_alloc},    {"dealloc", cmem_dealloc}, {"dispatch", cpu_dispatch},
    {"dispatch_time", cpu_dispatch_time}, {"run", cif_run}, {"params", cif_params},
    {"send", ipcq_send},      {"recv", ipcq_recv},      {"probe", ipcq_probe},
    {"wired", ipcq_wired},    {NULL, NULL}};
static const luaL_Reg unit_methods[] = {{"port", unit_port}, {"wire", unit_wire}, {NULL, NULL}};
static const luaL_Reg mem_methods[] = {{"read", mem_read},   {"write", mem_write},
                                       {"stats", mem_stats}, {"port", mem_port},
                                       {NULL, NULL}};

void lkb_open_module_ifs(lua_State *L)
{
    lkb_newclass(L, KB_CIF, &cif_key, cif_methods, cif_tostring, NULL);
    lkb_newclass(L, KB_MEMORY, &mem_key, mem_methods, mem_tostring, mem_gc);
    lkb_newclass(L, KB_UNIT, &unit_key, unit_methods, unit_tostring, unit_gc);
}
