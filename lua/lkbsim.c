/* lkbsim.c — Lua binding of the kbsim kernel: the `kbsim` module
 *
 * A simulation is a full userdata owning a `struct sim`; its user value is
 * the anchor table that keeps alive what the kernel refers to by pointer
 * (the Lua threads of processes, values sitting in fifos). Anchoring there
 * rather than in the registry lets an abandoned simulation with blocked
 * processes be collected. Every other handle (process, event, fifo,
 * signal) points into its simulation and keeps the simulation userdata
 * alive through its first user value; once the simulation is closed every
 * handle fails with "attempt to use a closed simulation".
 *
 * A thread process runs a fresh Lua thread (lua_newthread) called with
 * lua_pcall on the kernel's C-stack coroutine. A blocking call (kb.wait,
 * fifo read/write) is a C function that switches the C stack away, so it
 * works under pcall, inside a table.sort comparator or a metamethod.
 *
 * Time in Lua is a float count of nanoseconds, rounded to whole
 * picoseconds on the way in.
 */
#include "lkb_internal.h"
#include "lsweep_mpi.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#include "lrender.h"
#include "lsweep.h"
#include "ltrace.h"
#include "sim.h"
#include "sim_uv.h"

#define KB_SIM "kbsim.sim"
#define KB_PROC "kbsim.proc"
#define KB_EVENT "kbsim.event"
#define KB_FIFO "kbsim.fifo"
#define KB_SIGNAL "kbsim.signal"

/* Lua code runs on the coroutine's C stack, and the interpreter nests up
 * to LUAI_MAXCCALLS (200) C levels there, 220 in an error handler, before
 * its own "C stack overflow" error. The stack holds all of them: the
 * worst level measured (string.gsub with a table's __index) takes 2.1 KiB,
 * 452 KiB at the limit, in the Release and the ASan build alike (Lua is
 * Debian's, not instrumented). Twice that, since only the pages touched
 * cost memory: see docs/decisions/0011-thread-process-stacks.md. */
#define KB_DEFAULT_STACK ((size_t)1024 * 1024)

/* Largest whole time accepted, in ns: the end of simulated time (sim.h),
 * a picosecond count that is also a Lua integer. */
#define KB_MAX_NS ((lua_Integer)(SIM_TIME_MAX / SIM_NS))

/* Registry keys (their addresses are unique). */
static const char kb_state_key = 's';
static const char kb_options_key = 'o';
static const char kb_scratch_key = 'x'; /* --shard: the scratch output folder */

/* Per-Lua-state bookkeeping (no globals: several states may run in
 * parallel threads). Runs nest strictly, since sim:run is a C call, so the
 * running simulations form a stack. */
struct kb_state {
    struct lsim *running; /* innermost running simulation */
    long failed_checks;
};

struct lsim {
    struct sim *s; /* NULL once closed */
    struct kb_state *st;
    struct lsim *outer; /* the simulation running when this one started */
    bool running;
    char *err; /* first Lua process failure: message and traceback */
    /* The Lua process that ran last. It is the running one only if its
     * kernel process is sim_current(); other processes (C components) may
     * carry user pointers of their own, so those are never looked at. */
    struct lproc *cur;
};

/* Stack layout of a process's Lua thread. The function and its arguments
 * sit above these for a thread process until its body starts. */
enum { KB_T_SIM = 1, KB_T_PROC, KB_T_MSGH, KB_T_FN };

/* Every handle starts with its simulation and its class name (the same
 * pointer as its metatable's name): checkself compares that pointer. */
struct hhead {
    struct lsim *owner;
    const char *tname;
};

struct lproc {
    struct lsim *owner;
    const char *tname;
    struct sim_proc *p;
    lua_State *T; /* the process's Lua thread; NULL once finished */
    int ref;      /* T's reference in the anchor table */
    bool thread;  /* thread process (else method) */
    void *tl_slots[2]; /* kbsim.tlcore's, while T runs (lkb_tl_slots) */
    char name[];
};

struct lev {
    struct lsim *owner;
    const char *tname;
    struct sim_event *e;
};

struct lfifo {
    struct lsim *owner;
    const char *tname;
    struct sim_fifo *f;
};

/* A signal stores a Lua number as (payload, is-integer). The kernel's
 * signal starts as zero bytes, so the bytes kept are the value XOR the
 * initial value: exact for every number, and zero means "initial". */
struct lsig {
    struct lsim *owner;
    const char *tname;
    struct sim_signal *g;
    uint64_t init[2];
    char name[];
};

/* ---- helpers --------------------------------------------------------- */

/* A short, deterministic picture of a value for an error message: a
 * string quoted and cut, a table's first fields sorted by key ("{code = 7,
 * why = \"bad n\"}"), nested tables as {...}; pushed on L. */
#define KB_BRIEF_STR 40
#define KB_BRIEF_FIELDS 6

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void push_brief(lua_State *L, int idx, bool nested)
{
    idx = lua_absindex(L, idx);
    switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        const char *cut = lua_pushlstring(L, s, n > KB_BRIEF_STR ? KB_BRIEF_STR : n);
        lua_pushfstring(L, "\"%s%s\"", cut, n > KB_BRIEF_STR ? "..." : "");
        lua_remove(L, -2);
        return;
    }
    case LUA_TNUMBER:
    case LUA_TBOOLEAN:
    case LUA_TNIL:
        luaL_tolstring(L, idx, NULL);
        return;
    case LUA_TTABLE:
        break;
    default:
        lua_pushstring(L, luaL_typename(L, idx));
        return;
    }
    if (nested) {
        lua_pushliteral(L, "{...}");
        return;
    }
    /* "k = v" of every field with a string or number key, sorted */
    if (!lua_checkstack(L, 12)) {
        lua_pushliteral(L, "{...}");
        return;
    }
    lua_newtable(L); /* keeps the "k = v" strings */
    int acc = lua_gettop(L);
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        int kt = lua_type(L, -2), top = lua_gettop(L);
        if ((kt == LUA_TSTRING || kt == LUA_TNUMBER) && n < 1000) {
            if (kt == LUA_TSTRING)
                lua_pushvalue(L, top - 1);
            else
                lua_pushfstring(L, "[%s]", luaL_tolstring(L, top - 1, NULL));
            const char *k = lua_tostring(L, -1);
            push_brief(L, top, true);
            lua_pushfstring(L, "%s = %s", k, lua_tostring(L, -1));
            lua_rawseti(L, acc, (lua_Integer)++n);
            lua_settop(L, top);
        }
        lua_pop(L, 1);
    }
    const char **v = n ? lua_newuserdatauv(L, n * sizeof *v, 0) : NULL;
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, acc, (lua_Integer)i + 1);
        v[i] = lua_tostring(L, -1); /* kept by acc */
        lua_pop(L, 1);
    }
    if (n)
        qsort(v, n, sizeof *v, cmp_cstr);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addchar(&b, '{');
    for (size_t i = 0; i < n && i < KB_BRIEF_FIELDS; i++) {
        if (i)
            luaL_addstring(&b, ", ");
        luaL_addstring(&b, v[i]);
    }
    if (n > KB_BRIEF_FIELDS)
        luaL_addstring(&b, ", ...");
    luaL_addchar(&b, '}');
    luaL_pushresult(&b);
    lua_replace(L, acc);
    lua_settop(L, acc);
}

/* "FILE:LINE: " of the first Lua function on the stack (pushed), or "". */
static const char *push_first_lua_place(lua_State *L)
{
    lua_Debug ar;
    for (int level = 1; lua_getstack(L, level, &ar); level++) {
        lua_getinfo(L, "Sl", &ar);
        if (ar.currentline > 0)
            return lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
    }
    return "";
}

int lkb_traceback(lua_State *L)
{
    if (lua_islightuserdata(L, 1)) /* a marker, such as kb.sweep's end of run */
        return 1;
    const char *msg = lua_type(L, 1) == LUA_TSTRING ? lua_tostring(L, 1) : NULL;
    /* Lua's own message for coroutine.yield outside a coroutine (the
     * script, a sweep point) or in a process or kernel has no place */
    if (msg && strncmp(msg, "attempt to yield ", 17) == 0) {
        msg = lua_pushfstring(L, "%s%s (the script, a process, a kernel or a sweep point is not "
                              "a coroutine to yield from: they wait with kb.wait and kb/tl "
                              "calls)",
                              push_first_lua_place(L), msg);
    }
    if (msg == NULL) {
        /* error(value) adds no place to a value that is not a string:
         * the first Lua function on the stack is where it was raised */
        const char *where = push_first_lua_place(L);
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) {
            msg = lua_pushfstring(L, "%s%s", where, lua_tostring(L, -1));
        } else {
            push_brief(L, 1, false);
            msg = lua_pushfstring(L, "%serror object is a %s value%s%s", where,
                                  luaL_typename(L, 1), lua_type(L, 1) == LUA_TNIL ? "" : ": ",
                                  lua_type(L, 1) == LUA_TNIL ? "" : lua_tostring(L, -1));
        }
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int lkb_pcall(lua_State *L, int nargs, int nresults)
{
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, lkb_traceback);
    lua_insert(L, base);
    int rc = lua_pcall(L, nargs, nresults, base);
    lua_remove(L, base);
    return rc;
}

/* The module state hangs off the registry; a pointer to it is also kept
 * in the main thread's extra space, which every new Lua thread copies, so
 * the hot path (kb.wait, fifo calls in processes) finds it without a
 * registry lookup. */
static struct kb_state *getstate(lua_State *L)
{
    struct kb_state **fast = lua_getextraspace(L);
    if (*fast)
        return *fast;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &kb_state_key);
    struct kb_state *st = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (st == NULL) {
        st = lua_newuserdatauv(L, sizeof *st, 0);
        memset(st, 0, sizeof *st);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &kb_state_key);
    }
    *fast = st;
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    *(struct kb_state **)lua_getextraspace(lua_tothread(L, -1)) = st;
    lua_pop(L, 1);
    return st;
}

long lkb_failed_checks(lua_State *L)
{
    return getstate(L)->failed_checks;
}

static sim_time checktime(lua_State *L, int arg)
{
    /* a whole number of ns, the common case, exactly and without the
     * conversion to a float (luaL_checknumber of an integer is most of a
     * kb.wait's binding) */
    int whole;
    lua_Integer i = lua_tointegerx(L, arg, &whole);
    if (whole && i >= 0 && i <= KB_MAX_NS)
        return (sim_time)i * 1000;
    lua_Number ns = luaL_checknumber(L, arg);
    if (!(ns >= 0 && ns < HUGE_VAL))
        luaL_argerror(L, arg, "time must be a finite non-negative number of ns");
    lua_Number ps = floor(ns * 1000.0 + 0.5);
    /* SIM_TIME_MAX + 1 = 2^63 is exact as a float, SIM_TIME_MAX is not */
    if (!(ps < (lua_Number)SIM_TIME_MAX + 1))
        luaL_argerror(L, arg, "time past the end of simulated time "
                              "(9223372036854775.807 ns)");
    return (sim_time)ps;
}

static lua_Number ns_of(sim_time t)
{
    return (lua_Number)t / 1000.0;
}

static struct sim *live(lua_State *L, struct lsim *o)
{
    if (o->s == NULL)
        luaL_error(L, "attempt to use a closed simulation");
    return o->s;
}

/* A class's noun in messages ("an event") and the variable of its
 * examples (ev:notify(...)). */
static void classwords(const char *tname, const char **noun, const char **var)
{
    static const char *const words[][3] = {
        {KB_SIM, "a simulation", "sim"}, {KB_PROC, "a process", "p"},
        {KB_EVENT, "an event", "ev"},    {KB_FIFO, "a fifo", "f"},
        {KB_SIGNAL, "a signal", "sig"}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcmp(tname, words[i][0]) == 0) {
            *noun = words[i][1];
            *var = words[i][2];
            return;
        }
    *noun = tname;
    *var = "x";
}

/* Raises the error of a method called on something not of its class
 * (ev.notify(5) with a dot, a nil or another object before the colon):
 * the usual "bad argument" message with the call form to use. */
static int badself(lua_State *L, const char *tname)
{
    lua_Debug ar;
    const char *fn = "?";
    if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name)
        fn = ar.name;
    const char *noun, *var;
    classwords(tname, &noun, &var);
    const char *got = luaL_typename(L, 1);
    if (luaL_getmetafield(L, 1, "__name") == LUA_TSTRING)
        got = lua_tostring(L, -1);
    else if (lua_isnone(L, 1))
        got = "no value";
    return luaL_error(L, "bad argument #1 to '%s' (%s expected, got %s): '%s' is a "
                         "method of %s, called with a colon: %s:%s(...)",
                      fn, tname, got, fn, noun, var, fn);
}

/* Argument 1 of a method of the class `tname` (raises badself's error). */
static void *checkselfud(lua_State *L, const char *tname)
{
    void *h = luaL_testudata(L, 1, tname);
    if (h == NULL)
        badself(L, tname);
    return h;
}

/* The simulation of a sim method (argument 1). */
static struct lsim *checksim(lua_State *L, int i)
{
    struct lsim *o = i == 1 ? checkselfud(L, KB_SIM) : luaL_checkudata(L, i, KB_SIM);
    live(L, o);
    return o;
}

/* Pushes a new handle of `size` bytes whose first user value is the
 * simulation at index `simidx`; its first field is set to `o`. */
_Static_assert(offsetof(struct lproc, tname) == offsetof(struct hhead, tname) &&
                   offsetof(struct lev, tname) == offsetof(struct hhead, tname) &&
                   offsetof(struct lfifo, tname) ==
                       offsetof(struct hhead, tname) &&
                   offsetof(struct lsig, tname) == offsetof(struct hhead, tname),
               "every handle starts with struct hhead's fields");

static void *newhandle(lua_State *L, size_t size, int nuv, const char *tname,
                       int simidx, struct lsim *o)
{
    simidx = lua_absindex(L, simidx);
    struct hhead *h = lua_newuserdatauv(L, size, nuv);
    memset(h, 0, size);
    h->owner = o;
    h->tname = tname;
    luaL_setmetatable(L, tname);
    lua_pushvalue(L, simidx);
    lua_setiuservalue(L, -2, 1);
    return h;
}

/* Checks a handle and that its simulation is open. */
static void *checkhandle(lua_State *L, int i, const char *tname)
{
    void *h = luaL_checkudata(L, i, tname);
    live(L, *(struct lsim **)h);
    return h;
}

/* Argument 1 of a method: a full userdata whose header names the class
 * (the pointer stored by newhandle). Cheaper than luaL_checkudata's
 * metatable look-up by name, which runs on every fifo access; anything
 * else falls to luaL_checkudata, which raises the usual error. */
static void *checkself(lua_State *L, const char *tname)
{
    struct hhead *h = lua_touserdata(L, 1);
    if (h != NULL && lua_rawlen(L, 1) >= sizeof *h && h->tname == tname) {
        live(L, h->owner);
        return h;
    }
    h = checkselfud(L, tname);
    live(L, h->owner);
    return h;
}

/* The innermost running simulation, or an error naming `what`. */
static struct lsim *running(lua_State *L, const char *what)
{
    struct lsim *o = getstate(L)->running;
    if (o == NULL)
        luaL_error(L, "%s called outside a running simulation", what);
    return o;
}

/* The running process if it is a Lua process of the kind asked for. */
static struct lproc *current(lua_State *L, bool thread, const char *what)
{
    struct lsim *o = getstate(L)->running;
    struct sim_proc *p = o ? sim_current(o->s) : NULL;
    struct lproc *lp = p ? o->cur : NULL;
    if (lp == NULL || lp->p != p || lp->thread != thread)
        luaL_error(L, "%s called outside a %s process", what,
                   thread ? "thread" : "method");
    return lp;
}

static struct lev *checkevent_of(lua_State *L, int i, struct lsim *o)
{
    struct lev *ev = checkhandle(L, i, KB_EVENT);
    if (ev->owner != o)
        luaL_argerror(L, i, "event belongs to another simulation");
    return ev;
}

/* The anchor table of the simulation at index `simidx` on top of L. */
static void pushanchors(lua_State *L, int simidx)
{
    lua_getiuservalue(L, simidx, 1);
}

/* ---- kbsim.proc ------------------------------------------------------ */

static void proc_failed(struct lproc *lp, lua_State *T)
{
    struct lsim *o = lp->owner;
    const char *msg = lua_tostring(T, -1);
    if (msg == NULL)
        msg = "(error object is not a string)";
    if (o->err == NULL) {
        size_t n = strlen(lp->name) + strlen(msg) + 32;
        o->err = malloc(n);
        if (o->err)
            snprintf(o->err, n, "process '%s' failed: %s", lp->name, msg);
    }
    sim_fail(o->s, "process '%s' failed: %s", lp->name, msg);
}

static void thread_body(struct sim *s, void *arg)
{
    struct lproc *lp = arg;
    lua_State *T = lp->T;
    int nargs = lua_gettop(T) - KB_T_FN;
    lp->owner->cur = lp;
    if (lua_pcall(T, nargs, 0, KB_T_MSGH) != LUA_OK)
        proc_failed(lp, T);
    /* Let go of the Lua thread; nothing allocates after the unref, so it
     * cannot be collected while still in use here. */
    lua_settop(T, KB_T_SIM);
    pushanchors(T, KB_T_SIM);
    int ref = lp->ref;
    lp->ref = LUA_NOREF;
    lp->T = NULL;
    lp->owner->cur = NULL;
    luaL_unref(T, -1, ref);
    lua_settop(T, 0);
}

static void method_body(struct sim *s, void *arg)
{
    struct lproc *lp = arg;
    lua_State *T = lp->T;
    lua_pushvalue(T, KB_T_FN);
    lp->owner->cur = lp;
    if (lua_pcall(T, 0, 0, KB_T_MSGH) != LUA_OK)
        proc_failed(lp, T);
    lp->owner->cur = NULL;
    lua_settop(T, KB_T_FN);
}

/* Creates the process handle and its Lua thread with the standard stack
 * prefix, anchors the thread and leaves the handle on L's stack. */
static struct lproc *newproc(lua_State *L, struct lsim *o, const char *name,
                             bool thread, int fnidx, int nargs)
{
    size_t len = strlen(name);
    struct lproc *lp = newhandle(L, sizeof *lp + len + 1, 1, KB_PROC, 1, o);
    memcpy(lp->name, name, len + 1);
    lp->thread = thread;
    lp->ref = LUA_NOREF;
    lua_State *T = lua_newthread(L);
    luaL_checkstack(T, KB_T_FN + nargs + LUA_MINSTACK, "too many arguments");
    lua_pushvalue(L, 1);
    lua_xmove(L, T, 1);
    lua_pushvalue(L, -2);
    lua_xmove(L, T, 1);
    lua_pushcfunction(T, lkb_traceback);
    for (int i = 0; i <= nargs; i++) {
        lua_pushvalue(L, fnidx + i);
        lua_xmove(L, T, 1);
    }
    pushanchors(L, 1);
    lua_insert(L, -2);
    lp->ref = luaL_ref(L, -2);
    lua_pop(L, 1);
    lp->T = T;
    return lp;
}

static void dropproc(lua_State *L, struct lproc *lp)
{
    pushanchors(L, 1);
    luaL_unref(L, -1, lp->ref);
    lua_pop(L, 1);
    lp->ref = LUA_NOREF;
    lp->T = NULL;
}

/* sim:spawn(name, fn, ...) -> proc */
static int l_spawn(lua_State *L)
{
    struct lsim *o = checksim(L, 1);
    const char *name = luaL_checkstring(L, 2);
    luaL_checktype(L, 3, LUA_TFUNCTION);
    int nargs = lua_gettop(L) - 3;
    struct lproc *lp = newproc(L, o, name, true, 3, nargs);
    lp->p = sim_thread(o->s, name, thread_body, lp, 0);
    if (lp->p == NULL) {
        dropproc(L, lp);
        return luaL_error(L, "cannot spawn '%s': %s", name, sim_errmsg(o->s));
    }
    return 1;
}

/* sim:method(name, fn, {sensitive={ev,...}, dont_initialize=bool}) -> proc */
static int l_method(lua_State *L)
{
    struct lsim *o = checksim(L, 1);
    const char *name = luaL_checkstring(L, 2);
    luaL_checktype(L, 3, LUA_TFUNCTION);
    bool dont_init = false;
    int nsens = 0;
    if (!lua_isnoneornil(L, 4)) {
        luaL_checktype(L, 4, LUA_TTABLE);
        lua_getfield(L, 4, "dont_initialize");
        dont_init = lua_toboolean(L, -1);
        lua_pop(L, 1);
        lua_getfield(L, 4, "sensitive");
        if (!lua_isnil(L, -1)) {
            if (!lua_istable(L, -1))
                return luaL_argerror(L, 4, "'sensitive' must be a table of events");
            nsens = (int)luaL_len(L, -1);
            for (int i = 1; i <= nsens; i++) {
                lua_geti(L, -1, i);
                struct lev *ev = luaL_testudata(L, -1, KB_EVENT);
                if (ev == NULL || ev->owner != o)
                    return luaL_error(L, "bad 'sensitive' entry %d (event of this "
                                     "simulation expected)", i);
                lua_pop(L, 1);
            }
        }
        lua_pop(L, 1);
    }
    lua_settop(L, 4);
    struct lproc *lp = newproc(L, o, name, false, 3, 0);
    lp->p = sim_method(o->s, name, method_body, lp, dont_init);
    if (lp->p == NULL) {
        dropproc(L, lp);
        return luaL_error(L, "cannot create method '%s': %s", name, sim_errmsg(o->s));
    }
    if (nsens > 0) {
        lua_getfield(L, 4, "sensitive");
        for (int i = 1; i <= nsens; i++) {
            lua_geti(L, -1, i);
            struct lev *ev = lua_touserdata(L, -1);
            if (sim_sensitive(lp->p, ev->e) < 0)
                return luaL_error(L, "cannot make '%s' sensitive: %s", name,
                                  sim_errmsg(o->s));
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    return 1;
}

static int proc_name(lua_State *L)
{
    struct lproc *lp = checkself(L, KB_PROC);
    lua_pushstring(L, lp->name);
    return 1;
}

static int proc_done(lua_State *L)
{
    struct lproc *lp = checkself(L, KB_PROC);
    lua_pushboolean(L, sim_proc_terminated(lp->p));
    return 1;
}

static int proc_tostring(lua_State *L)
{
    struct lproc *lp = luaL_checkudata(L, 1, KB_PROC);
    lua_pushfstring(L, "%s process '%s'", lp->thread ? "thread" : "method",
                    lp->name);
    return 1;
}

/* ---- kbsim.event ----------------------------------------------------- */

/* sim:event(name) -> ev */
static int l_event(lua_State *L)
{
    struct lsim *o = checksim(L, 1);
    const char *name = luaL_checkstring(L, 2);
    struct lev *ev = newhandle(L, sizeof *ev, 1, KB_EVENT, 1, o);
    ev->e = sim_event_new(o->s, name);
    if (ev->e == NULL)
        return luaL_error(L, "cannot create event '%s': %s", name, sim_errmsg(o->s));
    return 1;
}

/* ev:notify() immediate, ev:notify(0) delta, ev:notify(ns) timed */
static int ev_notify(lua_State *L)
{
    struct lev *ev = checkself(L, KB_EVENT);
    if (lua_isnoneornil(L, 2))
        sim_notify(ev->e);
    else if (sim_notify_at(ev->e, checktime(L, 2)) < 0)
        return luaL_error(L, "ev:notify: %s", sim_errmsg(ev->owner->s));
    return 0;
}

static int ev_cancel(lua_State *L)
{
    struct lev *ev = checkself(L, KB_EVENT);
    sim_cancel(ev->e);
    return 0;
}

static int ev_name(lua_State *L)
{
    struct lev *ev = checkself(L, KB_EVENT);
    lua_pushstring(L, sim_event_name(ev->e));
    return 1;
}

static int ev_tostring(lua_State *L)
{
    struct lev *ev = luaL_checkudata(L, 1, KB_EVENT);
    if (ev->owner->s == NULL)
        lua_pushliteral(L, "event (closed)");
    else
        lua_pushfstring(L, "event '%s'", sim_event_name(ev->e));
    return 1;
}

/* ---- kbsim.fifo ------------------------------------------------------ */

/* A fifo element: numbers, booleans and nil travel by value; anything else
 * is anchored in the simulation's table and travels as a reference. */
struct fifo_val {
    int type; /* LUA_TNIL, LUA_TBOOLEAN, LUA_TNUMBER (int or float), or a ref */
    bool is_int;
    union {
        lua_Integer i;
        lua_Number n;
        int ref;
    } u;
};

/* sim:fifo(name, capacity) -> fifo of any Lua values. */
static int l_fifo(lua_State *L)
{
    struct lsim *o = checksim(L, 1);
    const char *name = luaL_checkstring(L, 2);
    lua_Integer cap = luaL_checkinteger(L, 3);
    luaL_argcheck(L, cap > 0, 3, "capacity must be positive");
    struct lfifo *f = newhandle(L, sizeof *f, 1, KB_FIFO, 1, o);
    f->f = sim_fifo_new(o->s, name, sizeof(struct fifo_val), (size_t)cap);
    if (f->f == NULL)
        return luaL_error(L, "cannot create fifo '%s': %s", name, sim_errmsg(o->s));
    return 1;
}

/* Blocking operations switch the kernel's coroutine, so they must come
 * from a thread process of the fifo's own, innermost running simulation. */
static struct lproc *checkblocking(lua_State *L, struct lfifo *f,
                                   const char *what)
{
    struct lproc *lp = current(L, true, what);
    if (lp->owner != f->owner)
        luaL_error(L, "%s: fifo '%s' belongs to another simulation", what,
                   sim_fifo_name(f->f));
    return lp;
}

/* Pushes the value of v (taking its anchor, if any) on top of L. */
static void takeval(lua_State *L, const struct fifo_val *v)
{
    switch (v->type) {
    case LUA_TNIL:
        lua_pushnil(L);
        return;
    case LUA_TBOOLEAN:
        lua_pushboolean(L, (int)v->u.i);
        return;
    case LUA_TNUMBER:
        if (v->is_int)
            lua_pushinteger(L, v->u.i);
        else
            lua_pushnumber(L, v->u.n);
        return;
    }
    lua_getiuservalue(L, 1, 1);
    lua_getiuservalue(L, -1, 1);
    lua_rawgeti(L, -1, v->u.ref);
    luaL_unref(L, -2, v->u.ref);
    lua_replace(L, -3);
    lua_pop(L, 1);
}

static struct fifo_val makeval(lua_State *L, int validx)
{
    struct fifo_val v = {.type = lua_type(L, validx)};
    switch (v.type) {
    case LUA_TNIL:
        return v;
    case LUA_TBOOLEAN:
        v.u.i = lua_toboolean(L, validx);
        return v;
    case LUA_TNUMBER:
        v.is_int = lua_isinteger(L, validx);
        if (v.is_int)
            v.u.i = lua_tointeger(L, validx);
        else
            v.u.n = lua_tonumber(L, validx);
        return v;
    }
    v.type = LUA_TTABLE; /* any anchored value */
    lua_getiuservalue(L, 1, 1);
    lua_getiuservalue(L, -1, 1);
    lua_pushvalue(L, validx);
    v.u.ref = luaL_ref(L, -2);
    lua_pop(L, 2);
    return v;
}

static void dropval(lua_State *L, const struct fifo_val *v)
{
    if (v->type != LUA_TTABLE)
        return;
    lua_getiuservalue(L, 1, 1);
    lua_getiuservalue(L, -1, 1);
    luaL_unref(L, -1, v->u.ref);
    lua_pop(L, 2);
}

static int fifo_read(lua_State *L)
{
    struct lfifo *f = checkself(L, KB_FIFO);
    struct lproc *lp = checkblocking(L, f, "fifo:read");
    struct fifo_val v;
    int rc = sim_fifo_read(f->f, &v);
    lp->owner->cur = lp;
    if (rc < 0)
        return luaL_error(L, "fifo '%s': %s", sim_fifo_name(f->f),
                          sim_errmsg(f->owner->s));
    takeval(L, &v);
    return 1;
}

static int fifo_write(lua_State *L)
{
    struct lfifo *f = checkself(L, KB_FIFO);
    luaL_checkany(L, 2);
    struct lproc *lp = checkblocking(L, f, "fifo:write");
    struct fifo_val v = makeval(L, 2);
    int rc = sim_fifo_write(f->f, &v);
    lp->owner->cur = lp;
    if (rc < 0) {
        dropval(L, &v);
        return luaL_error(L, "fifo '%s': %s", sim_fifo_name(f->f),
                          sim_errmsg(f->owner->s));
    }
    return 0;
}

static int fifo_nb_read(lua_State *L)
{
    struct lfifo *f = checkself(L, KB_FIFO);
    struct fifo_val v;
    if (!sim_fifo_nb_read(f->f, &v)) {
        lua_pushboolean(L, 0);
        return 1;
    }
    lua_pushboolean(L, 1);
    takeval(L, &v);
    return 2;
}

static int fifo_nb_write(lua_State *L)
{
    struct lfifo *f = checkself(L, KB_FIFO);
    luaL_checkany(L, 2);
    struct fifo_val v = makeval(L, 2);
    bool ok = sim_fifo_nb_write(f->f, &v);
    if (!ok)
        dropval(L, &v);
    lua_pushboolean(L, ok);
    return 1;
}

static int fifo_available(lua_State *L)
{
    struct lfifo *f = checkself(L, KB_FIFO);
    lua_pushinteger(L, (lua_Integer)sim_fifo_num_available(f->f));
    return 1;
}

static int fifo_free(lua_State *L)
{
    struct lfifo *f = checkself(L, KB_FIFO);
    lua_pushinteger(L, (lua_Integer)sim_fifo_num_free(f->f));
    return 1;
}

static int fifo_name(lua_State *L)
{
    struct lfifo *f = checkself(L, KB_FIFO);
    lua_pushstring(L, sim_fifo_name(f->f));
    return 1;
}

static int fifo_tostring(lua_State *L)
{
    struct lfifo *f = luaL_checkudata(L, 1, KB_FIFO);
    if (f->owner->s == NULL)
        lua_pushliteral(L, "fifo (closed)");
    else
        lua_pushfstring(L, "fifo '%s'", sim_fifo_name(f->f));
    return 1;
}

/* ---- kbsim.signal ---------------------------------------------------- */

static void encode(lua_State *L, int i, uint64_t out[2])
{
    if (lua_isinteger(L, i)) {
        out[0] = (uint64_t)lua_tointeger(L, i);
        out[1] = 1;
    } else {
        lua_Number v = luaL_checknumber(L, i);
        memcpy(&out[0], &v, sizeof v);
        out[1] = 0;
    }
}

/* sim:signal(name, initial) -> sig */
static int l_signal(lua_State *L)
{
    struct lsim *o = checksim(L, 1);
    const char *name = luaL_checkstring(L, 2);
    if (lua_isnoneornil(L, 3)) {
        lua_settop(L, 2);
        lua_pushinteger(L, 0);
    }
    size_t len = strlen(name);
    struct lsig *g = newhandle(L, sizeof *g + len + 1, 2, KB_SIGNAL, 1, o);
    memcpy(g->name, name, len + 1);
    encode(L, 3, g->init);
    g->g = sim_signal_new(o->s, name, sizeof g->init);
    if (g->g == NULL)
        return luaL_error(L, "cannot create signal '%s': %s", name, sim_errmsg(o->s));
    /* One handle for the changed event, so that sig:changed() is stable. */
    struct lev *ev = newhandle(L, sizeof *ev, 1, KB_EVENT, 1, o);
    ev->e = sim_signal_changed_event(g->g);
    lua_setiuservalue(L, -2, 2);
    return 1;
}

static int sig_read(lua_State *L)
{
    struct lsig *g = checkself(L, KB_SIGNAL);
    uint64_t v[2];
    sim_signal_read(g->g, v);
    v[0] ^= g->init[0];
    v[1] ^= g->init[1];
    if (v[1]) {
        lua_pushinteger(L, (lua_Integer)v[0]);
    } else {
        lua_Number n;
        memcpy(&n, &v[0], sizeof n);
        lua_pushnumber(L, n);
    }
    return 1;
}

static int sig_write(lua_State *L)
{
    struct lsig *g = checkself(L, KB_SIGNAL);
    uint64_t v[2];
    encode(L, 2, v);
    v[0] ^= g->init[0];
    v[1] ^= g->init[1];
    sim_signal_write(g->g, v);
    return 0;
}

static int sig_changed(lua_State *L)
{
    checkself(L, KB_SIGNAL);
    lua_getiuservalue(L, 1, 2);
    return 1;
}

static int sig_tostring(lua_State *L)
{
    struct lsig *g = luaL_checkudata(L, 1, KB_SIGNAL);
    lua_pushfstring(L, "signal '%s'", g->name);
    return 1;
}

/* ---- kbsim.sim ------------------------------------------------------- */

/* A function of the module (upvalue 1) called with a colon, kb:wait(ev):
 * its argument 1 is the module. Without this kb:check(false) passed
 * silently and kb:wait(ev) said "calling 'wait' on bad self". */
void lkb_nocolon(lua_State *L, const char *fn)
{
    if (lua_rawequal(L, 1, lua_upvalueindex(1)))
        luaL_error(L, "%s is a function, not a method: call it with a dot, "
                      "%s(...), not with a colon", fn, fn);
}

/* kb.sim{stack_size=bytes, guard=true, trace=true} -> sim */
static int l_sim(lua_State *L)
{
    lkb_nocolon(L, "kb.sim");
    struct sim_config cfg = {.stack_size = KB_DEFAULT_STACK};
    bool traceable = true;
    if (!lua_isnoneornil(L, 1)) {
        luaL_checktype(L, 1, LUA_TTABLE);
        static const char *const known[] = {"stack_size", "guard", "trace", NULL};
        lkb_check_keys(L, 1, "kb.sim", known);
        if (lua_getfield(L, 1, "stack_size") != LUA_TNIL) {
            int isint;
            lua_Integer n = lua_tointegerx(L, -1, &isint);
            if (!isint || n <= 0)
                return luaL_error(L, "bad 'stack_size' (positive integer expected)");
            cfg.stack_size = (size_t)n;
        }
        if (lua_getfield(L, 1, "guard") != LUA_TNIL)
            cfg.no_stack_guard = !lua_toboolean(L, -1);
        /* trace=false: a helper (path queries, say) that --trace passes by */
        if (lua_getfield(L, 1, "trace") != LUA_TNIL)
            traceable = lua_toboolean(L, -1);
        lua_pop(L, 3);
    }
    struct lsim *o = lua_newuserdatauv(L, sizeof *o, 1);
    memset(o, 0, sizeof *o);
    o->st = getstate(L);
    luaL_setmetatable(L, KB_SIM);
    lua_newtable(L);
    lua_setiuservalue(L, -2, 1);
    o->s = sim_new(&cfg);
    if (o->s == NULL)
        return luaL_error(L, "cannot create simulation (out of memory)");
    sim_set_userdata(o->s, o);
    if (traceable)
        lkb_trace_sim_created(L, lua_upvalueindex(1), o->s);
    return 1;
}

static void closesim(struct lsim *o)
{
    lkb_trace_sim_closing(o->s);
    sim_free(o->s);
    o->s = NULL;
    free(o->err);
    o->err = NULL;
}

static int sim_close_l(lua_State *L)
{
    struct lsim *o = luaL_checkudata(L, 1, KB_SIM);
    if (o->s == NULL)
        return 0;
    if (o->running)
        return luaL_error(L, "attempt to close a running simulation");
    lkb_describe_sim_closing(L, 1);
    closesim(o);
    /* Release the anchored threads and fifo values now, not at the next
     * collection of the handle. */
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 1);
    return 0;
}

static int sim_gc(lua_State *L)
{
    struct lsim *o = luaL_checkudata(L, 1, KB_SIM);
    if (o->s != NULL && !o->running)
        closesim(o);
    return 0;
}

static int sim_tostring(lua_State *L)
{
    struct lsim *o = luaL_checkudata(L, 1, KB_SIM);
    if (o->s == NULL)
        lua_pushliteral(L, "simulation (closed)");
    else
        lua_pushfstring(L, "simulation (%p) at %f ns", (void *)o,
                        ns_of(sim_now(o->s)));
    return 1;
}

/* Runs o as sim:run does: to `until` in one call (loop NULL), or in
 * batches of `batch` activations from sim_run_uv on `loop`, which serves
 * the loop's other handles between batches. Pushes "done" | "until" |
 * "stopped" or raises the failing process's message. */
static int run_sim(lua_State *L, struct lsim *o, sim_time until, uv_loop_t *loop,
                   uint64_t batch)
{
    if (o->running)
        return luaL_error(L, "simulation is already running");
    struct kb_state *st = o->st;
    o->outer = st->running;
    st->running = o;
    o->running = true;
    int rc = loop ? sim_run_uv(o->s, loop, until, batch, 0) : sim_run(o->s, until);
    st->running = o->outer;
    o->running = false;
    o->outer = NULL;
    switch (rc) {
    case SIM_DONE: lua_pushliteral(L, "done"); return 1;
    case SIM_UNTIL: lua_pushliteral(L, "until"); return 1;
    case SIM_STOPPED: lua_pushliteral(L, "stopped"); return 1;
    default: break;
    }
    if (rc == SIM_EPROC && o->err != NULL) {
        /* The process's own message already names its file and line. */
        lua_pushstring(L, o->err);
        free(o->err);
        o->err = NULL;
        return lua_error(L);
    }
    return luaL_error(L, "%s", sim_errmsg(o->s));
}

/* sim:run([until_ns]) -> "done" | "until" | "stopped" */
static int sim_run_l(lua_State *L)
{
    struct lsim *o = checksim(L, 1);
    sim_time until = lua_isnoneornil(L, 2) ? SIM_FOREVER : checktime(L, 2);
    return run_sim(L, o, until, NULL, 0);
}

int lkb_sim_run_uv(lua_State *L, int i, uv_loop_t *loop, uint64_t batch, uint64_t until)
{
    return run_sim(L, checksim(L, i), until, loop, batch);
}

static int sim_stop_l(lua_State *L)
{
    struct lsim *o = checksim(L, 1);
    if (!o->running)
        return luaL_error(L, "sim:stop called outside sim:run");
    sim_stop(o->s);
    return 0;
}

static int sim_now_l(lua_State *L)
{
    struct lsim *o = checksim(L, 1);
    lua_pushnumber(L, ns_of(sim_now(o->s)));
    return 1;
}

static int sim_now_ps(lua_State *L)
{
    struct lsim *o = checksim(L, 1);
    lua_pushinteger(L, (lua_Integer)sim_now(o->s));
    return 1;
}

static void setcount(lua_State *L, const char *k, uint64_t v)
{
    lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, k);
}

static int sim_stats_l(lua_State *L)
{
    struct lsim *o = checksim(L, 1);
    struct sim_stats t;
    sim_get_stats(o->s, &t);
    lua_createtable(L, 0, 7);
    setcount(L, "activations", t.activations);
    setcount(L, "timed_events", t.timed_events);
    setcount(L, "deltas", t.deltas);
    setcount(L, "switches", t.switches);
    setcount(L, "notifications", t.notifications);
    setcount(L, "threads_alive", t.threads_alive);
    setcount(L, "stack_bytes", t.stack_bytes);
    return 1;
}

/* ---- module functions ------------------------------------------------ */

/* kb.wait(ns) | kb.wait(ev) */
static int l_wait(lua_State *L)
{
    lkb_nocolon(L, "kb.wait");
    struct lproc *lp = current(L, true, "kb.wait");
    struct sim *s = lp->owner->s;
    int rc;
    if (lua_type(L, 1) == LUA_TNUMBER) {
        rc = sim_wait(s, checktime(L, 1));
    } else if (luaL_testudata(L, 1, KB_EVENT)) {
        rc = sim_wait_event(s, checkevent_of(L, 1, lp->owner)->e);
    } else {
        return luaL_typeerror(L, 1, "number or event");
    }
    lp->owner->cur = lp;
    if (rc < 0)
        return luaL_error(L, "kb.wait: %s", sim_errmsg(s));
    return 0;
}

/* kb.wait_any({ev, ...}, timeout_ns) -> index or nil */
static int l_wait_any(lua_State *L)
{
    lkb_nocolon(L, "kb.wait_any");
    struct lproc *lp = current(L, true, "kb.wait_any");
    struct sim *s = lp->owner->s;
    luaL_checktype(L, 1, LUA_TTABLE);
    sim_time timeout = lua_isnoneornil(L, 2) ? SIM_FOREVER : checktime(L, 2);
    lua_Integer n = luaL_len(L, 1);
    luaL_argcheck(L, n > 0 && n <= INT32_MAX, 1, "non-empty list of events expected");
    /* A userdata, not malloc: it is freed even if a check below raises. */
    struct sim_event **evs = lua_newuserdatauv(L, (size_t)n * sizeof *evs, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 1, i);
        struct lev *ev = luaL_testudata(L, -1, KB_EVENT);
        if (ev == NULL || ev->owner != lp->owner)
            return luaL_error(L, "bad event %d in kb.wait_any (event of this "
                                 "simulation expected)", (int)i);
        evs[i - 1] = ev->e;
        lua_pop(L, 1);
    }
    int rc = sim_wait_any(s, evs, (int)n, timeout);
    lp->owner->cur = lp;
    if (rc < -1)
        return luaL_error(L, "kb.wait_any: %s", sim_errmsg(s));
    if (rc == -1)
        lua_pushnil(L);
    else
        lua_pushinteger(L, rc + 1);
    return 1;
}

/* kb.next_trigger(ns|ev) */
static int l_next_trigger(lua_State *L)
{
    lkb_nocolon(L, "kb.next_trigger");
    struct lproc *lp = current(L, false, "kb.next_trigger");
    struct sim *s = lp->owner->s;
    int rc;
    if (lua_type(L, 1) == LUA_TNUMBER)
        rc = sim_next_trigger(s, checktime(L, 1));
    else if (luaL_testudata(L, 1, KB_EVENT))
        rc = sim_next_trigger_event(s, checkevent_of(L, 1, lp->owner)->e);
    else
        return luaL_typeerror(L, 1, "number or event");
    if (rc < 0)
        return luaL_error(L, "kb.next_trigger: %s", sim_errmsg(s));
    return 0;
}

static int l_now(lua_State *L)
{
    struct lsim *o = running(L, "kb.now");
    lua_pushnumber(L, ns_of(sim_now(o->s)));
    return 1;
}

static int l_clock(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

/* kb.check(cond, msg): a failed check is reported and counted, and the
 * script goes on, so that one run shows every failure. */
static int l_check(lua_State *L)
{
    lkb_nocolon(L, "kb.check");
    luaL_checkany(L, 1);
    if (!lua_toboolean(L, 1)) {
        struct kb_state *st = getstate(L);
        luaL_where(L, 1);
        const char *where = lua_tostring(L, -1);
        if (lua_isnoneornil(L, 2))
            fprintf(stderr, "%scheck failed\n", where);
        else
            fprintf(stderr, "%scheck failed: %s\n", where,
                    luaL_tolstring(L, 2, NULL));
        fflush(stderr);
        st->failed_checks++;
    }
    lua_settop(L, 1);
    return 1;
}

/* kb.checks_failed() -> how many kb.check calls of this state failed */
static int l_checks_failed(lua_State *L)
{
    lua_pushinteger(L, getstate(L)->failed_checks);
    return 1;
}

/* mkdir -p */
static int makedirs(const char *path)
{
    char *p = strdup(path);
    if (p == NULL)
        return ENOMEM;
    int err = 0;
    for (char *c = p + 1; err == 0; c++) {
        if (*c != '/' && *c != '\0')
            continue;
        char keep = *c;
        *c = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            err = errno;
        *c = keep;
        if (keep == '\0')
            break;
    }
    /* mkdir says EEXIST for a file as well */
    struct stat st;
    if (err == 0 && (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)))
        err = ENOTDIR;
    free(p);
    return err;
}

/* kb.params(spec [, opts]) -> the script's parameters, parsed from its
 * key=value arguments by lua/kbsim/params.lua (docs/cli.md) */
static int l_params(lua_State *L)
{
    lkb_nocolon(L, "kb.params");
    int n = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "kbsim.params");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "params");
    lua_replace(L, -2);
    lua_insert(L, 1);
    lua_call(L, n, 1);
    return 1;
}

const char *lkb_push_outdir(lua_State *L, int options)
{
    lua_getfield(L, options, "out");
    const char *dir = lua_tostring(L, -1);
    if (dir == NULL || *dir == '\0')
        luaL_error(L, "kb.options.out is not set");
    int err = makedirs(dir);
    if (err != 0)
        luaL_error(L, "cannot create output folder '%s': %s", dir, strerror(err));
    return dir;
}

/* A --shard run's output folder: made once, in $TMPDIR, removed at the
 * end of the run (lkb_remove_scratch). */
static void push_scratch(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kb_scratch_key) == LUA_TSTRING)
        return;
    lua_pop(L, 1);
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    int n = snprintf(dir, sizeof dir, "%s/kbsim-shard-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (n < 0 || (size_t)n >= sizeof dir || mkdtemp(dir) == NULL)
        luaL_error(L, "cannot create the shard's scratch output folder '%s': %s", dir,
                   n < 0 || (size_t)n >= sizeof dir ? "name too long" : strerror(errno));
    lua_pushstring(L, dir);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &kb_scratch_key);
}

/* kb.outdir() -> kb.options.out, created if missing; in a --shard run a
 * scratch folder instead, so that the script writes no outputs (kb.sweep
 * keeps its cache in kb.options.out) */
static int l_outdir(lua_State *L)
{
    lua_getfield(L, lua_upvalueindex(1), "options");
    int options = lua_gettop(L);
    lua_getfield(L, options, "shard");
    /* under MPI the ranks but 0 write no outputs either (lsweep_mpi.h) */
    bool shard = lua_istable(L, -1) || lkb_mpi_rank() > 0;
    lua_pop(L, 1);
    if (shard)
        push_scratch(L);
    else
        lkb_push_outdir(L, options);
    return 1;
}

/* kb.mpi() -> rank, size: this process's rank in an MPI job and the job's
 * ranks (0, 1 outside MPI). Only rank 0 writes outputs (lsweep_mpi.h). */
static int l_mpi(lua_State *L)
{
    lua_pushinteger(L, lkb_mpi_rank());
    lua_pushinteger(L, lkb_mpi_size());
    return 2;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void lkb_remove_scratch(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kb_scratch_key) == LUA_TSTRING)
        nftw(lua_tostring(L, -1), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    lua_pop(L, 1);
}

/* ---- for lsystem.c ---------------------------------------------------- */

void lkb_push_names(lua_State *L, const char *const names[])
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; names[i]; i++) {
        if (i)
            luaL_addstring(&b, ", ");
        luaL_addstring(&b, names[i]);
    }
    luaL_pushresult(&b);
}

void lkb_check_keys_as(lua_State *L, int idx, const struct lkb_keys_words *w,
                       const char *const known[], int level)
{
    idx = lua_absindex(L, idx);
    for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        int i = 0;
        while (k && known[i] && strcmp(k, known[i]) != 0)
            i++;
        if (k && known[i])
            continue;
        /* the key as tostring shows it; a table's or function's address
         * would make the message differ from run to run: its type */
        int t = lua_type(L, -2);
        if (t == LUA_TNUMBER || t == LUA_TBOOLEAN)
            k = luaL_tolstring(L, -2, NULL);
        else if (!k)
            k = luaL_typename(L, -2);
        if (level > 0)
            luaL_where(L, level);
        else
            lua_pushliteral(L, "");
        lkb_push_names(L, known);
        lua_pushfstring(L, "%s%s: unknown %s '%s' (%s%s)", lua_tostring(L, -2), w->what,
                        w->noun ? w->noun : "option", k, w->label ? w->label : "",
                        lua_tostring(L, -1));
        lua_error(L);
    }
}

void lkb_check_keys(lua_State *L, int idx, const char *what, const char *const known[])
{
    lkb_check_keys_as(L, idx, &(struct lkb_keys_words){what, "option", ""}, known, 1);
}

/* kb._check_keys(t, known, what [, noun [, label [, level]]]): for the
 * Lua library (the modules in lua/kbsim) the refusal of lkb_check_keys_as, with
 * known a list of names and level as error()'s (1: the function calling
 * _check_keys; 0: no place). noun defaults to "option", label to "". */
static int l_check_keys(lua_State *L)
{
    enum { MAX_KNOWN = 64 };
    const char *known[MAX_KNOWN + 1];
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TTABLE);
    struct lkb_keys_words w = {luaL_checkstring(L, 3), luaL_optstring(L, 4, "option"),
                               luaL_optstring(L, 5, "")};
    int level = (int)luaL_optinteger(L, 6, 1);
    lua_Integer n = luaL_len(L, 2);
    luaL_argcheck(L, n <= MAX_KNOWN, 2, "more than 64 names");
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i); /* the list holds the string: no pop while known is used */
        known[i - 1] = lua_tostring(L, -1);
        luaL_argcheck(L, lua_type(L, -1) == LUA_TSTRING, 2, "names must be strings");
    }
    known[n] = NULL;
    lkb_check_keys_as(L, 1, &w, known, level);
    return 0;
}

struct sim *lkb_checksim(lua_State *L, int i)
{
    return live(L, luaL_checkudata(L, i, KB_SIM));
}

struct sim *lkb_checksim_known(lua_State *L, int i)
{
    return live(L, lua_touserdata(L, i));
}

int lkb_newmetatable(lua_State *L, const char *tname)
{
    if (!luaL_newmetatable(L, tname))
        return 0;
    lua_pushstring(L, tname);
    lua_setfield(L, -2, "__metatable");
    return 1;
}

bool lkb_sim_is_open(lua_State *L, int i)
{
    struct lsim *o = luaL_testudata(L, i, KB_SIM);
    return o && o->s;
}

void lkb_anchor(lua_State *L, int simidx, int validx)
{
    simidx = lua_absindex(L, simidx);
    validx = lua_absindex(L, validx);
    pushanchors(L, simidx);
    lua_pushvalue(L, validx);
    luaL_ref(L, -2);
    lua_pop(L, 1);
}

void *lkb_block_begin(lua_State *L, struct sim *s, const char *what)
{
    struct lproc *lp = current(L, true, what);
    if (lp->owner->s != s)
        luaL_error(L, "%s: the system belongs to another simulation", what);
    return lp;
}

void lkb_block_end(void *proc)
{
    struct lproc *lp = proc;
    lp->owner->cur = lp;
}

void **lkb_tl_slots(lua_State *L)
{
    struct lsim *o = getstate(L)->running;
    struct sim_proc *p = o ? sim_current(o->s) : NULL;
    struct lproc *lp = p ? o->cur : NULL;
    if (lp == NULL || lp->p != p || !lp->thread || lp->T != L)
        return NULL;
    return lp->tl_slots;
}

/* ---- registration ---------------------------------------------------- */

static const luaL_Reg sim_methods[] = {
    {"spawn", l_spawn},     {"method", l_method}, {"event", l_event},
    {"fifo", l_fifo},       {"signal", l_signal}, {"run", sim_run_l},
    {"stop", sim_stop_l},   {"now", sim_now_l},   {"now_ps", sim_now_ps},
    {"stats", sim_stats_l}, {"close", sim_close_l}, {NULL, NULL}};
static const luaL_Reg sim_meta[] = {{"__gc", sim_gc},
                                    {"__close", sim_close_l},
                                    {"__tostring", sim_tostring},
                                    {NULL, NULL}};

static const luaL_Reg proc_methods[] = {
    {"name", proc_name}, {"done", proc_done}, {NULL, NULL}};
static const luaL_Reg proc_meta[] = {{"__tostring", proc_tostring}, {NULL, NULL}};

static const luaL_Reg ev_methods[] = {{"notify", ev_notify},
                                      {"cancel", ev_cancel},
                                      {"name", ev_name},
                                      {NULL, NULL}};
static const luaL_Reg ev_meta[] = {{"__tostring", ev_tostring}, {NULL, NULL}};

static const luaL_Reg fifo_methods[] = {
    {"read", fifo_read},         {"write", fifo_write},
    {"nb_read", fifo_nb_read},   {"nb_write", fifo_nb_write},
    {"available", fifo_available}, {"free", fifo_free},
    {"name", fifo_name},         {NULL, NULL}};
static const luaL_Reg fifo_meta[] = {{"__tostring", fifo_tostring}, {NULL, NULL}};

static const luaL_Reg sig_methods[] = {{"read", sig_read},
                                       {"write", sig_write},
                                       {"changed", sig_changed},
                                       {NULL, NULL}};
static const luaL_Reg sig_meta[] = {{"__tostring", sig_tostring}, {NULL, NULL}};

static const luaL_Reg kb_funcs[] = {
    {"sim", l_sim},       {"wait", l_wait},   {"wait_any", l_wait_any},
    {"next_trigger", l_next_trigger}, {"now", l_now}, {"clock", l_clock},
    {"check", l_check},   {"checks_failed", l_checks_failed},
    {"outdir", l_outdir}, {"params", l_params}, {"mpi", l_mpi},
    {"_check_keys", l_check_keys},
    {NULL, NULL}};

/* __index of a class's method table (upvalue 1: the class name): a name
 * that is not a method (ev:wait(), sim:wiat()) is an error naming it and
 * the methods there are, not a nil called later ("attempt to call a nil
 * value"). Only reached for a missing name, so the methods cost nothing. */
static int nomethod(lua_State *L)
{
    const char *noun, *var;
    classwords(lua_tostring(L, lua_upvalueindex(1)), &noun, &var);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (lua_type(L, 2) == LUA_TSTRING)
        lua_pushfstring(L, "%s has no method or field '%s'", noun,
                        lua_tostring(L, 2));
    else
        lua_pushfstring(L, "%s has no field of type %s", noun, luaL_typename(L, 2));
    luaL_addvalue(&b);
    /* the methods, sorted */
    const char *names[64];
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) {
        if (lua_type(L, -2) == LUA_TSTRING && n < 64)
            names[n++] = lua_tostring(L, -2); /* keys stay in the table */
        lua_pop(L, 1);
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    luaL_addstring(&b, " (its methods: ");
    for (int i = 0; i < n; i++) {
        if (i > 0)
            luaL_addstring(&b, ", ");
        luaL_addstring(&b, names[i]);
    }
    luaL_addchar(&b, ')');
    if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "wait") == 0)
        luaL_addstring(&b, strcmp(var, "sig") == 0
                               ? "; to wait for a change: kb.wait(sig:changed()) "
                                 "in a thread process"
                               : "; to wait: kb.wait(ev) or kb.wait(ns) in a "
                                 "thread process");
    luaL_pushresult(&b);
    luaL_where(L, 1); /* the script's line that named it */
    lua_insert(L, -2);
    lua_concat(L, 2);
    return lua_error(L);
}

static void newclass(lua_State *L, const char *tname, const luaL_Reg *meta,
                     const luaL_Reg *methods)
{
    lkb_newmetatable(L, tname);
    luaL_setfuncs(L, meta, 0);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_createtable(L, 0, 1);
    lua_pushstring(L, tname);
    lua_pushcclosure(L, nomethod, 1);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

static void default_options(lua_State *L)
{
    lua_createtable(L, 0, 5);
    lua_pushliteral(L, "out");
    lua_setfield(L, -2, "out");
    lua_pushinteger(L, 1);
    lua_setfield(L, -2, "jobs");
    lua_newtable(L);
    lua_setfield(L, -2, "set");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "quiet");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "fast");
}

int luaopen_kbsim(lua_State *L)
{
    getstate(L);
    newclass(L, KB_SIM, sim_meta, sim_methods);
    lkb_open_trace(L);
    newclass(L, KB_PROC, proc_meta, proc_methods);
    newclass(L, KB_EVENT, ev_meta, ev_methods);
    newclass(L, KB_FIFO, fifo_meta, fifo_methods);
    newclass(L, KB_SIGNAL, sig_meta, sig_methods);

    lua_newtable(L);
    lua_pushvalue(L, -1);
    luaL_setfuncs(L, kb_funcs, 1); /* upvalue: the module, for kb.outdir */
    lua_pushliteral(L, KBSIM_VERSION);
    lua_setfield(L, -2, "version");
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kb_options_key) == LUA_TNIL) {
        lua_pop(L, 1);
        default_options(L);
    }
    lua_setfield(L, -2, "options");
    lkb_open_system(L);
    lkb_open_sweep(L);
    lkb_open_render(L);
    return 1;
}

void lkb_preload(lua_State *L, const struct lkb_options *opt)
{
    lua_createtable(L, 0, 6);
    lua_pushstring(L, opt->out);
    lua_setfield(L, -2, "out");
    lua_pushinteger(L, opt->jobs);
    lua_setfield(L, -2, "jobs");
    lua_newtable(L);
    for (int i = 0; i < opt->nset; i++) {
        const char *kv = opt->set[i];
        const char *eq = strchr(kv, '=');
        if (eq == NULL)
            continue;
        lua_pushlstring(L, kv, (size_t)(eq - kv));
        lua_pushstring(L, eq + 1);
        lua_settable(L, -3);
    }
    lua_setfield(L, -2, "set");
    if (opt->topology) {
        lua_pushstring(L, opt->topology);
        lua_setfield(L, -2, "topology");
    }
    lua_pushboolean(L, opt->quiet);
    lua_setfield(L, -2, "quiet");
    lua_pushboolean(L, opt->fast);
    lua_setfield(L, -2, "fast");
    if (opt->point_timeout > 0) {
        lua_pushnumber(L, opt->point_timeout);
        lua_setfield(L, -2, "point_timeout");
    }
    if (opt->shards > 0) {
        lua_createtable(L, 0, 2);
        lua_pushinteger(L, opt->shard);
        lua_setfield(L, -2, "index");
        lua_pushinteger(L, opt->shards);
        lua_setfield(L, -2, "count");
        lua_setfield(L, -2, "shard");
    }
    if (opt->merge) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "merge");
    }
    if (opt->trace) {
        lua_pushstring(L, opt->trace);
        lua_setfield(L, -2, "trace");
        lua_pushinteger(L, opt->trace_point > 0 ? opt->trace_point : 1);
        lua_setfield(L, -2, "trace_point");
    }
    lua_rawsetp(L, LUA_REGISTRYINDEX, &kb_options_key);

    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_kbsim);
    lua_setfield(L, -2, "kbsim");
    lua_pop(L, 1);
    lkb_open_tl(L);
    lkb_open_source_only(L);
}
