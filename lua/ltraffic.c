/* ltraffic.c — sys:inject{src =, dst =, t_ns =, bytes =}: open-loop
 * traffic on a system's fabric, timing only
 *
 * Message i leaves PE src[i] for PE dst[i] at t_ns[i] (ns, non-decreasing,
 * not before now) whatever the network's state (an open-loop source: a
 * message the first link cannot take yet queues at the source), routed
 * by kb_system_send (fabric.routing, adaptive included). The handle's
 * :results() gives, once the simulation has run, {n =, injected =,
 * delivered =, latency_ns = {...}}: message i's time from t_ns[i] to its
 * last byte's arrival, -1 while not delivered. The handle lives as long as
 * the simulation (it is anchored there). */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "lkb_internal.h"
#include "system.h"

#define KB_TRAFFIC "kbsim.traffic"

struct traffic {
    struct kb_system *sys;
    struct sim *sim;
    struct sim_event *ev;
    size_t n, next;
    uint64_t bytes;
    int failed;
    char err[256];
    int *src, *dst;    /* fabric nodes */
    sim_time *t, *at;  /* injection, arrival (SIM_FOREVER: not yet) */
};

static void arrived(void *ud, sim_time at) { *(sim_time *)ud = at; }

/* The source: sends every message due now, then sleeps to the next. */
static void fire(struct sim *s, void *arg)
{
    struct traffic *tr = arg;
    sim_time now = sim_now(s);
    while (tr->next < tr->n && tr->t[tr->next] <= now) {
        size_t i = tr->next++;
        if (kb_system_send(tr->sys, tr->src[i], tr->dst[i], tr->bytes, arrived, &tr->at[i]) <
            0) {
            sim_fail(s, "sys:inject: %s", kb_system_errmsg(tr->sys));
            return;
        }
    }
    if (tr->next < tr->n)
        sim_notify_at(tr->ev, tr->t[tr->next] - now);
}

/* The integer array at field `key` of the table at idx, n entries. */
static size_t field_len(lua_State *L, int idx, const char *key)
{
    if (lua_getfield(L, idx, key) != LUA_TTABLE)
        luaL_error(L, "sys:inject: '%s' must be a table", key);
    size_t n = (size_t)luaL_len(L, -1);
    lua_pop(L, 1);
    return n;
}

static int sys_inject(lua_State *L)
{
    struct kb_system *sys = lkb_checksystem(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    static const char *const known[] = {"src", "dst", "t_ns", "bytes", NULL};
    lkb_check_keys(L, 2, "sys:inject", known);
    size_t n = field_len(L, 2, "src");
    if (field_len(L, 2, "dst") != n || field_len(L, 2, "t_ns") != n)
        return luaL_error(L, "sys:inject: src, dst and t_ns must have the same length");
    lua_getfield(L, 2, "bytes");
    int isint;
    lua_Integer bytes = lua_tointegerx(L, -1, &isint);
    if (!isint || bytes < 0)
        return luaL_error(L, "sys:inject: 'bytes' must be a non-negative integer");
    lua_pop(L, 1);

    lua_getiuservalue(L, 1, 1); /* the simulation */
    int simidx = lua_gettop(L);
    struct sim *s = lkb_checksim(L, simidx);
    size_t sz = sizeof(struct traffic) + n * (2 * sizeof(int) + 2 * sizeof(sim_time));
    struct traffic *tr = lua_newuserdatauv(L, sz, 0);
    int tridx = lua_gettop(L);
    memset(tr, 0, sizeof *tr);
    tr->t = (sim_time *)(tr + 1);
    tr->at = tr->t + n;
    tr->src = (int *)(tr->at + n);
    tr->dst = tr->src + n;
    tr->sys = sys;
    tr->sim = s;
    tr->n = n;
    tr->bytes = (uint64_t)bytes;
    struct kb_system_counts c;
    kb_system_get_counts(sys, &c);
    sim_time now = sim_now(s), prev = now;
    static const char *const keys[] = {"src", "dst"};
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 2; k++) {
            lua_getfield(L, 2, keys[k]);
            lua_rawgeti(L, -1, (lua_Integer)i + 1);
            lua_Integer r = lua_tointegerx(L, -1, &isint);
            if (!isint || r < 0 || r >= c.pes)
                return luaL_error(L, "sys:inject: %s[%d] is not a PE rank (0..%d)", keys[k],
                                  (int)i + 1, c.pes - 1);
            (k ? tr->dst : tr->src)[i] = kb_system_pe(sys, (int)r)->node;
            lua_pop(L, 2);
        }
        lua_getfield(L, 2, "t_ns");
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        int isnum;
        lua_Number t = lua_tonumberx(L, -1, &isnum);
        lua_pop(L, 2);
        sim_time ps = isnum && t >= 0 && t < 1e12 ? now + (sim_time)(t * 1000.0 + 0.5) : 0;
        if (!isnum || !(t >= 0) || t >= 1e12 || ps < prev)
            return luaL_error(L, "sys:inject: t_ns[%d] must be a time in ns from now, "
                              "0 <= t < 1e12, not below t_ns[%d]", (int)i + 1, (int)i);
        tr->t[i] = prev = ps;
        tr->at[i] = SIM_FOREVER;
    }
    if (!(tr->ev = sim_event_new(s, "sys.inject")))
        return luaL_error(L, "sys:inject: %s", sim_errmsg(s));
    struct sim_proc *p = sim_method(s, "sys.inject", fire, tr, true);
    if (!p || sim_sensitive(p, tr->ev) < 0)
        return luaL_error(L, "sys:inject: %s", sim_errmsg(s));
    if (n)
        sim_notify_at(tr->ev, tr->t[0] - now);
    lkb_anchor(L, simidx, tridx);
    luaL_setmetatable(L, KB_TRAFFIC);
    return 1;
}

static int traffic_results(lua_State *L)
{
    struct traffic *tr = luaL_checkudata(L, 1, KB_TRAFFIC);
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, (lua_Integer)tr->n);
    lua_setfield(L, -2, "n");
    lua_pushinteger(L, (lua_Integer)tr->next);
    lua_setfield(L, -2, "injected");
    lua_createtable(L, (int)tr->n, 0);
    lua_Integer delivered = 0;
    for (size_t i = 0; i < tr->n; i++) {
        bool in = tr->at[i] != SIM_FOREVER; /* its arrival time is known */
        delivered += in;
        lua_pushnumber(L, in ? (lua_Number)(tr->at[i] - tr->t[i]) / 1000.0 : -1);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "latency_ns");
    lua_pushinteger(L, delivered);
    lua_setfield(L, -2, "delivered");
    return 1;
}

void lkb_open_traffic(lua_State *L)
{
    static const luaL_Reg methods[] = {{"results", traffic_results}, {NULL, NULL}};
    lkb_newmetatable(L, KB_TRAFFIC);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

int lkb_sys_inject(lua_State *L) { return sys_inject(L); }
