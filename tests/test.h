/* test.h — a small test harness: a registry of tests and assertions that
 * print both values. A test file defines its tests with TEST(name) and
 * ends with TEST_MAIN(name1, name2, ...); the executable prints one line
 * a test and a closing "N passed, N failed" line, and exits 1 on failure.
 * A filter argument runs only the tests whose name contains it.
 *
 * Allocation failure (tests linked with kb_failalloc, which defines
 * KBSIM_FAILALLOC): `test_x --failalloc [filter]` runs each test once to
 * count its allocations, then again with the 1st, 2nd, ... of them
 * failing (failalloc.h; past TEST_FAILALLOC_ALL of them, every new call
 * site and a sample of the rest). A test made for this:
 *  - hands what it builds to T_OWN(ptr, free_fn) and frees it with
 *    T_FREE(free_fn, ptr), so that whatever an early return leaves is
 *    freed by the harness, newest first;
 *  - checks what every call returns (ASSERT_TRUE(p), ASSERT_OK(rc)).
 * Once the injected failure has happened, a failed ASSERT_TRUE, ASSERT_OK,
 * an ASSERT_EQ whose actual value is a negative error code, or a string
 * assertion whose actual text says "out of memory" is the error the code
 * under test owed: the case stops there, cleanly, and passes (as does
 * any assertion after such a stop, say in the test body after a process
 * stopped). Any other
 * failed assertion (a wrong value with no error), a crash, an abort or
 * (under ASan) a leak fails, naming the allocation. See
 * tests/failalloc/README.md. */
#ifndef KBSIM_TEST_H
#define KBSIM_TEST_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KBSIM_FAILALLOC
#include <signal.h>
#include <unistd.h>

#include "failalloc.h"
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/lsan_interface.h>
#define TEST__ASAN 1
#endif
#endif

static int test__failed;
static int test__stopped; /* stopped at the error an injected failure owed */
/* Running under --failalloc: a test of many random rounds may run fewer
 * (every round takes the same code paths; each failing run repeats the
 * test up to the failure). */
static bool test_failalloc_mode;

/* ---- what a test built, freed by the harness after an early return ---- */

struct test__owned {
    void *p;
    void (*fn)(void *);
};
static struct test__owned test__own[512];
static int test__nown;

static inline void *test_own(void *p, void (*fn)(void *))
{
    if (p) {
        if (test__nown == (int)(sizeof test__own / sizeof test__own[0])) {
            fprintf(stderr, "test.h: more than %d objects owned\n",
                    test__nown);
            abort();
        }
        test__own[test__nown++] = (struct test__owned){p, fn};
    }
    return p;
}

static inline void test_disown(const void *p)
{
    for (int i = test__nown - 1; i >= 0; i--)
        if (test__own[i].p == p) {
            memmove(&test__own[i], &test__own[i + 1],
                    (size_t)(test__nown - i - 1) * sizeof test__own[0]);
            test__nown--;
            return;
        }
}

static inline void test__free_owned(void)
{
    while (test__nown > 0) {
        struct test__owned o = test__own[--test__nown];
        o.fn(o.p);
    }
}

/* fclose for T_OWN (which takes a function returning nothing) */
static inline void test_fclose(FILE *f)
{
    fclose(f);
}

/* T_OWN(sim_new(NULL), sim_free): the pointer, owned by the test case
 * until T_FREE(sim_free, s) (or, after an early return, the harness)
 * frees it. NULL is passed through unowned. */
#define T_OWN(p, fn) test_own((p), (void (*)(void *))(fn))
#define T_FREE(fn, p) (test_disown(p), fn(p))

/* Whether the injected allocation failure has happened in this run. */
static inline bool test__injected(void)
{
#ifdef KBSIM_FAILALLOC
    return failalloc_fired();
#else
    return false;
#endif
}

/* A new file holding text (NULL: empty), made with mkstemp in $TMPDIR
 * (else /tmp) under a name starting with prefix; returns its path
 * (malloc'd) or NULL with nothing left behind. The caller removes and
 * frees it: T_OWN(path, test_remove_file). */
static inline char *test_tmpfile(const char *prefix, const char *text)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    size_t n = strlen(dir) + strlen(prefix) + sizeof "/-XXXXXX";
    char *path = malloc(n);
    if (!path)
        return NULL;
    snprintf(path, n, "%s/%s-XXXXXX", dir, prefix); /* mkstemp fills the Xs */
    int fd = mkstemp(path);
    if (fd < 0) {
        free(path);
        return NULL;
    }
    size_t len = text ? strlen(text) : 0;
    bool ok = true;
    for (size_t off = 0; ok && off < len;) {
        ssize_t w = write(fd, text + off, len - off);
        ok = w > 0;
        off += ok ? (size_t)w : 0;
    }
    if (close(fd) != 0 || !ok) {
        remove(path);
        free(path);
        return NULL;
    }
    return path;
}

/* removes and frees a test_tmpfile path, for T_OWN */
static inline void test_remove_file(char *path)
{
    remove(path);
    free(path);
}

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

static inline bool test__oom_text(const char *s)
{
    return !s || strstr(s, "out of memory") != NULL;
}

#define TEST__FAIL(...)                                                   \
    do {                                                                  \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                   \
        fprintf(stderr, __VA_ARGS__);                                     \
        fputc('\n', stderr);                                              \
        test__failed = 1;                                                 \
        return;                                                           \
    } while (0)

/* The case stops at the error an injected failure owed (when `owed`),
 * else fails. */
#define TEST__STOP_OR_FAIL(owed, ...)                                     \
    do {                                                                  \
        if (((owed) || test__stopped) && test__injected()) {              \
            test__stopped = 1;                                            \
            return;                                                       \
        }                                                                 \
        TEST__FAIL(__VA_ARGS__);                                          \
    } while (0)

#define ASSERT_TRUE(c)                                                    \
    do {                                                                  \
        if (!(c))                                                         \
            TEST__STOP_OR_FAIL(1, "assertion failed: %s", #c);            \
    } while (0)

/* rc is not an error code (< 0) */
#define ASSERT_OK(rc)                                                     \
    do {                                                                  \
        long long test__r = (long long)(rc);                              \
        if (test__r < 0)                                                  \
            TEST__STOP_OR_FAIL(1, "%s: error %lld", #rc, test__r);        \
    } while (0)

#define ASSERT_EQ(a, b)                                                   \
    do {                                                                  \
        long long test__a = (long long)(a), test__b = (long long)(b);     \
        if (test__a != test__b)                                           \
            TEST__STOP_OR_FAIL(test__a < 0, "%s == %s: %lld != %lld", #a, \
                               #b, test__a, test__b);                     \
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
            TEST__STOP_OR_FAIL(test__oom_text(test__a), "%s == %s: \"%s\" != \"%s\"", #a, #b,              \
                       test__a ? test__a : "(null)",                      \
                       test__b ? test__b : "(null)");                     \
    } while (0)

#define ASSERT_CONTAINS(hay, needle)                                      \
    do {                                                                  \
        const char *test__h = (hay), *test__n = (needle);                 \
        if (!test__h || !strstr(test__h, test__n))                        \
            TEST__STOP_OR_FAIL(test__oom_text(test__h), "%s contains \"%s\": got \"%s\"", #hay, test__n,   \
                       test__h ? test__h : "(null)");                     \
    } while (0)

#ifdef KBSIM_FAILALLOC
/* Every allocation up to TEST_FAILALLOC_ALL fails in turn; past it, the
 * first allocation from each call site not yet failed, and every
 * stride-th, with the stride that keeps those to TEST_FAILALLOC_SAMPLED
 * (a test of thousands of allocations then costs a few hundred runs). */
#ifndef TEST_FAILALLOC_ALL
#define TEST_FAILALLOC_ALL 300
#endif
#ifndef TEST_FAILALLOC_SAMPLED
#define TEST_FAILALLOC_SAMPLED 50
#endif
#define TEST__SITES (1ul << 20)

static const char *test__fa_name;
static unsigned long test__fa_k;

static void test__fa_report(void)
{
    if (!test__fa_name)
        return;
    char line[256];
    int n = snprintf(line, sizeof line,
                     "failalloc: died in %s with allocation %lu failing\n",
                     test__fa_name, test__fa_k);
    if (n > 0)
        (void)!write(2, line, (size_t)n < sizeof line ? (size_t)n
                                                      : sizeof line - 1);
}

static void test__fa_signal(int sig)
{
    test__fa_report();
    signal(sig, SIG_DFL);
    raise(sig);
}

static int test__fa_site_cmp(const void *a, const void *b)
{
    const void *x = *(const void *const *)a, *y = *(const void *const *)b;
    return x < y ? -1 : x > y;
}

/* One test with each chosen allocation failing in turn: 0 if every run
 * stopped cleanly or ended right. */
static int test__failalloc(void (*fn)(void), const char *name)
{
    /* the dry run: how many allocations, from where */
    failalloc_record(TEST__SITES);
    test__failed = test__stopped = 0;
    fn();
    test__free_owned();
    unsigned long total = failalloc_count();
    if (test__failed)
        return 1;
    unsigned long nsites = total < TEST__SITES ? total : TEST__SITES;
    const void **seen = calloc(nsites + 1, sizeof *seen);
    unsigned long *site_first = calloc(nsites + 1, sizeof *site_first);
    if (!seen || !site_first) {
        fprintf(stderr, "failalloc: out of memory in the harness\n");
        exit(2);
    }
    /* the first allocation from each call site */
    unsigned long nseen = 0;
    for (unsigned long n = 1; n <= nsites; n++) {
        const void *site = failalloc_site(n);
        const void **hit =
            nseen ? bsearch(&site, seen, nseen, sizeof *seen,
                            test__fa_site_cmp)
                  : NULL;
        if (!hit) {
            seen[nseen++] = site;
            qsort(seen, nseen, sizeof *seen, test__fa_site_cmp);
            site_first[n] = 1;
        }
    }
    unsigned long stride =
        total > TEST_FAILALLOC_ALL
            ? (total - TEST_FAILALLOC_ALL + TEST_FAILALLOC_SAMPLED - 1) /
                  TEST_FAILALLOC_SAMPLED
            : 1;
    unsigned long runs = 0, stopped = 0, ended = 0;
    int bad = 0;
    test__fa_name = name;
    for (unsigned long k = 1; k <= total && !bad; k++) {
        if (k > TEST_FAILALLOC_ALL && (k > nsites || !site_first[k]) &&
            (k - TEST_FAILALLOC_ALL) % stride != 0)
            continue;
        test__fa_k = k;
        test__failed = test__stopped = 0;
        failalloc_arm(k);
        fn();
        bool fired = failalloc_fired();
        failalloc_arm(0);
        test__free_owned();
        runs++;
        stopped += (unsigned long)test__stopped;
        ended += (unsigned long)(fired && !test__stopped && !test__failed);
#ifdef TEST__ASAN
        if (__lsan_do_recoverable_leak_check()) {
            fprintf(stderr, "%s: a leak with allocation %lu failing\n",
                    name, k);
            bad = 1;
        }
#endif
        if (test__failed) {
            fprintf(stderr, "%s: with allocation %lu of %lu failing "
                    "(from %p), the assertion above failed\n", name, k,
                    total, failalloc_site(k));
            bad = 1;
        }
    }
    test__fa_name = NULL;
    failalloc_record(0);
    printf("     %s: %lu allocations (%lu call sites), %lu failed in turn: "
           "%lu stopped at an error, %lu ended right\n", name, total,
           nseen, runs, stopped, ended);
    free(seen);
    free(site_first);
    return bad;
}

static void test__failalloc_setup(void)
{
#ifdef TEST__ASAN
    __asan_set_death_callback(test__fa_report);
#endif
    signal(SIGSEGV, test__fa_signal);
    signal(SIGABRT, test__fa_signal);
    signal(SIGBUS, test__fa_signal);
    signal(SIGFPE, test__fa_signal);
}
#define TEST__FAILALLOC_ARG(argc, argv)                                   \
    ((argc) > 1 && strcmp((argv)[1], "--failalloc") == 0)
#define TEST__RUN(fn, name, fa)                                           \
    ((fa) ? (void)(test__failed = test__failalloc(fn, name))              \
          : (void)(test__failed = test__stopped = 0, fn(),                \
                   test__free_owned()))
#else
#define TEST__FAILALLOC_ARG(argc, argv) 0
#define test__failalloc_setup() ((void)0)
#define TEST__RUN(fn, name, fa)                                           \
    ((void)(fa), (void)(test__failed = test__stopped = 0, fn(),           \
                        test__free_owned()))
#endif

/* TEST_MAIN(a, b, c): the tests of this file, in order. */
#define TEST_MAIN(...)                                                    \
    int main(int argc, char **argv)                                       \
    {                                                                     \
        void (*fns[])(void) = {__VA_ARGS__};                              \
        const char *names = #__VA_ARGS__;                                 \
        int n = (int)(sizeof fns / sizeof fns[0]);                        \
        int passed = 0, failed = 0;                                       \
        const char *p = names;                                            \
        int fa = TEST__FAILALLOC_ARG(argc, argv);                         \
        if (fa) {                                                         \
            test_failalloc_mode = true;                                   \
            test__failalloc_setup();                                      \
            argc--;                                                       \
            argv++;                                                       \
        }                                                                 \
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
            TEST__RUN(fns[i], name, fa);                                  \
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
