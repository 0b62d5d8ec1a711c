/* ljson.c — Lua values to JSON text and back (ljson.h) */
#include "ljson.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

/* ---- writer ------------------------------------------------------------ */

bool lkb_json_str(struct lkb_blob *b, const char *s, size_t n)
{
    if (!lkb_blob_add(b, "\"", 1))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            esc[2] = '\0';
        } else if (c == '\n') {
            strcpy(esc, "\\n");
        } else if (c == '\t') {
            strcpy(esc, "\\t");
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
        } else {
            esc[0] = (char)c;
            esc[1] = '\0';
        }
        if (!lkb_blob_str(b, esc))
            return false;
    }
    return lkb_blob_add(b, "\"", 1);
}

/* The shortest %.Ng that reads back as the same double. */
static void fmt_float(char *buf, size_t size, double v)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (strpbrk(buf, ".eE") == NULL)
        strncat(buf, ".0", size - strlen(buf) - 1);
}

static int cmp_key(const void *a, const void *b)
{
    const struct { const char *s; size_t n; } *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static bool json_value(lua_State *L, int idx, struct lkb_blob *b, int depth)
{
    idx = lua_absindex(L, idx);
    if (depth > LKB_MAX_DEPTH || !lua_checkstack(L, 6))
        return false;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        return lkb_blob_str(b, "null");
    case LUA_TBOOLEAN:
        return lkb_blob_str(b, lua_toboolean(L, idx) ? "true" : "false");
    case LUA_TNUMBER: {
        char buf[40];
        if (lua_isinteger(L, idx)) {
            snprintf(buf, sizeof buf, "%lld", (long long)lua_tointeger(L, idx));
        } else {
            double v = (double)lua_tonumber(L, idx);
            if (!isfinite(v))
                return false;
            fmt_float(buf, sizeof buf, v);
        }
        return lkb_blob_str(b, buf);
    }
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        return lkb_json_str(b, s, n);
    }
    case LUA_TTABLE:
        break;
    default:
        return false;
    }
    size_t count = 0, nstr = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        count++;
        if (lua_type(L, -2) == LUA_TSTRING)
            nstr++;
        lua_pop(L, 1);
    }
    if (count == 0)
        return lkb_blob_str(b, "[]");
    if (nstr == 0 && lua_rawlen(L, idx) == count) {
        lua_Integer n = (lua_Integer)count;
        for (lua_Integer i = 1; i <= n; i++) {
            if (lua_rawgeti(L, idx, i) == LUA_TNIL) {
                lua_pop(L, 1);
                return false; /* holes: not a JSON array */
            }
            bool ok = lkb_blob_str(b, i == 1 ? "[" : ",") && json_value(L, -1, b, depth + 1);
            lua_pop(L, 1);
            if (!ok)
                return false;
        }
        return lkb_blob_str(b, "]");
    }
    if (nstr != count)
        return false;
    struct kv { const char *s; size_t n; } *keys =
        lua_newuserdatauv(L, (count ? count : 1) * sizeof *keys, 0);
    size_t k = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        keys[k].s = lua_tolstring(L, -2, &keys[k].n); /* anchored: a key */
        k++;
        lua_pop(L, 1);
    }
    qsort(keys, k, sizeof *keys, cmp_key);
    bool ok = lkb_blob_str(b, "{");
    for (size_t i = 0; ok && i < k; i++) {
        lua_pushlstring(L, keys[i].s, keys[i].n);
        lua_rawget(L, idx);
        ok = (i == 0 || lkb_blob_str(b, ",")) && lkb_json_str(b, keys[i].s, keys[i].n) &&
             lkb_blob_str(b, ":") && json_value(L, -1, b, depth + 1);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return ok && lkb_blob_str(b, "}");
}

/* ---- reader ------------------------------------------------------------ */

struct jread {
    lua_State *L;
    const char *p, *end;
    int depth;
};

static void jr_space(struct jread *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' ||
                             *r->p == '\t'))
        r->p++;
}

static bool jr_lit(struct jread *r, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, lit, n) != 0)
        return false;
    r->p += n;
    return true;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A JSON string; \u escapes below 0x80 only (the writer makes no others,
 * and a file from elsewhere just misses the cache). */
static bool jr_string(struct jread *r)
{
    luaL_Buffer lb;
    if (r->p >= r->end || *r->p != '"')
        return false;
    r->p++;
    luaL_buffinit(r->L, &lb);
    while (r->p < r->end && *r->p != '"') {
        char c = *r->p++;
        if (c == '\\') {
            if (r->p >= r->end)
                return false;
            c = *r->p++;
            switch (c) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case '"': case '\\': case '/': break;
            case 'u': {
                int v = 0;
                for (int i = 0; i < 4; i++) {
                    int h = r->p < r->end ? hexval(*r->p++) : -1;
                    if (h < 0)
                        return false;
                    v = v * 16 + h;
                }
                if (v >= 0x80)
                    return false;
                c = (char)v;
                break;
            }
            default: return false;
            }
        }
        luaL_addchar(&lb, c);
    }
    if (r->p >= r->end)
        return false;
    r->p++;
    luaL_pushresult(&lb);
    return true;
}

static bool jr_value(struct jread *r)
{
    lua_State *L = r->L;
    if (++r->depth > LKB_MAX_DEPTH || !lua_checkstack(L, 6))
        return false;
    jr_space(r);
    if (r->p >= r->end)
        return false;
    char c = *r->p;
    bool ok = true;
    if (c == '"') {
        ok = jr_string(r);
    } else if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        lua_newtable(L);
        r->p++;
        jr_space(r);
        lua_Integer n = 0;
        if (r->p < r->end && *r->p == close) {
            r->p++;
        } else {
            for (;;) {
                if (c == '{') {
                    jr_space(r);
                    if (!jr_string(r))
                        return false;
                    jr_space(r);
                    if (!jr_lit(r, ":") || !jr_value(r))
                        return false;
                    lua_rawset(L, -3);
                } else {
                    if (!jr_value(r))
                        return false;
                    lua_rawseti(L, -2, ++n);
                }
                jr_space(r);
                if (jr_lit(r, ","))
                    continue;
                if (r->p < r->end && *r->p == close) {
                    r->p++;
                    break;
                }
                return false;
            }
        }
    } else if (jr_lit(r, "null")) {
        lua_pushnil(L);
    } else if (jr_lit(r, "true")) {
        lua_pushboolean(L, 1);
    } else if (jr_lit(r, "false")) {
        lua_pushboolean(L, 0);
    } else {
        char buf[64];
        size_t n = 0;
        bool isfloat = false;
        while (r->p < r->end && n < sizeof buf - 1 &&
               strchr("+-0123456789.eE", *r->p) != NULL) {
            if (strchr(".eE", *r->p))
                isfloat = true;
            buf[n++] = *r->p++;
        }
        buf[n] = '\0';
        char *endp;
        errno = 0;
        if (isfloat) {
            double v = strtod(buf, &endp);
            lua_pushnumber(L, (lua_Number)v);
        } else {
            long long v = strtoll(buf, &endp, 10);
            if (errno != 0)
                return false;
            lua_pushinteger(L, (lua_Integer)v);
        }
        ok = n > 0 && *endp == '\0';
    }
    r->depth--;
    return ok;
}

bool lkb_json_read(lua_State *L, const char *p, size_t n)
{
    int top = lua_gettop(L);
    struct jread r = {L, p, p + n, 0};
    if (jr_value(&r)) {
        jr_space(&r);
        if (r.p == r.end)
            return true;
    }
    lua_settop(L, top);
    return false;
}

bool lkb_json_write(lua_State *L, int idx, struct lkb_blob *b)
{
    return json_value(L, idx, b, 0);
}
