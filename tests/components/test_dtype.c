/* test_dtype.c — kb_dtype: known f16 / bf16 bit patterns, ties to even,
 * subnormals, overflow, NaN, exhaustive round trips, names and sizes */
#include <float.h>
#include <math.h>
#include <string.h>

#include "dtype.h"
#include "test.h"

static float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

TEST(f16_known_patterns)
{
    ASSERT_EQ(kb_dtype_f16_from_float(1.0f), 0x3C00);
    ASSERT_EQ(kb_dtype_f16_from_float(-2.0f), 0xC000);
    ASSERT_EQ(kb_dtype_f16_from_float(0.5f), 0x3800);
    ASSERT_EQ(kb_dtype_f16_from_float(65504.0f), 0x7BFF);       /* max */
    ASSERT_EQ(kb_dtype_f16_from_float(65519.0f), 0x7BFF);       /* below the tie */
    ASSERT_EQ(kb_dtype_f16_from_float(65520.0f), 0x7C00);       /* tie, to even: inf */
    ASSERT_EQ(kb_dtype_f16_from_float(1e9f), 0x7C00);
    ASSERT_EQ(kb_dtype_f16_from_float(-1e9f), 0xFC00);
    ASSERT_EQ(kb_dtype_f16_from_float(INFINITY), 0x7C00);
    ASSERT_EQ(kb_dtype_f16_from_float(-INFINITY), 0xFC00);
    ASSERT_EQ(kb_dtype_f16_from_float(0.0f), 0x0000);
    ASSERT_EQ(kb_dtype_f16_from_float(-0.0f), 0x8000);
    ASSERT_EQ(kb_dtype_f16_from_float(0x1p-14f), 0x0400);       /* min normal */
    ASSERT_EQ(kb_dtype_f16_from_float(0x1p-24f), 0x0001);       /* min subnormal */
    ASSERT_EQ(kb_dtype_f16_from_float(-0x1p-24f), 0x8001);
    ASSERT_EQ(kb_dtype_f16_from_float(0x1p-25f), 0x0000);       /* tie, to even: 0 */
    ASSERT_EQ(kb_dtype_f16_from_float(0x1.000002p-25f), 0x0001);
    ASSERT_EQ(kb_dtype_f16_from_float(0x3p-25f), 0x0002);       /* 1.5 ulp: even 2 */
    ASSERT_EQ(kb_dtype_f16_from_float(0x1p-40f), 0x0000);
    ASSERT_EQ(kb_dtype_f16_from_float(1023.5f * 0x1p-24f), 0x0400); /* carry to normal */
    ASSERT_EQ(kb_dtype_f16_from_float(1.0f + 0x1p-11f), 0x3C00); /* tie, even */
    ASSERT_EQ(kb_dtype_f16_from_float(1.0f + 0x3p-11f), 0x3C02); /* tie, even */
    ASSERT_EQ(kb_dtype_f16_from_float(1.0f + 0x1.8p-11f), 0x3C01);
    ASSERT_EQ(kb_dtype_f16_from_float(2047.0f + 0.5f), 0x67FF + 1); /* 2048 */

    ASSERT_TRUE(kb_dtype_f16_to_float(0x3C00) == 1.0f);
    ASSERT_TRUE(kb_dtype_f16_to_float(0x3555) == 0.333251953125f);
    ASSERT_TRUE(kb_dtype_f16_to_float(0x7BFF) == 65504.0f);
    ASSERT_TRUE(kb_dtype_f16_to_float(0x0001) == 0x1p-24f);
    ASSERT_TRUE(kb_dtype_f16_to_float(0x03FF) == 0x1.ff8p-15f);
    ASSERT_TRUE(kb_dtype_f16_to_float(0x7C00) == INFINITY);
    ASSERT_TRUE(kb_dtype_f16_to_float(0xFC00) == -INFINITY);
    ASSERT_EQ(bits_of(kb_dtype_f16_to_float(0x8000)), 0x80000000u);
}

TEST(f16_nan)
{
    ASSERT_TRUE(isnan(kb_dtype_f16_to_float(0x7E00)));
    ASSERT_TRUE(isnan(kb_dtype_f16_to_float(0x7C01))); /* signalling */
    ASSERT_TRUE(isnan(kb_dtype_f16_to_float(0xFFFF)));
    uint16_t h = kb_dtype_f16_from_float(NAN);
    ASSERT_EQ(h & 0x7C00, 0x7C00);
    ASSERT_TRUE((h & 0x3FF) != 0);
    h = kb_dtype_f16_from_float(f32_of(0x7F800001)); /* payload shifted away */
    ASSERT_EQ(h & 0x7C00, 0x7C00);
    ASSERT_TRUE((h & 0x3FF) != 0);
    h = kb_dtype_f16_from_float(-NAN);
    ASSERT_TRUE((h & 0x8000) && (h & 0x3FF));
}

TEST(bf16_known_patterns)
{
    ASSERT_EQ(kb_dtype_bf16_from_float(1.0f), 0x3F80);
    ASSERT_EQ(kb_dtype_bf16_from_float(-1.0f), 0xBF80);
    ASSERT_EQ(kb_dtype_bf16_from_float(f32_of(0x3F808000)), 0x3F80); /* tie, even */
    ASSERT_EQ(kb_dtype_bf16_from_float(f32_of(0x3F818000)), 0x3F82); /* tie, even */
    ASSERT_EQ(kb_dtype_bf16_from_float(f32_of(0x3F808001)), 0x3F81);
    ASSERT_EQ(kb_dtype_bf16_from_float(f32_of(0x3F807FFF)), 0x3F80);
    ASSERT_EQ(kb_dtype_bf16_from_float(f32_of(0x7F7FFFFF)), 0x7F80); /* to inf */
    ASSERT_EQ(kb_dtype_bf16_from_float(f32_of(0x7F7F7FFF)), 0x7F7F);
    ASSERT_EQ(kb_dtype_bf16_from_float(f32_of(0x00010000)), 0x0001); /* subnormal */
    ASSERT_EQ(kb_dtype_bf16_from_float(f32_of(0x00008000)), 0x0000); /* tie to 0 */
    ASSERT_EQ(kb_dtype_bf16_from_float(f32_of(0x00018000)), 0x0002);
    ASSERT_EQ(kb_dtype_bf16_from_float(-0.0f), 0x8000);
    ASSERT_EQ(kb_dtype_bf16_from_float(INFINITY), 0x7F80);
    ASSERT_EQ(kb_dtype_bf16_from_float(f32_of(0x7FC00000)), 0x7FC0);
    uint16_t b = kb_dtype_bf16_from_float(f32_of(0x7F800001)); /* signalling */
    ASSERT_TRUE((b & 0x7F80) == 0x7F80 && (b & 0x7F));
    ASSERT_TRUE(kb_dtype_bf16_to_float(0x4049) == 3.140625f);
    ASSERT_TRUE(isnan(kb_dtype_bf16_to_float(0x7F81)));
    /* a double rounds once: 1 + 2^-8 + 2^-40 is above the tie */
    ASSERT_EQ(kb_dtype_bf16_from_double(1.0 + 0x1p-8 + 0x1p-40), 0x3F81);
    ASSERT_EQ(kb_dtype_f16_from_double(1.0 + 0x1p-11 + 0x1p-40), 0x3C01);
}

/* Every pattern survives the round trip through float (NaN stays NaN). */
TEST(round_trips_exhaustive)
{
    for (uint32_t u = 0; u < 0x10000; u++) {
        uint16_t h = (uint16_t)u;
        float f = kb_dtype_f16_to_float(h);
        if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) {
            ASSERT_TRUE(isnan(f));
            ASSERT_TRUE(isnan(kb_dtype_f16_to_float(kb_dtype_f16_from_float(f))));
        } else {
            ASSERT_EQ(kb_dtype_f16_from_float(f), h);
        }
        f = kb_dtype_bf16_to_float(h);
        if ((h & 0x7F80) == 0x7F80 && (h & 0x7F))
            ASSERT_TRUE(isnan(f));
        else
            ASSERT_EQ(kb_dtype_bf16_from_float(f), h);
    }
}

/* Against the compiler's own binary16 where it has one, over a sweep of
 * float patterns that covers every exponent and many fractions. */
TEST(f16_against_compiler)
{
#ifdef __FLT16_MAX__
    for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 997) {
        float f = f32_of((uint32_t)u);
        if (isnan(f))
            continue;
        _Float16 r = (_Float16)f;
        uint16_t want;
        memcpy(&want, &r, 2);
        if (kb_dtype_f16_from_float(f) != want)
            ASSERT_EQ(kb_dtype_f16_from_float(f), want);
        double d = (double)f * (1.0 + 0x1p-30);
        r = (_Float16)d;
        memcpy(&want, &r, 2);
        if (kb_dtype_f16_from_double(d) != want)
            ASSERT_EQ(kb_dtype_f16_from_double(d), want);
    }
#endif
}

/* bf16 from float against the integer recipe (add 0x7FFF + lsb, truncate). */
TEST(bf16_against_integer_rounding)
{
    for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 331) {
        uint32_t x = (uint32_t)u;
        if ((x & 0x7F800000) == 0x7F800000 && (x & 0x7FFFFF))
            continue;
        uint16_t want = (uint16_t)((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
        if (kb_dtype_bf16_from_float(f32_of(x)) != want)
            ASSERT_EQ(kb_dtype_bf16_from_float(f32_of(x)), want);
    }
}

/* The general rounding recipe, as dtype.c had it before its normal-range
 * fast path: the oracle the fast path must match bit for bit. */
static uint16_t ref_narrow(double x, int ebits, int mbits)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    uint16_t sign = (uint16_t)((u >> 63) << (ebits + mbits));
    int bexp = (int)((u >> 52) & 0x7ff);
    uint64_t frac = u & ((UINT64_C(1) << 52) - 1);
    uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mbits);
    if (bexp == 0x7ff)
        return frac ? sign | inf | (uint16_t)(1u << (mbits - 1)) |
                          (uint16_t)(frac >> (52 - mbits))
                    : sign | inf;
    if (bexp == 0 && frac == 0)
        return sign;
    int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias;
    uint64_t sig = bexp ? frac | (UINT64_C(1) << 52) : frac;
    int e = bexp ? bexp - 1023 : -1022;
    int te = e > emin ? e : emin;
    int shift = 52 + te - mbits - e;
    if (shift > 63)
        return sign;
    uint64_t q = sig >> shift;
    uint64_t rem = sig & ((UINT64_C(1) << shift) - 1);
    uint64_t half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    uint64_t enc = ((uint64_t)(te - emin) << mbits) + q;
    return enc >= inf ? sign | inf : sign | (uint16_t)enc;
}

static double dbl_of(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* One double through every narrowing entry point, against the oracle. */
static int narrow_matches(double d)
{
    float f = (float)d;
    return kb_dtype_f16_from_double(d) == ref_narrow(d, 5, 10) &&
           kb_dtype_bf16_from_double(d) == ref_narrow(d, 8, 7) &&
           kb_dtype_f16_from_float(f) == ref_narrow(f, 5, 10) &&
           kb_dtype_bf16_from_float(f) == ref_narrow(f, 8, 7);
}

/* The fast narrowing against the general recipe: a stride over all float
 * patterns (the full 2^32 sweep was run once by hand), every f16 and bf16
 * value and the doubles just around each rounding midpoint and range
 * edge, and pseudo-random doubles over the exponents that matter. */
TEST(narrow_fast_path_matches_recipe)
{
    for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 251) {
        double d = f32_of((uint32_t)u);
        if (!narrow_matches(d))
            ASSERT_U64_EQ(u, UINT64_MAX);
    }
    for (uint32_t h = 0; h < 0x10000; h++) {
        double v[2] = {kb_dtype_f16_to_float((uint16_t)h),
                       kb_dtype_bf16_to_float((uint16_t)h)};
        double next[2] = {kb_dtype_f16_to_float((uint16_t)(h + 1)),
                          kb_dtype_bf16_to_float((uint16_t)(h + 1))};
        for (int k = 0; k < 2; k++) {
            if (isnan(v[k]))
                continue;
            double mid = isnan(next[k]) || isinf(v[k]) ? v[k] : (v[k] + next[k]) / 2;
            const double pts[] = {v[k], mid, nextafter(mid, INFINITY),
                                  nextafter(mid, -INFINITY),
                                  nextafter(v[k], INFINITY),
                                  nextafter(v[k], -INFINITY)};
            for (size_t j = 0; j < sizeof pts / sizeof pts[0]; j++)
                if (!narrow_matches(pts[j]))
                    ASSERT_TRUE(narrow_matches(pts[j]) && h == UINT32_MAX);
        }
    }
    uint64_t r = 0x9E3779B97F4A7C15u;
    for (int i = 0; i < 4000000; i++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        /* biased exponents 880..1167: every bf16 and f16 edge, both signs */
        uint64_t e = 880 + (r >> 40) % 288;
        double d = dbl_of((r & (UINT64_C(1) << 63)) | e << 52 |
                          (r & ((UINT64_C(1) << 52) - 1)));
        if (!narrow_matches(d))
            ASSERT_U64_EQ(r, 0);
    }
    const double edges[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN,
                            0x1p-1074, 0x1p-1022, 65504.0, 65520.0,
                            nextafter(65520.0, 0), 0x1p-14, 0x1p-24, 0x1p-25,
                            0x1p127, 0x1.fffffep127, 0x1p-126, 0x1p-133,
                            0x1p-134, DBL_MAX, -DBL_MAX};
    for (size_t j = 0; j < sizeof edges / sizeof edges[0]; j++)
        ASSERT_TRUE(narrow_matches(edges[j]));
}

/* The bulk conversions give what the element ones give. */
TEST(bulk_load_store)
{
    enum { N = 1031 };
    static double x[N], back[N], one[N];
    static unsigned char a[4 * N], b[4 * N];
    uint64_t r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 6364136223846793005u + 1442695040888963407u;
        x[i] = ldexp((double)(r >> 11) / 0x1p53 - 0.5, (int)(r % 60) - 30);
    }
    x[0] = NAN;
    x[1] = -INFINITY;
    x[2] = -0.0;
    for (int dt = 0; dt < KB_DTYPE_COUNT; dt++) {
        size_t es = kb_dtype_size((enum kb_dtype)dt);
        kb_dtype_store_n(a, (enum kb_dtype)dt, x, N);
        for (int i = 0; i < N; i++)
            kb_dtype_store(b, (size_t)i, (enum kb_dtype)dt, x[i]);
        ASSERT_TRUE(memcmp(a, b, N * es) == 0);
        kb_dtype_load_n(a, (enum kb_dtype)dt, back, N);
        for (int i = 0; i < N; i++)
            one[i] = kb_dtype_load(a, (size_t)i, (enum kb_dtype)dt);
        ASSERT_TRUE(memcmp(back, one, sizeof back) == 0);
    }
}

/* The bulk f16 store (the F16C path where the CPU has it, for groups of
 * eight exact in float) equals the element store bit for bit: groups all
 * exact in float (f16 sums, small integers, subnormals, overflow to inf),
 * groups with one lane that is not (more than 24 significant bits, a NaN,
 * below float's range), mixed along one buffer, and odd tails. */
TEST(bulk_f16_store_matches_element_store)
{
    enum { N = 8 * 4096 + 5 };
    static double x[N];
    static uint16_t bulk[N], one[N];
    uint64_t r = 99;
    for (int i = 0; i < N; i++) {
        r = r * 6364136223846793005u + 1442695040888963407u;
        int kind = (int)((r >> 20) % 8), g = i / 8;
        double f = (double)(float)ldexp((double)(r >> 40) / 0x1p24, (int)(r % 50) - 30);
        if (g % 3 == 0) /* whole groups exact in float */
            x[i] = kind == 0 ? 0.0 : kind == 1 ? -0.0 : kind == 2 ? 65520.0 : f;
        else if (kind == 0 && g % 3 == 1) /* one lane or more not exact */
            x[i] = 1.0 + 0x1p-40;
        else if (kind == 1 && g % 3 == 1)
            x[i] = NAN;
        else if (kind == 2 && g % 3 == 1)
            x[i] = 0x1p-200;
        else
            x[i] = f;
    }
    for (size_t n = N; n + 12 > N; n--) { /* tails of every length mod 8 */
        kb_dtype_store_n(bulk, KB_DTYPE_F16, x, n);
        for (size_t i = 0; i < n; i++)
            kb_dtype_store(one, i, KB_DTYPE_F16, x[i]);
        ASSERT_TRUE(memcmp(bulk, one, n * 2) == 0);
    }
}

/* Every f16 bit pattern through the bulk load (the F16C path where the CPU
 * has it) equals the scalar conversion bit for bit, NaNs included. */
TEST(bulk_f16_load_all_patterns)
{
    static uint16_t h[65536 + 3];
    static double bulk[65536 + 3];
    for (uint32_t i = 0; i < 65536 + 3; i++)
        h[i] = (uint16_t)(i * 40503u); /* every value once, shuffled */
    kb_dtype_load_n(h, KB_DTYPE_F16, bulk, 65536 + 3);
    int bad = -1;
    for (uint32_t i = 0; i < 65536 + 3 && bad < 0; i++) {
        double one = kb_dtype_f16_to_float(h[i]);
        if (memcmp(&one, &bulk[i], sizeof one) != 0)
            bad = (int)h[i];
    }
    ASSERT_EQ(bad, -1);
}

TEST(names_sizes_buffers)
{
    enum kb_dtype dt = KB_DTYPE_F32;
    ASSERT_EQ(kb_dtype_parse("f16", &dt), 0);
    ASSERT_EQ(dt, KB_DTYPE_F16);
    ASSERT_EQ(kb_dtype_parse("bf16", &dt), 0);
    ASSERT_EQ(dt, KB_DTYPE_BF16);
    ASSERT_EQ(kb_dtype_parse("f32", &dt), 0);
    ASSERT_EQ(dt, KB_DTYPE_F32);
    ASSERT_EQ(kb_dtype_parse("fp16", &dt), -1);
    ASSERT_EQ(kb_dtype_parse("F16", &dt), -1);
    ASSERT_EQ(kb_dtype_parse(NULL, &dt), -1);
    ASSERT_STREQ(kb_dtype_name(KB_DTYPE_BF16), "bf16");
    ASSERT_STREQ(kb_dtype_name((enum kb_dtype)7), "?");
    ASSERT_EQ(kb_dtype_size(KB_DTYPE_F16), 2);
    ASSERT_EQ(kb_dtype_size(KB_DTYPE_BF16), 2);
    ASSERT_EQ(kb_dtype_size(KB_DTYPE_F32), 4);

    unsigned char buf[16];
    kb_dtype_store(buf, 3, KB_DTYPE_F16, 1.0);
    uint16_t h;
    memcpy(&h, buf + 6, 2);
    ASSERT_EQ(h, 0x3C00);
    ASSERT_TRUE(kb_dtype_load(buf, 3, KB_DTYPE_F16) == 1.0f);
    kb_dtype_store(buf, 1, KB_DTYPE_F32, 0.1);
    ASSERT_TRUE(kb_dtype_load(buf, 1, KB_DTYPE_F32) == 0.1f);
    kb_dtype_store(buf, 0, KB_DTYPE_BF16, 3.14159);
    ASSERT_TRUE(kb_dtype_load(buf, 0, KB_DTYPE_BF16) == 3.140625f);
    ASSERT_TRUE(kb_dtype_round(65520.0, KB_DTYPE_F16) == INFINITY);
    ASSERT_TRUE(kb_dtype_round(0.1, KB_DTYPE_F32) == 0.1f);
}

TEST_MAIN(f16_known_patterns, f16_nan, bf16_known_patterns,
          round_trips_exhaustive, f16_against_compiler,
          bf16_against_integer_rounding, narrow_fast_path_matches_recipe,
          bulk_load_store, bulk_f16_load_all_patterns,
          bulk_f16_store_matches_element_store, names_sizes_buffers)
