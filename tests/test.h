/* test.h — a small test harness: a registry of tests and assertions that
 * print both values. A test file defines its tests with TEST(name) and
 * ends with TEST_MAIN(name1, name2, ...); the executable prints one line
 * a test and a closing "N passed, N failed" line, and exits 1 on failure.
 * A filter argument runs only the tests whose name contains it. */
#ifndef KBSIM_TEST_H
#define KBSIM_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test__failed;

/* The whole of stream f, NUL-terminated (caller frees): for tests that
 * write to a tmpfile and check what was written. */
static inline char *test_slurp(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    char *b = malloc((size_t)n + 1);
    if (!b)
        return NULL;
    rewind(f);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = '\0';
    return b;
}

#define TEST(name) static void name(void)

#define TEST__FAIL(...)                                                   \
    do {                                                                  \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                   \
        fprintf(stderr, __VA_ARGS__);                                     \
        fputc('\n', stderr);                                              \
        test__failed = 1;                                                 \
        return;                                                           \
    } while (0)

#define ASSERT_TRUE(c)                                                    \
    do {                                                                  \
        if (!(c))                                                         \
            TEST__FAIL("assertion failed: %s", #c);                       \
    } while (0)

#define ASSERT_EQ(a, b)                                                   \
    do {                                                                  \
        long long test__a = (long long)(a), test__b = (long long)(b);     \
        if (test__a != test__b)                                           \
            TEST__FAIL("%s == %s: %lld != %lld", #a, #b, test__a, test__b); \
    } while (0)

#define ASSERT_U64_EQ(a, b)                                               \
    do {                                                                  \
        uint64_t test__a = (uint64_t)(a), test__b = (uint64_t)(b);        \
        if (test__a != test__b)                                           \
            TEST__FAIL("%s == %s: %" PRIu64 " != %" PRIu64, #a, #b,       \
                       test__a, test__b);                                 \
    } while (0)

#define ASSERT_NEAR(a, b, eps)                                            \
    do {                                                                  \
        double test__a = (double)(a), test__b = (double)(b);              \
        if (!(test__a - test__b <= (eps) && test__b - test__a <= (eps)))  \
            TEST__FAIL("%s ~ %s: %.9g vs %.9g (eps %g)", #a, #b, test__a, \
                       test__b, (double)(eps));                           \
    } while (0)

#define ASSERT_STREQ(a, b)                                                \
    do {                                                                  \
        const char *test__a = (a), *test__b = (b);                        \
        if (!test__a || !test__b || strcmp(test__a, test__b) != 0)        \
            TEST__FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b,              \
                       test__a ? test__a : "(null)",                      \
                       test__b ? test__b : "(null)");                     \
    } while (0)

#define ASSERT_CONTAINS(hay, needle)                                      \
    do {                                                                  \
        const char *test__h = (hay), *test__n = (needle);                 \
        if (!test__h || !strstr(test__h, test__n))                        \
            TEST__FAIL("%s contains \"%s\": got \"%s\"", #hay, test__n,   \
                       test__h ? test__h : "(null)");                     \
    } while (0)

/* TEST_MAIN(a, b, c): the tests of this file, in order. */
#define TEST_MAIN(...)                                                    \
    int main(int argc, char **argv)                                       \
    {                                                                     \
        void (*fns[])(void) = {__VA_ARGS__};                              \
        const char *names = #__VA_ARGS__;                                 \
        int n = (int)(sizeof fns / sizeof fns[0]);                        \
        int passed = 0, failed = 0;                                       \
        const char *p = names;                                            \
        for (int i = 0; i < n; i++) {                                     \
            char name[128];                                               \
            size_t k = 0;                                                 \
            while (*p == ' ' || *p == ',' || *p == '\n' || *p == '\t')    \
                p++;                                                      \
            while (*p && *p != ',' && *p != ' ' && k + 1 < sizeof name)   \
                name[k++] = *p++;                                         \
            name[k] = 0;                                                  \
            if (argc > 1 && !strstr(name, argv[1]))                       \
                continue;                                                 \
            test__failed = 0;                                             \
            fns[i]();                                                     \
            printf("%s %s\n", test__failed ? "FAIL" : "ok  ", name);      \
            fflush(stdout);                                               \
            if (test__failed)                                             \
                failed++;                                                 \
            else                                                          \
                passed++;                                                 \
        }                                                                 \
        printf("%d passed, %d failed\n", passed, failed);                 \
        return failed ? 1 : 0;                                            \
    }

#endif
