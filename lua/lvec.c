/* lvec.c — host vectors (kbsim.vec): double arrays for building inputs,
 * references and checks at C speed, read from and written to PE memories
 *
 * Scenarios check every point's data; with tens of thousands of elements
 * per PE and a hundred PEs, doing that element by element in Lua costs
 * more than the simulation. A vec holds doubles; reading rounds nothing
 * (a memory's values are exact in double), writing rounds to the dtype.
 * Host access takes no simulated time. Registered in kbsim.tlcore.
 */
#include <math.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "dtype.h"
#include "lkb_internal.h"
#include "pe.h"
#include "system.h"

#define KB_VEC "kbsim.vec"

struct vec {
    size_t n;
    double v[];
};

static struct vec *newvec(lua_State *L, size_t n)
{
    struct vec *x = lua_newuserdatauv(L, sizeof *x + (n ? n : 1) * sizeof(double), 0);
    x->n = n;
    luaL_setmetatable(L, KB_VEC);
    return x;
}

static struct vec *checkvec(lua_State *L, int i)
{
    return luaL_checkudata(L, i, KB_VEC);
}

/* The largest vec, and any size or dimension: the product of two sizes
 * (rows × cols, m × k) then fits a size_t with room to spare. */
#define VEC_MAX ((lua_Integer)1 << 30)

static size_t checksize(lua_State *L, int i)
{
    lua_Integer n = luaL_checkinteger(L, i);
    luaL_argcheck(L, n >= 0 && n <= VEC_MAX, i, "size out of range");
    return (size_t)n;
}

static enum kb_dtype checkdt(lua_State *L, int i)
{
    enum kb_dtype dt;
    const char *s = luaL_checkstring(L, i);
    if (kb_dtype_parse(s, &dt) != 0)
        luaL_argerror(L, i, lua_pushfstring(L, "unknown dtype '%s' (f16, bf16, f32)", s));
    return dt;
}


/* vec_new(n [, value]) */
static int l_new(lua_State *L)
{
    size_t n = checksize(L, 1);
    double v = luaL_optnumber(L, 2, 0);
    struct vec *x = newvec(L, n);
    for (size_t i = 0; i < n; i++)
        x->v[i] = v;
    return 1;
}

/* vec_affine(n, scale, offset): v[i] = scale·i + offset (i from 0) */
static int l_affine(lua_State *L)
{
    size_t n = checksize(L, 1);
    double a = luaL_checknumber(L, 2), b = luaL_checknumber(L, 3);
    struct vec *x = newvec(L, n);
    for (size_t i = 0; i < n; i++)
        x->v[i] = a * (double)i + b;
    return 1;
}

/* vec_from(table) */
static int l_from(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer len = luaL_len(L, 1); /* a __len may say anything */
    luaL_argcheck(L, len >= 0 && len <= VEC_MAX, 1, "size out of range");
    size_t n = (size_t)len;
    struct vec *x = newvec(L, n);
    for (size_t i = 0; i < n; i++) {
        lua_geti(L, 1, (lua_Integer)i + 1);
        int isnum;
        x->v[i] = lua_tonumberx(L, -1, &isnum);
        if (!isnum)
            return luaL_error(L, "tl.vec_from: element %d is a %s, not a number", (int)i + 1,
                              luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    return 1;
}

/* x->n elements of dt at addr of m into x, widened straight from the
 * memory's pages; the first span checks the whole range, so an error
 * names it as kb_mem_read would */
static void read_into(lua_State *L, struct kb_mem *m, uint64_t a, enum kb_dtype dt,
                      struct vec *x)
{
    size_t n = x->n, es = kb_dtype_size(dt);
    for (size_t i = 0;;) {
        const unsigned char *p;
        uint64_t len;
        if (kb_mem_read_span(m, a, (uint64_t)(n - i) * es, &p, &len) != 0)
            luaL_error(L, "%s", kb_mem_errmsg(m));
        if (i == n)
            break;
        size_t k = (size_t)(len / es);
        if (k == 0) { /* an element across a page boundary */
            unsigned char e[4];
            kb_mem_read(m, a, e, es);
            kb_dtype_load_n(e, dt, x->v + i, 1);
            k = 1;
        } else if (p) {
            kb_dtype_load_n(p, dt, x->v + i, k);
        } else { /* never written: zeros, which widen to +0.0 */
            memset(x->v + i, 0, k * sizeof(double));
        }
        i += k;
        a += (uint64_t)k * es;
    }
}

/* The place the arguments from `sys` on name: sys, rank, addr, dtype
 * (and kind at kindidx) -> the memory, *addr and *dt. */
static struct kb_mem *check_place(lua_State *L, int sys, int kindidx, uint64_t *addr,
                                  enum kb_dtype *dt)
{
    struct kb_mem *m = lkb_check_pe_mem(L, sys, sys + 1, kindidx);
    *addr = (uint64_t)luaL_checkinteger(L, sys + 2);
    *dt = checkdt(L, sys + 3);
    return m;
}

/* vec_read(sys, rank, addr, dtype, n [, kind]) */
static int l_read(lua_State *L)
{
    uint64_t addr;
    enum kb_dtype dt;
    struct kb_mem *m = check_place(L, 1, 6, &addr, &dt);
    read_into(L, m, addr, dt, newvec(L, checksize(L, 5)));
    return 1;
}

/* v:read(sys, rank, addr, dtype [, kind]): #v elements read into v (as
 * vec_read, without a new vec: a check of many shards reuses one) -> v */
static int v_read(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    uint64_t addr;
    enum kb_dtype dt;
    struct kb_mem *m = check_place(L, 2, 6, &addr, &dt);
    read_into(L, m, addr, dt, x);
    lua_settop(L, 1);
    return 1;
}

/* v:write(sys, rank, addr, dtype [, kind]): rounds to dtype */
static int v_write(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    uint64_t a;
    enum kb_dtype dt;
    struct kb_mem *m = check_place(L, 2, 6, &a, &dt);
    size_t es = kb_dtype_size(dt);
    if (kb_system_timing_only(lkb_checksystem(L, 2)))
        return 0; /* a timing-only system carries no payload, host writes included */
    /* rounded straight into the memory's pages; the first span checks the
     * whole range, so an error names it as kb_mem_write would */
    for (size_t i = 0;;) {
        unsigned char *p;
        uint64_t len;
        if (kb_mem_write_span(m, a, (uint64_t)(x->n - i) * es, &p, &len) != 0)
            return luaL_error(L, "%s", kb_mem_errmsg(m));
        if (i == x->n)
            break;
        size_t k = (size_t)(len / es);
        if (k == 0) { /* an element across a page boundary */
            unsigned char e[4];
            kb_dtype_store_n(e, dt, x->v + i, 1);
            if (kb_mem_write(m, a, e, es) != 0)
                return luaL_error(L, "%s", kb_mem_errmsg(m));
            k = 1;
        } else {
            kb_dtype_store_n(p, dt, x->v + i, k);
        }
        i += k;
        a += (uint64_t)k * es;
    }
    return 0;
}

/* v:round(dtype): each element rounded to dtype, in place */
static int v_round(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    enum kb_dtype dt = checkdt(L, 2);
    for (size_t i = 0; i < x->n; i++)
        x->v[i] = kb_dtype_round(x->v[i], dt);
    lua_settop(L, 1);
    return 1;
}

static struct vec *same_size(lua_State *L, struct vec *x, int i)
{
    struct vec *y = checkvec(L, i);
    if (y->n != x->n)
        luaL_error(L, "vec sizes differ: %d and %d", (int)x->n, (int)y->n);
    return y;
}

/* v:add(w) in place; v:add(number) likewise */
static int v_add(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    if (lua_type(L, 2) == LUA_TNUMBER) {
        double k = lua_tonumber(L, 2);
        for (size_t i = 0; i < x->n; i++)
            x->v[i] += k;
    } else {
        struct vec *y = same_size(L, x, 2);
        for (size_t i = 0; i < x->n; i++)
            x->v[i] += y->v[i];
    }
    lua_settop(L, 1);
    return 1;
}

/* v:scale(k) in place */
static int v_scale(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    double k = luaL_checknumber(L, 2);
    for (size_t i = 0; i < x->n; i++)
        x->v[i] *= k;
    lua_settop(L, 1);
    return 1;
}

/* v:mod(m) in place: v[i] = v[i] mod m (floored, as Lua's %) */
static int v_mod(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    double m = luaL_checknumber(L, 2);
    luaL_argcheck(L, m != 0, 2, "modulus must not be zero");
    for (size_t i = 0; i < x->n; i++)
        x->v[i] -= floor(x->v[i] / m) * m;
    lua_settop(L, 1);
    return 1;
}

/* v:copy() */
static int v_copy(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    struct vec *y = newvec(L, x->n);
    memcpy(y->v, x->v, x->n * sizeof(double));
    return 1;
}

/* v:slice(off, n) -> new vec of v[off .. off+n) (0-based) */
static int v_slice(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    lua_Integer off = luaL_checkinteger(L, 2), n = luaL_checkinteger(L, 3);
    if (off < 0 || n < 0 || (size_t)off > x->n || (size_t)n > x->n - (size_t)off)
        return luaL_error(L, "vec:slice(%I, %I) outside a vec of %d", off, n, (int)x->n);
    struct vec *y = newvec(L, (size_t)n);
    memcpy(y->v, x->v + off, (size_t)n * sizeof(double));
    return 1;
}

/* v:set(off, w): w into v at element off (0-based), in place */
static int v_set(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    lua_Integer off = luaL_checkinteger(L, 2);
    struct vec *y = checkvec(L, 3);
    if (off < 0 || (size_t)off + y->n > x->n)
        return luaL_error(L, "vec:set(%I, vec of %d) outside a vec of %d", off, (int)y->n,
                          (int)x->n);
    memcpy(x->v + off, y->v, y->n * sizeof(double));
    lua_settop(L, 1);
    return 1;
}

/* The largest difference of v and w, absolute or relative to |w[i]|
 * (w[i] = 0: 0 when v[i] is 0 too, else inf; NaN on either side: inf),
 * and its index. */
static int max_diff(lua_State *L, bool relative)
{
    struct vec *x = checkvec(L, 1);
    struct vec *y = same_size(L, x, 2);
    double worst = 0;
    size_t at = 0;
    /* A check that passes finds every pair the same finite value: one
     * pass of integer operations the compiler vectorises tells that before
     * the pass that finds the largest difference and its index (lrab on
     * 1024 SIPs checks 805 M values). Pairs equal bit for bit and finite
     * differ by 0; anything else (-0 against 0, NaN, inf against inf:
     * inf - inf is NaN, an inf difference) takes the second pass. A double
     * is not finite when its exponent bits are all ones: adding one to
     * that exponent carries into the sign bit, and no finite one does. */
    uint64_t bits = 0, nonfinite = 0;
    const uint64_t exp_mask = UINT64_C(0x7ff0000000000000), exp_one = UINT64_C(1) << 52;
    for (size_t i = 0; i < x->n; i++) {
        uint64_t a, b;
        memcpy(&a, &x->v[i], sizeof a);
        memcpy(&b, &y->v[i], sizeof b);
        bits |= a ^ b;
        nonfinite |= (a & exp_mask) + exp_one;
    }
    bool differ = bits != 0 || (nonfinite >> 63) != 0;
    for (size_t i = 0; differ && i < x->n; i++) {
        double d = fabs(x->v[i] - y->v[i]);
        if (d != d)
            d = INFINITY;
        else if (relative && d > 0)
            d = y->v[i] != 0 ? d / fabs(y->v[i]) : INFINITY;
        if (d > worst) {
            worst = d;
            at = i;
        }
    }
    lua_pushnumber(L, worst);
    lua_pushinteger(L, (lua_Integer)at);
    return 2;
}

/* v:max_abs_diff(w) -> largest |v[i] - w[i]|, index */
static int v_max_abs_diff(lua_State *L) { return max_diff(L, false); }

/* v:max_rel_diff(w) -> largest |v[i] - w[i]| / |w[i]|, index */
static int v_max_rel_diff(lua_State *L) { return max_diff(L, true); }

/* v:tile(rows, cols, tr, tc) -> a new vec: the row-major rows×cols matrix v
 * reordered tile by tile (tiles tr×tc in row-major order, each row-major
 * inside; the last tile row and column hold what is left), the layout a
 * tile pipeline keeps in memory so each tile is one contiguous copy. Tile
 * (ti, tj) starts at ti·tr·cols + h·tj·tc, h the height of its tile row. */
static int v_tile(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    size_t rows = checksize(L, 2), cols = checksize(L, 3), tr = checksize(L, 4),
           tc = checksize(L, 5);
    if (rows * cols != x->n || !tr || !tc)
        return luaL_error(L, "vec:tile(%d, %d, %d, %d) of a vec of %d", (int)rows, (int)cols,
                          (int)tr, (int)tc, (int)x->n);
    struct vec *y = newvec(L, x->n);
    size_t o = 0;
    for (size_t r0 = 0; r0 < rows; r0 += tr) {
        size_t h = rows - r0 < tr ? rows - r0 : tr;
        for (size_t c0 = 0; c0 < cols; c0 += tc) {
            size_t w = cols - c0 < tc ? cols - c0 : tc;
            for (size_t r = 0; r < h; r++) {
                memcpy(y->v + o, x->v + (r0 + r) * cols + c0, w * sizeof(double));
                o += w;
            }
        }
    }
    return 1;
}

/* vec_matmul(a, b, m, k, n) -> c: the host reference of a GEMM, row-major
 * a (m×k) times b (k×n), every product and sum in double, so the inputs'
 * exact values give the exact result wherever it fits 53 bits */
static int l_matmul(lua_State *L)
{
    struct vec *a = checkvec(L, 1), *b = checkvec(L, 2);
    size_t m = checksize(L, 3), k = checksize(L, 4), n = checksize(L, 5);
    if (a->n != m * k || b->n != k * n)
        return luaL_error(L, "vec_matmul: a of %d and b of %d do not fit m=%d k=%d n=%d",
                          (int)a->n, (int)b->n, (int)m, (int)k, (int)n);
    if (m * n > (size_t)VEC_MAX)
        return luaL_error(L, "vec_matmul: result too large");
    struct vec *c = newvec(L, m * n);
    memset(c->v, 0, m * n * sizeof(double));
    /* i, p, j: the inner loop runs along rows of b and c, contiguous */
    for (size_t i = 0; i < m; i++) {
        double *ci = c->v + i * n;
        for (size_t p = 0; p < k; p++) {
            double aip = a->v[i * k + p];
            const double *bp = b->v + p * n;
            for (size_t j = 0; j < n; j++)
                ci[j] += aip * bp[j];
        }
    }
    return 1;
}

/* v:max_abs() */
static int v_max_abs(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    double m = 0;
    for (size_t i = 0; i < x->n; i++)
        if (fabs(x->v[i]) > m)
            m = fabs(x->v[i]);
    lua_pushnumber(L, m);
    return 1;
}

/* v:get(i) (0-based) */
static int v_get(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    lua_Integer i = luaL_checkinteger(L, 2);
    luaL_argcheck(L, i >= 0 && (size_t)i < x->n, 2, "index out of range");
    lua_pushnumber(L, x->v[i]);
    return 1;
}

static int v_to_table(lua_State *L)
{
    struct vec *x = checkvec(L, 1);
    lua_createtable(L, (int)x->n, 0);
    for (size_t i = 0; i < x->n; i++) {
        lua_pushnumber(L, x->v[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int v_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)checkvec(L, 1)->n);
    return 1;
}

static int v_tostring(lua_State *L)
{
    lua_pushfstring(L, "vec(%d)", (int)checkvec(L, 1)->n);
    return 1;
}

static const luaL_Reg vec_methods[] = {
    {"write", v_write},   {"read", v_read},   {"round", v_round},     {"add", v_add},
    {"scale", v_scale},   {"mod", v_mod},         {"copy", v_copy},       {"slice", v_slice},
    {"set", v_set},       {"max_abs_diff", v_max_abs_diff}, {"max_rel_diff", v_max_rel_diff},
    {"tile", v_tile},
    {"max_abs", v_max_abs}, {"get", v_get},       {"to_table", v_to_table},
    {NULL, NULL}};

static const luaL_Reg vec_funcs[] = {
    {"vec_new", l_new}, {"vec_affine", l_affine}, {"vec_from", l_from},
    {"vec_read", l_read}, {"vec_matmul", l_matmul}, {NULL, NULL}};

void lkb_open_vec(lua_State *L)
{
    if (lkb_newmetatable(L, KB_VEC)) {
        luaL_newlib(L, vec_methods);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, v_len);
        lua_setfield(L, -2, "__len");
        lua_pushcfunction(L, v_tostring);
        lua_setfield(L, -2, "__tostring");
    }
    lua_pop(L, 1);
    luaL_setfuncs(L, vec_funcs, 0);
}
