/* ltransport.c — Lua values, bytecode and upvalues from one Lua state to
 * another, as bytes (ltransport.h)
 *
 * Used by kb.sweep (lsweep.c): every point runs in a fresh state of its
 * own, and its function, parameters and returned row travel as these
 * bytes; the same bytes, with table keys in a canonical order, are hashed
 * for the --fast cache. See docs/decisions/0006-sweep-points-in-separate-states.md.
 */
#include "ltransport.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

/* ---- serialisation: Lua values to bytes ------------------------------ */

/* Tags of the byte format. Integers are little-endian whatever the host,
 * so that cache keys do not depend on it. */
enum {
    T_NIL = 'n', T_FALSE = 'f', T_TRUE = 't', T_INT = 'i', T_FLOAT = 'd',
    T_STR = 's', T_TABLE = 'T', T_FUNC = 'F', T_FUNCREF = 'R',
    T_JOIN = 'J', T_MODULE = 'M', T_MEMBER = 'm',
};

struct ser {
    lua_State *L;
    struct lkb_blob *b;
    struct lkb_pack_how o; /* o.path grows and shrinks as values nest */
    int visiting;    /* tables being written: cycle check */
    int funcs;       /* function -> id (LKB_PACK_CODE) */
    int upids;       /* upvalue id -> id * 256 + index (LKB_PACK_CODE) */
    uint32_t nfuncs;
    int depth;
    size_t plen;
};

static int ser_fail(struct ser *s, const char *problem)
{
    return luaL_error(s->L, "%s '%s'%s %s%s", s->o.prefix, s->o.path, s->o.after,
                      problem, s->o.suffix);
}

static void ser_add(struct ser *s, const void *p, size_t n)
{
    if (!lkb_blob_add(s->b, p, n))
        luaL_error(s->L, "kb.sweep: out of memory");
}

static void ser_byte(struct ser *s, int c)
{
    unsigned char b = (unsigned char)c;
    ser_add(s, &b, 1);
}

static void ser_u64(struct ser *s, uint64_t v)
{
    unsigned char d[8];
    lkb_put_le64(d, v);
    ser_add(s, d, 8);
}

static void ser_lstr(struct ser *s, const char *p, size_t n)
{
    ser_byte(s, T_STR);
    ser_u64(s, n);
    ser_add(s, p, n);
}

static size_t path_push(struct ser *s, const char *part, bool dot)
{
    size_t old = s->plen;
    int n = snprintf(s->o.path + old, sizeof s->o.path - old, "%s%s",
                     dot && old > 0 ? "." : "", part);
    if (n < 0 || (size_t)n >= sizeof s->o.path - old)
        s->o.path[old] = '\0'; /* too long to say: name the outer part */
    else
        s->plen = old + (size_t)n;
    return old;
}

/* The key at index k as a path part: ".name" or "[3]". */
static size_t path_push_key(struct ser *s, int k)
{
    lua_State *L = s->L;
    char tmp[48];
    if (lua_type(L, k) == LUA_TSTRING)
        return path_push(s, lua_tostring(L, k), true);
    if (lua_isinteger(L, k))
        snprintf(tmp, sizeof tmp, "[%lld]", (long long)lua_tointeger(L, k));
    else
        snprintf(tmp, sizeof tmp, "[%s]", luaL_typename(L, k));
    return path_push(s, tmp, false);
}

static void path_pop(struct ser *s, size_t old)
{
    s->plen = old;
    s->o.path[old] = '\0';
}

static void ser_value(struct ser *s, int idx);

/* One key/value pair of a table's hash part, as offsets into the
 * buffer. */
struct entry {
    size_t koff, klen, end;
};

static int entry_cmp(const void *a, const void *b, void *base)
{
    const struct entry *x = a, *y = b;
    const unsigned char *p = base;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(p + x->koff, p + y->koff, n);
    if (c != 0)
        return c;
    return (x->klen > y->klen) - (x->klen < y->klen);
}

/* A table: its array part 1..n in order, then the other pairs sorted by
 * their encoded keys, so that equal tables give equal bytes whatever
 * their insertion history (the cache key depends on it). */
static void ser_table(struct ser *s, int idx)
{
    lua_State *L = s->L;
    if (lua_getmetatable(L, idx)) {
        lua_pop(L, 1);
        ser_fail(s, "is a table with a metatable");
    }
    lua_pushvalue(L, idx);
    if (lua_rawget(L, s->visiting) != LUA_TNIL)
        ser_fail(s, "is part of a cycle (a table that contains itself)");
    lua_pop(L, 1);
    lua_pushvalue(L, idx);
    lua_pushboolean(L, 1);
    lua_rawset(L, s->visiting);

    lua_Integer narr = 0;
    while (lua_rawgeti(L, idx, narr + 1) != LUA_TNIL) {
        lua_pop(L, 1);
        narr++;
    }
    lua_pop(L, 1);
    ser_byte(s, T_TABLE);
    ser_u64(s, (uint64_t)narr);
    for (lua_Integer i = 1; i <= narr; i++) {
        lua_rawgeti(L, idx, i);
        lua_pushinteger(L, i);
        size_t old = path_push_key(s, -1);
        lua_pop(L, 1);
        ser_value(s, -1);
        path_pop(s, old);
        lua_pop(L, 1);
    }

    size_t countoff = s->b->n;
    ser_u64(s, 0);
    size_t start = s->b->n;
    struct lkb_blob *ents = lkb_newblob(L);
    int entsidx = lua_gettop(L);
    uint64_t count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        if (lua_isinteger(L, -2)) {
            lua_Integer k = lua_tointeger(L, -2);
            if (k >= 1 && k <= narr) {
                lua_pop(L, 1);
                continue;
            }
        }
        size_t old = path_push_key(s, -2);
        int kt = lua_type(L, -2);
        if (kt != LUA_TSTRING && kt != LUA_TNUMBER && kt != LUA_TBOOLEAN)
            ser_fail(s, "has a key that is not a string, number or boolean");
        struct entry e = {.koff = s->b->n};
        ser_value(s, -2);
        e.klen = s->b->n - e.koff;
        ser_value(s, -1);
        e.end = s->b->n;
        path_pop(s, old);
        if (!lkb_blob_add(ents, &e, sizeof e))
            luaL_error(L, "kb.sweep: out of memory");
        count++;
        lua_pop(L, 1);
    }
    if (count > 1) {
        struct entry *ev = (struct entry *)ents->p;
        qsort_r(ev, count, sizeof *ev, entry_cmp, s->b->p);
        struct lkb_blob *copy = lkb_newblob(L);
        if (!lkb_blob_add(copy, s->b->p + start, s->b->n - start))
            luaL_error(L, "kb.sweep: out of memory");
        size_t at = start;
        for (uint64_t i = 0; i < count; i++) {
            size_t len = ev[i].end - ev[i].koff;
            memcpy(s->b->p + at, copy->p + (ev[i].koff - start), len);
            at += len;
        }
    }
    lua_settop(L, entsidx - 1);
    lkb_put_le64(s->b->p + countoff, count);

    lua_pushvalue(L, idx);
    lua_pushnil(L);
    lua_rawset(L, s->visiting);
}

static int dump_writer(lua_State *L, const void *p, size_t n, void *ud)
{
    return lkb_blob_add(ud, p, n) ? 0 : 1;
}

/* A Lua function: its bytecode, then each upvalue. Upvalues shared with a
 * function written before are written as a join, so closures that share a
 * variable still share it in the point's state; a function met again
 * (recursion) is a reference. */
static void ser_function(struct ser *s, int idx)
{
    lua_State *L = s->L;
    lua_pushvalue(L, idx);
    if (lua_rawget(L, s->funcs) == LUA_TNUMBER) {
        uint32_t id = (uint32_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
        ser_byte(s, T_FUNCREF);
        ser_u64(s, id);
        return;
    }
    lua_pop(L, 1);
    uint32_t id = s->nfuncs++;
    lua_pushvalue(L, idx);
    lua_pushinteger(L, id);
    lua_rawset(L, s->funcs);

    ser_byte(s, T_FUNC);
    ser_u64(s, id);
    size_t lenoff = s->b->n;
    ser_u64(s, 0);
    size_t start = s->b->n;
    lua_pushvalue(L, idx);
    if (lua_dump(L, dump_writer, s->b, s->o.strip) != 0)
        luaL_error(L, "kb.sweep: out of memory");
    lua_pop(L, 1);
    lkb_put_le64(s->b->p + lenoff, s->b->n - start);

    int nup = 0;
    while (lua_getupvalue(L, idx, nup + 1) != NULL) {
        lua_pop(L, 1);
        nup++;
    }
    ser_u64(s, (uint64_t)nup);
    for (int i = 1; i <= nup; i++) {
        lua_pushlightuserdata(L, lua_upvalueid(L, idx, i));
        if (lua_rawget(L, s->upids) == LUA_TNUMBER) {
            lua_Integer at = lua_tointeger(L, -1);
            lua_pop(L, 1);
            ser_byte(s, T_JOIN);
            ser_u64(s, (uint64_t)(at / 256));
            ser_u64(s, (uint64_t)(at % 256));
            continue;
        }
        lua_pop(L, 1);
        lua_pushlightuserdata(L, lua_upvalueid(L, idx, i));
        lua_pushinteger(L, (lua_Integer)id * 256 + i);
        lua_rawset(L, s->upids);
        const char *name = lua_getupvalue(L, idx, i);
        size_t old = path_push(s, name && *name ? name : "?", true);
        ser_value(s, -1);
        path_pop(s, old);
        lua_pop(L, 1);
    }
}

static void ser_value(struct ser *s, int idx)
{
    lua_State *L = s->L;
    idx = lua_absindex(L, idx);
    luaL_checkstack(L, 8, "kb.sweep: value nested too deeply");
    int t = lua_type(L, idx);
    if (s->o.mode == LKB_PACK_CODE &&
        (t == LUA_TTABLE || t == LUA_TFUNCTION || t == LUA_TUSERDATA)) {
        lua_pushvalue(L, idx);
        if (lua_rawget(L, s->o.mods) == LUA_TSTRING) {
            size_t n;
            const char *name = lua_tolstring(L, -1, &n);
            ser_byte(s, T_MODULE);
            ser_lstr(s, name, n);
            lua_pop(L, 1);
            return;
        }
        lua_pop(L, 1);
        lua_pushvalue(L, idx);
        if (lua_rawget(L, s->o.members) == LUA_TTABLE) {
            size_t n;
            ser_byte(s, T_MEMBER);
            lua_rawgeti(L, -1, 1);
            const char *mod = lua_tolstring(L, -1, &n);
            ser_lstr(s, mod, n);
            lua_rawgeti(L, -2, 2);
            const char *key = lua_tolstring(L, -1, &n);
            ser_lstr(s, key, n);
            lua_pop(L, 3);
            return;
        }
        lua_pop(L, 1);
    }
    switch (t) {
    case LUA_TNIL:
        ser_byte(s, T_NIL);
        return;
    case LUA_TBOOLEAN:
        ser_byte(s, lua_toboolean(L, idx) ? T_TRUE : T_FALSE);
        return;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            ser_byte(s, T_INT);
            ser_u64(s, (uint64_t)lua_tointeger(L, idx));
        } else {
            double d = (double)lua_tonumber(L, idx);
            uint64_t bits;
            memcpy(&bits, &d, sizeof bits);
            ser_byte(s, T_FLOAT);
            ser_u64(s, bits);
        }
        return;
    case LUA_TSTRING: {
        size_t n;
        const char *p = lua_tolstring(L, idx, &n);
        ser_lstr(s, p, n);
        return;
    }
    case LUA_TTABLE:
        if (++s->depth > LKB_MAX_DEPTH)
            ser_fail(s, "is nested too deeply");
        ser_table(s, idx);
        s->depth--;
        return;
    case LUA_TFUNCTION:
        if (s->o.mode != LKB_PACK_CODE)
            ser_fail(s, "is a function");
        if (lua_iscfunction(L, idx))
            ser_fail(s, "is a C function of no loaded module");
        if (++s->depth > LKB_MAX_DEPTH)
            ser_fail(s, "is nested too deeply");
        ser_function(s, idx);
        s->depth--;
        return;
    default:
        ser_fail(s, lua_pushfstring(L, "is a %s", luaL_typename(L, idx)));
    }
}

void lkb_pack(lua_State *L, int idx, struct lkb_blob *b, const struct lkb_pack_how *how)
{
    idx = lua_absindex(L, idx);
    int top = lua_gettop(L);
    struct ser s = {.o = *how};
    s.L = L;
    s.b = b;
    s.depth = 0;
    s.nfuncs = 0;
    s.plen = strlen(s.o.path);
    lua_newtable(L);
    s.visiting = lua_gettop(L);
    if (s.o.mode == LKB_PACK_CODE) {
        lua_newtable(L);
        s.funcs = lua_gettop(L);
        lua_newtable(L);
        s.upids = lua_gettop(L);
    }
    ser_value(&s, idx);
    lua_settop(L, top);
}

/* ---- module maps ------------------------------------------------------ */

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Modules are visited in name order, so a value reachable two ways
 * always gets the same name. */
void lkb_push_module_maps(lua_State *L)
{
    int top = lua_gettop(L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    int loaded = lua_gettop(L);
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, loaded) != 0) {
        if (lua_type(L, -2) == LUA_TSTRING)
            n++;
        lua_pop(L, 1);
    }
    const char **names = lua_newuserdatauv(L, (n ? n : 1) * sizeof *names, 0);
    size_t k = 0;
    lua_pushnil(L);
    while (lua_next(L, loaded) != 0) {
        if (lua_type(L, -2) == LUA_TSTRING && k < n)
            names[k++] = lua_tostring(L, -2); /* anchored: a key of loaded */
        lua_pop(L, 1);
    }
    qsort(names, k, sizeof *names, cmp_cstr);

    lua_newtable(L);
    int mods = lua_gettop(L);
    lua_newtable(L);
    int members = lua_gettop(L);
    for (size_t i = 0; i < k; i++) {
        int t = lua_getfield(L, loaded, names[i]);
        if (t == LUA_TTABLE || t == LUA_TFUNCTION || t == LUA_TUSERDATA) {
            lua_pushvalue(L, -1);
            if (lua_rawget(L, mods) == LUA_TNIL) {
                lua_pushvalue(L, -2);
                lua_pushstring(L, names[i]);
                lua_rawset(L, mods);
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    for (size_t i = 0; i < k; i++) {
        bool is_g = strcmp(names[i], "_G") == 0;
        if (lua_getfield(L, loaded, names[i]) != LUA_TTABLE) {
            lua_pop(L, 1);
            continue;
        }
        int mod = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, mod) != 0) {
            if (lua_type(L, -2) != LUA_TSTRING || !lua_isfunction(L, -1) ||
                (is_g && !lua_iscfunction(L, -1))) {
                lua_pop(L, 1);
                continue;
            }
            /* The smallest key wins within a module, for determinism.
             * Stack: key fn [entry emod ekey]. */
            bool take = true;
            lua_pushvalue(L, -1);
            if (lua_rawget(L, members) == LUA_TTABLE) {
                lua_rawgeti(L, -1, 1);
                lua_rawgeti(L, -2, 2);
                take = strcmp(lua_tostring(L, -2), names[i]) == 0 &&
                       strcmp(lua_tostring(L, -5), lua_tostring(L, -1)) < 0;
                lua_pop(L, 2);
            }
            lua_pop(L, 1);
            if (take) {
                lua_pushvalue(L, -1);
                lua_createtable(L, 2, 0);
                lua_pushstring(L, names[i]);
                lua_rawseti(L, -2, 1);
                lua_pushvalue(L, -4);
                lua_rawseti(L, -2, 2);
                lua_rawset(L, members);
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_copy(L, mods, top + 1);
    lua_copy(L, members, top + 2);
    lua_settop(L, top + 2);
}

/* ---- deserialisation: bytes to Lua values ----------------------------- */

struct des {
    lua_State *L;
    const unsigned char *p, *end;
    int funcs; /* id -> function */
};

static const unsigned char *des_take(struct des *d, size_t n)
{
    if ((size_t)(d->end - d->p) < n)
        luaL_error(d->L, "kb.sweep: truncated value (internal error)");
    const unsigned char *at = d->p;
    d->p += n;
    return at;
}

static uint64_t des_u64(struct des *d)
{
    return lkb_get_le64(des_take(d, 8));
}

static const char *des_str(struct des *d, size_t *n)
{
    if (*des_take(d, 1) != T_STR)
        luaL_error(d->L, "kb.sweep: bad value (internal error)");
    *n = (size_t)des_u64(d);
    return (const char *)des_take(d, *n);
}

/* package.loaded[name], or require(name) in this state. */
static void push_module(lua_State *L, const char *name, size_t n)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushlstring(L, name, n);
    if (lua_rawget(L, -2) == LUA_TNIL) {
        lua_pop(L, 1);
        lua_getglobal(L, "require");
        lua_pushlstring(L, name, n);
        lua_call(L, 1, 1);
    }
    lua_remove(L, -2);
}

static void des_value(struct des *d)
{
    lua_State *L = d->L;
    luaL_checkstack(L, 8, "kb.sweep: value nested too deeply");
    int tag = *des_take(d, 1);
    switch (tag) {
    case T_NIL: lua_pushnil(L); return;
    case T_FALSE: lua_pushboolean(L, 0); return;
    case T_TRUE: lua_pushboolean(L, 1); return;
    case T_INT: lua_pushinteger(L, (lua_Integer)des_u64(d)); return;
    case T_FLOAT: {
        uint64_t bits = des_u64(d);
        double v;
        memcpy(&v, &bits, sizeof v);
        lua_pushnumber(L, (lua_Number)v);
        return;
    }
    case T_STR: {
        size_t n = (size_t)des_u64(d);
        lua_pushlstring(L, (const char *)des_take(d, n), n);
        return;
    }
    case T_TABLE: {
        uint64_t narr = des_u64(d);
        lua_createtable(L, narr < INT32_MAX ? (int)narr : 0, 0);
        for (uint64_t i = 1; i <= narr; i++) {
            des_value(d);
            lua_rawseti(L, -2, (lua_Integer)i);
        }
        uint64_t nhash = des_u64(d);
        for (uint64_t i = 0; i < nhash; i++) {
            des_value(d);
            des_value(d);
            lua_rawset(L, -3);
        }
        return;
    }
    case T_FUNC: {
        lua_Integer id = (lua_Integer)des_u64(d);
        size_t n = (size_t)des_u64(d);
        const char *code = (const char *)des_take(d, n);
        if (luaL_loadbufferx(L, code, n, "=kb.sweep", "b") != LUA_OK)
            lua_error(L);
        int f = lua_gettop(L);
        lua_pushvalue(L, f);
        lua_rawseti(L, d->funcs, id);
        int nup = (int)des_u64(d);
        for (int i = 1; i <= nup; i++) {
            if (d->p < d->end && *d->p == T_JOIN) {
                d->p++;
                lua_Integer fid = (lua_Integer)des_u64(d);
                int j = (int)des_u64(d);
                lua_rawgeti(L, d->funcs, fid);
                lua_upvaluejoin(L, f, i, -1, j);
                lua_pop(L, 1);
                continue;
            }
            des_value(d);
            if (lua_setupvalue(L, f, i) == NULL)
                lua_pop(L, 1);
        }
        return;
    }
    case T_FUNCREF:
        lua_rawgeti(L, d->funcs, (lua_Integer)des_u64(d));
        return;
    case T_MODULE: {
        size_t n;
        const char *name = des_str(d, &n);
        push_module(L, name, n);
        return;
    }
    case T_MEMBER: {
        size_t mn, kn;
        const char *mod = des_str(d, &mn);
        const char *key = des_str(d, &kn);
        push_module(L, mod, mn);
        lua_pushlstring(L, key, kn);
        if (!lua_istable(L, -2) || lua_rawget(L, -2) == LUA_TNIL)
            luaL_error(L, "kb.sweep: '%s.%s' does not exist in the point's Lua state",
                       mod, key);
        lua_remove(L, -2);
        return;
    }
    default:
        luaL_error(L, "kb.sweep: bad value tag %d (internal error)", tag);
    }
}

void lkb_unpack(lua_State *L, const struct lkb_blob *b)
{
    lua_newtable(L);
    struct des d = {L, b->p, b->p + b->n, lua_gettop(L)};
    des_value(&d);
    lua_remove(L, d.funcs);
}
