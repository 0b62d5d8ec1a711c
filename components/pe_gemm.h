/* pe_gemm.h — kb_gemm: PE_GEMM, the tile engine of a PE: C (+)= A·B on a
 * MAC array, on real f16, bf16 or f32 inputs with f32 accumulation
 *
 * Matrices are row-major with leading dimensions (elements between the
 * starts of two rows): A is M×K (lda >= K), B is K×N (ldb >= N), C is M×N
 * (ldc >= N). A tile is tile.m rows of A and C by tile.n columns of B and C
 * by tile.k of the shared depth K; the default 32×64×32 is m = 32, n = 64,
 * k = 32. The MAC array does mac.m × mac.n × mac.k multiply-accumulates a
 * cycle (default 16×16×16).
 *
 * Values: inputs are widened to f32 (exact); each MAC is
 * acc = f32(acc + f32(a·b)), in increasing k, so for f16 and bf16 inputs,
 * whose products are exact in f32, it is a fused MAC. A whole GEMM
 * accumulates every k of an element into one f32 accumulator before C is
 * written, rounded once to C's dtype.
 *
 * Timing (stated in pe_gemm.c): a tile of tm×tn×tk takes
 * ceil(tm/mac.m)·ceil(tn/mac.n)·ceil(tk/mac.k) cycles, edge tiles their
 * real size rounded up to the array; a GEMM takes the sum over its tiles.
 *
 * Errors: int functions return 0 or a negative SIM_E* code; kb_gemm_errmsg()
 * says what went wrong. */
#ifndef KBSIM_PE_GEMM_H
#define KBSIM_PE_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "sim.h"


struct kb_gemm_params {
    struct {
        uint32_t m, n, k; /* MACs a cycle: rows × columns × depth, each > 0 */
    } mac;
    struct {
        uint32_t m, n, k; /* largest tile: rows of A/C, columns of B/C, depth */
    } tile;
    double clock_ghz; /* > 0 */
};

struct kb_gemm_stats {
    uint64_t runs;   /* kb_gemm_run calls */
    uint64_t tiles;  /* tiles computed, by runs and by kb_gemm_tile */
    uint64_t macs;   /* useful MACs: tm·tn·tk summed over tiles */
    uint64_t cycles; /* array cycles, padding of edge tiles included */
    sim_time busy_ps;
};

struct kb_gemm;

/* ---- parameters and closed forms ----------------------------------------- */


/* 0, or SIM_EINVAL with a message naming `name` and the bad value. */
int kb_gemm_params_check(const struct kb_gemm_params *p, const char *name,
                         char *err, size_t errlen);

/* Cycles of one tile of tm×tn×tk (any size; 0 if one is 0). */
uint64_t kb_gemm_tile_cycles(const struct kb_gemm_params *p, uint64_t tm,
                             uint64_t tn, uint64_t tk);

/* Tiles, cycles and time (ps) of an M×N×K GEMM cut into tiles of the
 * parameters' tile shape. */
uint64_t kb_gemm_tiles(const struct kb_gemm_params *p, uint64_t M,
                       uint64_t N, uint64_t K);
uint64_t kb_gemm_cycles(const struct kb_gemm_params *p, uint64_t M,
                        uint64_t N, uint64_t K);
sim_time kb_gemm_time(const struct kb_gemm_params *p, uint64_t M, uint64_t N,
                      uint64_t K);

/* Whether the closed forms of an M×N×K GEMM can be computed: M·N·K <=
 * 2^48 keeps the cycle count (at most 8·M·N·K) in 64 bits, and the time
 * must fit a sim_time. Callers that take sizes from users check it first. */
#define KB_GEMM_MAX_MNK ((uint64_t)1 << 48)
bool kb_gemm_time_fits(const struct kb_gemm_params *p, uint64_t M, uint64_t N, uint64_t K);

/* cycles / clock_ghz, in ps rounded to nearest. */
sim_time kb_gemm_cycles_to_ps(const struct kb_gemm_params *p, uint64_t cycles);

/* 2·mac.m·mac.n·mac.k·clock, FLOP/s (a MAC is two FLOPs). */
double kb_gemm_peak_flops(const struct kb_gemm_params *p);

/* ---- the engine ---------------------------------------------------------- */

/* An engine named after its PE ("sip0.cube0.pe3"); NULL on bad parameters
 * or no memory, with err set. It owns f32 staging buffers of one tile. */
struct kb_gemm *kb_gemm_new(struct sim *s, const char *name,
                            const struct kb_gemm_params *p, char *err,
                            size_t errlen);
void kb_gemm_free(struct kb_gemm *g);

const char *kb_gemm_errmsg(const struct kb_gemm *g);
const char *kb_gemm_name(const struct kb_gemm *g);
const struct kb_gemm_params *kb_gemm_params(const struct kb_gemm *g);

/* One tile, for a tile pipeline that schedules its stages itself: C[tm×tn]
 * (f32, the accumulator) = (accumulate ? C : 0) + A[tm×tk]·B[tk×tn], A and B
 * of dtype `dt`. tm, tn, tk must be between 1 and the tile shape. Counts the
 * tile and its busy time but does not wait: returns the tile's cycles
 * (kb_gemm_tile_cycles), or a negative SIM_E* code with nothing done. With
 * A, B and C all NULL only the time is counted (timing-only runs). */
int64_t kb_gemm_tile(struct kb_gemm *g, const void *A, size_t lda,
                     const void *B, size_t ldb, float *C, size_t ldc,
                     size_t tm, size_t tn, size_t tk, enum kb_dtype dt,
                     bool accumulate);

/* From a thread process: a whole GEMM, C = (accumulate ? C : 0) + A·B with A
 * and B of `in_dt` and C of `c_dt`, tile by tile (row tiles, then column
 * tiles, then depth), then holds the engine for kb_gemm_time and returns
 * when it ends. One GEMM at a time: a call made while the engine is busy
 * starts when it frees. SIM_EINVAL on bad arguments (nothing done);
 * SIM_EPERM outside any process (nothing done) or from a method process
 * (computed and booked, not waited for). With A, B and C all NULL only the
 * time is taken (timing-only runs carry no values). */
int kb_gemm_run(struct kb_gemm *g, size_t M, size_t N, size_t K,
                const void *A, size_t lda, const void *B, size_t ldb,
                void *C, size_t ldc, enum kb_dtype in_dt, enum kb_dtype c_dt,
                bool accumulate);

/* ---- the module: its port and interface ------------------------------- */

/* What the GEMM engine does for the unit that issues its ops (the
 * PE_CPU): kb_gemm_run, kb_gemm_tile and kb_gemm_params, each taking ctx
 * (the kb_gemm). Exported on "NAME.gemm.in" : kb_gemm_if (one binding). */
struct kb_gemm_if {
    void *ctx;
    int (*run)(void *ctx, size_t M, size_t N, size_t K, const void *A, size_t lda,
               const void *B, size_t ldb, void *C, size_t ldc, enum kb_dtype in_dt,
               enum kb_dtype c_dt, bool accumulate);
    int64_t (*tile)(void *ctx, const void *A, size_t lda, const void *B, size_t ldb, float *C,
                    size_t ldc, size_t tm, size_t tn, size_t tk, enum kb_dtype dt,
                    bool accumulate);
    const struct kb_gemm_params *(*params)(void *ctx);
    const char *(*errmsg)(void *ctx);
};

struct sim_port *kb_gemm_port(const struct kb_gemm *g);

void kb_gemm_get_stats(const struct kb_gemm *g, struct kb_gemm_stats *out);

/* 2·macs / elapsed, FLOP/s; elapsed 0 means the engine's busy time (the
 * rate while busy: below peak by the padding of edge tiles). */
double kb_gemm_achieved_flops(const struct kb_gemm *g, sim_time elapsed);
/* busy / elapsed; elapsed 0 means the current time. */
double kb_gemm_utilisation(const struct kb_gemm *g, sim_time elapsed);

#endif
