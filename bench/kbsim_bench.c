/* kbsim_bench.c — peer-benchmark workloads W1–W4 (bench/WORKLOADS.md) on the C API
 *
 *   kbsim-bench timed|pingpong|ring|method P K   one line of results, self-checked
 *   kbsim-bench --check-w4                        W4 reference delays table
 *   kbsim-bench --rss N [STACK_KIB]              peak RSS of N live thread processes
 *
 * Thread processes get 16 KiB stacks: a W1–W3 body is a loop around one
 * kernel call, and the deepest path (fifo read -> block -> switch) stays
 * far below that.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "sim.h"

#define BENCH_STACK ((size_t)16 * 1024)

struct bench {
    struct sim *s;
    uint64_t P, K;
    uint64_t events;
    struct sim_fifo **fifos;
    int64_t final_token; /* W3: token absorbed by process 0 */
    uint64_t bad_values; /* W2: reads that returned the wrong value */
};

struct proc_arg {
    struct bench *b;
    uint64_t i;
    uint64_t x;     /* W4: LCG state */
    uint64_t fired; /* W4: firings so far */
    bool started;   /* W4: initial run done */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- W1 timed -------------------------------------------------------- */

static void w1_proc(struct sim *s, void *arg)
{
    struct proc_arg *a = arg;
    for (uint64_t k = 0; k < a->b->K; k++) {
        sim_wait(s, 10 * SIM_NS);
        a->b->events++;
    }
}

/* ---- W2 pingpong ----------------------------------------------------- */

static void w2_a(struct sim *s, void *arg)
{
    struct proc_arg *a = arg;
    struct bench *b = a->b;
    struct sim_fifo *a2b = b->fifos[2 * (a->i / 2)];
    struct sim_fifo *b2a = b->fifos[2 * (a->i / 2) + 1];
    for (int64_t k = 0; k < (int64_t)b->K; k++) {
        int64_t v;
        sim_fifo_write(a2b, &k);
        sim_fifo_read(b2a, &v);
        b->events++;
        if (v != k)
            b->bad_values++;
    }
}

static void w2_b(struct sim *s, void *arg)
{
    struct proc_arg *a = arg;
    struct bench *b = a->b;
    struct sim_fifo *a2b = b->fifos[2 * (a->i / 2)];
    struct sim_fifo *b2a = b->fifos[2 * (a->i / 2) + 1];
    for (uint64_t k = 0; k < b->K; k++) {
        int64_t v;
        sim_fifo_read(a2b, &v);
        b->events++;
        sim_fifo_write(b2a, &v);
    }
}

/* ---- W3 ring --------------------------------------------------------- */

static void w3_proc(struct sim *s, void *arg)
{
    struct proc_arg *a = arg;
    struct bench *b = a->b;
    struct sim_fifo *in = b->fifos[a->i];
    struct sim_fifo *out = b->fifos[(a->i + 1) % b->P];
    uint64_t laps = b->K / b->P;
    int64_t tok = 0;
    for (uint64_t r = 0; r < laps; r++) {
        if (!(a->i == 0 && r == 0))
            sim_fifo_read(in, &tok);
        sim_wait(s, SIM_NS);
        b->events++;
        tok++;
        sim_fifo_write(out, &tok);
    }
    if (a->i == 0) {
        sim_fifo_read(in, &tok);
        b->final_token = tok;
    }
}

/* ---- W4 method ------------------------------------------------------- */

static uint64_t lcg_draw(uint64_t *x)
{
    *x = *x * 6364136223846793005u + 1442695040888963407u;
    return 1 + (*x >> 33) % 1000;
}

static void w4_method(struct sim *s, void *arg)
{
    struct proc_arg *a = arg;
    if (a->started) {
        a->b->events++;
        if (++a->fired == a->b->K)
            return;
    }
    a->started = true;
    sim_next_trigger(s, lcg_draw(&a->x) * SIM_NS);
}

/* max over i of the sum of process i's K delays */
static uint64_t w4_expected_end(uint64_t P, uint64_t K)
{
    uint64_t end = 0;
    for (uint64_t i = 0; i < P; i++) {
        uint64_t x = i, sum = 0;
        for (uint64_t k = 0; k < K; k++)
            sum += lcg_draw(&x);
        if (sum > end)
            end = sum;
    }
    return end;
}

static int check_w4_table(void)
{
    static const uint64_t first5[3][5] = {
        {808, 425, 938, 237, 126},
        {775, 154, 197, 871, 35},
        {741, 883, 457, 505, 296},
    };
    static const uint64_t ends[][3] = {
        {1, 1, 808},       {1, 10, 4992},      {10, 100, 54957},
        {100, 100, 56836}, {1000, 1000, 531263}, {10000, 100, 61543},
        {100, 10000, 5080786},
    };
    int bad = 0;
    for (uint64_t i = 0; i < 3; i++) {
        uint64_t x = i;
        for (int k = 0; k < 5; k++) {
            uint64_t d = lcg_draw(&x);
            if (d != first5[i][k]) {
                fprintf(stderr, "w4: process %" PRIu64 " delay %d is %" PRIu64
                        ", expected %" PRIu64 "\n", i, k, d, first5[i][k]);
                bad = 1;
            }
        }
    }
    for (size_t r = 0; r < sizeof ends / sizeof ends[0]; r++) {
        uint64_t e = w4_expected_end(ends[r][0], ends[r][1]);
        if (e != ends[r][2]) {
            fprintf(stderr, "w4: P=%" PRIu64 " K=%" PRIu64 " ends at %" PRIu64
                    ", expected %" PRIu64 "\n", ends[r][0], ends[r][1], e,
                    ends[r][2]);
            bad = 1;
        }
    }
    printf("w4 reference table %s\n", bad ? "MISMATCH" : "ok");
    return bad;
}

/* ---- memory check ---------------------------------------------------- */

static void rss_proc(struct sim *s, void *arg)
{
    sim_wait(s, SIM_NS);
}

/* N thread processes all alive at once (each blocks once before it ends),
 * then the peak RSS of the whole program. */
static int rss_check(uint64_t n, size_t stack_kib)
{
    struct sim_config cfg = {.stack_size = stack_kib * 1024};
    struct sim *s = sim_new(&cfg);
    struct sim_stats st;
    struct rusage ru;
    if (!s) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (!sim_thread(s, "p", rss_proc, NULL, 0)) {
            fprintf(stderr, "sim_thread %" PRIu64 ": %s\n", i, sim_errmsg(s));
            return 1;
        }
    }
    int rc = sim_run(s, SIM_FOREVER);
    sim_get_stats(s, &st);
    getrusage(RUSAGE_SELF, &ru);
    printf("rss procs=%" PRIu64 " stack_kib=%zu rc=%d stack_mapped_mib=%.1f "
           "maxrss_mib=%.1f per_proc_kib=%.2f\n",
           n, stack_kib, rc, (double)st.stack_bytes / (1 << 20),
           (double)ru.ru_maxrss / 1024, (double)ru.ru_maxrss / (double)n);
    sim_free(s);
    return rc == SIM_DONE ? 0 : 1;
}

/* ---- main ------------------------------------------------------------ */

static int usage(void)
{
    fprintf(stderr,
            "usage: kbsim-bench timed|pingpong|ring|method P K\n"
            "       kbsim-bench --check-w4\n"
            "       kbsim-bench --rss N [STACK_KIB]\n");
    return 2;
}

static bool parse_u64(const char *str, uint64_t *out)
{
    char *end;
    if (!str || !*str || *str == '-')
        return false;
    *out = strtoull(str, &end, 10);
    return *end == 0;
}

int main(int argc, char **argv)
{
    struct bench b = {.final_token = -1};
    uint64_t exp_end;
    const char *w;

    if (argc == 2 && !strcmp(argv[1], "--check-w4"))
        return check_w4_table();
    if ((argc == 3 || argc == 4) && !strcmp(argv[1], "--rss")) {
        uint64_t n, kib = 64;
        if (!parse_u64(argv[2], &n) || (argc == 4 && !parse_u64(argv[3], &kib)))
            return usage();
        return rss_check(n, (size_t)kib);
    }
    if (argc != 4 || !parse_u64(argv[2], &b.P) || !parse_u64(argv[3], &b.K) ||
        b.P == 0)
        return usage();
    w = argv[1];

    struct sim_config cfg = {.stack_size = BENCH_STACK};
    b.s = sim_new(&cfg);
    struct proc_arg *args = calloc(b.P, sizeof *args);
    if (!b.s || !args) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < b.P; i++)
        args[i] = (struct proc_arg){.b = &b, .i = i, .x = i};

    /* Processes and channels are created, and the expected results
     * computed, before the clock starts. */
    if (!strcmp(w, "timed")) {
        for (uint64_t i = 0; i < b.P; i++)
            sim_thread(b.s, "timed", w1_proc, &args[i], 0);
        exp_end = 10 * b.K;
    } else if (!strcmp(w, "pingpong")) {
        if (b.P % 2) {
            fprintf(stderr, "pingpong: P must be even, got %" PRIu64 "\n", b.P);
            return 2;
        }
        b.fifos = calloc(b.P, sizeof *b.fifos);
        for (uint64_t i = 0; i < b.P; i++) {
            b.fifos[i] = sim_fifo_new(b.s, i % 2 ? "b2a" : "a2b",
                                      sizeof(int64_t), 1);
            sim_thread(b.s, i % 2 ? "B" : "A", i % 2 ? w2_b : w2_a, &args[i],
                       0);
        }
        exp_end = 0;
    } else if (!strcmp(w, "ring")) {
        if (b.K % b.P) {
            fprintf(stderr, "ring: K must be a multiple of P, got K=%" PRIu64
                    " P=%" PRIu64 "\n", b.K, b.P);
            return 2;
        }
        b.fifos = calloc(b.P, sizeof *b.fifos);
        for (uint64_t i = 0; i < b.P; i++)
            b.fifos[i] = sim_fifo_new(b.s, "ring", sizeof(int64_t), 1);
        for (uint64_t i = 0; i < b.P; i++)
            sim_thread(b.s, "node", w3_proc, &args[i], 0);
        exp_end = b.K;
    } else if (!strcmp(w, "method")) {
        for (uint64_t i = 0; i < b.P; i++)
            sim_method(b.s, "method", w4_method, &args[i], false);
        exp_end = w4_expected_end(b.P, b.K);
    } else {
        return usage();
    }

    double t0 = now_s();
    int rc = sim_run(b.s, SIM_FOREVER);
    double wall = now_s() - t0;

    uint64_t end_ns = sim_now(b.s) / SIM_NS;
    printf("workload=%s peer=kbsim P=%" PRIu64 " K=%" PRIu64 " events=%" PRIu64
           " sim_end_ns=%" PRIu64 " wall_s=%.6f rate=%.0f\n",
           w, b.P, b.K, b.events, end_ns, wall,
           wall > 0 ? (double)b.events / wall : 0.0);

    int bad = 0;
    uint64_t exp_events = !strcmp(w, "ring") ? b.K : b.P * b.K;
    if (rc != SIM_DONE) {
        fprintf(stderr, "%s: sim_run returned %d: %s\n", w, rc,
                sim_errmsg(b.s));
        bad = 1;
    }
    if (b.events != exp_events) {
        fprintf(stderr, "%s: events %" PRIu64 ", expected %" PRIu64 "\n", w,
                b.events, exp_events);
        bad = 1;
    }
    if (end_ns != exp_end) {
        fprintf(stderr, "%s: sim_end_ns %" PRIu64 ", expected %" PRIu64 "\n",
                w, end_ns, exp_end);
        bad = 1;
    }
    if (!strcmp(w, "ring") && b.final_token != (int64_t)b.K) {
        fprintf(stderr, "ring: final token %" PRId64 ", expected %" PRIu64 "\n",
                b.final_token, b.K);
        bad = 1;
    }
    if (b.bad_values) {
        fprintf(stderr, "pingpong: %" PRIu64 " reads returned a wrong value\n",
                b.bad_values);
        bad = 1;
    }
    sim_free(b.s);
    free(b.fifos);
    free(args);
    return bad;
}
