/* system_build.c — kbsim-system-bench: time to build systems from
 * topology.yaml (default 256 PEs, 16 SIPs = 2,048 PEs, ...) and the heap
 * they take per PE
 *
 *   kbsim-system-bench [--repeat N] [SIPS ...]     (default: 2 16)
 *
 * Each row: the median wall time of N builds (kb_system_new only: the
 * configuration is loaded once) and the heap bytes the system holds after
 * the build (glibc mallinfo2: in-use bytes after minus before), per PE.
 * Memories are sparse, so no HBM, TCM or SRAM page is counted. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "system.h"
#include "topology_schema.h"

#define TOPO_DEFAULTS KBSIM_SOURCE_DIR "/configs/topology.yaml"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int bench(int sips, int repeat)
{
    char user[64];
    snprintf(user, sizeof user, "sips: {count: %d}", sips);
    struct kb_config_errors errs;
    kb_config_errors_init(&errs);
    struct kb_config_src src = {
        .defaults_path = TOPO_DEFAULTS, .user_name = "bench", .user_text = user};
    struct kb_topology_cfg cfg;
    if (kb_topo_cfg_load(&cfg, &src, &errs) < 0) {
        kb_config_errors_print(&errs, stderr);
        kb_config_errors_release(&errs);
        return 1;
    }
    kb_config_errors_release(&errs);
    double *t = calloc((size_t)repeat, sizeof *t);
    size_t bytes = 0;
    struct kb_system_counts n = {0};
    char err[256];
    for (int i = 0; i < repeat; i++) {
        struct sim *s = sim_new(NULL);
        size_t before = heap_in_use();
        double t0 = now_s();
        struct kb_system *sys = kb_system_new(s, &cfg, NULL, err, sizeof err);
        t[i] = now_s() - t0;
        if (!sys) {
            fprintf(stderr, "kbsim-system-bench: %s\n", err);
            free(t);
            sim_free(s);
            return 1;
        }
        bytes = heap_in_use() - before;
        kb_system_get_counts(sys, &n);
        kb_system_free(sys);
        sim_free(s);
    }
    qsort(t, (size_t)repeat, sizeof *t, cmp_double);
    printf("| %4d | %5d | %6d | %6d | %9.1f | %8.0f | %7.2f |\n", sips, n.pes, n.nodes, n.links,
           t[repeat / 2] * 1e3, (double)bytes / n.pes, (double)bytes / (1 << 20));
    free(t);
    return 0;
}

int main(int argc, char **argv)
{
    int repeat = 5, rc = 0, rows = 0;
    printf("| sips | PEs   | nodes  | links  | build, ms | B per PE | MiB     |\n"
           "|------|-------|--------|--------|-----------|----------|---------|\n");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            repeat = atoi(argv[++i]);
            if (repeat < 1)
                repeat = 1;
            continue;
        }
        rc |= bench(atoi(argv[i]), repeat);
        rows++;
    }
    if (!rows)
        rc = bench(2, repeat) | bench(16, repeat);
    return rc;
}
