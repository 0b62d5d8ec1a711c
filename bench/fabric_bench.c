/* fabric_bench.c — flit-level fabric speed: B bytes over a chain of h links,
 * in flit-hop events per second of wall time, checked against the closed form
 *
 *   kbsim-fabric-bench [BYTES [HOPS [FLOWS]]]     (default 1 MiB, 10 hops, 1 flow)
 *
 * Prints one line: bytes, hops, flows, flit_hops, sim_ns, wall_s, rate. Each
 * flow is a thread process blocked in kb_fabric_transfer until its last byte
 * arrives, so the run ends at the last arrival; with one flow that time must
 * equal kb_fabric_path_time (exit 1 if not).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fabric.h"
#include "link.h"
#include "sim.h"

struct flow {
    struct kb_fabric *f;
    const int *links;
    int hops;
    uint64_t bytes;
    int rc;
};

static void sender(struct sim *s, void *arg)
{
    struct flow *w = arg;
    w->rc = kb_fabric_transfer(w->f, w->links, w->hops, w->bytes);
}

int main(int argc, char **argv)
{
    uint64_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : 1u << 20;
    int hops = argc > 2 ? atoi(argv[2]) : 10;
    int flows = argc > 3 ? atoi(argv[3]) : 1;
    if (bytes == 0 || hops < 1 || hops > 1000 || flows < 1 || flows > 1000) {
        fprintf(stderr, "usage: kbsim-fabric-bench [BYTES [HOPS [FLOWS]]]\n");
        return 2;
    }
    struct sim *s = sim_new(NULL);
    struct kb_fabric *f = kb_fabric_new(s);
    /* a NoC-like chain: 256 GB/s, 1.7 ns wire, no per-node overhead */
    struct kb_link_params p = {.bw_gbps = 256, .latency_ns = 1.7, .overhead_ns = 0,
                               .flit_bytes = 256};
    int *links = malloc((size_t)hops * sizeof *links);
    int prev = kb_fabric_add_node(f, "n0");
    for (int i = 0; i < hops; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%d", i + 1);
        int next = kb_fabric_add_node(f, name);
        links[i] = kb_fabric_add_link(f, prev, next, NULL, &p);
        if (links[i] < 0) {
            fprintf(stderr, "kbsim-fabric-bench: %s\n", kb_fabric_errmsg(f));
            return 2;
        }
        prev = next;
    }
    struct flow *w = calloc((size_t)flows, sizeof *w);
    for (int k = 0; k < flows; k++) {
        w[k] = (struct flow){f, links, hops, bytes, 0};
        sim_thread(s, "flow", sender, &w[k], 0);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = sim_run(s, SIM_FOREVER);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    uint64_t flits = (bytes + p.flit_bytes - 1) / p.flit_bytes;
    uint64_t flit_hops = flits * (uint64_t)hops * (uint64_t)flows;
    sim_time end = sim_now(s);
    printf("fabric bytes=%llu hops=%d flows=%d flit_hops=%llu sim_ns=%.3f wall_s=%.6f rate=%.0f\n",
           (unsigned long long)bytes, hops, flows, (unsigned long long)flit_hops,
           (double)end / 1000.0, wall, (double)flit_hops / wall);
    int status = rc == SIM_DONE ? 0 : 1;
    for (int k = 0; k < flows; k++)
        if (w[k].rc < 0)
            status = 1;
    if (flows == 1 && end != kb_fabric_path_time(f, links, hops, bytes)) {
        fprintf(stderr, "kbsim-fabric-bench: simulated %llu ps, closed form %llu ps\n",
                (unsigned long long)end,
                (unsigned long long)kb_fabric_path_time(f, links, hops, bytes));
        status = 1;
    }
    kb_fabric_free(f);
    sim_free(s);
    free(links);
    free(w);
    return status;
}
