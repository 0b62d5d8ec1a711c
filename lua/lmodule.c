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
 * wrapper of its interface struct (lmodule_ifs.c); for a Lua export a
 * proxy that calls the implementation and names the port and the
 * function when it raises. C ports are never bound to a Lua export (a C
 * caller would find no C struct behind it): only a Lua module's OUT port
 * binds here. kb.memory and kb.unit, which place C memories and units for
 * a module to bind to, are in lmodule_ifs.c.
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
#include "system.h"

#define KB_MODULE "kbsim.module"
#define KB_PORT "kbsim.port"

/* Registry keys of the metatables, by address: checking a userdata's
 * type is then a pointer look-up, not the interning of its name
 * (luaL_checkudata), on every call through a port. */
static const char mod_key = 'm', port_key = 'q';

void *lkb_testud(lua_State *L, int i, const char *key)
{
    void *p = lua_touserdata(L, i);
    if (!p || !lua_getmetatable(L, i))
        return NULL;
    lua_rawgetp(L, LUA_REGISTRYINDEX, key);
    bool same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same ? p : NULL;
}

void *lkb_checkud(lua_State *L, int i, const char *key, const char *tname)
{
    void *p = lkb_testud(L, i, key);
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

/* ---- helpers ------------------------------------------------------------- */

struct kb_system *lkb_module_system(lua_State *L, int idx)
{
    lua_getiuservalue(L, idx, 1);
    struct kb_system *sys = lkb_checksystem_known(L, -1);
    lua_pop(L, 1);
    return sys;
}

bool lkb_module_system_open(lua_State *L, int idx)
{
    lua_getiuservalue(L, idx, 1); /* the system */
    bool open = *lkb_system_open_slot(L, -1) != NULL;
    if (open) {
        lua_getiuservalue(L, -1, 1); /* its simulation */
        open = lkb_sim_is_open(L, -1);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return open;
}

static struct lmod *checkmod(lua_State *L, int i)
{
    struct lmod *m = lkb_checkud(L, i, &mod_key, KB_MODULE);
    lkb_module_system(L, i);
    return m;
}

static struct lport *checkport(lua_State *L, int i)
{
    struct lport *p = lkb_checkud(L, i, &port_key, KB_PORT);
    lua_getiuservalue(L, i, 1);
    lkb_module_system(L, lua_gettop(L));
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

bool lkb_is_module_port(lua_State *L, int sysidx, const char *name)
{
    push_sys_ports(L, sysidx);
    bool is = lua_getfield(L, -1, name) != LUA_TNIL;
    lua_pop(L, 2);
    return is;
}

struct sim_port *lkb_find_port(struct sim *s, const char *name)
{
    if (sim_port_make_deferred(s) < 0) /* out of memory */
        return NULL;
    for (struct sim_port *p = sim_port_next(s, NULL); p; p = sim_port_next(s, p))
        if (strcmp(sim_port_name(p), name) == 0)
            return p;
    return NULL;
}

/* Units and memories' ports are made on first use: make those a port name
 * may belong to ("a.dma.in": PE a's units; "a.tcm.in", "sip0.cube0.sram.in":
 * a memory's export). Raises on a failure to make them. */
void lkb_make_ports_for(lua_State *L, struct kb_system *sys, const char *name)
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
    struct kb_system *sys = lkb_module_system(L, 1);
    struct sim *s = kb_system_sim(sys);
    if (!*pname || strchr(pname, '.') || strlen(pname) > 50)
        luaL_error(L, "module '%s': bad port name '%s' (one part, not empty, at most 50 "
                      "characters)", m->name, pname);
    char full[256];
    snprintf(full, sizeof full, "%s.%s", m->name, pname);
    lua_getiuservalue(L, 1, 1);
    push_sys_ports(L, -1);
    int tbl = lua_gettop(L);
    if (lua_getfield(L, tbl, full) != LUA_TNIL || lkb_find_port(s, full))
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
    luaL_argcheck(L, *type, 3, "an interface type is not empty");
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
    luaL_argcheck(L, *type, 2, "an interface type is not empty");
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
    const char *const *fns = lkb_cif_fns(type);
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
    if (!lua_isnoneornil(L, 4)) {
        luaL_checktype(L, 4, LUA_TTABLE);
        static const char *const known[] = {"sensitive", "dont_initialize", NULL};
        lkb_check_keys(L, 4, "m:method", known);
    }
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
    struct lmod *m = lkb_checkud(L, 1, &mod_key, KB_MODULE);
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
            if (!(to = lkb_find_port(s, name))) {
                lkb_make_ports_for(L, sys, name);
                to = lkb_find_port(s, name);
            }
            if (!to)
                return luaL_error(L, "cannot bind '%s' to '%s': the system has no port '%s'",
                                  sim_port_name(from->p), name, name);
        }
    } else if ((to = lkb_memory_port(L, 2))) {
        lua_getiuservalue(L, 2, 1);
        if (!lua_rawequal(L, -1, sysidx))
            return luaL_error(L, "cannot bind '%s' to '%s': another system's memory",
                              sim_port_name(from->p), sim_port_name(to));
        lua_pop(L, 1);
    } else {
        struct lport *tp = lkb_testud(L, 2, &port_key);
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
        int k = lkb_cif_kind_of(type);
        if (k < 0) {
            lkb_push_names(L, lkb_cif_types);
            return luaL_error(L, "'%s' is bound to '%s' (%s): a Lua module calls the C "
                                 "interfaces %s, not %s",
                              sim_port_name(p->p), sim_port_name(peer), type,
                              lua_tostring(L, -1), type);
        }
        lua_getiuservalue(L, 1, 1);
        lua_getiuservalue(L, -1, 1);
        lkb_push_cif(L, k, sim_port_peer_iface(p->p, (int)i - 1), sim_port_name(peer),
                     lua_gettop(L));
        lua_replace(L, -3);
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
    struct lport *p = lkb_checkud(L, 1, &port_key, KB_PORT);
    lua_getiuservalue(L, 1, 1); /* the module */
    if (!p->p || !lkb_module_system_open(L, -1)) {
        lua_pushliteral(L, "port of a closed system");
        return 1;
    }
    lua_pushfstring(L, "port '%s' : %s", sim_port_name(p->p), sim_port_type(p->p));
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
void lkb_newclass(lua_State *L, const char *tname, const char *key,
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
    lkb_newclass(L, KB_MODULE, &mod_key, mod_methods, mod_tostring, NULL);
    lkb_newclass(L, KB_PORT, &port_key, port_methods, port_tostring, NULL);
    lkb_open_module_ifs(L);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &ports_key);
    lua_pushcfunction(L, l_module);
    lua_setfield(L, -2, "module");
    lua_pushcfunction(L, lkb_module_memory);
    lua_setfield(L, -2, "memory");
    lua_pushcfunction(L, lkb_module_unit);
    lua_setfield(L, -2, "unit");
}

