/* dtype.h — kb_dtype: the element types of PE_MATH and PE_GEMM (f16, bf16,
 * f32) and their exact conversions
 *
 * f16 is IEEE 754 binary16 (1 sign, 5 exponent, 10 fraction bits), bf16 the
 * upper half of a binary32 (1, 8, 7), f32 binary32. Narrowing conversions
 * round to nearest, ties to even, produce subnormals, overflow to infinity
 * and keep NaN a NaN (quiet, sign and top payload bits kept). Widening
 * conversions are exact. Elements are stored in host byte order. */
#ifndef KBSIM_DTYPE_H
#define KBSIM_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kb_dtype { KB_DTYPE_F16, KB_DTYPE_BF16, KB_DTYPE_F32 };

#define KB_DTYPE_COUNT 3

/* "f16", "bf16", "f32"; "?" for a value outside the enum. */
const char *kb_dtype_name(enum kb_dtype dt);

/* Bytes per element: 2, 2, 4; 0 for a value outside the enum. */
size_t kb_dtype_size(enum kb_dtype dt);

/* Parses "f16", "bf16" or "f32" into *out: 0, or -1 for any other name. */
int kb_dtype_parse(const char *name, enum kb_dtype *out);

/* binary16 and bfloat16 bit patterns to and from float. */
uint16_t kb_dtype_f16_from_float(float x);
float kb_dtype_f16_to_float(uint16_t h);
uint16_t kb_dtype_bf16_from_float(float x);
float kb_dtype_bf16_to_float(uint16_t b);

/* Rounding a double once, straight to the narrow type (no double rounding
 * through float). */
uint16_t kb_dtype_f16_from_double(double x);
uint16_t kb_dtype_bf16_from_double(double x);

/* Element i of a buffer of `dt`, widened to float (exact). */
float kb_dtype_load(const void *buf, size_t i, enum kb_dtype dt);

/* Rounds x once to `dt` and stores it as element i. */
void kb_dtype_store(void *buf, size_t i, enum kb_dtype dt, double x);

/* Elements [0, n) of a buffer of `dt`, widened to double (exact), and n
 * doubles each rounded once to `dt` into a buffer: kb_dtype_load and
 * kb_dtype_store over a whole buffer, with the same results. */
/* Whether this CPU has F16C and AVX (x86-64): the bulk f16 paths of
 * kb_dtype_load_n / kb_dtype_store_n and PE_MATH use them, bit for bit the
 * scalar results. */
bool kb_dtype_have_f16c(void);
void kb_dtype_load_n(const void *buf, enum kb_dtype dt, double *out, size_t n);
void kb_dtype_store_n(void *buf, enum kb_dtype dt, const double *x, size_t n);

/* x rounded once to `dt`, as a float (exact for every dtype). */
float kb_dtype_round(double x, enum kb_dtype dt);

#endif
