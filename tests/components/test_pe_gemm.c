/* test_pe_gemm.c — kb_gemm: tile and GEMM time against the sum over tiles,
 * values against a naive host matmul (squares 64…512, skinny K-heavy,
 * edge tiles, accumulate, leading dims) in f32, f16 and bf16, the tile hook,
 * peak and achieved FLOP/s, counters and errors */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "pe.h"
#include "pe_gemm.h"
#include "sim.h"
#include "test.h"
#include "topology_schema.h"

static const struct kb_gemm_params DEF = {
    .mac = {16, 16, 16}, .tile = {32, 64, 32}, .clock_ghz = 1.0};

static uint64_t rng_state = 0x2545F4914F6CDD1Du;
static double uniform(double lo, double hi)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x9E3779B97F4A7C15u;
    return lo + (hi - lo) * (double)(r >> 11) * 0x1p-53;
}

/* A rows×cols matrix of dtype dt (leading dim ld) with values in [-1, 1]. */
static void *matrix(size_t rows, size_t cols, size_t ld, enum kb_dtype dt)
{
    void *m = T_OWN(calloc(rows * ld + 1, kb_dtype_size(dt)), free);
    if (!m)
        return NULL;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            kb_dtype_store(m, r * ld + c, dt, uniform(-1, 1));
    return m;
}

/* m widened to f32; NULL if m is NULL (not allocated) or out of memory. */
static float *widen(const void *m, size_t n, enum kb_dtype dt)
{
    if (!m)
        return NULL;
    float *f = T_OWN(malloc((n + 1) * sizeof *f), free);
    if (!f)
        return NULL;
    for (size_t i = 0; i < n; i++)
        f[i] = kb_dtype_load(m, i, dt);
    return f;
}

/* The host matmul, in the engine's order: every C element accumulates its
 * k in increasing order in f32, products rounded to f32 first. */
static void naive(size_t M, size_t N, size_t K, const float *a, size_t lda,
                  const float *b, size_t ldb, float *c, size_t ldc, int acc)
{
    for (size_t i = 0; i < M; i++) {
        if (!acc)
            memset(c + i * ldc, 0, N * sizeof *c);
        for (size_t k = 0; k < K; k++) {
            float aik = a[i * lda + k];
            for (size_t j = 0; j < N; j++) {
                float prod = aik * b[k * ldb + j];
                c[i * ldc + j] += prod;
            }
        }
    }
}

/* ---- time model ---------------------------------------------------------- */

/* The sum over the tile grid, tile by tile. */
static uint64_t sum_over_tiles(const struct kb_gemm_params *p, uint64_t M,
                               uint64_t N, uint64_t K, uint64_t *tiles)
{
    uint64_t cyc = 0;
    *tiles = 0;
    for (uint64_t i = 0; i < M; i += p->tile.m)
        for (uint64_t j = 0; j < N; j += p->tile.n)
            for (uint64_t k = 0; k < K; k += p->tile.k) {
                uint64_t tm = M - i < p->tile.m ? M - i : p->tile.m;
                uint64_t tn = N - j < p->tile.n ? N - j : p->tile.n;
                uint64_t tk = K - k < p->tile.k ? K - k : p->tile.k;
                cyc += ((tm + p->mac.m - 1) / p->mac.m) *
                       ((tn + p->mac.n - 1) / p->mac.n) *
                       ((tk + p->mac.k - 1) / p->mac.k);
                ++*tiles;
            }
    return cyc;
}

TEST(tile_time)
{
    ASSERT_U64_EQ(kb_gemm_tile_cycles(&DEF, 32, 64, 32), 2 * 4 * 2); /* full */
    ASSERT_U64_EQ(kb_gemm_tile_cycles(&DEF, 1, 1, 1), 1);
    ASSERT_U64_EQ(kb_gemm_tile_cycles(&DEF, 16, 16, 16), 1);
    ASSERT_U64_EQ(kb_gemm_tile_cycles(&DEF, 17, 64, 32), 16); /* rounded up */
    ASSERT_U64_EQ(kb_gemm_tile_cycles(&DEF, 16, 64, 32), 8);
    ASSERT_U64_EQ(kb_gemm_tile_cycles(&DEF, 32, 8, 32), 4);
    ASSERT_U64_EQ(kb_gemm_tile_cycles(&DEF, 4, 50, 20), 1 * 4 * 2);
    ASSERT_U64_EQ(kb_gemm_tile_cycles(&DEF, 0, 64, 32), 0);
}

TEST(gemm_time_closed_form)
{
    /* squares: (n/16)^3 cycles at 1 GHz */
    for (uint64_t n = 64; n <= 512; n *= 2) {
        uint64_t q = n / 16;
        ASSERT_U64_EQ(kb_gemm_cycles(&DEF, n, n, n), q * q * q);
        ASSERT_U64_EQ(kb_gemm_time(&DEF, n, n, n), q * q * q * SIM_NS);
        ASSERT_U64_EQ(kb_gemm_tiles(&DEF, n, n, n), (n / 32) * (n / 64) * (n / 32));
    }
    /* skinny K-heavy M = 32, N = 32, K = 3072: one 32×32 output tile (the
     * 64-wide tile half used), 96 depth tiles of 2·2·2 cycles */
    ASSERT_U64_EQ(kb_gemm_cycles(&DEF, 32, 32, 3072), 96 * 8);
    ASSERT_U64_EQ(kb_gemm_tiles(&DEF, 32, 32, 3072), 96);
    ASSERT_U64_EQ(kb_gemm_cycles(&DEF, 0, 32, 32), 0);

    static const struct kb_gemm_params ps[] = {
        {{16, 16, 16}, {32, 64, 32}, 1.0},
        {{16, 16, 16}, {24, 40, 20}, 1.5}, /* tiles not multiples of the array */
        {{8, 32, 4}, {32, 32, 32}, 0.7},
        {{1, 1, 1}, {3, 5, 7}, 2.0},
    };
    static const uint64_t shapes[][3] = {
        {64, 64, 64}, {100, 70, 50}, {1, 1, 1}, {33, 65, 17}, {32, 32, 3072},
        {257, 3, 129}, {512, 512, 512}, {7, 1000, 5}};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const uint64_t *d = shapes[s];
            uint64_t tiles;
            uint64_t cyc = sum_over_tiles(&ps[k], d[0], d[1], d[2], &tiles);
            ASSERT_U64_EQ(kb_gemm_cycles(&ps[k], d[0], d[1], d[2]), cyc);
            ASSERT_U64_EQ(kb_gemm_tiles(&ps[k], d[0], d[1], d[2]), tiles);
            ASSERT_U64_EQ(kb_gemm_time(&ps[k], d[0], d[1], d[2]),
                          (uint64_t)llround((double)cyc * 1000 / ps[k].clock_ghz));
        }
}

TEST(peak_flops)
{
    ASSERT_NEAR(kb_gemm_peak_flops(&DEF), 8.192e12, 1);
    struct kb_gemm_params p = {{8, 8, 4}, {32, 32, 32}, 1.5};
    ASSERT_NEAR(kb_gemm_peak_flops(&p), 2 * 256 * 1.5e9, 1);
}

TEST(params)
{
    char err[256];
    struct kb_gemm_params p = DEF;
    ASSERT_EQ(kb_gemm_params_check(&p, "pe0", err, sizeof err), 0);
    p.mac.n = 0;
    ASSERT_EQ(kb_gemm_params_check(&p, "pe0", err, sizeof err), SIM_EINVAL);
    ASSERT_STREQ(err, "gemm of 'pe0': mac array must be > 0 in each dimension, got 16x0x16");
    p = DEF, p.tile.k = 0;
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_TRUE(kb_gemm_new(s, "pe0", &p, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "gemm of 'pe0': tile must be > 0 in each dimension, got 32x64x0");
    p = DEF, p.clock_ghz = 0;
    ASSERT_TRUE(kb_gemm_new(s, "pe0", &p, err, sizeof err) == NULL);
    ASSERT_CONTAINS(err, "clock must be a positive number of GHz, got 0");
    T_FREE(sim_free, s);

    struct kb_topology_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.pe.gemm.mac.m = cfg.pe.gemm.mac.n = cfg.pe.gemm.mac.k = 16;
    cfg.pe.gemm.tile.m = 32, cfg.pe.gemm.tile.n = 64, cfg.pe.gemm.tile.k = 32;
    cfg.clock_ghz = 1.0;
    struct kb_pe_params pp;
    kb_pe_params_from_cfg(&pp, &cfg);
    p = pp.gemm;
    ASSERT_EQ(memcmp(&p.mac, &DEF.mac, sizeof p.mac), 0);
    ASSERT_EQ(memcmp(&p.tile, &DEF.tile, sizeof p.tile), 0);
    ASSERT_TRUE(p.clock_ghz == 1.0);
}

/* ---- values in a simulation ------------------------------------------- */

struct shape {
    size_t M, N, K, pad; /* pad: extra elements per row in every matrix */
};

static const struct shape SHAPES[] = {
    {64, 64, 64, 0}, {128, 128, 128, 0}, {256, 256, 256, 0},
    {512, 512, 512, 0}, {32, 32, 3072, 0}, {100, 70, 50, 3}, {1, 1, 1, 0}};

/* Under --failalloc the big squares are left out: they take the paths of
 * the small ones, and each failing run repeats the test to its failure. */
static bool shape_runs(const struct shape *sh)
{
    return !test_failalloc_mode || sh->M * sh->N * sh->K <= 128 * 128 * 128;
}

struct ctx {
    struct kb_gemm *g;
    int failed;
    int oom; /* an allocation or a run failed for want of memory */
    char msg[256];
};

/* In a thread: a buffer that could not be allocated, or a run that failed
 * with SIM_ENOMEM, ends the thread; the test body stops at it (run_gemm). */
#define NEED(cx, cond)                                                    \
    do {                                                                  \
        if (!(cond)) {                                                    \
            (cx)->oom = 1;                                                \
            return;                                                       \
        }                                                                 \
    } while (0)
#define RUN_OK(cx, rc) NEED(cx, (rc) != SIM_ENOMEM)

#define CHECK(cx, cond, ...)                                              \
    do {                                                                  \
        if (!(cond) && !(cx)->failed) {                                   \
            (cx)->failed = 1;                                             \
            snprintf((cx)->msg, sizeof (cx)->msg, __VA_ARGS__);           \
        }                                                                 \
    } while (0)

/* A new simulation *sp with a PE_GEMM named `pe` in *cx, and the thread
 * `fn` (named `name`) run on it to the end; a failed CHECK of the thread
 * fails the test. The caller frees cx->g and *sp. */
static void run_gemm(struct sim **sp, struct ctx *cx, const char *pe,
                     const char *name, sim_proc_fn fn)
{
    char err[256];
    *cx = (struct ctx){0};
    struct sim *s = *sp = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    cx->g = T_OWN(kb_gemm_new(s, pe, &DEF, err, sizeof err), kb_gemm_free);
    ASSERT_TRUE(cx->g != NULL);
    ASSERT_TRUE(sim_thread(s, name, fn, cx, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_TRUE(!cx->oom);
    if (cx->failed)
        TEST__FAIL("%s", cx->msg);
}

/* run_gemm for a thread that checks everything itself, then both freed. */
static void check_gemm_thread(const char *pe, const char *name, sim_proc_fn fn)
{
    static struct ctx cx;
    struct sim *s;
    run_gemm(&s, &cx, pe, name, fn);
    if (test__failed || test__stopped)
        return;
    T_FREE(kb_gemm_free, cx.g);
    T_FREE(sim_free, s);
}

/* One GEMM of every shape and input dtype: f32 C bit-equal to the naive
 * matmul of the widened inputs; against a double reference within
 * K·2^-24·sum_k |a_ik b_kj| (the f32 accumulation bound) — and for an f16
 * or bf16 C that plus half an ulp of the output. Each run takes exactly
 * kb_gemm_time. */
static void values_thread(struct sim *s, void *arg)
{
    struct ctx *cx = arg;
    static const enum kb_dtype dts[] = {KB_DTYPE_F32, KB_DTYPE_F16, KB_DTYPE_BF16};
    for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++) {
        const struct shape *sh = &SHAPES[si];
        if (!shape_runs(sh))
            continue;
        size_t M = sh->M, N = sh->N, K = sh->K;
        size_t lda = K + sh->pad, ldb = N + sh->pad, ldc = N + sh->pad;
        for (size_t d = 0; d < 3; d++) {
            enum kb_dtype dt = dts[d];
            enum kb_dtype c_dt = d == 2 && si % 2 ? KB_DTYPE_BF16 : KB_DTYPE_F32;
            void *A = matrix(M, K, lda, dt), *B = matrix(K, N, ldb, dt);
            float *a = widen(A, M * lda, dt), *b = widen(B, K * ldb, dt);
            NEED(cx, A && B && a && b);
            float *want = T_OWN(calloc(M * ldc + 1, sizeof *want), free);
            void *C = T_OWN(calloc(M * ldc + 1, 4), free);
            NEED(cx, want && C);
            naive(M, N, K, a, lda, b, ldb, want, ldc, 0);

            sim_time t0 = sim_now(s);
            int rc = kb_gemm_run(cx->g, M, N, K, A, lda, B, ldb, C, ldc, dt,
                                 c_dt, false);
            RUN_OK(cx, rc);
            CHECK(cx, rc == 0, "run: %s", kb_gemm_errmsg(cx->g));
            CHECK(cx, sim_now(s) - t0 == kb_gemm_time(kb_gemm_params(cx->g), M, N, K),
                  "%zux%zux%zu took %llu ps", M, N, K,
                  (unsigned long long)(sim_now(s) - t0));
            for (size_t i = 0; i < M && !cx->failed; i++)
                for (size_t j = 0; j < N; j++) {
                    double exact = 0, mag = 0;
                    for (size_t k = 0; k < K; k++) {
                        exact += (double)a[i * lda + k] * b[k * ldb + j];
                        mag += fabs((double)a[i * lda + k] * b[k * ldb + j]);
                    }
                    float got = kb_dtype_load(C, i * ldc + j, c_dt);
                    float w = kb_dtype_round(want[i * ldc + j], c_dt);
                    CHECK(cx, memcmp(&got, &w, 4) == 0,
                          "%zux%zux%zu %s->%s [%zu,%zu]: %a != naive %a", M, N,
                          K, kb_dtype_name(dt), kb_dtype_name(c_dt), i, j,
                          got, w);
                    double tol = (double)K * 0x1p-24 * mag +
                                 (c_dt == KB_DTYPE_BF16 ? fabs(exact) * 0x1p-8 : 0) +
                                 1e-30;
                    CHECK(cx, fabs(got - exact) <= tol,
                          "%zux%zux%zu %s [%zu,%zu]: %.9g vs exact %.9g (tol %g)",
                          M, N, K, kb_dtype_name(dt), i, j, got, exact, tol);
                }
            T_FREE(free, A), T_FREE(free, B), T_FREE(free, a), T_FREE(free, b), T_FREE(free, want), T_FREE(free, C);
        }
    }
}

TEST(values_against_naive)
{
    static struct ctx cx;
    struct sim *s;
    run_gemm(&s, &cx, "sip0.cube0.pe0", "values", values_thread);
    if (test__failed || test__stopped)
        return;

    /* every run's tiles, MACs and cycles are the closed forms' */
    struct kb_gemm_stats st;
    kb_gemm_get_stats(cx.g, &st);
    uint64_t tiles = 0, macs = 0, cycles = 0, runs = 0;
    for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++) {
        const struct shape *sh = &SHAPES[si];
        if (!shape_runs(sh))
            continue;
        runs += 3;
        tiles += 3 * kb_gemm_tiles(&DEF, sh->M, sh->N, sh->K);
        macs += 3 * (uint64_t)sh->M * sh->N * sh->K;
        cycles += 3 * kb_gemm_cycles(&DEF, sh->M, sh->N, sh->K);
    }
    ASSERT_U64_EQ(st.runs, runs);
    ASSERT_U64_EQ(st.tiles, tiles);
    ASSERT_U64_EQ(st.macs, macs);
    ASSERT_U64_EQ(st.cycles, cycles);
    ASSERT_U64_EQ(st.busy_ps, cycles * SIM_NS);
    ASSERT_U64_EQ(sim_now(s), st.busy_ps); /* back to back: always busy */
    ASSERT_NEAR(kb_gemm_utilisation(cx.g, 0), 1.0, 1e-12);
    /* edge tiles pad the array, so the rate while busy is below peak */
    double achieved = kb_gemm_achieved_flops(cx.g, 0);
    ASSERT_NEAR(achieved, 2.0 * (double)macs / ((double)cycles * 1e-9), 1);
    ASSERT_TRUE(achieved < kb_gemm_peak_flops(&DEF));
    ASSERT_NEAR(kb_gemm_achieved_flops(cx.g, 2 * st.busy_ps), achieved / 2, 1);
    T_FREE(kb_gemm_free, cx.g);
    T_FREE(sim_free, s);
}

/* C (+)= A·B with accumulate, an f16 C; and a full-tile square at peak. */
static void accumulate_thread(struct sim *s, void *arg)
{
    struct ctx *cx = arg;
    size_t M = 96, N = 130, K = 70;
    void *A = matrix(M, K, K, KB_DTYPE_F16), *B = matrix(K, N, N, KB_DTYPE_F16);
    void *C = matrix(M, N, N, KB_DTYPE_F16);
    float *a = widen(A, M * K, KB_DTYPE_F16), *b = widen(B, K * N, KB_DTYPE_F16);
    NEED(cx, A && B && C && a && b);
    float *want = widen(C, M * N, KB_DTYPE_F16);
    NEED(cx, want);
    naive(M, N, K, a, K, b, N, want, N, 1);
    int rc = kb_gemm_run(cx->g, M, N, K, A, K, B, N, C, N, KB_DTYPE_F16,
                         KB_DTYPE_F16, true);
    RUN_OK(cx, rc);
    CHECK(cx, rc == 0, "accumulate: %s", kb_gemm_errmsg(cx->g));
    for (size_t i = 0; i < M * N; i++) {
        uint16_t got, w = kb_dtype_f16_from_float(want[i]);
        memcpy(&got, (char *)C + 2 * i, 2);
        CHECK(cx, got == w, "accumulate [%zu]: %#x != %#x", i, got, w);
    }
    /* K = 0: C = 0 without accumulate, no time */
    sim_time t0 = sim_now(s);
    rc = kb_gemm_run(cx->g, M, N, 0, NULL, 0, NULL, 0, C, N, KB_DTYPE_F16,
                     KB_DTYPE_F16, false);
    RUN_OK(cx, rc);
    CHECK(cx, rc == 0 && sim_now(s) == t0, "empty K");
    for (size_t i = 0; i < M * N; i++)
        CHECK(cx, ((uint16_t *)C)[i] == 0, "empty K: C[%zu] not zero", i);
    T_FREE(free, A), T_FREE(free, B), T_FREE(free, C), T_FREE(free, a), T_FREE(free, b), T_FREE(free, want);
}

/* Identity · B on full tiles: C equals B, and the busy rate is the peak. */
static void peak_thread(struct sim *s, void *arg)
{
    struct ctx *cx = arg;
    static float A[64 * 64], B[64 * 64], C[64 * 64];
    for (int i = 0; i < 64; i++)
        for (int k = 0; k < 64; k++)
            A[i * 64 + k] = i == k, B[i * 64 + k] = (float)(i * 64 + k);
    int rc = kb_gemm_run(cx->g, 64, 64, 64, A, 64, B, 64, C, 64, KB_DTYPE_F32,
                         KB_DTYPE_F32, false);
    RUN_OK(cx, rc);
    CHECK(cx, rc == 0, "peak: %s", kb_gemm_errmsg(cx->g));
    CHECK(cx, memcmp(B, C, sizeof C) == 0, "identity times B is not B");
}

TEST(accumulate_and_peak)
{
    check_gemm_thread("pe1", "acc", accumulate_thread);
    if (test__failed || test__stopped)
        return;

    static struct ctx cx;
    struct sim *s;
    run_gemm(&s, &cx, "pe1", "peak", peak_thread);
    if (test__failed || test__stopped)
        return;
    ASSERT_U64_EQ(sim_now(s), 64 * SIM_NS);
    ASSERT_NEAR(kb_gemm_achieved_flops(cx.g, 0), kb_gemm_peak_flops(&DEF), 1);
    T_FREE(kb_gemm_free, cx.g);
    T_FREE(sim_free, s);
}

/* The tile hook: a GEMM with edge tiles driven tile by tile as a pipeline
 * would (accumulate after the first depth tile) gives kb_gemm_run's bits,
 * and its cycles sum to kb_gemm_cycles; nothing waits. */
static void tiles_thread(struct sim *s, void *arg)
{
    struct ctx *cx = arg;
    const struct kb_gemm_params *p = kb_gemm_params(cx->g);
    size_t M = 100, N = 70, K = 50;
    void *A = matrix(M, K, K, KB_DTYPE_BF16), *B = matrix(K, N, N, KB_DTYPE_BF16);
    float *C = T_OWN(calloc(M * N, sizeof *C), free);
    float *R = T_OWN(calloc(M * N, sizeof *R), free);
    NEED(cx, A && B && C && R);
    uint64_t cycles = 0;
    for (size_t i0 = 0; i0 < M; i0 += p->tile.m)
        for (size_t j0 = 0; j0 < N; j0 += p->tile.n)
            for (size_t k0 = 0; k0 < K; k0 += p->tile.k) {
                size_t tm = M - i0 < p->tile.m ? M - i0 : p->tile.m;
                size_t tn = N - j0 < p->tile.n ? N - j0 : p->tile.n;
                size_t tk = K - k0 < p->tile.k ? K - k0 : p->tile.k;
                int64_t c = kb_gemm_tile(cx->g, (char *)A + 2 * (i0 * K + k0), K,
                                         (char *)B + 2 * (k0 * N + j0), N,
                                         C + i0 * N + j0, N, tm, tn, tk,
                                         KB_DTYPE_BF16, k0 > 0);
                RUN_OK(cx, c);
                CHECK(cx, c == (int64_t)kb_gemm_tile_cycles(p, tm, tn, tk),
                      "tile cycles %lld", (long long)c);
                cycles += (uint64_t)c;
            }
    CHECK(cx, sim_now(s) == 0, "kb_gemm_tile waited");
    CHECK(cx, cycles == kb_gemm_cycles(p, M, N, K), "tile cycles sum %llu",
          (unsigned long long)cycles);
    struct kb_gemm_stats st;
    kb_gemm_get_stats(cx->g, &st);
    CHECK(cx, st.tiles == kb_gemm_tiles(p, M, N, K) && st.macs == M * N * K &&
              st.cycles == cycles && st.busy_ps == cycles * SIM_NS && st.runs == 0,
          "tile counters");
    int rc = kb_gemm_run(cx->g, M, N, K, A, K, B, N, R, N, KB_DTYPE_BF16,
                         KB_DTYPE_F32, false);
    RUN_OK(cx, rc);
    CHECK(cx, rc == 0, "run: %s", kb_gemm_errmsg(cx->g));
    CHECK(cx, memcmp(C, R, M * N * sizeof *C) == 0, "tiles differ from run");
    CHECK(cx, sim_now(s) == kb_gemm_time(p, M, N, K), "run time");
    T_FREE(free, A), T_FREE(free, B), T_FREE(free, C), T_FREE(free, R);
}

TEST(tile_hook)
{
    check_gemm_thread("pe2", "tiles", tiles_thread);
}

/* Timing-only: A, B and C all NULL take kb_gemm_run's time and count its
 * tiles, with nothing computed; a NULL among real buffers is still an
 * error. */
static void time_only_thread(struct sim *s, void *arg)
{
    struct ctx *cx = arg;
    const struct kb_gemm_params *p = kb_gemm_params(cx->g);
    size_t M = 100, N = 70, K = 50;
    int rc = kb_gemm_run(cx->g, M, N, K, NULL, K, NULL, N, NULL, N,
                         KB_DTYPE_BF16, KB_DTYPE_F32, false);
    RUN_OK(cx, rc);
    CHECK(cx, rc == 0, "time-only run: %s", kb_gemm_errmsg(cx->g));
    CHECK(cx, sim_now(s) == kb_gemm_time(p, M, N, K), "time-only run time");
    struct kb_gemm_stats st;
    kb_gemm_get_stats(cx->g, &st);
    CHECK(cx, st.tiles == kb_gemm_tiles(p, M, N, K) && st.macs == M * N * K &&
              st.cycles == kb_gemm_cycles(p, M, N, K) && st.runs == 1,
          "time-only counters");
    int64_t c = kb_gemm_tile(cx->g, NULL, 8, NULL, 8, NULL, 8, 4, 8, 8,
                             KB_DTYPE_F16, false);
    RUN_OK(cx, c);
    CHECK(cx, c == (int64_t)kb_gemm_tile_cycles(p, 4, 8, 8), "time-only tile");
    static float C[16];
    rc = kb_gemm_run(cx->g, 4, 4, 4, NULL, 4, NULL, 4, C, 4, KB_DTYPE_F32,
                     KB_DTYPE_F32, false);
    CHECK(cx, rc == SIM_EINVAL, "C without A and B accepted (%d)", rc);
    rc = kb_gemm_run(cx->g, 4, 4, 4, NULL, 2, NULL, 4, NULL, 4, KB_DTYPE_F32,
                     KB_DTYPE_F32, false);
    CHECK(cx, rc == SIM_EINVAL, "time-only run with lda < K accepted (%d)",
          rc);
}

TEST(time_only)
{
    check_gemm_thread("pe3", "t", time_only_thread);
}

static void serial_thread(struct sim *s, void *arg)
{
    struct ctx *cx = arg;
    static float A[64 * 64], B[64 * 64], C[64 * 64]; /* both write zeros */
    cx->failed = kb_gemm_run(cx->g, 64, 64, 64, A, 64, B, 64, C, 64,
                             KB_DTYPE_F32, KB_DTYPE_F32, false);
}

static void method_proc(struct sim *s, void *arg)
{
    struct ctx *cx = arg;
    static float A[16], B[16], C[16];
    int rc = kb_gemm_run(cx->g, 4, 4, 4, A, 4, B, 4, C, 4, KB_DTYPE_F32,
                         KB_DTYPE_F32, false);
    snprintf(cx->msg, sizeof cx->msg, "%d %s", rc, kb_gemm_errmsg(cx->g));
}

TEST(serialise_and_errors)
{
    /* two runs issued together: the second ends after both */
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    static struct ctx c1, c2;
    struct kb_gemm *g = T_OWN(kb_gemm_new(s, "pe3", &DEF, err, sizeof err), kb_gemm_free);
    ASSERT_TRUE(g);
    c1 = (struct ctx){.g = g}, c2 = (struct ctx){.g = g};
    ASSERT_TRUE(sim_thread(s, "r1", serial_thread, &c1, 0));
    ASSERT_TRUE(sim_thread(s, "r2", serial_thread, &c2, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(c1.failed, 0);
    ASSERT_EQ(c2.failed, 0);
    ASSERT_U64_EQ(sim_now(s), 2 * kb_gemm_time(&DEF, 64, 64, 64));
    ASSERT_NEAR(kb_gemm_utilisation(g, 0), 1.0, 1e-12);

    /* bad calls do nothing */
    float A[64], B[64], C[64];
    ASSERT_EQ(kb_gemm_run(g, 4, 4, 4, A, 4, B, 4, C, 4, KB_DTYPE_F32,
                          KB_DTYPE_F32, false), SIM_EPERM);
    ASSERT_STREQ(kb_gemm_errmsg(g), "gemm of 'pe3': run outside a process");
    ASSERT_EQ(kb_gemm_run(g, 4, 4, 4, A, 4, B, 3, C, 4, KB_DTYPE_F32,
                          KB_DTYPE_F32, false), SIM_EINVAL);
    ASSERT_STREQ(kb_gemm_errmsg(g), "gemm of 'pe3': run: ldb 3 is less than N = 4");
    ASSERT_EQ(kb_gemm_run(g, 4, 4, 4, NULL, 4, B, 4, C, 4, KB_DTYPE_F32,
                          KB_DTYPE_F32, false), SIM_EINVAL);
    ASSERT_STREQ(kb_gemm_errmsg(g), "gemm of 'pe3': run needs A, got NULL");
    ASSERT_EQ(kb_gemm_run(g, 4, 4, 4, A, 4, B, 4, C, 4, KB_DTYPE_F32,
                          (enum kb_dtype)5, false), SIM_EINVAL);
    ASSERT_STREQ(kb_gemm_errmsg(g), "gemm of 'pe3': run: unknown output dtype 5");
    ASSERT_EQ(kb_gemm_tile(g, A, 64, B, 64, C, 64, 33, 8, 8, KB_DTYPE_F32, false),
              SIM_EINVAL);
    ASSERT_STREQ(kb_gemm_errmsg(g), "gemm of 'pe3': tile 33x8x8 is not within "
                 "1x1x1 .. 32x64x32");
    ASSERT_EQ(kb_gemm_tile(g, A, 64, B, 64, C, 64, 0, 8, 8, KB_DTYPE_F32, false),
              SIM_EINVAL);
    ASSERT_EQ(kb_gemm_tile(g, A, 2, B, 8, C, 8, 8, 8, 4, KB_DTYPE_F32, false),
              SIM_EINVAL);
    ASSERT_STREQ(kb_gemm_errmsg(g), "gemm of 'pe3': tile: lda 2 is less than K = 4");
    struct kb_gemm_stats st;
    kb_gemm_get_stats(g, &st);
    ASSERT_U64_EQ(st.runs, 2);
    ASSERT_U64_EQ(st.tiles, 2 * kb_gemm_tiles(&DEF, 64, 64, 64));
    T_FREE(kb_gemm_free, g);
    T_FREE(sim_free, s);

    /* from a method: computed and booked, not waited for */
    s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    g = T_OWN(kb_gemm_new(s, "pe4", &DEF, err, sizeof err), kb_gemm_free);
    ASSERT_TRUE(g);
    c1 = (struct ctx){.g = g};
    ASSERT_TRUE(sim_method(s, "m", method_proc, &c1, false));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_CONTAINS(c1.msg, "-1 gemm of 'pe4': run from a method process cannot wait");
    T_FREE(kb_gemm_free, g);
    T_FREE(sim_free, s);
}

TEST_MAIN(tile_time, gemm_time_closed_form, peak_flops, params,
          values_against_naive, accumulate_and_peak, tile_hook,
          serialise_and_errors, time_only)
