/* pe_math.h — kb_math: PE_MATH, the element-wise vector unit of a PE
 * (add, sub, mul, div, maximum, minimum, fma, clamp, exp, log, softmax,
 * cdiv, sum) on real f16, bf16 and f32 values
 *
 * Values: every element is computed in double from the exact (widened)
 * operand values and rounded, to nearest even, to the operands' dtype. For
 * add, sub, mul and div that is the correctly rounded result, bit for bit
 * what an f32 ALU followed by a rounding to f16 or bf16 gives (each wider
 * type carries at least 2p+2 bits of the narrower p-bit one, so these double
 * roundings are harmless); fma is fused (fmaf for f32; for f16 and bf16 a
 * double fma, exact while the result is inside the type's range). exp, log
 * and softmax are evaluated in double and rounded once; sum accumulates in
 * double, in index order, and rounds once.
 *
 * Timing (stated in pe_math.c): an op streams its vectors through a
 * datapath of W = vector_bytes_per_cycle bytes a cycle; transcendental
 * passes take `transcendental_cycles` cycles a vector.
 *
 * Errors: int functions return 0 or a negative SIM_E* code; kb_math_errmsg()
 * says what went wrong. */
#ifndef KBSIM_PE_MATH_H
#define KBSIM_PE_MATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "memory.h"
#include "sim.h"


enum kb_math_op {
    KB_MATH_ADD,     /* a + b */
    KB_MATH_SUB,     /* a - b */
    KB_MATH_MUL,     /* a * b */
    KB_MATH_DIV,     /* a / b (IEEE: x/0 is ±inf, 0/0 NaN) */
    KB_MATH_MAXIMUM, /* max(a, b); NaN if either is NaN; max(-0, +0) = +0 */
    KB_MATH_MINIMUM, /* min(a, b); NaN if either is NaN; min(-0, +0) = -0 */
    KB_MATH_FMA,     /* a * b + c, fused */
    KB_MATH_CLAMP,   /* min(max(a, b), c): a clamped to [lo = b, hi = c] */
    KB_MATH_EXP,     /* e^a */
    KB_MATH_LOG,     /* ln a */
    KB_MATH_SOFTMAX, /* e^(a_i - max a) / sum_j e^(a_j - max a), over all n */
    KB_MATH_CDIV,    /* ceil(a / b) */
    KB_MATH_SUM,     /* out[0] = sum of a_i (out holds one element) */
};

#define KB_MATH_OP_COUNT 13

struct kb_math_params {
    uint32_t vector_bytes_per_cycle; /* W, bytes, > 0 */
    double clock_ghz;                /* > 0 */
    uint32_t transcendental_cycles;  /* T, cycles per vector of exp / log, >= 1 */
};

struct kb_math_stats {
    uint64_t ops;      /* kb_math_run calls */
    uint64_t elements; /* n summed over them */
    uint64_t cycles;
    sim_time busy_ps;
    uint64_t by_op[KB_MATH_OP_COUNT]; /* ops per kind */
};

struct kb_math;

/* ---- ops ----------------------------------------------------------------- */

/* "add", "sub", "mul", "div", "maximum", "minimum", "fma", "clamp", "exp",
 * "log", "softmax", "cdiv", "sum"; "?" outside the enum. */
const char *kb_math_op_name(enum kb_math_op op);
/* 0 and *out set, or -1 for an unknown name. */
int kb_math_op_parse(const char *name, enum kb_math_op *out);
/* Operands read: 1 (exp, log, softmax, sum), 3 (fma, clamp) or 2. */
int kb_math_op_arity(enum kb_math_op op);

/* The values alone, no time: out[i] = op(a[i], b[i], c[i]) for i < n, all
 * buffers of dtype `dt` (b, c unused by ops of lower arity and may be NULL).
 * out may be the same buffer as any operand. SIM_EINVAL for an unknown op
 * or dtype or a missing buffer. */
int kb_math_compute(enum kb_math_op op, const void *a, const void *b,
                    const void *c, void *out, size_t n, enum kb_dtype dt);

/* ceil(a / b) on integers, any signs (as triton's cdiv for positive
 * operands); b != 0 and not INT64_MIN / -1. */
int64_t kb_math_cdiv_i64(int64_t a, int64_t b);

/* ---- timing -------------------------------------------------------------- */

/* 0, or SIM_EINVAL with a message naming `name` and the bad value. */
int kb_math_params_check(const struct kb_math_params *p, const char *name,
                         char *err, size_t errlen);

/* Closed forms for valid parameters: the cycles, and the time in ps, of
 * one op over n elements of `dt` (0 for an unknown op or dtype). */
uint64_t kb_math_cycles(const struct kb_math_params *p, enum kb_math_op op,
                        size_t n, enum kb_dtype dt);
sim_time kb_math_time(const struct kb_math_params *p, enum kb_math_op op,
                      size_t n, enum kb_dtype dt);
/* Whether those closed forms can be computed: n <= 2^40 elements keeps n·s
 * in 64 bits, and the time must fit a sim_time. Callers that take n from
 * users check it first. */
#define KB_MATH_MAX_N ((uint64_t)1 << 40)
bool kb_math_time_fits(const struct kb_math_params *p, enum kb_math_op op, uint64_t n,
                       enum kb_dtype dt);

/* ---- the unit ------------------------------------------------------------ */

/* A unit named after its PE ("sip0.cube0.pe3"); NULL on bad parameters or
 * no memory, with err set. */
struct kb_math *kb_math_new(struct sim *s, const char *name,
                            const struct kb_math_params *p, char *err,
                            size_t errlen);
void kb_math_free(struct kb_math *m);

const char *kb_math_errmsg(const struct kb_math *m);
const char *kb_math_name(const struct kb_math *m);
const struct kb_math_params *kb_math_params(const struct kb_math *m);

/* From a thread process: computes the values (kb_math_compute), then holds
 * the unit for kb_math_time and returns when the op ends; with every buffer
 * NULL only the time is taken (timing-only runs carry no values). The unit
 * does one
 * op at a time: a call made while it is busy starts when it frees (callers
 * are served in call order). SIM_EINVAL on bad operands (nothing computed);
 * SIM_EPERM outside any process (nothing done) or from a method process
 * (values computed and the unit booked, but not waited for). */
int kb_math_run(struct kb_math *m, enum kb_math_op op, const void *a,
                const void *b, const void *c, void *out, size_t n,
                enum kb_dtype dt);

/* An operand given either as a host buffer (p) or as a snapshot of memory
 * (snap: kb_mem_snap, decision 0056), which the unit reads span by span
 * instead of a caller copying it out first; both NULL: none. drop, when
 * set, is snap itself, which the unit may clear once it has read the
 * values: a result written into a page the snapshot still held would
 * copy that page first (decision 0060). */
struct kb_math_arg {
    const void *p;
    const struct kb_mem_snap *snap;
    struct kb_mem_snap *drop;
};

/* Where a result goes: a host buffer (p), or memory (mem at addr, written
 * in place span by span); both NULL: none (time only). */
struct kb_math_dst {
    void *p;
    struct kb_mem *mem;
    uint64_t addr;
};

/* kb_math_compute with operands as kb_math_arg (unused ones may be NULL)
 * and the result to a kb_math_dst: the same values. An elementwise op runs
 * over the runs of elements that are contiguous in every operand and in
 * the result; sum and softmax read a snapshot operand into a buffer first.
 * SIM_ENOMEM when there is no memory for that or for the result's pages,
 * SIM_EINVAL for an operand shorter than n elements or a result beyond its
 * memory. */
int kb_math_compute_args(enum kb_math_op op, const struct kb_math_arg *a,
                         const struct kb_math_arg *b, const struct kb_math_arg *c,
                         const struct kb_math_dst *out, size_t n, enum kb_dtype dt);
/* kb_math_run with operands as kb_math_arg (unused ones may be NULL) and
 * the result to a kb_math_dst: the same values, the same time. A result
 * into memory is written when the op ends (where a caller of kb_math_run
 * writes its buffer to memory), so that it needs no buffer while the unit
 * is held; its operands must stay unchanged until then (snapshots do). */
int kb_math_run_args(struct kb_math *m, enum kb_math_op op, const struct kb_math_arg *a,
                     const struct kb_math_arg *b, const struct kb_math_arg *c,
                     const struct kb_math_dst *out, size_t n, enum kb_dtype dt);

/* ---- the module: its port and interface ------------------------------- */

/* What the math unit does for the unit that issues its ops (the PE_CPU):
 * kb_math_run and kb_math_params, each taking ctx (the kb_math). Exported
 * on "NAME.math.in" : kb_math_if (one binding). */
struct kb_math_if {
    void *ctx;
    int (*run)(void *ctx, enum kb_math_op op, const void *a, const void *b, const void *c,
               void *out, size_t n, enum kb_dtype dt);
    const struct kb_math_params *(*params)(void *ctx);
    const char *(*errmsg)(void *ctx);
    /* optional (NULL: the caller passes host buffers to run):
     * kb_math_run_args */
    int (*run_args)(void *ctx, enum kb_math_op op, const struct kb_math_arg *a,
                    const struct kb_math_arg *b, const struct kb_math_arg *c,
                    const struct kb_math_dst *out, size_t n, enum kb_dtype dt);
};

struct sim_port *kb_math_port(const struct kb_math *m);

void kb_math_get_stats(const struct kb_math *m, struct kb_math_stats *out);
/* busy / elapsed; elapsed 0 means the current time. */
double kb_math_utilisation(const struct kb_math *m, sim_time elapsed);

#endif
