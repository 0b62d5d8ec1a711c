/* dtype.c — kb_dtype: f16 / bf16 / f32 names, sizes and rounding */
#include "dtype.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define DTYPE_F16C 1
#endif

static const char *const names[KB_DTYPE_COUNT] = {"f16", "bf16", "f32"};

const char *kb_dtype_name(enum kb_dtype dt)
{
    return (unsigned)dt < KB_DTYPE_COUNT ? names[dt] : "?";
}

size_t kb_dtype_size(enum kb_dtype dt)
{
    switch (dt) {
    case KB_DTYPE_F16:
    case KB_DTYPE_BF16: return 2;
    case KB_DTYPE_F32: return 4;
    }
    return 0;
}

int kb_dtype_parse(const char *name, enum kb_dtype *out)
{
    for (int i = 0; name && i < KB_DTYPE_COUNT; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (enum kb_dtype)i;
            return 0;
        }
    return -1;
}

static uint64_t bits64(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Rounds a double once to a binary format of `ebits` exponent and `mbits`
 * fraction bits (ebits <= 8, mbits <= 10 here). The value is taken as an
 * integer significand `sig` times 2^(e-52) and divided by the target's
 * quantum 2^(te-mbits), te = max(e, emin); the rounded quotient q laid over
 * the exponent field, ((te-emin) << mbits) + q, is the encoding: a carry out
 * of the fraction lands in the exponent, a subnormal that rounds up to
 * 2^emin becomes the smallest normal, and overflow reaches the infinity
 * pattern. */
static uint16_t narrow(double x, int ebits, int mbits)
{
    uint64_t u = bits64(x);
    uint16_t sign = (uint16_t)((u >> 63) << (ebits + mbits));
    int bexp = (int)((u >> 52) & 0x7ff);
    uint64_t frac = u & ((UINT64_C(1) << 52) - 1);
    uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mbits);

    if (bexp == 0x7ff) {
        if (!frac)
            return sign | inf;
        /* quiet NaN: the quiet bit guarantees a non-zero fraction */
        return sign | inf | (uint16_t)(1u << (mbits - 1)) |
               (uint16_t)(frac >> (52 - mbits));
    }
    if (bexp == 0 && frac == 0)
        return sign;

    int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias;
    uint64_t sig = bexp ? frac | (UINT64_C(1) << 52) : frac;
    int e = bexp ? bexp - 1023 : -1022;
    int te = e > emin ? e : emin;
    int shift = 52 + te - mbits - e; /* >= 52 - mbits > 0 */
    if (shift > 63)
        return sign; /* below half the smallest subnormal */
    uint64_t q = sig >> shift;
    uint64_t rem = sig & ((UINT64_C(1) << shift) - 1);
    uint64_t half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    uint64_t enc = ((uint64_t)(te - emin) << mbits) + q;
    if (enc >= inf)
        return sign | inf;
    return sign | (uint16_t)enc;
}

/* The common case first: a value whose result is a normal of the narrow
 * type (biased double exponent in [lo, hi]) keeps its top mbits fraction
 * bits under the rebiased exponent, (a >> (52 - mbits)) - (1023 - bias) <<
 * mbits, then rounds to nearest even on the dropped bits; a carry out of
 * the fraction lands in the exponent, and from the largest normal it gives
 * exactly the infinity pattern. Everything else (zeros, subnormals,
 * overflow, inf, NaN) goes through narrow(), which this matches bit for bit
 * (tests/components/test_dtype.c checks it against the general recipe). */
static inline uint16_t narrow_fast(double x, int ebits, int mbits)
{
    uint64_t u = bits64(x);
    uint64_t a = u & ~(UINT64_C(1) << 63);
    int bias = (1 << (ebits - 1)) - 1;
    uint64_t lo = (uint64_t)(1023 - bias + 1), hi = (uint64_t)(1023 + bias);
    if (a - (lo << 52) > ((hi - lo) << 52 | ((UINT64_C(1) << 52) - 1)))
        return narrow(x, ebits, mbits);
    int drop = 52 - mbits;
    uint64_t enc = (a >> drop) - ((uint64_t)(1023 - bias) << mbits);
    uint64_t rem = a & ((UINT64_C(1) << drop) - 1), half = UINT64_C(1) << (drop - 1);
    enc += rem > half || (rem == half && (enc & 1));
    return (uint16_t)((u >> 63) << (ebits + mbits)) | (uint16_t)enc;
}

uint16_t kb_dtype_f16_from_double(double x) { return narrow_fast(x, 5, 10); }
uint16_t kb_dtype_bf16_from_double(double x) { return narrow_fast(x, 8, 7); }
uint16_t kb_dtype_f16_from_float(float x) { return narrow_fast(x, 5, 10); }
uint16_t kb_dtype_bf16_from_float(float x) { return narrow_fast(x, 8, 7); }

float kb_dtype_f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t e = (h >> 10) & 0x1f, f = h & 0x3ff;
    if (e == 0x1f) /* a signalling NaN comes out quiet, as IEEE asks */
        return float_of(sign | 0x7f800000 | (f << 13) | (f ? 0x400000 : 0));
    if (e == 0) {
        float v = ldexpf((float)f, -24);
        return sign ? -v : v;
    }
    return float_of(sign | ((e + 127 - 15) << 23) | (f << 13));
}

float kb_dtype_bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    if ((u & 0x7f800000) == 0x7f800000 && (u & 0x7fffff))
        u |= 0x400000;
    return float_of(u);
}

float kb_dtype_load(const void *buf, size_t i, enum kb_dtype dt)
{
    uint16_t h;
    float f;
    switch (dt) {
    case KB_DTYPE_F16:
        memcpy(&h, (const char *)buf + 2 * i, 2);
        return kb_dtype_f16_to_float(h);
    case KB_DTYPE_BF16:
        memcpy(&h, (const char *)buf + 2 * i, 2);
        return kb_dtype_bf16_to_float(h);
    case KB_DTYPE_F32:
        memcpy(&f, (const char *)buf + 4 * i, 4);
        return f;
    }
    return NAN;
}

void kb_dtype_store(void *buf, size_t i, enum kb_dtype dt, double x)
{
    uint16_t h;
    float f;
    switch (dt) {
    case KB_DTYPE_F16:
        h = kb_dtype_f16_from_double(x);
        memcpy((char *)buf + 2 * i, &h, 2);
        break;
    case KB_DTYPE_BF16:
        h = kb_dtype_bf16_from_double(x);
        memcpy((char *)buf + 2 * i, &h, 2);
        break;
    case KB_DTYPE_F32:
        f = (float)x;
        memcpy((char *)buf + 4 * i, &f, 4);
        break;
    }
}

/* The bulk forms hoist the dtype switch out of the element loop, which is
 * where per-element conversion spends its time on large buffers. */
#ifdef DTYPE_F16C
/* f16 -> double eight at a time with the F16C instruction, which is exact
 * (subnormals included, a signalling NaN comes out quiet with the same
 * payload, as the scalar path does; test_dtype checks all 65536 inputs).
 * Returns how many it converted, a multiple of 8. */
__attribute__((target("avx,f16c"))) static size_t f16_load_f16c(const unsigned char *p,
                                                                  double *out, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(p + 2 * i));
        __m256 f = _mm256_cvtph_ps(h);
        _mm256_storeu_pd(out + i, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
        _mm256_storeu_pd(out + i + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
    }
    return i;
}

/* double -> f16 eight at a time with F16C, for the lanes it gets right:
 * when all eight doubles are exact in float (the float -> double round trip
 * gives them back), the float is the value, and F16C's round to nearest
 * even from it is the one rounding narrow() makes. A group with any lane
 * not exact in float (a NaN, a value below float's range or with more than
 * 24 significant bits) is left to the scalar path, so the bits are always
 * narrow()'s (test_dtype checks both paths against the element one).
 * Returns how many it converted. */
__attribute__((target("avx,f16c"))) static size_t f16_store_f16c(unsigned char *p,
                                                                   const double *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256d a = _mm256_loadu_pd(x + i), b = _mm256_loadu_pd(x + i + 4);
        __m128 fa = _mm256_cvtpd_ps(a), fb = _mm256_cvtpd_ps(b);
        __m256d ea = _mm256_cmp_pd(_mm256_cvtps_pd(fa), a, _CMP_EQ_OQ);
        __m256d eb = _mm256_cmp_pd(_mm256_cvtps_pd(fb), b, _CMP_EQ_OQ);
        if ((_mm256_movemask_pd(ea) & _mm256_movemask_pd(eb)) != 0xf)
            break;
        __m256 f = _mm256_insertf128_ps(_mm256_castps128_ps256(fa), fb, 1);
        _mm_storeu_si128((__m128i *)(void *)(p + 2 * i),
                         _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

#endif

#if defined(DTYPE_F16C) && defined(__clang__)
/* clang (14, Debian 12's) knows no "f16c" for __builtin_cpu_supports: the
 * CPUID bit, read once before main */
#include <cpuid.h>
static bool cpu_f16c;
__attribute__((constructor)) static void probe_f16c(void)
{
    unsigned a, b, c, d;
    cpu_f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

bool kb_dtype_have_f16c(void)
{
#if defined(DTYPE_F16C) && defined(__clang__)
    return cpu_f16c && __builtin_cpu_supports("avx");
#elif defined(DTYPE_F16C)
    /* a load and a bit test of what libgcc found at start-up: no cache */
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#else
    return false;
#endif
}

void kb_dtype_load_n(const void *buf, enum kb_dtype dt, double *out, size_t n)
{
    const unsigned char *p = buf;
    uint16_t h;
    float f;
    switch (dt) {
    case KB_DTYPE_F16: {
        size_t i = 0;
#ifdef DTYPE_F16C
        if (kb_dtype_have_f16c())
            i = f16_load_f16c(p, out, n);
#endif
        for (; i < n; i++) {
            memcpy(&h, p + 2 * i, 2);
            out[i] = kb_dtype_f16_to_float(h);
        }
        return;
    }
    case KB_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) {
            memcpy(&h, p + 2 * i, 2);
            out[i] = kb_dtype_bf16_to_float(h);
        }
        return;
    case KB_DTYPE_F32:
        for (size_t i = 0; i < n; i++) {
            memcpy(&f, p + 4 * i, 4);
            out[i] = f;
        }
        return;
    }
}

void kb_dtype_store_n(void *buf, enum kb_dtype dt, const double *x, size_t n)
{
    unsigned char *p = buf;
    uint16_t h;
    float f;
    switch (dt) {
    case KB_DTYPE_F16:
        for (size_t i = 0; i < n;) {
#ifdef DTYPE_F16C
            if (kb_dtype_have_f16c()) {
                i += f16_store_f16c(p + 2 * i, x + i, n - i);
                /* a group it left, or the tail: up to 8 scalar, then again */
            }
#endif
            for (size_t e = i + 8 < n ? i + 8 : n; i < e; i++) {
                h = narrow_fast(x[i], 5, 10);
                memcpy(p + 2 * i, &h, 2);
            }
        }
        return;
    case KB_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) {
            h = narrow_fast(x[i], 8, 7);
            memcpy(p + 2 * i, &h, 2);
        }
        return;
    case KB_DTYPE_F32:
        for (size_t i = 0; i < n; i++) {
            f = (float)x[i];
            memcpy(p + 4 * i, &f, 4);
        }
        return;
    }
}

float kb_dtype_round(double x, enum kb_dtype dt)
{
    switch (dt) {
    case KB_DTYPE_F16: return kb_dtype_f16_to_float(kb_dtype_f16_from_double(x));
    case KB_DTYPE_BF16: return kb_dtype_bf16_to_float(kb_dtype_bf16_from_double(x));
    case KB_DTYPE_F32: return (float)x;
    }
    return NAN;
}
