/* lmodule.c — modules written in Lua, bound into a C-built system
 *
 * kb.module(sys, "sw.reduce") makes a module whose ports are engine ports
 * (sim_port_*, through components/kb_port.h) named "sw.reduce.PORT", as
 * the C units' are. A Lua module
 *   - reaches C modules (and other Lua modules) through OUT ports:
 *     m:out("dma", "kb_dma_if", {min =, max =}), then m:bind("dma",
 *     "a.dma.in"); the engine checks direction, type tag and multiplicity
 *     and a refusal names both ends, as a C bind's does;
 *   - offers what it does on an IN port "MODULE.in" whose interface is a
 *     table of Lua functions: m:export("kb_allreduce_if", impl, {max =});
 *   - runs as thread or method processes of the engine named after it:
 *     m:thread(name, fn, ...), m:method(name, fn, opts).
 * A call through an OUT port goes to m:peer("dma", i): for a C export a
 * wrapper of its interface struct (kb_dma_if, kb_mem_if: the functions a
 * C caller has, one indirect call after the wrapper's checks); for a Lua
 * export a proxy that calls the implementation and names the port and the
 * function when it raises. C ports are never bound to a Lua export (a C
 * caller would find no C struct behind it): only a Lua module's OUT port
 * binds here. kb.memory(sys, node, params) places a C memory (a kb_mem
 * with its kb_mem_if export) at a fabric node, e.g. a switch's buffer.
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
#include "memory.h"
#include "pe.h"
#include "pe_cpu.h"
#include "pe_dma.h"
#include "pe_gemm.h"
#include "pe_ipcq.h"
#include "pe_math.h"
#include "system.h"

#define KB_MODULE "kbsim.module"
#define KB_PORT "kbsim.port"
#define KB_CIF "kbsim.iface"
#define KB_MEMORY "kbsim.memory"

/* Registry keys of the four metatables, by address: checking a
 * userdata's type is then a pointer look-up, not the interning of its
 * name (luaL_checkudata), on every call through a port. */
static const char mod_key = 'm', port_key = 'q', cif_key = 'c', mem_key = 'y';

/* The userdata at i if its metatable is the one registered at key. */
static void *testud(lua_State *L, int i, const char *key)
{
    void *p = lua_touserdata(L, i);
    if (!p || !lua_getmetatable(L, i))
        return NULL;
    lua_rawgetp(L, LUA_REGISTRYINDEX, key);
    bool same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same ? p : NULL;
}

static void *checkud(lua_State *L, int i, const char *key, const char *tname)
{
    void *p = testud(L, i, key);
    if (!p)
        luaL_typeerror(L, i, tname);
    return p;
}

/* Registry key of the table {system userdata -> {port name -> port
 * handle}} (weak keys): the Lua modules' ports of each system. */
static const char ports_key = 'p';

/* A module. User values: 1 the system, 2 {port name -> port handle}. */
struct lmod {
    int n_ports;
    char name[];
};

/* A port of a Lua module. User values: 1 the module, 2 the export's
 * implementation table (IN) or the peers' proxies by index (OUT). */
struct lport {
    struct sim_port *p;
    bool is_export;
};

/* A C interface seen from Lua: a peer's struct. User value 1: the system. */
enum cif_kind { CIF_DMA, CIF_MEM, CIF_CPU, CIF_MATH, CIF_GEMM, CIF_IPCQ, CIF_KINDS };
static const char *const cif_types[] = {KB_DMA_IF, KB_MEM_IF, KB_CPU_IF, KB_MATH_IF,
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

/* The kind of a C interface type, or -1. */
static int cif_kind_of(const char *type)
{
    for (int k = 0; cif_types[k]; k++)
        if (strcmp(type, cif_types[k]) == 0)
            return k;
    return -1;
}

static const char *const *c_fns(const char *type)
{
    int k = cif_kind_of(type);
    return k < 0 ? NULL : cif_fns[k];
}

/* ---- helpers ------------------------------------------------------------- */

/* The system at user value 1 of the userdata at idx, checked open (with
 * its simulation); pushes nothing. */
static struct kb_system *sys_of(lua_State *L, int idx)
{
    lua_getiuservalue(L, idx, 1);
    struct kb_system *sys = lkb_checksystem_known(L, -1);
    lua_pop(L, 1);
    return sys;
}

static struct lmod *checkmod(lua_State *L, int i)
{
    struct lmod *m = checkud(L, i, &mod_key, KB_MODULE);
    sys_of(L, i);
    return m;
}

static struct lport *checkport(lua_State *L, int i)
{
    struct lport *p = checkud(L, i, &port_key, KB_PORT);
    lua_getiuservalue(L, i, 1);
    sys_of(L, lua_gettop(L));
    lua_pop(L, 1);
    return p;
}

/* Pushes the {name -> port handle} table of the system at sysidx. */
static void push_sys_ports(lua_State *L, int sysidx)
{
    sysidx = lua_absindex(L, sysidx);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &ports_key);
    lua_pushvalue(L, sysidx);
    if (lua_rawget(L, -2) == LUA_TNIL) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, sysidx);
        lua_pushvalue(L, -2);
        lua_rawset(L, -4);
    }
    lua_remove(L, -2);
}

/* The port of sim s named `name`, or NULL. */
static struct sim_port *find_port(struct sim *s, const char *name)
{
    for (struct sim_port *p = sim_port_next(s, NULL); p; p = sim_port_next(s, p))
        if (strcmp(sim_port_name(p), name) == 0)
            return p;
    return NULL;
}

/* Units and memories' ports are made on first use: make those a port name
 * may belong to ("a.dma.in": PE a's units; "a.tcm.in", "sip0.cube0.sram.in":
 * a memory's export). Raises on a failure to make them. */
static void make_for(lua_State *L, struct kb_system *sys, const char *name)
{
    struct kb_system_counts c;
    kb_system_get_counts(sys, &c);
    size_t len = strlen(name);
    for (int r = 0; r < c.pes; r++) {
        struct kb_pe *pe = kb_system_pe(sys, r);
        size_t pl = strlen(pe->name);
        if (len > pl && strncmp(name, pe->name, pl) == 0 && name[pl] == '.' &&
            !kb_system_pe_units(sys, r))
            luaL_error(L, "%s", kb_system_errmsg(sys));
        struct kb_mem *mems[] = {pe->tcm, pe->sram, pe->hbm};
        for (int k = 0; k < 3; k++) {
            if (!mems[k])
                continue;
            const char *mn = kb_mem_name(mems[k]);
            const char *kind = kb_mem_kind_name(kb_mem_params(mems[k])->kind);
            size_t ml = strlen(mn), kl = strlen(kind);
            if (len == ml + kl + 4 && strncmp(name, mn, ml) == 0 && name[ml] == '.' &&
                strncmp(name + ml + 1, kind, kl) == 0 && strcmp(name + ml + 1 + kl, ".in") == 0 &&
                !kb_mem_port(mems[k]))
                luaL_error(L, "%s", kb_mem_errmsg(mems[k]));
        }
    }
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
static int l_memory(lua_State *L)
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
    int kind = luaL_checkoption(L, -1, "sram", kinds);
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
    if (find_port(s, name))
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
    struct lmem *h = checkud(L, i, &mem_key, KB_MEMORY);
    sys_of(L, i);
    return h;
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
    struct lmem *h = checkud(L, 1, &mem_key, KB_MEMORY);
    kb_mem_free(h->m);
    h->m = NULL;
    return 0;
}

static int mem_tostring(lua_State *L)
{
    struct lmem *h = checkud(L, 1, &mem_key, KB_MEMORY);
    lua_pushfstring(L, "memory '%s'", h->port ? sim_port_name(h->port) : "?");
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
    struct lunit *h = checkud(L, i, &unit_key, KB_UNIT);
    sys_of(L, i);
    return h;
}

/* The C port a unit's OUT port binds to: a port name of the system (a
 * PE's units and memories made on first use) or a kbsim.memory. */
static struct sim_port *c_target(lua_State *L, struct kb_system *sys, int sysidx, int i,
                                 const char *what)
{
    struct sim *s = kb_system_sim(sys);
    if (lua_type(L, i) == LUA_TSTRING) {
        const char *name = lua_tostring(L, i);
        struct sim_port *to = find_port(s, name);
        if (!to) {
            make_for(L, sys, name);
            to = find_port(s, name);
        }
        if (!to)
            luaL_error(L, "kb.unit: %s: the system has no port '%s'", what, name);
        return to;
    }
    struct lmem *mh = testud(L, i, &mem_key);
    if (!mh)
        luaL_error(L, "kb.unit: %s must be a port name or a kbsim.memory, got %s", what,
                   luaL_typename(L, i));
    checkmem(L, i);
    lua_getiuservalue(L, i, 1);
    if (!lua_rawequal(L, -1, sysidx))
        luaL_error(L, "kb.unit: %s: another system's memory", what);
    lua_pop(L, 1);
    return mh->port;
}

/* kb.unit(sys, name, kind[, {dma =, buf =}]) -> a C unit ("cpu", "math",
 * "gemm" or "ipcq") named NAME with the system's parameters (pe.* and
 * ipcq.* of its topology), exported on "NAME.KIND.in" for a Lua module's
 * port: a PE's own math, gemm and ipcq exports take one binding, their
 * CPU's. An ipcq sends with the DMA `dma` (a kb_dma_if export such as
 * "a.dma.in", whose node is where it sits) and keeps its rings in `buf` (a
 * kb_mem_if export or a kbsim.memory); unit:wire makes its channels. */
static int l_unit(lua_State *L)
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
    if (find_port(s, pname))
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
        dma = c_target(L, sys, 1, 5, "dma");
        buf = c_target(L, sys, 1, 6, "buf");
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
    struct lunit *h = checkud(L, 1, &unit_key, KB_UNIT);
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
    struct lunit *h = checkud(L, 1, &unit_key, KB_UNIT);
    lua_pushfstring(L, "%s unit '%s'", unit_kinds[h->kind], h->port ? sim_port_name(h->port) : "?");
    return 1;
}

/* ---- kb.module ------------------------------------------------------------ */

/* kb.module(sys, name) -> a module "name" of the system's simulation */
static int l_module(lua_State *L)
{
    lkb_checksystem(L, 1);
    size_t len;
    const char *name = luaL_checklstring(L, 2, &len);
    if (len == 0 || len > 200 || name[0] == '.' || name[len - 1] == '.' || strstr(name, ".."))
        return luaL_argerror(L, 2, "a module name is 'OWNER.UNIT' (not empty, no empty part, "
                                   "at most 200 characters)");
    push_sys_ports(L, 1);
    lua_pop(L, 1);
    struct lmod *m = lua_newuserdatauv(L, sizeof *m + len + 1, 2);
    m->n_ports = 0;
    memcpy(m->name, name, len + 1);
    luaL_setmetatable(L, KB_MODULE);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    lua_newtable(L);
    lua_setiuservalue(L, -2, 2);
    /* its export's functions are called as long as the simulation runs */
    lua_getiuservalue(L, 1, 1);
    lkb_anchor(L, -1, -2);
    lua_pop(L, 1);
    return 1;
}

/* Makes port `pname` of the module at index 1 and leaves its handle on
 * the stack. */
static struct lport *newport(lua_State *L, struct lmod *m, const char *pname,
                             enum sim_port_dir dir, const char *type, int mn, int mx)
{
    struct kb_system *sys = sys_of(L, 1);
    struct sim *s = kb_system_sim(sys);
    if (!*pname || strchr(pname, '.') || strlen(pname) > 50)
        luaL_error(L, "module '%s': bad port name '%s' (one part, not empty, at most 50 "
                      "characters)", m->name, pname);
    char full[256];
    snprintf(full, sizeof full, "%s.%s", m->name, pname);
    lua_getiuservalue(L, 1, 1);
    push_sys_ports(L, -1);
    int tbl = lua_gettop(L);
    if (lua_getfield(L, tbl, full) != LUA_TNIL || find_port(s, full))
        luaL_error(L, "module '%s': a port '%s' already exists", m->name, full);
    lua_pop(L, 1);
    struct lport *p = lua_newuserdatauv(L, sizeof *p, 2);
    p->p = NULL;
    p->is_export = dir == SIM_PORT_IN;
    luaL_setmetatable(L, KB_PORT);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    char err[300];
    const char *dot = strrchr(m->name, '.');
    char owner[256];
    snprintf(owner, sizeof owner, "%.*s", dot ? (int)(dot - m->name) : 0, m->name);
    p->p = kb_port_new(s, dot ? owner : NULL, dot ? dot + 1 : m->name, pname, dir, type, mn, mx,
                       err, sizeof err);
    if (!p->p)
        luaL_error(L, "module '%s': %s", m->name, err);
    lua_pushvalue(L, -1);
    lua_setfield(L, tbl, full);
    lua_getiuservalue(L, 1, 2);
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, pname);
    lua_pop(L, 1);
    m->n_ports++;
    lua_replace(L, tbl - 1);
    lua_settop(L, tbl - 1);
    return p;
}

static int optint(lua_State *L, int t, const char *key, int def, int lo, int hi)
{
    if (lua_isnoneornil(L, t))
        return def;
    lua_getfield(L, t, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return def;
    }
    int ok;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok || v < lo || v > hi)
        luaL_error(L, "'%s' must be an integer in %d..%d, got %s", key, lo, hi,
                   luaL_tolstring(L, -1, NULL));
    lua_pop(L, 1);
    return (int)v;
}

/* m:out(name, type, {min = 1, max = 1}) -> port */
static int mod_out(lua_State *L)
{
    struct lmod *m = checkmod(L, 1);
    const char *pname = luaL_checkstring(L, 2);
    const char *type = luaL_checkstring(L, 3);
    if (!lua_isnoneornil(L, 4)) {
        luaL_checktype(L, 4, LUA_TTABLE);
        static const char *const known[] = {"min", "max", NULL};
        lkb_check_keys(L, 4, "m:out", known);
    }
    int mn = optint(L, 4, "min", 1, 0, KB_PORT_MANY);
    int mx = optint(L, 4, "max", mn > 1 ? mn : 1, 1, KB_PORT_MANY);
    if (mx < mn)
        return luaL_error(L, "module '%s': port '%s': max %d is below min %d", m->name, pname,
                          mx, mn);
    lua_settop(L, 4);
    newport(L, m, pname, SIM_PORT_OUT, type, mn, mx);
    lua_newtable(L);
    lua_setiuservalue(L, -2, 2);
    return 1;
}

/* m:export(type, impl, {name = "in", max = any}) -> port: an IN port
 * whose interface is the table impl; a C interface type needs the
 * functions its C wrapper has. */
static int mod_export(lua_State *L)
{
    struct lmod *m = checkmod(L, 1);
    const char *type = luaL_checkstring(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    const char *pname = "in";
    if (!lua_isnoneornil(L, 4)) {
        luaL_checktype(L, 4, LUA_TTABLE);
        static const char *const known[] = {"name", "max", NULL};
        lkb_check_keys(L, 4, "m:export", known);
        lua_getfield(L, 4, "name");
        if (!lua_isnil(L, -1))
            pname = luaL_checkstring(L, -1);
        lua_pop(L, 1);
    }
    int mx = optint(L, 4, "max", KB_PORT_MANY, 1, KB_PORT_MANY);
    const char *const *fns = c_fns(type);
    for (int i = 0; fns && fns[i]; i++) {
        lua_getfield(L, 3, fns[i]);
        bool ok = lua_isfunction(L, -1);
        lua_pop(L, 1);
        if (!ok)
        {
            lkb_push_names(L, fns);
            return luaL_error(L, "module '%s': an export of '%s' implements what its C "
                                 "wrapper offers (%s); '%s' is missing",
                              m->name, type, lua_tostring(L, -1), fns[i]);
        }
    }
    lua_settop(L, 4);
    newport(L, m, pname, SIM_PORT_IN, type, 0, mx);
    lua_pushvalue(L, 3);
    lua_setiuservalue(L, -2, 2);
    return 1;
}

/* m:port(name) -> port */
static int mod_port(lua_State *L)
{
    struct lmod *m = checkmod(L, 1);
    const char *pname = luaL_checkstring(L, 2);
    lua_getiuservalue(L, 1, 2);
    if (lua_getfield(L, -1, pname) == LUA_TNIL)
        return luaL_error(L, "module '%s' has no port '%s'", m->name, pname);
    return 1;
}

static int mod_name(lua_State *L)
{
    lua_pushstring(L, checkmod(L, 1)->name);
    return 1;
}

/* The simulation handle of the module at index 1, pushed. */
static void push_sim(lua_State *L)
{
    lua_getiuservalue(L, 1, 1);
    lua_getiuservalue(L, -1, 1);
    lua_remove(L, -2);
}

/* Calls sim:WHAT(MODULE.name, ...) with the values from index first on. */
static int call_sim(lua_State *L, const char *what, int first)
{
    struct lmod *m = checkmod(L, 1);
    const char *name = luaL_checkstring(L, 2);
    int top = lua_gettop(L);
    push_sim(L);
    lua_getfield(L, -1, what);
    lua_insert(L, -2);
    lua_pushfstring(L, "%s.%s", m->name, name);
    for (int i = first; i <= top; i++)
        lua_pushvalue(L, i);
    lua_call(L, 2 + (top >= first ? top - first + 1 : 0), 1);
    return 1;
}

/* m:thread(name, fn, ...) -> proc "MODULE.name" running fn(m, ...) */
static int mod_thread(lua_State *L)
{
    checkmod(L, 1);
    luaL_checkstring(L, 2);
    luaL_checktype(L, 3, LUA_TFUNCTION);
    /* sim:spawn(name, fn, m, ...) */
    lua_pushvalue(L, 1);
    lua_insert(L, 4);
    return call_sim(L, "spawn", 3);
}

static int method_trampoline(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_call(L, 1, 0);
    return 0;
}

/* m:method(name, fn, {sensitive = {...}, dont_initialize =}) -> proc
 * "MODULE.name" running fn(m) each time it is triggered */
static int mod_method(lua_State *L)
{
    checkmod(L, 1);
    luaL_checkstring(L, 2);
    luaL_checktype(L, 3, LUA_TFUNCTION);
    lua_settop(L, 4);
    lua_pushvalue(L, 3);
    lua_pushvalue(L, 1);
    lua_pushcclosure(L, method_trampoline, 2);
    lua_replace(L, 3);
    return call_sim(L, "method", 3);
}

/* m:event(name) -> event "MODULE.name" */
static int mod_event(lua_State *L)
{
    checkmod(L, 1);
    luaL_checkstring(L, 2);
    lua_settop(L, 2);
    return call_sim(L, "event", 3);
}

static int mod_bind(lua_State *L);
static int mod_peer(lua_State *L);

static int mod_tostring(lua_State *L)
{
    struct lmod *m = checkud(L, 1, &mod_key, KB_MODULE);
    lua_pushfstring(L, "module '%s' (%d ports)", m->name, m->n_ports);
    return 1;
}

/* ---- ports ----------------------------------------------------------------- */

/* port:bind(target): target is a port handle, a kbsim.memory, or the full
 * name of any port of the system ("a.dma.in"). Only an OUT port of a Lua
 * module binds, to an IN port (C or Lua) of the same system. */
static int port_bind(lua_State *L)
{
    struct lport *from = checkport(L, 1);
    lua_getiuservalue(L, 1, 1); /* module */
    int modidx = lua_gettop(L);
    lua_getiuservalue(L, modidx, 1); /* system */
    int sysidx = lua_gettop(L);
    struct kb_system *sys = lkb_checksystem_known(L, sysidx);
    struct sim *s = kb_system_sim(sys);
    if (sim_port_dir(from->p) != SIM_PORT_OUT)
        return luaL_error(L, "cannot bind '%s': only an OUT port of a Lua module binds (this is "
                             "its export; bind a peer's OUT port to it)",
                          sim_port_name(from->p));
    struct sim_port *to = NULL;
    int target = 0; /* index of the target's Lua port handle, when it is one */
    if (lua_type(L, 2) == LUA_TSTRING) {
        const char *name = lua_tostring(L, 2);
        push_sys_ports(L, sysidx);
        if (lua_getfield(L, -1, name) != LUA_TNIL) {
            to = ((struct lport *)lua_touserdata(L, -1))->p;
            target = lua_gettop(L);
        } else {
            lua_pop(L, 2);
            if (!(to = find_port(s, name))) {
                make_for(L, sys, name);
                to = find_port(s, name);
            }
            if (!to)
                return luaL_error(L, "cannot bind '%s' to '%s': the system has no port '%s'",
                                  sim_port_name(from->p), name, name);
        }
    } else if (testud(L, 2, &mem_key)) {
        struct lmem *mh = checkmem(L, 2);
        lua_getiuservalue(L, 2, 1);
        if (!lua_rawequal(L, -1, sysidx))
            return luaL_error(L, "cannot bind '%s' to '%s': another system's memory",
                              sim_port_name(from->p), sim_port_name(mh->port));
        lua_pop(L, 1);
        to = mh->port;
    } else {
        struct lport *tp = testud(L, 2, &port_key);
        if (!tp)
            return luaL_typeerror(L, 2, "port, memory or port name");
        checkport(L, 2);
        lua_getiuservalue(L, 2, 1);
        lua_getiuservalue(L, -1, 1);
        if (!lua_rawequal(L, -1, sysidx))
            return luaL_error(L, "cannot bind '%s' to '%s': another system's port",
                              sim_port_name(from->p), sim_port_name(tp->p));
        lua_pop(L, 2);
        to = tp->p;
        target = 2;
    }
    char err[512];
    if (kb_port_bind(s, from->p, to, err, sizeof err) < 0)
        return luaL_error(L, "%s", err);
    /* peers[i]: the target's handle when it is a Lua export, else false */
    lua_getiuservalue(L, 1, 2);
    if (target)
        lua_pushvalue(L, target);
    else
        lua_pushboolean(L, 0);
    lua_rawseti(L, -2, sim_port_bound_count(from->p));
    return 0;
}

static int mod_bind(lua_State *L)
{
    lua_settop(L, 3);
    mod_port(L); /* the port handle, on top */
    lua_replace(L, 1);
    lua_remove(L, 2);
    return port_bind(L);
}

/* A Lua export's function called through a proxy: upvalues 1 the
 * function, 2 the implementation table, 3 "PORT: NAME" for messages. The
 * proxy (self) is replaced by the implementation; an error names the port
 * and the function before the script's own message. */
static int lua_if_call(lua_State *L)
{
    int n = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushvalue(L, lua_upvalueindex(2));
    for (int i = 2; i <= n; i++)
        lua_pushvalue(L, i);
    if (lua_pcall(L, n, LUA_MULTRET, 0) != LUA_OK) {
        if (lua_type(L, -1) == LUA_TSTRING) {
            lua_pushfstring(L, "%s: %s", lua_tostring(L, lua_upvalueindex(3)),
                            lua_tostring(L, -1));
        }
        return lua_error(L);
    }
    return lua_gettop(L) - n;
}

/* __index of a Lua export's proxy: upvalues 1 the implementation, 2 the
 * export's name, 3 its type. Makes (once) and caches the caller of a
 * function; other fields read through. */
static int lua_if_index(lua_State *L)
{
    const char *k = luaL_checkstring(L, 2);
    lua_pushvalue(L, 2);
    int t = lua_gettable(L, lua_upvalueindex(1));
    if (t == LUA_TNIL)
        return luaL_error(L, "'%s' (%s) has no function '%s'",
                          lua_tostring(L, lua_upvalueindex(2)),
                          lua_tostring(L, lua_upvalueindex(3)), k);
    if (t != LUA_TFUNCTION)
        return 1;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushfstring(L, "%s: %s", lua_tostring(L, lua_upvalueindex(2)), k);
    lua_pushcclosure(L, lua_if_call, 3);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, -2);
    lua_rawset(L, 1);
    return 1;
}

/* Pushes the proxy of the Lua export whose port handle is at idx. */
static void push_lua_proxy(lua_State *L, int idx)
{
    struct lport *ep = lua_touserdata(L, idx);
    lua_newtable(L);
    lua_createtable(L, 0, 2);
    lua_getiuservalue(L, idx, 2);
    lua_pushstring(L, sim_port_name(ep->p));
    lua_pushstring(L, sim_port_type(ep->p));
    lua_pushcclosure(L, lua_if_index, 3);
    lua_setfield(L, -2, "__index");
    lua_pushliteral(L, "kbsim.lua_iface");
    lua_setfield(L, -2, "__name");
    lua_setmetatable(L, -2);
}

/* port:peer([i = 1]) -> the interface of its i-th peer: a C wrapper or a
 * Lua export's proxy, made once and cached. */
static int port_peer(lua_State *L)
{
    struct lport *p = checkport(L, 1);
    lua_Integer i = luaL_optinteger(L, 2, 1);
    int n = sim_port_bound_count(p->p);
    if (p->is_export)
        return luaL_error(L, "'%s' is an export: its peers call it", sim_port_name(p->p));
    if (n == 0)
        return luaL_error(L, "'%s' is unbound", sim_port_name(p->p));
    if (i < 1 || i > n)
        return luaL_error(L, "'%s' has %d binding%s, no peer %I", sim_port_name(p->p), n,
                          n == 1 ? "" : "s", i);
    lua_getiuservalue(L, 1, 2);
    int peers = lua_gettop(L);
    /* peers[i]: the export's handle or false; peers[-i]: the proxy */
    if (lua_rawgeti(L, peers, -i) != LUA_TNIL)
        return 1;
    lua_pop(L, 1);
    lua_rawgeti(L, peers, i);
    if (lua_type(L, -1) == LUA_TUSERDATA) {
        push_lua_proxy(L, lua_gettop(L));
    } else {
        struct sim_port *peer = sim_port_peer(p->p, (int)i - 1);
        const char *type = sim_port_type(peer);
        int k = cif_kind_of(type);
        if (k < 0) {
            lkb_push_names(L, cif_types);
            return luaL_error(L, "'%s' is bound to '%s' (%s): a Lua module calls the C "
                                 "interfaces %s, not %s",
                              sim_port_name(p->p), sim_port_name(peer), type,
                              lua_tostring(L, -1), type);
        }
        enum cif_kind kind = (enum cif_kind)k;
        const char *pn = sim_port_name(peer);
        size_t len = strlen(pn);
        struct lcif *c = lua_newuserdatauv(L, sizeof *c + len + 1, 1);
        c->iface = sim_port_peer_iface(p->p, (int)i - 1);
        c->kind = kind;
        memcpy(c->port, pn, len + 1);
        luaL_setmetatable(L, KB_CIF);
        lua_getiuservalue(L, 1, 1);
        lua_getiuservalue(L, -1, 1);
        lua_setiuservalue(L, -3, 1);
        lua_pop(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_rawseti(L, peers, -i);
    return 1;
}

static int mod_peer(lua_State *L)
{
    lua_settop(L, 3);
    mod_port(L);
    lua_replace(L, 1);
    lua_remove(L, 2);
    return port_peer(L);
}

static int port_name(lua_State *L)
{
    lua_pushstring(L, sim_port_name(checkport(L, 1)->p));
    return 1;
}

static int port_type(lua_State *L)
{
    lua_pushstring(L, sim_port_type(checkport(L, 1)->p));
    return 1;
}

static int port_count(lua_State *L)
{
    lua_pushinteger(L, sim_port_bound_count(checkport(L, 1)->p));
    return 1;
}

static int port_tostring(lua_State *L)
{
    struct lport *p = checkud(L, 1, &port_key, KB_PORT);
    lua_pushfstring(L, "port '%s' : %s", p->p ? sim_port_name(p->p) : "?",
                    p->p ? sim_port_type(p->p) : "?");
    return 1;
}

/* ---- C interfaces called from Lua ------------------------------------------ */

static struct lcif *checkcif(lua_State *L, int i, enum cif_kind kind, const char *fn)
{
    struct lcif *c = checkud(L, i, &cif_key, KB_CIF);
    if (c->kind != kind)
        luaL_error(L, "'%s' (%s) has no function '%s'", c->port, cif_types[c->kind], fn);
    sys_of(L, i);
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
    struct lcif *c = testud(L, -1, &cif_key);
    struct lmem *mh = testud(L, -1, &mem_key);
    if (c && c->kind == CIF_MEM) {
        sys_of(L, lua_gettop(L));
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
    struct sim *s = kb_system_sim(sys_of(L, 1));
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
    struct lcif *c = checkud(L, 1, &cif_key, KB_CIF);
    if (c->kind != CIF_DMA && c->kind != CIF_MEM)
        return luaL_error(L, "'%s' (%s) has no function 'node'", c->port, cif_types[c->kind]);
    sys_of(L, 1);
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
    struct sim *s = kb_system_sim(sys_of(L, 1));
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
    struct sim *s = kb_system_sim(sys_of(L, 1));
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
static void *checkarray(lua_State *L, int i, lua_Integer *n, enum kb_dtype dt, const char *what)
{
    if (!lua_istable(L, i))
        luaL_argerror(L, i, lua_pushfstring(L, "%s must be an array of numbers", what));
    lua_Integer len = (lua_Integer)lua_rawlen(L, i);
    if (*n < 0) {
        if (len < 1 || len > CIF_MAX_ELEMS)
            luaL_argerror(L, i, lua_pushfstring(L, "%s must have 1..%I numbers, has %I", what,
                                                CIF_MAX_ELEMS, len));
        *n = len;
    } else if (len != *n) {
        luaL_argerror(L, i, lua_pushfstring(L, "%s must have %I numbers, has %I", what, *n, len));
    }
    void *buf = pushbuf(L, (size_t)*n, dt);
    for (lua_Integer k = 1; k <= *n; k++) {
        int ok;
        lua_rawgeti(L, i, k);
        double v = lua_tonumberx(L, -1, &ok);
        if (!ok)
            luaL_argerror(L, i, lua_pushfstring(L, "%s[%I] is not a number", what, k));
        lua_pop(L, 1);
        kb_dtype_store(buf, (size_t)(k - 1), dt, v);
    }
    return buf;
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
    struct sim *s = kb_system_sim(sys_of(L, 1));
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
        lua_getfield(L, 7, "dtype");
        dt = checkdtype(L, lua_gettop(L), "f32");
        lua_getfield(L, 7, "c_dtype");
        cdt = checkdtype(L, lua_gettop(L), "f32");
        lua_getfield(L, 7, "accumulate");
        acc = lua_toboolean(L, -1);
        lua_pop(L, 3);
    }
    const void *A = NULL, *B = NULL;
    void *C = NULL;
    if (!lua_isnil(L, 5) || !lua_isnil(L, 6)) {
        lua_Integer na = M * K, nb = K * N, nc = M * N;
        A = checkarray(L, 5, &na, dt, "A");
        B = checkarray(L, 6, &nb, dt, "B");
        if (acc) {
            lua_getfield(L, opts, "C");
            C = checkarray(L, lua_gettop(L), &nc, cdt, "C");
        } else {
            C = pushbuf(L, (size_t)nc, cdt);
        }
    } else if (acc) {
        return luaL_error(L, "gemm:run: accumulate needs A, B and C");
    }
    const struct kb_gemm_if *g = c->iface;
    struct sim *s = kb_system_sim(sys_of(L, 1));
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
    struct lcif *c = checkud(L, 1, &cif_key, KB_CIF);
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
        lua_pushnumber(L, (lua_Number)kb_gemm_time(g->params(g->ctx), d[0], d[1], d[2]) / 1000.0);
        return 1;
    }
    return dma_time(L);
}

/* math:run / gemm:run, math:params / gemm:params: by the peer's kind */
static int cif_run(lua_State *L)
{
    struct lcif *c = checkud(L, 1, &cif_key, KB_CIF);
    return c->kind == CIF_GEMM ? gemm_run(L) : math_run(L);
}

static int cif_params(lua_State *L)
{
    struct lcif *c = checkud(L, 1, &cif_key, KB_CIF);
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
    struct sim *s = kb_system_sim(sys_of(L, 1));
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
    struct sim *s = kb_system_sim(sys_of(L, 1));
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
    struct lcif *c = checkud(L, 1, &cif_key, KB_CIF);
    lua_pushfstring(L, "%s of '%s'", cif_types[c->kind], c->port);
    return 1;
}

/* ---- registration ------------------------------------------------------------ */

static const luaL_Reg mod_methods[] = {
    {"out", mod_out},         {"export", mod_export}, {"port", mod_port},
    {"bind", mod_bind},       {"peer", mod_peer},     {"thread", mod_thread},
    {"method", mod_method},   {"event", mod_event},   {"name", mod_name},
    {NULL, NULL}};
static const luaL_Reg port_methods[] = {{"bind", port_bind},   {"peer", port_peer},
                                        {"name", port_name},   {"type", port_type},
                                        {"count", port_count}, {NULL, NULL}};
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

static void newclass(lua_State *L, const char *tname, const char *key,
                     const luaL_Reg *methods, lua_CFunction tostring, lua_CFunction gc)
{
    lkb_newmetatable(L, tname);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, key);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, tostring);
    lua_setfield(L, -2, "__tostring");
    if (gc) {
        lua_pushcfunction(L, gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
}

void lkb_open_module(lua_State *L)
{
    newclass(L, KB_MODULE, &mod_key, mod_methods, mod_tostring, NULL);
    newclass(L, KB_PORT, &port_key, port_methods, port_tostring, NULL);
    newclass(L, KB_CIF, &cif_key, cif_methods, cif_tostring, NULL);
    newclass(L, KB_MEMORY, &mem_key, mem_methods, mem_tostring, mem_gc);
    newclass(L, KB_UNIT, &unit_key, unit_methods, unit_tostring, unit_gc);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &ports_key);
    lua_pushcfunction(L, l_module);
    lua_setfield(L, -2, "module");
    lua_pushcfunction(L, l_memory);
    lua_setfield(L, -2, "memory");
    lua_pushcfunction(L, l_unit);
    lua_setfield(L, -2, "unit");
}
