/* lsweep_cache.c — the --fast cache of kb.sweep: one JSON file per point
 *
 * Every point's file is OUT/cache/SWEEP/KEY.json, KEY being the point's
 * input hash (lsweep.c). A point's file is written by the point itself as
 * soon as it ends, under a temporary name no other writer uses (host,
 * process, a counter; created exclusively) and then renamed into place,
 * so that any number of threads and processes, on one machine or sharing
 * a file system, may fill one cache: a reader sees a whole file or none,
 * and two writers of one key write the same bytes. See docs/results.md.
 */
#include "lsweep_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>

#define KB_BLOB "kbsim.sweep.blob"

/* ---- byte buffers ---------------------------------------------------- */

bool blob_reserve(struct blob *b, size_t more)
{
    if (b->cap - b->n >= more)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < more) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    unsigned char *p = realloc(b->p, cap);
    if (p == NULL)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

bool blob_add(struct blob *b, const void *src, size_t n)
{
    if (!blob_reserve(b, n))
        return false;
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return true;
}

bool blob_str(struct blob *b, const char *s)
{
    return blob_add(b, s, strlen(s));
}

void blob_free(struct blob *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static int blob_gc(lua_State *L)
{
    blob_free(lua_touserdata(L, 1));
    return 0;
}

/* A buffer owned by a userdata on the stack, so that an error raised
 * while filling it does not leak it. */
struct blob *newblob(lua_State *L)
{
    struct blob *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    if (luaL_newmetatable(L, KB_BLOB)) {
        lua_pushcfunction(L, blob_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return b;
}

bool blob_read_file(const char *path, struct blob *b, size_t max)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    char buf[8192];
    size_t n;
    bool ok = true;
    size_t total = 0;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        total += n;
        if (total > max) {
            fclose(f);
            errno = EFBIG;
            return false;
        }
        ok = blob_add(b, buf, n);
    }
    if (ok && ferror(f)) {
        ok = false;
        errno = errno ? errno : EIO;
    }
    int e = errno;
    fclose(f);
    errno = e;
    return ok;
}

/* ---- JSON for the cache ------------------------------------------------ */

/* Cached rows are JSON so that a reader can look at them. Integers are
 * written without a decimal point and floats always with one (or an
 * exponent), so that a row reads back with the same number types. A row
 * JSON cannot hold exactly (a table mixing key kinds, NaN, infinity) is
 * simply not cached. */

static bool json_str(struct blob *b, const char *s, size_t n)
{
    if (!blob_add(b, "\"", 1))
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
        if (!blob_str(b, esc))
            return false;
    }
    return blob_add(b, "\"", 1);
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

static bool json_value(lua_State *L, int idx, struct blob *b, int depth)
{
    idx = lua_absindex(L, idx);
    if (depth > KB_MAX_DEPTH || !lua_checkstack(L, 6))
        return false;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        return blob_str(b, "null");
    case LUA_TBOOLEAN:
        return blob_str(b, lua_toboolean(L, idx) ? "true" : "false");
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
        return blob_str(b, buf);
    }
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        return json_str(b, s, n);
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
        return blob_str(b, "[]");
    if (nstr == 0 && lua_rawlen(L, idx) == count) {
        lua_Integer n = (lua_Integer)count;
        for (lua_Integer i = 1; i <= n; i++) {
            if (lua_rawgeti(L, idx, i) == LUA_TNIL) {
                lua_pop(L, 1);
                return false; /* holes: not a JSON array */
            }
            bool ok = blob_str(b, i == 1 ? "[" : ",") && json_value(L, -1, b, depth + 1);
            lua_pop(L, 1);
            if (!ok)
                return false;
        }
        return blob_str(b, "]");
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
    bool ok = blob_str(b, "{");
    for (size_t i = 0; ok && i < k; i++) {
        lua_pushlstring(L, keys[i].s, keys[i].n);
        lua_rawget(L, idx);
        ok = (i == 0 || blob_str(b, ",")) && json_str(b, keys[i].s, keys[i].n) &&
             blob_str(b, ":") && json_value(L, -1, b, depth + 1);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return ok && blob_str(b, "}");
}

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
    if (++r->depth > KB_MAX_DEPTH || !lua_checkstack(L, 6))
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

/* Pushes the JSON document in [p, p+n) as a Lua value, or returns false
 * with the stack as it was. */
static bool json_read(lua_State *L, const char *p, size_t n)
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

/* ---- cache files ------------------------------------------------------- */

bool kb_cache_path(char *buf, size_t size, const char *dir, uint64_t key)
{
    int n = snprintf(buf, size, "%s/%016llx.json", dir, (unsigned long long)key);
    return n >= 0 && (size_t)n < size;
}

/* A fresh file next to path, opened for writing, whose name no other
 * thread or process uses: host name, process id and a counter, created
 * with O_EXCL (retried with the next counter if it exists). */
static int open_unique(const char *path, char *tmp, size_t size)
{
    static atomic_ulong counter;
    char host[64];
    if (gethostname(host, sizeof host) != 0)
        strcpy(host, "host");
    host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    for (int tries = 0; tries < 100; tries++) {
        unsigned long k = atomic_fetch_add(&counter, 1);
        int n = snprintf(tmp, size, "%s.%s.%ld.%lu.tmp", path, host, (long)getpid(), k);
        if (n < 0 || (size_t)n >= size) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

static bool write_all(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Writes [p, p+n) to path through a temporary file and a rename, so that
 * a reader never sees half a file. */
static bool write_atomic(const char *path, const void *p, size_t n)
{
    char tmp[4200];
    int fd = open_unique(path, tmp, sizeof tmp);
    if (fd < 0)
        return false;
    bool ok = write_all(fd, p, n);
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, path) == 0)
        return true;
    if (ok)
        e = errno;
    remove(tmp);
    errno = e;
    return false;
}

int kb_cache_probe(const char *dir)
{
    char path[4200], tmp[4200];
    if (snprintf(path, sizeof path, "%s/.probe", dir) >= (int)sizeof path)
        return ENAMETOOLONG;
    int fd = open_unique(path, tmp, sizeof tmp);
    if (fd < 0)
        return errno;
    /* a few blocks, not an empty file: a full disk accepts those */
    static const char block[4096];
    bool ok = write_all(fd, block, sizeof block);
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    remove(tmp);
    return ok ? 0 : e;
}

bool kb_cache_parse(lua_State *L, const char *p, size_t n, const char *hex)
{
    if (!json_read(L, p, n))
        return false;
    bool ok = lua_istable(L, -1);
    if (ok) {
        lua_getfield(L, -1, "kbsim");
        lua_getfield(L, -2, "key");
        const char *v = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        ok = v && k && strcmp(v, KBSIM_VERSION) == 0 && strcmp(k, hex) == 0;
        lua_pop(L, 2);
    }
    if (!ok)
        lua_pop(L, 1);
    return ok;
}

enum kb_cache_found kb_cache_load(lua_State *L, const char *dir, uint64_t key)
{
    char path[4200], hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)key);
    if (!kb_cache_path(path, sizeof path, dir, key))
        return KB_CACHE_MISS;
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOENT || errno == ENOTDIR ? KB_CACHE_MISS : KB_CACHE_CORRUPT;
    if (!S_ISREG(st.st_mode))
        return KB_CACHE_CORRUPT; /* a folder, a device: not kbsim's */
    struct blob *b = newblob(L);
    if (!blob_read_file(path, b, KB_CACHE_MAX_BYTES)) {
        bool missing = errno == ENOENT || errno == ENOTDIR;
        lua_pop(L, 1);
        return missing ? KB_CACHE_MISS : KB_CACHE_CORRUPT;
    }
    bool ok = kb_cache_parse(L, (const char *)b->p, b->n, hex);
    lua_remove(L, ok ? -2 : -1);
    return ok ? KB_CACHE_HIT : KB_CACHE_CORRUPT;
}

/* strerror for a point's thread: several write their cache at once, and
 * strerror's buffer is shared (the build defines _GNU_SOURCE: GNU's
 * strerror_r returns the text) */
static const char *error_text(int e, char *buf, size_t n)
{
    return strerror_r(e, buf, n);
}

int kb_cache_store(lua_State *L, const char *dir, const char *name, size_t index,
                   uint64_t key, int params, int row, char *why, size_t whysize)
{
    char etext[128];
    char path[4200], hex[17], num[32];
    params = lua_absindex(L, params);
    row = lua_absindex(L, row);
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)key);
    if (!kb_cache_path(path, sizeof path, dir, key)) {
        snprintf(why, whysize, "cannot write in '%s': %s", dir, error_text(ENAMETOOLONG, etext, sizeof etext));
        return -1;
    }
    snprintf(num, sizeof num, "%zu", index + 1);
    struct blob *b = newblob(L);
    size_t mark;
    bool ok = blob_str(b, "{\"kbsim\": ") && json_str(b, KBSIM_VERSION, strlen(KBSIM_VERSION)) &&
              blob_str(b, ", \"sweep\": ") && json_str(b, name, strlen(name)) &&
              blob_str(b, ", \"point\": ") && blob_str(b, num) &&
              blob_str(b, ", \"key\": ") && json_str(b, hex, 16);
    mark = b->n;
    if (ok && !(blob_str(b, ", \"params\": ") && json_value(L, params, b, 0)))
        b->n = mark; /* the parameters are only there for a human reader */
    ok = ok && blob_str(b, ", \"row\": ") && json_value(L, row, b, 0) &&
         blob_str(b, "}\n");
    int rc = 1;
    if (ok) {
        rc = 0;
        if (!write_atomic(path, b->p, b->n)) {
            snprintf(why, whysize, "cannot write '%s': %s", path,
                     error_text(errno, etext, sizeof etext));
            rc = -1;
        }
    }
    lua_pop(L, 1);
    return rc;
}
