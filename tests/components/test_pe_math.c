/* test_pe_math.c — kb_math: every op's values in f16, bf16 and f32 against
 * a double-precision reference rounded to the dtype, softmax rows, the
 * time formula against its closed form, the blocking run and counters */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "pe.h"
#include "pe_math.h"
#include "sim.h"
#include "test.h"
#include "topology_schema.h"

static const enum kb_dtype DTS[] = {KB_DTYPE_F16, KB_DTYPE_BF16, KB_DTYPE_F32};

static const struct kb_math_params DEF = {
    .vector_bytes_per_cycle = 128, .clock_ghz = 1.0,
    .transcendental_cycles = 4};

/* xorshift64*: reproducible operands without libc's rand */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static double uniform(double lo, double hi)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545F4914F6CDD1Du;
    return lo + (hi - lo) * (double)(r >> 11) * 0x1p-53;
}

static void fill(void *buf, size_t n, enum kb_dtype dt, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        kb_dtype_store(buf, i, dt, uniform(lo, hi));
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The plain double computation each op is checked against. */
static double reference(enum kb_math_op op, double x, double y, double z)
{
    switch (op) {
    case KB_MATH_ADD: return x + y;
    case KB_MATH_SUB: return x - y;
    case KB_MATH_MUL: return x * y;
    case KB_MATH_DIV: return x / y;
    case KB_MATH_MAXIMUM: return x > y ? x : y;
    case KB_MATH_MINIMUM: return x < y ? x : y;
    case KB_MATH_FMA: return fma(x, y, z);
    case KB_MATH_CLAMP: return x < y ? y : x > z ? z : x;
    case KB_MATH_EXP: return exp(x);
    case KB_MATH_LOG: return log(x);
    case KB_MATH_CDIV: return ceil(x / y);
    default: return NAN;
    }
}

/* One unit in the last place of `dt` at |v| (the subnormal spacing below
 * the normal range). */
static double ulp(double v, enum kb_dtype dt)
{
    int p = dt == KB_DTYPE_F16 ? 11 : dt == KB_DTYPE_BF16 ? 8 : 24;
    int emin = dt == KB_DTYPE_F16 ? -14 : -126;
    int e = v == 0 ? emin : ilogb(v);
    return ldexp(1.0, (e < emin ? emin : e) - (p - 1));
}

#define N 2000

/* add … cdiv except the transcendental ones: bit-exact. Operands cover
 * mixed signs and magnitudes; clamp bounds are lo <= hi. */
TEST(values_exact)
{
    static const enum kb_math_op ops[] = {
        KB_MATH_ADD, KB_MATH_SUB, KB_MATH_MUL, KB_MATH_DIV, KB_MATH_MAXIMUM,
        KB_MATH_MINIMUM, KB_MATH_FMA, KB_MATH_CLAMP, KB_MATH_CDIV};
    static float a[N], b[N], c[N], out[N];
    for (size_t d = 0; d < 3; d++) {
        enum kb_dtype dt = DTS[d];
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            enum kb_math_op op = ops[o];
            fill(a, N, dt, -300, 300);
            fill(b, N, dt, -3, 3);
            fill(c, N, dt, -50, 50);
            if (op == KB_MATH_CLAMP) {
                fill(b, N, dt, -100, 0);
                fill(c, N, dt, 0, 100);
            }
            for (size_t i = 0; i < N; i += 97) /* some tiny magnitudes */
                kb_dtype_store(b, i, dt, uniform(-1, 1) * 1e-6);
            ASSERT_EQ(kb_math_compute(op, a, b, c, out, N, dt), 0);
            for (size_t i = 0; i < N; i++) {
                double x = kb_dtype_load(a, i, dt), y = kb_dtype_load(b, i, dt),
                       z = kb_dtype_load(c, i, dt);
                float want = kb_dtype_round(reference(op, x, y, z), dt);
                float got = kb_dtype_load(out, i, dt);
                if (bits(got) != bits(want)) {
                    fprintf(stderr, "%s %s [%zu]: %a %a %a\n",
                            kb_math_op_name(op), kb_dtype_name(dt), i, x, y, z);
                    ASSERT_U64_EQ(bits(got), bits(want));
                }
            }
        }
    }
}

/* f16 add, sub, mul, div against the compiler's own _Float16 arithmetic,
 * an independent implementation of the same rounding. */
TEST(values_f16_against_compiler)
{
#ifdef __FLT16_MAX__
    static _Float16 a[N], b[N], out[N];
    static const enum kb_math_op ops[] = {KB_MATH_ADD, KB_MATH_SUB, KB_MATH_MUL,
                                          KB_MATH_DIV};
    fill(a, N, KB_DTYPE_F16, -1000, 1000);
    fill(b, N, KB_DTYPE_F16, -2, 2);
    for (size_t o = 0; o < 4; o++) {
        ASSERT_EQ(kb_math_compute(ops[o], a, b, NULL, out, N, KB_DTYPE_F16), 0);
        for (size_t i = 0; i < N; i++) {
            _Float16 want = ops[o] == KB_MATH_ADD ? a[i] + b[i]
                          : ops[o] == KB_MATH_SUB ? a[i] - b[i]
                          : ops[o] == KB_MATH_MUL ? a[i] * b[i]
                                                  : a[i] / b[i];
            ASSERT_EQ(memcmp(&out[i], &want, 2), 0);
        }
    }
#endif
}

/* exp and log: within one ulp of the dtype of the double value (the
 * implementation rounds the double once, so it is in fact correctly
 * rounded with respect to libm's double). */
/* f16 add, sub, mul, div (vector paths where the CPU has F16C, AVX-512) against
 * the scalar recipe, double op then kb_dtype_store, bit for bit: every
 * f16 against a set of operands that covers zeros, subnormals, the
 * largest finite, infinities, quiet and signalling NaNs and rounding ties,
 * on both sides, at every position of a vector and in the scalar tail. */
TEST(values_f16_every_input)
{
    static const uint16_t special[] = {
        0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x3c01, 0x3555,
        0x4200, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7d23, 0x1400, 0x6800,
        0x5bff, 0x0200, 0x3800, 0xc5a7, 0x2e66, 0x7a00, 0x0013, 0x8c00, 0x6400, 0x0801};
    enum { NS = sizeof special / sizeof special[0], M = 65536 + 3 };
    static uint16_t a[M], b[M], out[M], want[M];
    static const enum kb_math_op ops[] = {KB_MATH_ADD, KB_MATH_SUB, KB_MATH_MUL,
                                          KB_MATH_DIV};
    for (size_t o = 0; o < 4; o++) {
        for (size_t k = 0; k < 2 * NS; k++) {
            for (size_t i = 0; i < M; i++) {
                uint16_t all = (uint16_t)(i * 40503u + k), sp = special[k % NS];
                a[i] = k < NS ? all : sp;
                b[i] = k < NS ? sp : all;
                double x = kb_dtype_load(a, i, KB_DTYPE_F16), y = kb_dtype_load(b, i, KB_DTYPE_F16);
                kb_dtype_store(want, i, KB_DTYPE_F16, reference(ops[o], x, y, 0));
            }
            ASSERT_EQ(kb_math_compute(ops[o], a, b, NULL, out, M, KB_DTYPE_F16), 0);
            for (size_t i = 0; i < M; i++) {
                bool nan2 = (a[i] & 0x7fff) > 0x7c00 && (b[i] & 0x7fff) > 0x7c00;
                if (nan2 && (out[i] & 0x7fff) > 0x7c00)
                    continue; /* two NaNs: which one comes out is the compiler's choice */
                if (out[i] != want[i]) {
                    fprintf(stderr, "%s f16 [%zu]: %04x %04x -> %04x, want %04x\n",
                            kb_math_op_name(ops[o]), i, a[i], b[i], out[i], want[i]);
                    ASSERT_EQ(out[i], want[i]);
                }
            }
        }
    }
}

TEST(values_transcendental)
{
    static float a[N], out[N];
    for (size_t d = 0; d < 3; d++) {
        enum kb_dtype dt = DTS[d];
        fill(a, N, dt, -12, 12);
        ASSERT_EQ(kb_math_compute(KB_MATH_EXP, a, NULL, NULL, out, N, dt), 0);
        for (size_t i = 0; i < N; i++) {
            double want = exp(kb_dtype_load(a, i, dt));
            double got = kb_dtype_load(out, i, dt);
            if (dt == KB_DTYPE_F16 && want > 65504)
                ASSERT_TRUE(got == INFINITY || fabs(got - want) <= ulp(want, dt));
            else
                ASSERT_NEAR(got, want, ulp(want, dt));
        }
        fill(a, N, dt, 1e-3, 1e4);
        ASSERT_EQ(kb_math_compute(KB_MATH_LOG, a, NULL, NULL, out, N, dt), 0);
        for (size_t i = 0; i < N; i++) {
            double want = log(kb_dtype_load(a, i, dt));
            ASSERT_NEAR(kb_dtype_load(out, i, dt), want, ulp(want, dt));
        }
    }
}

TEST(values_special)
{
    float a[4], b[4], c[4], out[4];
    enum kb_dtype f = KB_DTYPE_F32;
    a[0] = -0.0f, b[0] = 0.0f, a[1] = 0.0f, b[1] = -0.0f;
    a[2] = NAN, b[2] = 1, a[3] = 1, b[3] = NAN;
    kb_math_compute(KB_MATH_MAXIMUM, a, b, NULL, out, 4, f);
    ASSERT_EQ(bits(out[0]), 0);
    ASSERT_EQ(bits(out[1]), 0);
    ASSERT_TRUE(isnan(out[2]) && isnan(out[3]));
    kb_math_compute(KB_MATH_MINIMUM, a, b, NULL, out, 4, f);
    ASSERT_EQ(bits(out[0]), 0x80000000u);
    ASSERT_EQ(bits(out[1]), 0x80000000u);
    ASSERT_TRUE(isnan(out[2]) && isnan(out[3]));

    a[0] = 5, a[1] = -5, a[2] = 0.5f, a[3] = NAN;
    for (int i = 0; i < 4; i++)
        b[i] = 0, c[i] = 1;
    kb_math_compute(KB_MATH_CLAMP, a, b, c, out, 4, f);
    ASSERT_TRUE(out[0] == 1 && out[1] == 0 && out[2] == 0.5f && isnan(out[3]));

    a[0] = 1, b[0] = 0, a[1] = -1, b[1] = 0, a[2] = 0, b[2] = 0;
    kb_math_compute(KB_MATH_DIV, a, b, NULL, out, 3, f);
    ASSERT_TRUE(out[0] == INFINITY && out[1] == -INFINITY && isnan(out[2]));

    a[0] = 0, a[1] = -1, a[2] = 1, a[3] = INFINITY;
    kb_math_compute(KB_MATH_LOG, a, NULL, NULL, out, 4, f);
    ASSERT_TRUE(out[0] == -INFINITY && isnan(out[1]) && out[2] == 0 &&
                out[3] == INFINITY);

    uint16_t h[2], ho[2];
    h[0] = kb_dtype_f16_from_float(12.0f), h[1] = kb_dtype_f16_from_float(-20.0f);
    kb_math_compute(KB_MATH_EXP, h, NULL, NULL, ho, 2, KB_DTYPE_F16);
    ASSERT_EQ(ho[0], 0x7C00); /* e^12 = 162755 overflows f16 */
    ASSERT_EQ(ho[1], 0x0000); /* e^-20 = 2.06e-9 is below half a subnormal */
    h[0] = kb_dtype_f16_from_float(60000), h[1] = kb_dtype_f16_from_float(60000);
    kb_math_compute(KB_MATH_ADD, h, h, NULL, ho, 1, KB_DTYPE_F16);
    ASSERT_EQ(ho[0], 0x7C00);

    a[0] = 7, b[0] = 2, a[1] = -7, b[1] = 2, a[2] = 6, b[2] = 2, a[3] = 0.5f;
    b[3] = 0.25f;
    kb_math_compute(KB_MATH_CDIV, a, b, NULL, out, 4, f);
    ASSERT_TRUE(out[0] == 4 && out[1] == -3 && out[2] == 3 && out[3] == 2);
    ASSERT_EQ(kb_math_cdiv_i64(7, 2), 4);
    ASSERT_EQ(kb_math_cdiv_i64(8, 2), 4);
    ASSERT_EQ(kb_math_cdiv_i64(-7, 2), -3);
    ASSERT_EQ(kb_math_cdiv_i64(7, -2), -3);
    ASSERT_EQ(kb_math_cdiv_i64(-7, -2), 4);
    ASSERT_EQ(kb_math_cdiv_i64(0, 5), 0);
    ASSERT_EQ(kb_math_cdiv_i64(3072, 32), 96);
    ASSERT_EQ(kb_math_cdiv_i64(3073, 32), 97);

    /* in place, and the bad calls */
    a[0] = 1, a[1] = 2;
    ASSERT_EQ(kb_math_compute(KB_MATH_MUL, a, a, NULL, a, 2, f), 0);
    ASSERT_TRUE(a[0] == 1 && a[1] == 4);
    ASSERT_EQ(kb_math_compute(KB_MATH_ADD, a, NULL, NULL, out, 2, f), SIM_EINVAL);
    ASSERT_EQ(kb_math_compute(KB_MATH_FMA, a, b, NULL, out, 2, f), SIM_EINVAL);
    ASSERT_EQ(kb_math_compute((enum kb_math_op)99, a, b, c, out, 2, f), SIM_EINVAL);
    ASSERT_EQ(kb_math_compute(KB_MATH_ADD, a, b, c, out, 2, (enum kb_dtype)9),
              SIM_EINVAL);
    ASSERT_EQ(kb_math_compute(KB_MATH_ADD, NULL, NULL, NULL, NULL, 0, f), 0);
}

/* Rows of several lengths, large offsets (e^1000 would overflow without the
 * max subtraction), against double; each row sums to 1 within
 * u + n·(half the smallest subnormal), u the dtype's unit roundoff. */
TEST(softmax_rows)
{
    static float a[N], out[N];
    static const size_t lens[] = {1, 2, 7, 64, 333, 2000};
    for (size_t d = 0; d < 3; d++) {
        enum kb_dtype dt = DTS[d];
        double u = dt == KB_DTYPE_F16 ? 0x1p-11 : dt == KB_DTYPE_BF16 ? 0x1p-8 : 0x1p-24;
        double half_sub = dt == KB_DTYPE_F16 ? 0x1p-25 : 0x1p-150;
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            size_t n = lens[l];
            double off = dt == KB_DTYPE_F16 ? 1000 : 1e4;
            fill(a, n, dt, off - 10, off + 10);
            ASSERT_EQ(kb_math_compute(KB_MATH_SOFTMAX, a, NULL, NULL, out, n, dt), 0);
            double mx = -INFINITY, den = 0, sum = 0;
            for (size_t i = 0; i < n; i++)
                mx = fmax(mx, kb_dtype_load(a, i, dt));
            for (size_t i = 0; i < n; i++)
                den += exp(kb_dtype_load(a, i, dt) - mx);
            for (size_t i = 0; i < n; i++) {
                double want = exp(kb_dtype_load(a, i, dt) - mx) / den;
                double got = kb_dtype_load(out, i, dt);
                ASSERT_TRUE(isfinite(got));
                ASSERT_NEAR(got, want, ulp(want, dt));
                sum += got;
            }
            ASSERT_NEAR(sum, 1.0, u + (double)n * half_sub + 1e-12);
            /* in place gives the same bits */
            static float copy[N];
            memcpy(copy, out, n * kb_dtype_size(dt));
            kb_math_compute(KB_MATH_SOFTMAX, a, NULL, NULL, a, n, dt);
            ASSERT_EQ(memcmp(a, copy, n * kb_dtype_size(dt)), 0);
        }
    }
}

TEST(sum_reduction)
{
    static float a[N];
    float out[1];
    for (size_t d = 0; d < 3; d++) {
        enum kb_dtype dt = DTS[d];
        fill(a, N, dt, -1, 2);
        ASSERT_EQ(kb_math_compute(KB_MATH_SUM, a, NULL, NULL, out, N, dt), 0);
        double s = 0;
        for (size_t i = 0; i < N; i++)
            s += kb_dtype_load(a, i, dt);
        ASSERT_U64_EQ(bits(kb_dtype_load(out, 0, dt)), bits(kb_dtype_round(s, dt)));
    }
    ASSERT_EQ(kb_math_compute(KB_MATH_SUM, a, NULL, NULL, out, 0, KB_DTYPE_F32), 0);
    ASSERT_TRUE(out[0] == 0);
}

TEST(names)
{
    enum kb_math_op op;
    for (int i = 0; i < KB_MATH_OP_COUNT; i++) {
        ASSERT_EQ(kb_math_op_parse(kb_math_op_name((enum kb_math_op)i), &op), 0);
        ASSERT_EQ(op, i);
    }
    ASSERT_EQ(kb_math_op_parse("max", &op), -1);
    ASSERT_STREQ(kb_math_op_name(KB_MATH_CDIV), "cdiv");
    ASSERT_EQ(kb_math_op_arity(KB_MATH_SOFTMAX), 1);
    ASSERT_EQ(kb_math_op_arity(KB_MATH_CLAMP), 3);
    ASSERT_EQ(kb_math_op_arity(KB_MATH_CDIV), 2);
}

/* ---- timing ------------------------------------------------------------- */

TEST(time_formula)
{
    /* hand-worked: W = 128 B, T = 4, 1 GHz */
    ASSERT_U64_EQ(kb_math_cycles(&DEF, KB_MATH_ADD, 32, KB_DTYPE_F32), 1);
    ASSERT_U64_EQ(kb_math_cycles(&DEF, KB_MATH_ADD, 33, KB_DTYPE_F32), 2);
    ASSERT_U64_EQ(kb_math_cycles(&DEF, KB_MATH_ADD, 64, KB_DTYPE_F16), 1);
    ASSERT_U64_EQ(kb_math_cycles(&DEF, KB_MATH_FMA, 65, KB_DTYPE_BF16), 2);
    ASSERT_U64_EQ(kb_math_cycles(&DEF, KB_MATH_ADD, 0, KB_DTYPE_F16), 0);
    ASSERT_U64_EQ(kb_math_cycles(&DEF, KB_MATH_EXP, 128, KB_DTYPE_F16), 8);
    ASSERT_U64_EQ(kb_math_cycles(&DEF, KB_MATH_SOFTMAX, 1000, KB_DTYPE_F32), 32 * 6);
    ASSERT_U64_EQ(kb_math_cycles(&DEF, KB_MATH_SUM, 49152, KB_DTYPE_F16), 768);
    ASSERT_U64_EQ(kb_math_time(&DEF, KB_MATH_ADD, 49152, KB_DTYPE_F16), 768 * SIM_NS);
    ASSERT_U64_EQ(kb_math_time(&DEF, KB_MATH_LOG, 49152, KB_DTYPE_F32), 6144 * SIM_NS);
    ASSERT_U64_EQ(kb_math_cycles(&DEF, (enum kb_math_op)77, 10, KB_DTYPE_F32), 0);

    /* the closed form over ops, dtypes, sizes and parameter sets */
    static const size_t ns[] = {1, 2, 63, 64, 65, 127, 128, 129, 1000, 4096, 49152, 1 << 20};
    struct kb_math_params ps[] = {DEF, {64, 1.5, 8}, {256, 2.0, 1}, {96, 0.8, 3}};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++)
        for (int op = 0; op < KB_MATH_OP_COUNT; op++)
            for (size_t d = 0; d < 3; d++)
                for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
                    const struct kb_math_params *p = &ps[k];
                    double bytes = (double)ns[j] * (double)kb_dtype_size(DTS[d]);
                    double per = op == KB_MATH_EXP || op == KB_MATH_LOG
                                     ? p->transcendental_cycles
                                 : op == KB_MATH_SOFTMAX ? p->transcendental_cycles + 2
                                                         : 1;
                    double cyc = ceil(bytes / p->vector_bytes_per_cycle) * per;
                    ASSERT_U64_EQ(kb_math_cycles(p, (enum kb_math_op)op, ns[j], DTS[d]),
                                  (uint64_t)cyc);
                    ASSERT_U64_EQ(kb_math_time(p, (enum kb_math_op)op, ns[j], DTS[d]),
                                  (uint64_t)llround(cyc * 1000 / p->clock_ghz));
                }
    /* 1.5 GHz: 3 cycles are 2 ns, 1 cycle 666.67 -> 667 ps */
    struct kb_math_params fast = {64, 1.5, 4};
    ASSERT_U64_EQ(kb_math_time(&fast, KB_MATH_ADD, 48, KB_DTYPE_F32), 2000);
    ASSERT_U64_EQ(kb_math_time(&fast, KB_MATH_ADD, 16, KB_DTYPE_F32), 667);
}

TEST(params)
{
    char err[256];
    struct kb_math_params p = DEF;
    ASSERT_EQ(kb_math_params_check(&p, "pe0", err, sizeof err), 0);
    p.vector_bytes_per_cycle = 0;
    ASSERT_EQ(kb_math_params_check(&p, "pe0", err, sizeof err), SIM_EINVAL);
    ASSERT_STREQ(err, "math of 'pe0': vector width must be > 0 bytes per cycle, got 0");
    p = DEF, p.clock_ghz = -1;
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_TRUE(kb_math_new(s, "pe0", &p, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "math of 'pe0': clock must be a positive number of GHz, got -1");
    p = DEF, p.transcendental_cycles = 0;
    ASSERT_TRUE(kb_math_new(s, "pe0", &p, err, sizeof err) == NULL);
    ASSERT_CONTAINS(err, "transcendental cycles must be >= 1");
    T_FREE(sim_free, s);

    struct kb_topology_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.pe.math.vector_bytes_per_cycle = 128;
    cfg.pe.math.transcendental_cycles = 6;
    cfg.clock_ghz = 1.0;
    struct kb_pe_params pp;
    kb_pe_params_from_cfg(&pp, &cfg);
    ASSERT_EQ(pp.math.vector_bytes_per_cycle, 128);
    ASSERT_TRUE(pp.math.clock_ghz == 1.0);
    ASSERT_EQ(pp.math.transcendental_cycles, 6);
}

/* ---- the unit in a simulation ------------------------------------------- */

struct job {
    struct kb_math *m;
    enum kb_math_op op;
    size_t n;
    sim_time start, end;
    int rc;
    float a[4096], b[4096], out[4096];
};

static void job_thread(struct sim *s, void *arg)
{
    struct job *j = arg;
    if (j->start)
        sim_wait(s, j->start);
    j->rc = kb_math_run(j->m, j->op, j->a, j->b, NULL, j->out, j->n, KB_DTYPE_F32);
    j->end = sim_now(s);
}

TEST(run_waits_and_counts)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    struct kb_math *m = T_OWN(kb_math_new(s, "sip0.cube0.pe0", &DEF, err, sizeof err), kb_math_free);
    ASSERT_TRUE(m);
    ASSERT_TRUE(m != NULL);
    ASSERT_STREQ(kb_math_name(m), "sip0.cube0.pe0");
    static struct job j1, j2, j3;
    j1 = (struct job){.m = m, .op = KB_MATH_ADD, .n = 4096};
    j2 = (struct job){.m = m, .op = KB_MATH_EXP, .n = 1000};
    j3 = (struct job){.m = m, .op = KB_MATH_MUL, .n = 100, .start = 1000 * SIM_NS};
    for (int i = 0; i < 4096; i++)
        j1.a[i] = (float)i, j1.b[i] = 0.5f, j2.a[i] = -1.0f;
    ASSERT_TRUE(sim_thread(s, "j1", job_thread, &j1, 0));
    ASSERT_TRUE(sim_thread(s, "j2", job_thread, &j2, 0));
    ASSERT_TRUE(sim_thread(s, "j3", job_thread, &j3, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(j1.rc, 0);
    ASSERT_EQ(j2.rc, 0);
    ASSERT_EQ(j3.rc, 0);
    sim_time t1 = kb_math_time(&DEF, KB_MATH_ADD, 4096, KB_DTYPE_F32);
    sim_time t2 = kb_math_time(&DEF, KB_MATH_EXP, 1000, KB_DTYPE_F32);
    sim_time t3 = kb_math_time(&DEF, KB_MATH_MUL, 100, KB_DTYPE_F32);
    ASSERT_U64_EQ(t1, 128 * SIM_NS);
    ASSERT_U64_EQ(t2, 32 * 4 * SIM_NS);
    ASSERT_U64_EQ(j1.end, t1);
    ASSERT_U64_EQ(j2.end, t1 + t2); /* queued behind j1 */
    ASSERT_U64_EQ(j3.end, 1000 * SIM_NS + t3); /* the unit was idle again */
    ASSERT_TRUE(j1.out[4095] == 4095.5f);
    ASSERT_TRUE(j2.out[999] == (float)exp(-1.0));

    struct kb_math_stats st;
    kb_math_get_stats(m, &st);
    ASSERT_U64_EQ(st.ops, 3);
    ASSERT_U64_EQ(st.elements, 4096 + 1000 + 100);
    ASSERT_U64_EQ(st.cycles, 128 + 128 + 4);
    ASSERT_U64_EQ(st.busy_ps, t1 + t2 + t3);
    ASSERT_U64_EQ(st.by_op[KB_MATH_EXP], 1);
    ASSERT_U64_EQ(st.by_op[KB_MATH_SUB], 0);
    ASSERT_NEAR(kb_math_utilisation(m, 0), (double)(t1 + t2 + t3) / (double)sim_now(s), 1e-12);
    ASSERT_NEAR(kb_math_utilisation(m, 2 * (t1 + t2 + t3)), 0.5, 1e-12);
    T_FREE(kb_math_free, m);
    T_FREE(sim_free, s);
}

static void bad_thread(struct sim *s, void *arg)
{
    struct job *j = arg;
    j->rc = kb_math_run(j->m, KB_MATH_FMA, j->a, j->b, NULL, j->out, 4, KB_DTYPE_F32);
}

static void method_proc(struct sim *s, void *arg)
{
    struct job *j = arg;
    j->rc = kb_math_run(j->m, KB_MATH_ADD, j->a, j->b, NULL, j->out, 64, KB_DTYPE_F32);
}

TEST(run_errors)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    struct kb_math *m = T_OWN(kb_math_new(s, "pe7", &DEF, err, sizeof err), kb_math_free);
    ASSERT_TRUE(m);
    static struct job j, k;
    j = (struct job){.m = m, .rc = 1};
    k = (struct job){.m = m, .rc = 1};
    float a[4] = {1, 2, 3, 4}, out[4];
    ASSERT_EQ(kb_math_run(m, KB_MATH_ADD, a, a, NULL, out, 4, KB_DTYPE_F32), SIM_EPERM);
    ASSERT_STREQ(kb_math_errmsg(m), "math of 'pe7': add outside a process");
    ASSERT_TRUE(sim_thread(s, "bad", bad_thread, &j, 0));
    ASSERT_TRUE(sim_method(s, "meth", method_proc, &k, false));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(j.rc, SIM_EINVAL);
    ASSERT_EQ(k.rc, SIM_EPERM);
    ASSERT_CONTAINS(kb_math_errmsg(m), "from a method process");
    struct kb_math_stats st;
    kb_math_get_stats(m, &st);
    ASSERT_U64_EQ(st.ops, 1); /* the method's op was booked */
    T_FREE(kb_math_free, m);
    T_FREE(sim_free, s);

    s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    m = T_OWN(kb_math_new(s, "pe7", &DEF, err, sizeof err), kb_math_free);
    ASSERT_TRUE(m);
    j = (struct job){.m = m, .rc = 1};
    ASSERT_TRUE(sim_thread(s, "bad", bad_thread, &j, 0));
    sim_run(s, SIM_FOREVER);
    ASSERT_STREQ(kb_math_errmsg(m), "math of 'pe7': fma needs operand 'c', got NULL");
    T_FREE(kb_math_free, m);
    T_FREE(sim_free, s);
}

static void snap_del(struct kb_mem_snap *s)
{
    kb_mem_snap_free(s);
    free(s);
}

/* Operands read from snapshots of memory (kb_math_compute_args) give the
 * values of the same operands in host buffers, for every op and dtype:
 * operands starting anywhere in a page (elements split between pages for
 * an odd start), one of them never written (zeros), a host buffer beside
 * them (a broadcast scalar). */
TEST(values_from_snapshots)
{
    enum { NE = 3000, NB = NE * 4 };
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    static const struct kb_mem_params MP = {.kind = KB_MEM_TCM, .capacity = 1 << 20,
                                            .bw_gbps = 512, .n_channels = 1};
    char err[256];
    struct kb_mem *m = T_OWN(kb_mem_new(s, "pe0", &MP, err, sizeof err), kb_mem_free);
    ASSERT_TRUE(m);
    unsigned char *host[3], *want = T_OWN(malloc(NB), free), *got = T_OWN(malloc(NB), free);
    ASSERT_TRUE(want && got);
    for (int j = 0; j < 3; j++)
        ASSERT_TRUE(host[j] = T_OWN(malloc(NB), free));
    struct kb_mem_snap *sn[3];
    for (int j = 0; j < 3; j++)
        ASSERT_TRUE(sn[j] = T_OWN(calloc(1, sizeof *sn[j]), snap_del));
    static const uint64_t at[3] = {4096 - 64, 5 * 4096 + 1, 12 * 4096 + 2}; /* b: odd */
    for (size_t d = 0; d < sizeof DTS / sizeof DTS[0]; d++) {
        enum kb_dtype dt = DTS[d];
        size_t es = kb_dtype_size(dt);
        for (int op = 0; op < KB_MATH_OP_COUNT; op++) {
            int arity = kb_math_op_arity((enum kb_math_op)op);
            for (int zero = 0; zero < 2; zero++) {
                for (int j = 0; j < 3; j++) {
                    fill(host[j], NE, dt, 0.5, 4.0);
                    if (zero && j == 0)
                        memset(host[j], 0, NE * es);
                    kb_mem_snap_clear(sn[j]);
                    /* operand 0 when zero: never written (a fresh memory's
                     * page tables), else written at its address */
                    uint64_t a = zero && j == 0 ? 400 * 1024 : at[j];
                    if (!(zero && j == 0))
                        ASSERT_EQ(kb_mem_write(m, a, host[j], NE * es), 0);
                    ASSERT_EQ(kb_mem_snap_take(m, a, NE * es, sn[j]), 0);
                }
                ASSERT_EQ(kb_math_compute((enum kb_math_op)op, host[0], host[1], host[2], want,
                                          NE, dt), 0);
                /* operand c (clamp, fma) stays a host buffer */
                struct kb_math_arg a = {NULL, sn[0], NULL}, b = {NULL, sn[1], NULL},
                                  c = {host[2], NULL, NULL};
                size_t outn = op == KB_MATH_SUM ? 1 : NE;
                /* into a host buffer */
                memset(got, 0xA5, NB);
                struct kb_math_dst hd = {got, NULL, 0};
                ASSERT_EQ(kb_math_compute_args((enum kb_math_op)op, &a, arity > 1 ? &b : NULL,
                                               arity > 2 ? &c : NULL, &hd, NE, dt), 0);
                ASSERT_TRUE(memcmp(got, want, outn * es) == 0);
                /* into memory at an odd address (elements split between
                 * pages), over bytes written before */
                uint64_t ra = 20 * 4096 + 4096 - 3;
                ASSERT_EQ(kb_mem_write(m, ra, host[1], NE * es), 0);
                struct kb_math_dst md = {NULL, m, ra};
                ASSERT_EQ(kb_math_compute_args((enum kb_math_op)op, &a, arity > 1 ? &b : NULL,
                                               arity > 2 ? &c : NULL, &md, NE, dt), 0);
                ASSERT_EQ(kb_mem_read(m, ra, got, outn * es), 0);
                ASSERT_TRUE(memcmp(got, want, outn * es) == 0);
            }
        }
    }
    for (int j = 2; j >= 0; j--)
        T_FREE(snap_del, sn[j]);
    for (int j = 2; j >= 0; j--)
        T_FREE(free, host[j]);
    T_FREE(free, got);
    T_FREE(free, want);
    T_FREE(kb_mem_free, m);
    T_FREE(sim_free, s);
}


/* Operands as snapshots of many pieces (appended ranges of 1 byte to a few
 * pages from anywhere in a memory, some never written, some short and
 * copied), so that an element may lie across three pieces, and results
 * into memory at random addresses over written bytes: kb_math_compute's
 * values on the bytes the snapshots hold, for every op and dtype. */
TEST(values_from_snapshots_of_many_pieces)
{
    enum { NE = 2500, NB = NE * 4, SRC = 256 * 1024 };
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    static const struct kb_mem_params MP = {.kind = KB_MEM_TCM, .capacity = 1 << 20,
                                            .bw_gbps = 512, .n_channels = 1};
    char err[256];
    struct kb_mem *m = T_OWN(kb_mem_new(s, "pe0", &MP, err, sizeof err), kb_mem_free);
    ASSERT_TRUE(m);
    unsigned char *src = T_OWN(malloc(SRC), free), *want = T_OWN(malloc(NB), free);
    unsigned char *got = T_OWN(malloc(NB), free);
    ASSERT_TRUE(src && want && got);
    unsigned char *host[3];
    struct kb_mem_snap *sn[3];
    for (int j = 0; j < 3; j++) {
        ASSERT_TRUE(host[j] = T_OWN(malloc(NB), free));
        ASSERT_TRUE(sn[j] = T_OWN(calloc(1, sizeof *sn[j]), snap_del));
    }
    uint64_t x = 0x2545F4914F6CDD1Dull;
#define NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
    for (int round = 0; round < (test_failalloc_mode ? 1 : 12); round++) {
        for (size_t d = 0; d < sizeof DTS / sizeof DTS[0]; d++) {
            enum kb_dtype dt = DTS[d];
            size_t es = kb_dtype_size(dt);
            /* the source: values in [0.5, 4) where written, pages 40..47 never */
            fill(src, SRC / es, dt, 0.5, 4.0);
            memset(src + 40 * 4096, 0, 8 * 4096);
            ASSERT_EQ(kb_mem_write(m, 0, src, 40 * 4096), 0);
            ASSERT_EQ(kb_mem_write(m, 48 * 4096, src + 48 * 4096, SRC - 48 * 4096), 0);
            for (int j = 0; j < 3; j++) {
                kb_mem_snap_clear(sn[j]);
                for (uint64_t have = 0; have < NE * es;) {
                    uint64_t r = NEXT(), len;
                    switch (r % 4) {
                    case 0: len = 1 + (r >> 8) % 3; break;
                    case 1: len = 1 + (r >> 8) % 1500; break;
                    default: len = 1 + (r >> 8) % 9000; break;
                    }
                    if (len > NE * es - have)
                        len = NE * es - have;
                    uint64_t a = (r >> 24) % (SRC - len);
                    if ((r >> 40) % 3 == 0)
                        a &= ~(uint64_t)4095;
                    ASSERT_EQ(kb_mem_snap_take(m, a, len, sn[j]), 0);
                    memcpy(host[j] + have, src + a, len);
                    have += len;
                }
            }
            /* the memory written over after: the snapshots keep their bytes */
            ASSERT_EQ(kb_mem_write(m, 0, host[2], NE * es), 0);
            for (int op = 0; op < KB_MATH_OP_COUNT; op++) {
                int arity = kb_math_op_arity((enum kb_math_op)op);
                size_t outn = op == KB_MATH_SUM ? 1 : NE;
                ASSERT_EQ(kb_math_compute((enum kb_math_op)op, host[0], host[1], host[2], want,
                                          NE, dt), 0);
                struct kb_math_arg a = {NULL, sn[0], NULL}, b = {NULL, sn[1], NULL},
                                  c = {NULL, sn[2], NULL};
                uint64_t ra = 300 * 1024 + NEXT() % (600 * 1024);
                ASSERT_EQ(kb_mem_write(m, ra, src, NE * es), 0);
                struct kb_math_dst md = {NULL, m, ra};
                ASSERT_EQ(kb_math_compute_args((enum kb_math_op)op, &a, arity > 1 ? &b : NULL,
                                               arity > 2 ? &c : NULL, &md, NE, dt), 0);
                ASSERT_EQ(kb_mem_read(m, ra, got, outn * es), 0);
                ASSERT_TRUE(memcmp(got, want, outn * es) == 0);
            }
        }
    }
#undef NEXT
    for (int j = 2; j >= 0; j--) {
        T_FREE(snap_del, sn[j]);
        T_FREE(free, host[j]);
    }
    T_FREE(free, got);
    T_FREE(free, want);
    T_FREE(free, src);
    T_FREE(kb_mem_free, m);
    T_FREE(sim_free, s);
}

/* A result written into memory when the host is out of memory (a page or
 * a page table the write needs): SIM_ENOMEM, never SIM_EINVAL, for sum
 * and softmax (written through a buffer; they said SIM_EINVAL) and an
 * elementwise op whose result has elements split between two pages. Each
 * allocation of the call fails in turn. */
TEST(results_into_memory_out_of_host_memory)
{
#ifdef KBSIM_FAILALLOC
    if (test_failalloc_mode) /* (the harness fails allocations itself) */
        return;
    enum { NE = 3000 };
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    /* 2 GiB: pages 63 and 64 lie under two nodes of its page tables */
    static const struct kb_mem_params MP = {.kind = KB_MEM_HBM, .capacity = (uint64_t)2 << 30,
                                            .bw_gbps = 32, .n_channels = 1};
    float *x = T_OWN(malloc(NE * sizeof *x), free);
    ASSERT_TRUE(x);
    fill(x, NE, KB_DTYPE_F32, 0.5, 4.0);
    static const enum kb_math_op ops[] = {KB_MATH_SUM, KB_MATH_SOFTMAX, KB_MATH_EXP};
    int failed = 0;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        for (unsigned long n = 1;; n++) {
            char err[256];
            struct kb_mem *m = T_OWN(kb_mem_new(s, "pe0", &MP, err, sizeof err), kb_mem_free);
            ASSERT_TRUE(m);
            struct kb_math_arg a = {x, NULL, NULL};
            /* 10 bytes before a page boundary (and a table node's): the
             * third element is split */
            struct kb_math_dst md = {NULL, m, 64 * 4096 - 10};
            failalloc_arm(n);
            int rc = kb_math_compute_args(ops[k], &a, NULL, NULL, &md, NE, KB_DTYPE_F32);
            bool fired = failalloc_fired();
            failalloc_arm(0);
            T_FREE(kb_mem_free, m);
            if (!fired) {
                ASSERT_EQ(rc, 0);
                break;
            }
            if (rc < 0) {
                ASSERT_EQ(rc, SIM_ENOMEM);
                failed++;
            }
        }
    }
    ASSERT_TRUE(failed >= 3);
    T_FREE(free, x);
    T_FREE(sim_free, s);
#endif
}

/* A result beside its operands in one page (tiles of half a page):
 * with snapshots the unit may drop, it is computed aside, the snapshots
 * let go, and written, so no page is copied; with snapshots it must keep,
 * the page is copied and the snapshots keep their bytes. The same values
 * either way (decision 0060). */
TEST(results_beside_their_operands_copy_no_page)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    static const struct kb_mem_params MP = {.kind = KB_MEM_TCM, .capacity = 1 << 20,
                                            .bw_gbps = 512, .n_channels = 1};
    char err[256];
    struct kb_mem *m = T_OWN(kb_mem_new(s, "pe0", &MP, err, sizeof err), kb_mem_free);
    ASSERT_TRUE(m);
    enum { PG = KB_MEM_PAGE_BYTES, NB = PG / 2, NE = NB / 2 };
    uint16_t x[NE], y[NE], want[NE], got[NE];
    fill(x, NE, KB_DTYPE_F16, 0.5, 4.0);
    fill(y, NE, KB_DTYPE_F16, -2.0, 2.0);
    ASSERT_EQ(kb_math_compute(KB_MATH_ADD, x, y, NULL, want, NE, KB_DTYPE_F16), 0);
    struct kb_mem_snap *sa = T_OWN(calloc(1, sizeof *sa), snap_del);
    struct kb_mem_snap *sb = T_OWN(calloc(1, sizeof *sb), snap_del);
    ASSERT_TRUE(sa && sb);
    for (int drop = 0; drop < 2; drop++) {
        /* x at 0 and y in the second half of page 1; the result in the
         * second half of page 0, x's page */
        ASSERT_EQ(kb_mem_write(m, 0, x, NB), 0);
        ASSERT_EQ(kb_mem_write(m, PG + NB, y, NB), 0);
        ASSERT_EQ(kb_mem_snap_take(m, 0, NB, sa), 0);
        ASSERT_EQ(kb_mem_snap_take(m, PG + NB, NB, sb), 0);
        ASSERT_TRUE(kb_mem_shared(m, NB, NB));
        ASSERT_TRUE(!kb_mem_shared(m, 2 * PG, NB));
        uint64_t pool = kb_mem_pool_pages();
        struct kb_math_arg a = {NULL, sa, drop ? sa : NULL}, b = {NULL, sb, drop ? sb : NULL};
        struct kb_math_dst md = {NULL, m, NB};
        ASSERT_EQ(kb_math_compute_args(KB_MATH_ADD, &a, &b, NULL, &md, NE, KB_DTYPE_F16), 0);
        ASSERT_EQ(kb_mem_read(m, NB, got, NB), 0);
        ASSERT_TRUE(memcmp(got, want, NB) == 0);
        if (drop) {
            ASSERT_U64_EQ(kb_mem_pool_pages(), pool);
            ASSERT_U64_EQ(sa->bytes, 0);
            ASSERT_U64_EQ(sb->bytes, 0);
        } else {
            ASSERT_U64_EQ(kb_mem_pool_pages(), pool + 1); /* x's page, copied */
            ASSERT_EQ(kb_mem_snap_read(sa, 0, got, NB), 0);
            ASSERT_TRUE(memcmp(got, x, NB) == 0);
        }
        kb_mem_snap_clear(sa);
        kb_mem_snap_clear(sb);
    }
    T_FREE(snap_del, sb);
    T_FREE(snap_del, sa);
    T_FREE(kb_mem_free, m);
    T_FREE(sim_free, s);
}

TEST_MAIN(values_exact, values_f16_against_compiler, values_f16_every_input, values_transcendental, values_special, softmax_rows,
          sum_reduction, names, time_formula, params, run_waits_and_counts,
          run_errors, values_from_snapshots, values_from_snapshots_of_many_pieces,
          results_into_memory_out_of_host_memory, results_beside_their_operands_copy_no_page)
