/* pe_math.c — kb_math: element-wise values, the vector-unit time model and
 * the unit's occupancy and counters */
#include "pe_math.h"

#include "kb_err.h"
#include "kb_port.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MATH_F16C 1
#endif


struct kb_math {
    struct sim *sim;
    char *name;
    struct kb_math_params p;
    sim_time busy_until;
    struct kb_math_stats st;
    struct kb_math_if iface;
    struct sim_port *port; /* "NAME.math.in" */
    char err[256];
};

static const char *const op_names[KB_MATH_OP_COUNT] = {
    "add", "sub", "mul", "div", "maximum", "minimum", "fma",
    "clamp", "exp", "log", "softmax", "cdiv", "sum"};

const char *kb_math_op_name(enum kb_math_op op)
{
    return (unsigned)op < KB_MATH_OP_COUNT ? op_names[op] : "?";
}

int kb_math_op_parse(const char *name, enum kb_math_op *out)
{
    for (int i = 0; name && i < KB_MATH_OP_COUNT; i++)
        if (strcmp(name, op_names[i]) == 0) {
            *out = (enum kb_math_op)i;
            return 0;
        }
    return -1;
}

int kb_math_op_arity(enum kb_math_op op)
{
    switch (op) {
    case KB_MATH_EXP:
    case KB_MATH_LOG:
    case KB_MATH_SOFTMAX:
    case KB_MATH_SUM: return 1;
    case KB_MATH_FMA:
    case KB_MATH_CLAMP: return 3;
    default: return 2;
    }
}

int64_t kb_math_cdiv_i64(int64_t a, int64_t b)
{
    int64_t q = a / b; /* truncates toward zero */
    if (a % b != 0 && (a < 0) == (b < 0))
        q++;
    return q;
}

/* ---- values -------------------------------------------------------------- */

/* NaN-propagating max; among equal values a +0 beats a -0. */
static double max_of(double x, double y)
{
    if (isnan(x) || isnan(y))
        return x + y;
    if (x == y)
        return signbit(x) ? y : x;
    return x > y ? x : y;
}

static double min_of(double x, double y)
{
    if (isnan(x) || isnan(y))
        return x + y;
    if (x == y)
        return signbit(x) ? x : y;
    return x < y ? x : y;
}

/* One element of a one-, two- or three-operand op, before its rounding.
 * f32 fma rounds in fmaf itself: a double fma rounded again to float could
 * be a double rounding; for f16 and bf16 a double fma is the exact value in
 * every case that stays inside the narrow type's range. */
static double element(enum kb_math_op op, double x, double y, double z,
                      enum kb_dtype dt)
{
    switch (op) {
    case KB_MATH_ADD: return x + y;
    case KB_MATH_SUB: return x - y;
    case KB_MATH_MUL: return x * y;
    case KB_MATH_DIV: return x / y;
    case KB_MATH_MAXIMUM: return max_of(x, y);
    case KB_MATH_MINIMUM: return min_of(x, y);
    case KB_MATH_FMA:
        return dt == KB_DTYPE_F32 ? fmaf((float)x, (float)y, (float)z)
                                  : fma(x, y, z);
    case KB_MATH_CLAMP: return min_of(max_of(x, y), z);
    case KB_MATH_EXP: return exp(x);
    case KB_MATH_LOG: return log(x);
    case KB_MATH_CDIV: return ceil(x / y);
    case KB_MATH_SOFTMAX:
    case KB_MATH_SUM: break;
    }
    return NAN;
}

/* Two passes so that `out` may alias `a`: the max and the sum of
 * exponentials first, then each output from its own exponential. */
static void softmax(const void *a, void *out, size_t n, enum kb_dtype dt)
{
    if (!n)
        return;
    double mx = kb_dtype_load(a, 0, dt);
    for (size_t i = 1; i < n; i++)
        mx = max_of(mx, kb_dtype_load(a, i, dt));
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += exp(kb_dtype_load(a, i, dt) - mx);
    for (size_t i = 0; i < n; i++)
        kb_dtype_store(out, i, dt, exp(kb_dtype_load(a, i, dt) - mx) / sum);
}

/* Elementwise ops in chunks, so that the bulk conversions run over many
 * elements; each chunk is loaded whole before it is stored, so out may
 * still alias an operand. The chunk stays small: thread processes have
 * small stacks. */
static void values(enum kb_math_op op, const void *a, const void *b, const void *c, void *out,
                   size_t n, enum kb_dtype dt)
{
    enum { CHUNK = 64 };
    int arity = kb_math_op_arity(op);
    double x[CHUNK], y[CHUNK] = {0}, z[CHUNK] = {0}, r[CHUNK];
    size_t es = kb_dtype_size(dt);
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        kb_dtype_load_n((const char *)a + i * es, dt, x, k);
        if (arity > 1)
            kb_dtype_load_n((const char *)b + i * es, dt, y, k);
        if (arity > 2)
            kb_dtype_load_n((const char *)c + i * es, dt, z, k);
        /* the commonest ops as loops of their own (the compiler vectorises
         * them), the same arithmetic as element() */
        switch (op) {
        case KB_MATH_ADD:
            for (size_t j = 0; j < k; j++)
                r[j] = x[j] + y[j];
            break;
        case KB_MATH_SUB:
            for (size_t j = 0; j < k; j++)
                r[j] = x[j] - y[j];
            break;
        case KB_MATH_MUL:
            for (size_t j = 0; j < k; j++)
                r[j] = x[j] * y[j];
            break;
        default:
            for (size_t j = 0; j < k; j++)
                r[j] = element(op, x[j], y[j], z[j], dt);
        }
        kb_dtype_store_n((char *)out + i * es, dt, r, k);
    }
}

#ifdef MATH_F16C
/* f16 add, sub, mul and div eight elements at a time: F16C widens to
 * float (exact), the op runs in float, and F16C narrows to nearest even.
 * This is bit for bit what element() in double and kb_dtype_store give:
 * a float holds 24 bits, at least 2·11 + 2, so rounding the exact result
 * first to float and then to f16 equals rounding it once to f16 (a double
 * rounding is innocuous for +, -, ×, ÷ when p >= 2q + 2; Figueroa 1995).
 * Eight elements holding a NaN operand are left to the scalar path (which
 * NaN comes out of two is the compiled code's choice of operand order);
 * test_pe_math checks every f16 against a set of operands. Returns the
 * index of the first element not done: n, an unaligned tail, or a block
 * with a NaN, which the caller does before calling again from past it. */
__attribute__((target("avx,f16c"))) static size_t f16_binary_f16c(enum kb_math_op op,
                                                                   const void *a, const void *b,
                                                                   void *out, size_t i, size_t n)
{
    const unsigned char *pa = a, *pb = b;
    unsigned char *po = out;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(pa + 2 * i)));
        __m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(pb + 2 * i)));
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, y, _CMP_UNORD_Q)))
            break;
        __m256 r;
        switch (op) {
        case KB_MATH_ADD: r = _mm256_add_ps(x, y); break;
        case KB_MATH_SUB: r = _mm256_sub_ps(x, y); break;
        case KB_MATH_MUL: r = _mm256_mul_ps(x, y); break;
        default: r = _mm256_div_ps(x, y); break;
        }
        _mm_storeu_si128((__m128i *)(void *)(po + 2 * i),
                         _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return i;
}

/* The same sixteen at a time, where the CPU has AVX-512 (F): the lanes
 * are those of f16_binary_f16c, so every element is bit for bit the same;
 * a block of sixteen holding a NaN is left to the eight-wide and scalar
 * paths, as a block of eight is there. */
__attribute__((target("avx512f"))) static size_t f16_binary_avx512(enum kb_math_op op,
                                                                    const void *a, const void *b,
                                                                    void *out, size_t i, size_t n)
{
    const unsigned char *pa = a, *pb = b;
    unsigned char *po = out;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(pa + 2 * i)));
        __m512 y = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(pb + 2 * i)));
        if (_mm512_cmp_ps_mask(x, y, _CMP_UNORD_Q))
            break;
        __m512 r;
        switch (op) {
        case KB_MATH_ADD: r = _mm512_add_ps(x, y); break;
        case KB_MATH_SUB: r = _mm512_sub_ps(x, y); break;
        case KB_MATH_MUL: r = _mm512_mul_ps(x, y); break;
        default: r = _mm512_div_ps(x, y); break;
        }
        _mm256_storeu_si256((__m256i *)(void *)(po + 2 * i),
                            _mm512_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return i;
}


#endif

int kb_math_compute(enum kb_math_op op, const void *a, const void *b,
                    const void *c, void *out, size_t n, enum kb_dtype dt)
{
    if ((unsigned)op >= KB_MATH_OP_COUNT || kb_dtype_size(dt) == 0)
        return SIM_EINVAL;
    int arity = kb_math_op_arity(op);
    bool need = n > 0 || op == KB_MATH_SUM;
    if (need && (!out || (n && (!a || (arity > 1 && !b) || (arity > 2 && !c)))))
        return SIM_EINVAL;
    if (op == KB_MATH_SUM) {
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += kb_dtype_load(a, i, dt);
        kb_dtype_store(out, 0, dt, s);
        return 0;
    }
    if (op == KB_MATH_SOFTMAX) {
        softmax(a, out, n, dt);
        return 0;
    }
#ifdef MATH_F16C
    size_t es = kb_dtype_size(dt);
    if (dt == KB_DTYPE_F16 && (op == KB_MATH_ADD || op == KB_MATH_SUB || op == KB_MATH_MUL ||
                               op == KB_MATH_DIV) && kb_dtype_have_f16c()) {
        size_t i = 0;
        bool wide = __builtin_cpu_supports("avx512f"); /* (a load and a bit test) */
        while ((i = f16_binary_f16c(op, a, b, out, wide ? f16_binary_avx512(op, a, b, out, i, n) : i,
                                    n)) < n) {
            size_t k = n - i < 8 ? n - i : 8; /* the tail, or a block with a NaN */
            values(op, (const char *)a + i * es, (const char *)b + i * es, NULL,
                   (char *)out + i * es, k, dt);
            i += k;
        }
        return 0;
    }
#endif
    values(op, a, b, c, out, n, dt);
    return 0;
}

/* The element at element index i of arg x, or a run of *k elements from
 * there that are contiguous (at most *k): a pointer to them. An element
 * split between two pieces of a snapshot is read into tmp (*k = 1). */
static const void *arg_run(const struct kb_math_arg *x, size_t i, size_t es, size_t n,
                           size_t *k, unsigned char *tmp)
{
    static const unsigned char zeros[KB_MEM_PAGE_BYTES]; /* a span is at most a page */
    if (!x->snap)
        return (const char *)x->p + i * es;
    const unsigned char *p;
    uint64_t len;
    if (kb_mem_snap_span(x->snap, (uint64_t)i * es, (uint64_t)(n - i) * es, &p, &len) < 0)
        return NULL;
    if (len < es) {
        *k = 1;
        return kb_mem_snap_read(x->snap, (uint64_t)i * es, tmp, es) < 0 ? NULL : tmp;
    }
    if (*k > len / es)
        *k = (size_t)(len / es);
    if (!p && *k > sizeof zeros / es)
        *k = sizeof zeros / es;
    return p ? p : zeros;
}

static bool arg_none(const struct kb_math_arg *x) { return !x || (!x->p && !x->snap); }

int kb_math_compute_args(enum kb_math_op op, const struct kb_math_arg *a,
                         const struct kb_math_arg *b, const struct kb_math_arg *c,
                         const struct kb_math_dst *out, size_t n, enum kb_dtype dt)
{
    size_t es = kb_dtype_size(dt);
    if ((unsigned)op >= KB_MATH_OP_COUNT || es == 0)
        return SIM_EINVAL;
    int arity = kb_math_op_arity(op);
    const struct kb_math_arg *args[3] = {a, b, c};
    bool snaps = false;
    for (int j = 0; j < arity; j++) {
        if (arg_none(args[j]))
            return kb_math_compute(op, NULL, NULL, NULL, out->p, n, dt); /* its error */
        snaps = snaps || args[j]->snap;
    }
    if (!out->mem && !snaps)
        return kb_math_compute(op, a->p, arity > 1 ? b->p : NULL, arity > 2 ? c->p : NULL,
                               out->p, n, dt);
    if (!out->mem && !out->p)
        return kb_math_compute(op, NULL, NULL, NULL, NULL, n, dt); /* its error */
    if (op == KB_MATH_SUM || op == KB_MATH_SOFTMAX) {
        /* one operand, read whole; the result through a buffer if need be */
        size_t outn = op == KB_MATH_SUM ? 1 : n;
        void *in = a->snap ? malloc(n > 0 ? n * es : 1) : NULL;
        void *res = out->mem ? malloc(outn * es) : out->p;
        int rc = (a->snap && !in) || !res ? SIM_ENOMEM
                 : in && kb_mem_snap_read(a->snap, 0, in, (uint64_t)n * es) < 0 ? SIM_EINVAL
                 : kb_math_compute(op, in ? in : a->p, NULL, NULL, res, n, dt);
        if (rc == 0 && out->mem) /* (SIM_ENOMEM stays so: args_error tells) */
            rc = kb_mem_write(out->mem, out->addr, res, outn * es);
        free(in);
        if (out->mem)
            free(res);
        return rc;
    }
    /* a result into pages that an operand's snapshot holds (a tile beside
     * its operands in one page): computed aside, the snapshots the caller
     * lets go of dropped, then written, so that no page is copied */
    bool drops = false;
    for (int j = 0; j < arity; j++)
        drops = drops || args[j]->drop;
    uint64_t rbytes = (uint64_t)n * es;
    if (out->mem && drops && kb_mem_shared(out->mem, out->addr, rbytes)) {
        void *res = malloc(rbytes ? rbytes : 1);
        if (!res)
            return SIM_ENOMEM;
        struct kb_math_dst aside = {res, NULL, 0};
        int rc = kb_math_compute_args(op, a, b, c, &aside, n, dt);
        if (rc == 0) {
            for (int j = 0; j < arity; j++)
                if (args[j]->drop)
                    kb_mem_snap_clear(args[j]->drop);
            rc = kb_mem_write(out->mem, out->addr, res, rbytes);
        }
        free(res);
        return rc;
    }
    /* elementwise: each element's value depends on its operands only, so
     * runs of any length give the values of one pass */
    unsigned char tmp[4][16];
    for (size_t i = 0; i < n;) {
        size_t k = n - i;
        const void *p[3] = {NULL, NULL, NULL};
        for (int j = 0; j < arity; j++)
            if (!(p[j] = arg_run(args[j], i, es, n, &k, tmp[j])))
                return SIM_EINVAL;
        void *o = out->p ? (char *)out->p + i * es : NULL;
        bool split = false; /* an element split between two pages of the result */
        if (out->mem) {
            unsigned char *w;
            uint64_t len;
            int rc = kb_mem_write_span(out->mem, out->addr + (uint64_t)i * es,
                                       (uint64_t)k * es, &w, &len);
            if (rc < 0)
                return rc;
            split = len < es;
            if (split)
                k = 1;
            else if (k > len / es)
                k = (size_t)(len / es);
            o = split ? tmp[3] : w;
        }
        int rc = kb_math_compute(op, p[0], p[1], p[2], o, k, dt);
        if (rc == 0 && split)
            rc = kb_mem_write(out->mem, out->addr + (uint64_t)i * es, tmp[3], es);
        if (rc < 0)
            return rc;
        i += k;
    }
    return 0;
}

/* ---- timing -------------------------------------------------------------- */

/* The time model, in cycles, for n elements of s bytes:
 *
 *     cycles = ceil(n·s / W) · c(op)
 *
 * ceil(n·s / W) is the number of W-byte vectors in one operand stream: the
 * unit reads each of its operand streams and writes its result stream in
 * parallel, one vector of each a cycle, so the bytes counted are those of
 * one stream, n·s (for sum: its input). c(op) is the cycles a vector takes:
 * 1 for add, sub, mul, div, maximum, minimum, fma, clamp, cdiv and sum;
 * T = transcendental_cycles for exp and log; T + 2 for softmax (a max pass,
 * an exp-and-sum pass, a scaling pass). The time is cycles / clock_ghz ns,
 * rounded to the nearest ps. */
static uint64_t cycles_per_vector(const struct kb_math_params *p,
                                  enum kb_math_op op)
{
    switch (op) {
    case KB_MATH_EXP:
    case KB_MATH_LOG: return p->transcendental_cycles;
    case KB_MATH_SOFTMAX: return (uint64_t)p->transcendental_cycles + 2;
    default: return 1;
    }
}

uint64_t kb_math_cycles(const struct kb_math_params *p, enum kb_math_op op,
                        size_t n, enum kb_dtype dt)
{
    uint64_t s = kb_dtype_size(dt), w = p->vector_bytes_per_cycle;
    if ((unsigned)op >= KB_MATH_OP_COUNT || !s || !w)
        return 0;
    /* n·s + w - 1 stays far from 2^64 for any buffer that fits in memory */
    uint64_t vectors = ((uint64_t)n * s + w - 1) / w;
    return vectors * cycles_per_vector(p, op);
}

static sim_time cycles_to_ps(uint64_t cycles, double clock_ghz)
{
    return sim_round_ps((double)cycles * 1000.0 / clock_ghz); /* llround, exactly */
}

sim_time kb_math_time(const struct kb_math_params *p, enum kb_math_op op,
                      size_t n, enum kb_dtype dt)
{
    return cycles_to_ps(kb_math_cycles(p, op, n, dt), p->clock_ghz);
}

bool kb_math_time_fits(const struct kb_math_params *p, enum kb_math_op op, uint64_t n,
                       enum kb_dtype dt)
{
    if (n > KB_MATH_MAX_N)
        return false;
    return (double)kb_math_cycles(p, op, (size_t)n, dt) * 1000.0 / p->clock_ghz < 9e18;
}

int kb_math_params_check(const struct kb_math_params *p, const char *name,
                         char *err, size_t errlen)
{
    if (p->vector_bytes_per_cycle == 0)
        kb_errf(err, errlen, "math of '%s': vector width must be > 0 bytes per "
             "cycle, got 0", name);
    else if (!(p->clock_ghz > 0) || isinf(p->clock_ghz))
        kb_errf(err, errlen, "math of '%s': clock must be a positive number of "
             "GHz, got %g", name, p->clock_ghz);
    else if (p->transcendental_cycles == 0)
        kb_errf(err, errlen, "math of '%s': transcendental cycles must be >= 1, "
             "got 0", name);
    else
        return 0;
    return SIM_EINVAL;
}

/* ---- the unit ------------------------------------------------------------ */

/* ---- the module's export (kb_math_if) ----------------------------------- */

static int if_run_args(void *ctx, enum kb_math_op op, const struct kb_math_arg *a,
                       const struct kb_math_arg *b, const struct kb_math_arg *c,
                       const struct kb_math_dst *out, size_t n, enum kb_dtype dt)
{
    return kb_math_run_args(ctx, op, a, b, c, out, n, dt);
}
static int if_run(void *ctx, enum kb_math_op op, const void *a, const void *b, const void *c,
                  void *out, size_t n, enum kb_dtype dt)
{
    return kb_math_run(ctx, op, a, b, c, out, n, dt);
}
static const struct kb_math_params *if_params(void *ctx) { return kb_math_params(ctx); }
static const char *if_errmsg(void *ctx) { return kb_math_errmsg(ctx); }

struct kb_math *kb_math_new(struct sim *s, const char *name,
                            const struct kb_math_params *p, char *err,
                            size_t errlen)
{
    if (kb_math_params_check(p, name, err, errlen) < 0)
        return NULL;
    struct kb_math *m = calloc(1, sizeof *m);
    if (m)
        m->name = strdup(name);
    if (!m || !m->name) {
        kb_errf(err, errlen, "math of '%s': out of memory", name);
        free(m);
        return NULL;
    }
    m->sim = s;
    m->p = *p;
    m->iface = (struct kb_math_if){m, if_run, if_params, if_errmsg, if_run_args};
    if (!(m->port = kb_port_export(s, name, "math", KB_MATH_IF, &m->iface, 1, err, errlen))) {
        kb_math_free(m);
        return NULL;
    }
    return m;
}

struct sim_port *kb_math_port(const struct kb_math *m) { return m->port; }

void kb_math_free(struct kb_math *m)
{
    if (!m)
        return;
    free(m->name);
    free(m);
}

const char *kb_math_errmsg(const struct kb_math *m) { return m->err; }
const char *kb_math_name(const struct kb_math *m) { return m->name; }
const struct kb_math_params *kb_math_params(const struct kb_math *m)
{
    return &m->p;
}

static int bad_operands(struct kb_math *m, enum kb_math_op op, const void *a,
                        const void *b, const void *c, const void *out,
                        size_t n, enum kb_dtype dt)
{
    const char *why = NULL;
    if ((unsigned)op >= KB_MATH_OP_COUNT) {
        kb_errf(m->err, sizeof m->err, "math of '%s': unknown op %d", m->name,
             (int)op);
        return SIM_EINVAL;
    }
    int arity = kb_math_op_arity(op);
    if (kb_dtype_size(dt) == 0) {
        kb_errf(m->err, sizeof m->err, "math of '%s': %s: unknown dtype %d",
             m->name, op_names[op], (int)dt);
        return SIM_EINVAL;
    }
    if (!a && !b && !c && !out)
        return 0; /* time only: a timing-only run carries no values */
    if ((n || op == KB_MATH_SUM) && !out)
        why = "out";
    else if (n && !a)
        why = "a";
    else if (n && arity > 1 && !b)
        why = "b";
    else if (n && arity > 2 && !c)
        why = "c";
    if (why) {
        kb_errf(m->err, sizeof m->err, "math of '%s': %s needs operand '%s', "
             "got NULL", m->name, op_names[op], why);
        return SIM_EINVAL;
    }
    return 0;
}

static int hold(struct kb_math *m, enum kb_math_op op, size_t n, enum kb_dtype dt);
static int args_error(struct kb_math *m, enum kb_math_op op, int rc, struct kb_mem *dst);

/* 0, or SIM_EPERM with its message: op asked for outside a process */
static int in_process(struct kb_math *m, enum kb_math_op op)
{
    if (sim_current(m->sim))
        return 0;
    kb_errf(m->err, sizeof m->err, "math of '%s': %s outside a process", m->name,
            op_names[op]);
    return SIM_EPERM;
}

int kb_math_run(struct kb_math *m, enum kb_math_op op, const void *a,
                const void *b, const void *c, void *out, size_t n,
                enum kb_dtype dt)
{
    int rc = bad_operands(m, op, a, b, c, out, n, dt);
    if (rc < 0)
        return rc;
    if ((rc = in_process(m, op)) < 0)
        return rc;
    if (out)
        kb_math_compute(op, a, b, c, out, n, dt);
    return hold(m, op, n, dt);
}

int kb_math_run_args(struct kb_math *m, enum kb_math_op op, const struct kb_math_arg *a,
                     const struct kb_math_arg *b, const struct kb_math_arg *c,
                     const struct kb_math_dst *out, size_t n, enum kb_dtype dt)
{
    /* (a snapshot stands for its operand in the check) */
    const struct kb_math_arg *args[3] = {a, b, c};
    const void *p[3];
    for (int j = 0; j < 3; j++)
        p[j] = arg_none(args[j]) ? NULL : args[j]->p ? args[j]->p : (const void *)args[j]->snap;
    const void *o = !out ? NULL : out->p ? out->p : (const void *)out->mem;
    int rc = bad_operands(m, op, p[0], p[1], p[2], o, n, dt);
    if (rc < 0)
        return rc;
    if ((rc = in_process(m, op)) < 0)
        return rc;
    /* into a buffer: computed now, as kb_math_run; into memory: when the
     * op ends (the same values: the operands do not change meanwhile) */
    bool late = o && out->mem;
    if (o && !late && (rc = kb_math_compute_args(op, a, b, c, out, n, dt)) < 0)
        return args_error(m, op, rc, NULL);
    if ((rc = hold(m, op, n, dt)) < 0 || !late)
        return rc;
    if ((rc = kb_math_compute_args(op, a, b, c, out, n, dt)) < 0)
        return args_error(m, op, rc, out->mem);
    return 0;
}

/* kb_math_compute_args failed with rc: the unit's message says why. */
static int args_error(struct kb_math *m, enum kb_math_op op, int rc, struct kb_mem *dst)
{
    if (rc == SIM_ENOMEM)
        kb_errf(m->err, sizeof m->err, "math of '%s': %s: out of memory", m->name,
                op_names[op]);
    else if (dst)
        kb_errf(m->err, sizeof m->err, "math of '%s': %s: %s", m->name, op_names[op],
                kb_mem_errmsg(dst));
    else
        kb_errf(m->err, sizeof m->err, "math of '%s': %s: an operand is shorter than its "
                "elements", m->name, op_names[op]);
    return rc;
}

/* The unit held for op's time from now, or from when it frees: the
 * caller waits until the op ends. */
static int hold(struct kb_math *m, enum kb_math_op op, size_t n, enum kb_dtype dt)
{
    int rc;
    uint64_t cycles = kb_math_cycles(&m->p, op, n, dt);
    sim_time t = cycles_to_ps(cycles, m->p.clock_ghz);
    sim_time now = sim_now(m->sim);
    sim_time start = m->busy_until > now ? m->busy_until : now;
    m->busy_until = start + t;
    m->st.ops++;
    m->st.elements += n;
    m->st.cycles += cycles;
    m->st.busy_ps += t;
    m->st.by_op[op]++;
    if (m->busy_until == now)
        return 0; /* nothing to wait for: not even a delta cycle */
    rc = sim_wait(m->sim, m->busy_until - now);
    if (rc < 0)
        kb_errf(m->err, sizeof m->err, "math of '%s': %s from a method process "
             "cannot wait (booked until %" PRIu64 " ps)", m->name,
             op_names[op], m->busy_until);
    return rc;
}

void kb_math_get_stats(const struct kb_math *m, struct kb_math_stats *out)
{
    *out = m->st;
}

double kb_math_utilisation(const struct kb_math *m, sim_time elapsed)
{
    if (!elapsed)
        elapsed = sim_now(m->sim);
    return elapsed ? (double)m->st.busy_ps / (double)elapsed : 0.0;
}
