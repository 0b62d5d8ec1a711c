/* ltrace.c — --trace in the Lua binding: handing the trace to one
 * simulation, and sim:trace_track / sim:trace_span for Lua code (kernels)
 *
 * The rule of which simulation records is in ltrace.h; the recorder and
 * the file format are engine/trace.h.
 */
#include "ltrace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "lkb_internal.h"
#include "sim.h"
#include "trace.h"

#define KB_SIM "kbsim.sim"
/* Arguments of one span from Lua: plenty for a label, bounded for the stack. */
#define MAX_ARGS 16

static const char trace_state_key = 't'; /* registry: struct tstate */

/* Per Lua state (no globals: sweep points run in parallel states). */
struct tstate {
    lua_Integer sims; /* simulations made so far by kb.sim */
    bool taken;       /* the trace was handed out */
};

static struct tstate *getstate(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &trace_state_key);
    struct tstate *st = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (st == NULL) {
        st = lua_newuserdatauv(L, sizeof *st, 0);
        memset(st, 0, sizeof *st);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &trace_state_key);
    }
    return st;
}

/* kb.options.trace and trace_point; false if no trace is asked for. */
static bool wanted(lua_State *L, int module, const char **path,
                   lua_Integer *point)
{
    module = lua_absindex(L, module);
    bool want = false;
    if (lua_getfield(L, module, "options") == LUA_TTABLE) {
        if (lua_getfield(L, -1, "trace") == LUA_TSTRING) {
            *path = lua_tostring(L, -1);
            want = true;
        }
        lua_getfield(L, -2, "trace_point");
        int isint;
        lua_Integer n = lua_tointegerx(L, -1, &isint);
        *point = isint && n > 0 ? n : 1;
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
    /* *path stays valid: kb.options holds the string */
    return want;
}

void lkb_trace_sim_created(lua_State *L, int module, struct sim *s)
{
    struct tstate *st = getstate(L);
    st->sims++;
    const char *path = NULL;
    lua_Integer point = 1;
    if (st->taken || !wanted(L, module, &path, &point) || st->sims != point)
        return;
    st->taken = true;
    char err[512];
    if (sim_trace_open(s, path, err, sizeof err) < 0)
        luaL_error(L, "%s", err);
}

void lkb_trace_sim_closing(struct sim *s)
{
    char err[512];
    if (sim_trace_close(s, err, sizeof err) < 0)
        fprintf(stderr, "kbsim: %s\n", err);
}

bool lkb_trace_take(lua_State *L)
{
    struct tstate *st = getstate(L);
    bool had = !st->taken;
    st->taken = true;
    return had;
}

bool lkb_trace_taken(lua_State *L) { return getstate(L)->taken; }

/* ---- methods --------------------------------------------------------- */

/* ns (Lua's unit of time) to ps, rounded as every time from Lua is. */
static sim_time checkns(lua_State *L, int arg)
{
    lua_Number ns = luaL_checknumber(L, arg);
    if (!(ns >= 0 && ns <= 1.8e16))
        luaL_argerror(L, arg, "time must be a finite non-negative number of ns");
    return (sim_time)floor(ns * 1000.0 + 0.5);
}

/* sim:trace_track(name): makes the track of a hierarchical name now, so
 * that rows appear in the order a script wants (kernels first); a no-op
 * without a trace. */
static int l_trace_track(lua_State *L)
{
    struct sim *s = lkb_checksim(L, 1);
    const char *name = luaL_checkstring(L, 2);
    struct sim_trace *t = sim_tracer(s);
    if (t)
        sim_trace_track_path(t, name);
    return 0;
}

static int cmpkey(const void *a, const void *b)
{
    return strcmp(((const struct sim_trace_arg *)a)->key,
                  ((const struct sim_trace_arg *)b)->key);
}

/* sim:trace_span(track, cat, name, start_ns, end_ns [, args]): a span on
 * the track of a hierarchical name; args maps strings to strings or
 * non-negative integers and is written in key order (pairs order is not
 * the same from run to run). A no-op without a trace. */
static int l_trace_span(lua_State *L)
{
    struct sim *s = lkb_checksim(L, 1);
    const char *track = luaL_checkstring(L, 2);
    const char *cat = luaL_checkstring(L, 3);
    const char *name = luaL_checkstring(L, 4);
    sim_time t0 = checkns(L, 5), t1 = checkns(L, 6);
    if (t1 < t0)
        return luaL_argerror(L, 6, "the span ends before it starts");
    struct sim_trace_arg a[MAX_ARGS];
    int n = 0;
    if (!lua_isnoneornil(L, 7)) {
        luaL_checktype(L, 7, LUA_TTABLE);
        lua_pushnil(L);
        while (lua_next(L, 7) != 0) {
            if (lua_type(L, -2) != LUA_TSTRING)
                return luaL_error(L, "trace_span: argument keys must be strings");
            if (n == MAX_ARGS)
                return luaL_error(L, "trace_span: more than %d arguments", MAX_ARGS);
            a[n] = (struct sim_trace_arg){lua_tostring(L, -2), NULL, 0};
            int isint;
            lua_Integer v = lua_tointegerx(L, -1, &isint);
            if (lua_type(L, -1) == LUA_TSTRING)
                a[n].str = lua_tostring(L, -1);
            else if (isint && v >= 0 && lua_type(L, -1) == LUA_TNUMBER)
                a[n].num = (uint64_t)v;
            else
                return luaL_error(L, "trace_span: argument '%s' must be a string or "
                                  "a non-negative integer", a[n].key);
            n++;
            lua_pop(L, 1); /* the table keeps the strings alive */
        }
        qsort(a, (size_t)n, sizeof a[0], cmpkey);
    }
    struct sim_trace *t = sim_tracer(s);
    if (t)
        sim_trace_span(t, sim_trace_track_path(t, track), cat, name, t0, t1, a, n);
    return 0;
}

void lkb_open_trace(lua_State *L)
{
    static const luaL_Reg methods[] = {{"trace_track", l_trace_track},
                                       {"trace_span", l_trace_span},
                                       {NULL, NULL}};
    luaL_getmetatable(L, KB_SIM);
    lua_getfield(L, -1, "__index");
    luaL_setfuncs(L, methods, 0);
    lua_pop(L, 2);
}
