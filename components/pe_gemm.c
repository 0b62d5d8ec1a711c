/* pe_gemm.c — kb_gemm: tiled matrix multiply on real values, the MAC-array
 * time model, the engine's occupancy and counters */
#include "pe_gemm.h"

#include "kb_err.h"
#include "kb_port.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct kb_gemm {
    struct sim *sim;
    char *name;
    struct kb_gemm_params p;
    float *a_s, *b_s, *acc; /* staging: tile.m×tile.k, tile.k×tile.n, tile.m×tile.n */
    sim_time busy_until;
    struct kb_gemm_stats st;
    struct kb_gemm_if iface;
    struct sim_port *port; /* "NAME.gemm.in" */
    char err[256];
};

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* ---- time model ---------------------------------------------------------- */

/* A tile of tm×tn×tk occupies the mac.m×mac.n×mac.k array for
 *
 *     cycles(tile) = ceil(tm/mac.m) · ceil(tn/mac.n) · ceil(tk/mac.k)
 *
 * (an edge tile is charged its real size rounded up to the array), and an
 * M×N×K GEMM for the sum over its tiles. As a tile's cycles are a product
 * of a row, a column and a depth term, the sum over the tile grid is the
 * product of the three sums; along a dimension of size d cut into tiles of
 * t, with q = floor(d/t) full tiles and r = d mod t left over,
 *
 *     S(d, t, mac) = q·ceil(t/mac) + ceil(r/mac),
 *     cycles(GEMM) = S(M, tile.m, mac.m) · S(N, tile.n, mac.n) · S(K, tile.k, mac.k).
 *
 * Time = cycles / clock_ghz ns, rounded to the nearest ps. */
uint64_t kb_gemm_tile_cycles(const struct kb_gemm_params *p, uint64_t tm,
                             uint64_t tn, uint64_t tk)
{
    return ceil_div(tm, p->mac.m) * ceil_div(tn, p->mac.n) *
           ceil_div(tk, p->mac.k);
}

static uint64_t dim_sum(uint64_t d, uint64_t t, uint64_t mac)
{
    return d / t * ceil_div(t, mac) + ceil_div(d % t, mac);
}

uint64_t kb_gemm_cycles(const struct kb_gemm_params *p, uint64_t M,
                        uint64_t N, uint64_t K)
{
    return dim_sum(M, p->tile.m, p->mac.m) * dim_sum(N, p->tile.n, p->mac.n) *
           dim_sum(K, p->tile.k, p->mac.k);
}

uint64_t kb_gemm_tiles(const struct kb_gemm_params *p, uint64_t M,
                       uint64_t N, uint64_t K)
{
    return ceil_div(M, p->tile.m) * ceil_div(N, p->tile.n) *
           ceil_div(K, p->tile.k);
}

sim_time kb_gemm_cycles_to_ps(const struct kb_gemm_params *p, uint64_t cycles)
{
    return (sim_time)llround((double)cycles * 1000.0 / p->clock_ghz);
}

bool kb_gemm_time_fits(const struct kb_gemm_params *p, uint64_t M, uint64_t N, uint64_t K)
{
    if ((double)M * (double)N * (double)K > (double)KB_GEMM_MAX_MNK)
        return false;
    return (double)kb_gemm_cycles(p, M, N, K) * 1000.0 / p->clock_ghz < 9e18;
}

sim_time kb_gemm_time(const struct kb_gemm_params *p, uint64_t M, uint64_t N,
                      uint64_t K)
{
    return kb_gemm_cycles_to_ps(p, kb_gemm_cycles(p, M, N, K));
}

double kb_gemm_peak_flops(const struct kb_gemm_params *p)
{
    return 2.0 * p->mac.m * p->mac.n * p->mac.k * p->clock_ghz * 1e9;
}

int kb_gemm_params_check(const struct kb_gemm_params *p, const char *name,
                         char *err, size_t errlen)
{
    if (!p->mac.m || !p->mac.n || !p->mac.k)
        kb_errf(err, errlen, "gemm of '%s': mac array must be > 0 in each "
             "dimension, got %" PRIu32 "x%" PRIu32 "x%" PRIu32, name, p->mac.m,
             p->mac.n, p->mac.k);
    else if (!p->tile.m || !p->tile.n || !p->tile.k)
        kb_errf(err, errlen, "gemm of '%s': tile must be > 0 in each dimension, "
             "got %" PRIu32 "x%" PRIu32 "x%" PRIu32, name, p->tile.m,
             p->tile.n, p->tile.k);
    else if (!(p->clock_ghz > 0) || isinf(p->clock_ghz))
        kb_errf(err, errlen, "gemm of '%s': clock must be a positive number of "
             "GHz, got %g", name, p->clock_ghz);
    else
        return 0;
    return SIM_EINVAL;
}

/* ---- values -------------------------------------------------------------- */

/* rows×cols elements of `src` from (r0, c0) into f32 `dst` (leading dim
 * `ldd`). */
static void stage(float *dst, size_t ldd, const void *src, size_t lds,
                  size_t r0, size_t c0, size_t rows, size_t cols,
                  enum kb_dtype dt)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            dst[r * ldd + c] = kb_dtype_load(src, (r0 + r) * lds + c0 + c, dt);
}

/* acc[tm×tn] += a[tm×tk]·b[tk×tn], each element in increasing k. The
 * product and the sum are separate statements so that no compiler fuses
 * them (the rounding of an f32 product is part of the model). */
static void mac_tile(float *restrict acc, size_t ldc, const float *restrict a,
                     size_t lda, const float *restrict b, size_t ldb,
                     size_t tm, size_t tn, size_t tk)
{
    for (size_t i = 0; i < tm; i++) {
        float *c = acc + i * ldc;
        for (size_t k = 0; k < tk; k++) {
            float aik = a[i * lda + k];
            const float *bk = b + k * ldb;
            for (size_t j = 0; j < tn; j++) {
                float prod = aik * bk[j];
                c[j] += prod;
            }
        }
    }
}

/* ---- the engine ---------------------------------------------------------- */

/* ---- the module's export (kb_gemm_if) ----------------------------------- */

static int if_run(void *ctx, size_t M, size_t N, size_t K, const void *A, size_t lda,
                  const void *B, size_t ldb, void *C, size_t ldc, enum kb_dtype in_dt,
                  enum kb_dtype c_dt, bool accumulate)
{
    return kb_gemm_run(ctx, M, N, K, A, lda, B, ldb, C, ldc, in_dt, c_dt, accumulate);
}
static int64_t if_tile(void *ctx, const void *A, size_t lda, const void *B, size_t ldb,
                       float *C, size_t ldc, size_t tm, size_t tn, size_t tk,
                       enum kb_dtype dt, bool accumulate)
{
    return kb_gemm_tile(ctx, A, lda, B, ldb, C, ldc, tm, tn, tk, dt, accumulate);
}
static const struct kb_gemm_params *if_params(void *ctx) { return kb_gemm_params(ctx); }
static const char *if_errmsg(void *ctx) { return kb_gemm_errmsg(ctx); }

struct sim_port *kb_gemm_port(const struct kb_gemm *g) { return g->port; }

struct kb_gemm *kb_gemm_new(struct sim *s, const char *name,
                            const struct kb_gemm_params *p, char *err,
                            size_t errlen)
{
    if (kb_gemm_params_check(p, name, err, errlen) < 0)
        return NULL;
    struct kb_gemm *g = calloc(1, sizeof *g);
    if (!g)
        goto oom;
    g->sim = s;
    g->p = *p;
    g->name = strdup(name);
    if (!g->name)
        goto oom;
    g->iface = (struct kb_gemm_if){g, if_run, if_tile, if_params, if_errmsg};
    if (!(g->port = kb_port_export(s, name, "gemm", KB_GEMM_IF, &g->iface, 1, err, errlen))) {
        kb_gemm_free(g);
        return NULL;
    }
    return g;
oom:
    kb_errf(err, errlen, "gemm of '%s': out of memory", name);
    kb_gemm_free(g);
    return NULL;
}

void kb_gemm_free(struct kb_gemm *g)
{
    if (!g)
        return;
    free(g->name);
    free(g->a_s);
    free(g->b_s);
    free(g->acc);
    free(g);
}

const char *kb_gemm_errmsg(const struct kb_gemm *g) { return g->err; }
const char *kb_gemm_name(const struct kb_gemm *g) { return g->name; }
const struct kb_gemm_params *kb_gemm_params(const struct kb_gemm *g)
{
    return &g->p;
}

/* The leading dimensions and buffers of a non-empty product. */
/* With A, B and C all NULL only the time is taken (a timing-only run). */
static bool time_only(const void *A, const void *B, const void *C)
{
    return !A && !B && !C;
}

static int check_mats(struct kb_gemm *g, const char *what, size_t M, size_t N,
                      size_t K, const void *A, size_t lda, const void *B,
                      size_t ldb, const void *C, size_t ldc)
{
    bool values = !time_only(A, B, C); /* else the sizes are still checked */
    if (values && M && N && !C)
        return KB_SETERR(g, SIM_EINVAL, "gemm of '%s': %s needs C, got NULL",
                      g->name, what);
    if (values && M && N && K && (!A || !B))
        return KB_SETERR(g, SIM_EINVAL, "gemm of '%s': %s needs %s, got NULL",
                      g->name, what, A ? "B" : "A");
    if (M && K && lda < K)
        return KB_SETERR(g, SIM_EINVAL, "gemm of '%s': %s: lda %zu is less than "
                      "K = %zu", g->name, what, lda, K);
    if (K && N && ldb < N)
        return KB_SETERR(g, SIM_EINVAL, "gemm of '%s': %s: ldb %zu is less than "
                      "N = %zu", g->name, what, ldb, N);
    if (M && N && ldc < N)
        return KB_SETERR(g, SIM_EINVAL, "gemm of '%s': %s: ldc %zu is less than "
                      "N = %zu", g->name, what, ldc, N);
    return 0;
}

static int check_dtype(struct kb_gemm *g, const char *what, const char *which,
                       enum kb_dtype dt)
{
    if (kb_dtype_size(dt))
        return 0;
    return KB_SETERR(g, SIM_EINVAL, "gemm of '%s': %s: unknown %s dtype %d",
                  g->name, what, which, (int)dt);
}

static void count_tile(struct kb_gemm *g, size_t tm, size_t tn, size_t tk,
                       uint64_t cycles)
{
    g->st.tiles++;
    g->st.macs += (uint64_t)tm * tn * tk;
    g->st.cycles += cycles;
}

/* The staging buffers, made for the first tile with values (a timing-only
 * run, and a PE that multiplies nothing, never pays for them). */
static int staging(struct kb_gemm *g)
{
    const struct kb_gemm_params *p = &g->p;
    if (g->acc)
        return 0;
    free(g->a_s);
    free(g->b_s);
    g->a_s = malloc((size_t)p->tile.m * p->tile.k * sizeof *g->a_s);
    g->b_s = malloc((size_t)p->tile.k * p->tile.n * sizeof *g->b_s);
    if (g->a_s && g->b_s)
        g->acc = malloc((size_t)p->tile.m * p->tile.n * sizeof *g->acc);
    if (!g->acc)
        return KB_SETERR(g, SIM_ENOMEM, "gemm of '%s': out of memory", g->name);
    return 0;
}

int64_t kb_gemm_tile(struct kb_gemm *g, const void *A, size_t lda,
                     const void *B, size_t ldb, float *C, size_t ldc,
                     size_t tm, size_t tn, size_t tk, enum kb_dtype dt,
                     bool accumulate)
{
    const struct kb_gemm_params *p = &g->p;
    if (!tm || !tn || !tk || tm > p->tile.m || tn > p->tile.n || tk > p->tile.k)
        return KB_SETERR(g, SIM_EINVAL, "gemm of '%s': tile %zux%zux%zu is not "
                      "within 1x1x1 .. %" PRIu32 "x%" PRIu32 "x%" PRIu32,
                      g->name, tm, tn, tk, p->tile.m, p->tile.n, p->tile.k);
    int rc = check_dtype(g, "tile", "input", dt);
    if (rc == 0)
        rc = check_mats(g, "tile", tm, tn, tk, A, lda, B, ldb, C, ldc);
    if (rc < 0)
        return rc;

    if (!time_only(A, B, C)) {
        if ((rc = staging(g)) < 0)
            return rc;
        stage(g->a_s, p->tile.k, A, lda, 0, 0, tm, tk, dt);
        stage(g->b_s, p->tile.n, B, ldb, 0, 0, tk, tn, dt);
        if (!accumulate)
            for (size_t i = 0; i < tm; i++)
                memset(C + i * ldc, 0, tn * sizeof *C);
        mac_tile(C, ldc, g->a_s, p->tile.k, g->b_s, p->tile.n, tm, tn, tk);
    }

    uint64_t cycles = kb_gemm_tile_cycles(p, tm, tn, tk);
    count_tile(g, tm, tn, tk, cycles);
    g->st.busy_ps += kb_gemm_cycles_to_ps(p, cycles);
    return (int64_t)cycles;
}

int kb_gemm_run(struct kb_gemm *g, size_t M, size_t N, size_t K,
                const void *A, size_t lda, const void *B, size_t ldb,
                void *C, size_t ldc, enum kb_dtype in_dt, enum kb_dtype c_dt,
                bool accumulate)
{
    const struct kb_gemm_params *p = &g->p;
    int rc = check_dtype(g, "run", "input", in_dt);
    if (rc == 0)
        rc = check_dtype(g, "run", "output", c_dt);
    if (rc == 0)
        rc = check_mats(g, "run", M, N, K, A, lda, B, ldb, C, ldc);
    if (rc < 0)
        return rc;
    if (!sim_current(g->sim))
        return KB_SETERR(g, SIM_EPERM, "gemm of '%s': run outside a process",
                      g->name);

    uint64_t cycles = 0;
    size_t ldacc = p->tile.n;
    bool values = !time_only(A, B, C);
    if (values && (rc = staging(g)) < 0)
        return rc;
    for (size_t i0 = 0; i0 < M; i0 += p->tile.m) {
        size_t tm = min_sz(p->tile.m, M - i0);
        for (size_t j0 = 0; j0 < N; j0 += p->tile.n) {
            size_t tn = min_sz(p->tile.n, N - j0);
            if (!values) {
                for (size_t k0 = 0; k0 < K; k0 += p->tile.k) {
                    size_t tk = min_sz(p->tile.k, K - k0);
                    uint64_t c = kb_gemm_tile_cycles(p, tm, tn, tk);
                    count_tile(g, tm, tn, tk, c);
                    cycles += c;
                }
                continue;
            }
            for (size_t i = 0; i < tm; i++)
                for (size_t j = 0; j < tn; j++)
                    g->acc[i * ldacc + j] =
                        accumulate ? kb_dtype_load(C, (i0 + i) * ldc + j0 + j, c_dt)
                                   : 0.0f;
            for (size_t k0 = 0; k0 < K; k0 += p->tile.k) {
                size_t tk = min_sz(p->tile.k, K - k0);
                stage(g->a_s, p->tile.k, A, lda, i0, k0, tm, tk, in_dt);
                stage(g->b_s, p->tile.n, B, ldb, k0, j0, tk, tn, in_dt);
                mac_tile(g->acc, ldacc, g->a_s, p->tile.k, g->b_s, p->tile.n,
                         tm, tn, tk);
                uint64_t c = kb_gemm_tile_cycles(p, tm, tn, tk);
                count_tile(g, tm, tn, tk, c);
                cycles += c;
            }
            for (size_t i = 0; i < tm; i++)
                for (size_t j = 0; j < tn; j++)
                    kb_dtype_store(C, (i0 + i) * ldc + j0 + j, c_dt,
                                   g->acc[i * ldacc + j]);
        }
    }

    sim_time t = kb_gemm_cycles_to_ps(p, cycles);
    sim_time now = sim_now(g->sim);
    sim_time start = g->busy_until > now ? g->busy_until : now;
    g->busy_until = start + t;
    g->st.runs++;
    g->st.busy_ps += t;
    if (g->busy_until == now)
        return 0; /* an empty product: not even a delta cycle */
    rc = sim_wait(g->sim, g->busy_until - now);
    if (rc < 0)
        kb_errf(g->err, sizeof g->err, "gemm of '%s': run from a method process "
             "cannot wait (booked until %" PRIu64 " ps)", g->name, g->busy_until);
    return rc;
}

void kb_gemm_get_stats(const struct kb_gemm *g, struct kb_gemm_stats *out)
{
    *out = g->st;
}

double kb_gemm_achieved_flops(const struct kb_gemm *g, sim_time elapsed)
{
    if (!elapsed)
        elapsed = g->st.busy_ps;
    return elapsed ? 2.0 * (double)g->st.macs / ((double)elapsed * 1e-12) : 0.0;
}

double kb_gemm_utilisation(const struct kb_gemm *g, sim_time elapsed)
{
    if (!elapsed)
        elapsed = sim_now(g->sim);
    return elapsed ? (double)g->st.busy_ps / (double)elapsed : 0.0;
}
