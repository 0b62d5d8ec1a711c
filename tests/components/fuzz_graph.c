/* fuzz_graph.c — libFuzzer target for graph systems: the input is a graph
 * file (nodes, links, routes, the PE keys, fabric), read as kbsim
 * --topology reads one (its keys over configs/topology.yaml), and when it
 * is valid, built into a simulation and routed between every pair of its
 * first nodes. Any crash, leak, hang or sanitizer report is a bug;
 * configuration errors (each one located, printable line) are the expected
 * outcome of most inputs. */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "graph_topology.h"
#include "sim.h"
#include "system.h"

#define TOPO_DEFAULTS KBSIM_SOURCE_DIR "/configs/topology.yaml"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* Builds the graph and asks for routes and path times: the part a valid
 * file reaches (user routes, the breadth-first table, the fabric). */
static void build(const struct kb_graph_cfg *g, const struct kb_topology_cfg *topo)
{
    struct sim *s = sim_new(NULL);
    if (!s)
        return;
    char err[256];
    struct kb_system *sys = kb_system_new_graph(s, g, topo, NULL, err, sizeof err);
    if (sys) {
        struct kb_system_counts n;
        kb_system_get_counts(sys, &n);
        int m = n.nodes < 12 ? n.nodes : 12, links[64];
        for (int a = 0; a < m; a++)
            for (int b = 0; b < m; b++) {
                int h = kb_system_route(sys, a, b, links, 64);
                if (h > kb_system_max_hops(sys))
                    abort(); /* the bound every caller sizes its buffers by */
                (void)kb_system_path_time(sys, a, b, 4096);
            }
        kb_system_free(sys);
    } else if (!err[0] || strchr(err, '\n')) {
        abort();
    }
    sim_free(s);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;

    struct kb_config_errors errs;
    kb_config_errors_init(&errs);
    struct kb_config c;
    kb_config_init(&c, &errs);
    struct kb_config_node *user = kb_config_parse_string(&c, "fuzz.yaml", text, size);
    if (user && errs.n == 0 && kb_graph_tree_is_graph(user)) {
        struct kb_config_node *root = kb_config_parse_file(&c, TOPO_DEFAULTS);
        struct kb_topology_cfg topo;
        struct kb_graph_cfg g;
        memset(&g, 0, sizeof g);
        if (root && kb_graph_system_from_tree(&c, root, user, NULL, 0, &topo, &g) == 0)
            build(&g, &topo);
        kb_graph_cfg_release(&g);
    }
    /* every message must be a located, printable line */
    for (size_t i = 0; i < errs.n; i++)
        if (!errs.msgs[i][0] || strchr(errs.msgs[i], '\n'))
            abort();
    kb_config_release(&c);
    kb_config_errors_release(&errs);
    free(text);
    return 0;
}
