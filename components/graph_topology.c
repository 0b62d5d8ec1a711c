/* graph_topology.c — kb_graph: the generic graph description (validation
 * from a configuration tree), its build into a fabric, BFS routing */
#include "graph_topology.h"

#include "kb_err.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_schema.h"

/* ---- the description ---------------------------------------------------- */

struct raw_node {
    struct kb_config_str name;
    bool pe;
};

struct raw_link {
    struct kb_config_str from, to;
    double bw, latency, overhead;
    bool bidirectional;
};

#define NF(f) offsetof(struct raw_node, f)
#define LF(f) offsetof(struct raw_link, f)
#define OPT KB_CONFIG_F_OPTIONAL
#define RANGE (KB_CONFIG_F_MIN | KB_CONFIG_F_MAX)
static const struct kb_config_key node_keys[] = {
    {"name", KB_CONFIG_T_STRING, 0, 0, 0, NULL, NULL, NF(name), "node name"},
    {"pe", KB_CONFIG_T_BOOL, OPT, 0, 0, NULL, NULL, NF(pe), "the node is a PE"},
    {0},
};
static const struct kb_config_key link_keys[] = {
    {"from", KB_CONFIG_T_STRING, 0, 0, 0, NULL, NULL, LF(from), "source node"},
    {"to", KB_CONFIG_T_STRING, 0, 0, 0, NULL, NULL, LF(to), "destination node"},
    {"bandwidth_gbps", KB_CONFIG_T_FLOAT, RANGE, KB_CONFIG_MIN_GBPS, KB_CONFIG_MAX_GBPS, NULL,
     NULL, LF(bw), "GB/s"},
    {"latency_ns", KB_CONFIG_T_FLOAT, OPT | RANGE, 0, KB_CONFIG_MAX_NS, NULL, NULL, LF(latency),
     "wire delay, ns"},
    {"overhead_ns", KB_CONFIG_T_FLOAT, OPT | RANGE, 0, KB_CONFIG_MAX_NS, NULL, NULL,
     LF(overhead), "per message, ns"},
    {"bidirectional", KB_CONFIG_T_BOOL, OPT, 0, 0, NULL, NULL, LF(bidirectional),
     "also the link back"},
    {0},
};
/* The graph's own keys; the topology keys a graph system takes (its PEs
 * are PEs like a grid's); the topology keys that describe the grid. */
static const char *const graph_keys[] = {"nodes", "links", "routes", NULL};
static const char *const system_keys[] = {"pe", "ipcq", "clock_ghz", "flit_bytes", "fabric",
                                          NULL};
static const char *const grid_keys[] = {"sips", "sip", "cube", "ucie", NULL};

static bool in_list(const char *const *list, const char *key)
{
    for (; *list; list++)
        if (strcmp(*list, key) == 0)
            return true;
    return false;
}

bool kb_graph_tree_is_graph(const struct kb_config_node *root)
{
    return root && root->kind == KB_CONFIG_MAP && kb_config_get(root, "nodes");
}

void kb_graph_cfg_release(struct kb_graph_cfg *g)
{
    for (size_t i = 0; i < g->n_nodes; i++)
        free(g->nodes[i].name);
    free(g->nodes);
    free(g->links);
    for (size_t i = 0; i < g->n_routes; i++)
        free(g->routes[i].nodes);
    free(g->routes);
    memset(g, 0, sizeof *g);
}

/* The nearest of graph_keys and system_keys to `key` (edit distance up to
 * 2), or NULL. */
static const char *nearest_top_key(const char *key)
{
    static const char *const *const lists[] = {graph_keys, system_keys};
    const char *best = NULL;
    int best_d = 3;
    for (size_t l = 0; l < 2; l++)
        for (const char *const *t = lists[l]; *t; t++) {
            int d = kb_config_edit_distance(*t, key);
            if (d < best_d)
                best = *t, best_d = d;
        }
    return best;
}

static void check_top_keys(struct kb_config *c, const struct kb_config_node *root)
{
    for (size_t i = 0; i < root->n; i++) {
        const struct kb_config_node *k = root->kids[i];
        if (in_list(graph_keys, k->key) || in_list(system_keys, k->key))
            continue;
        const char *best = nearest_top_key(k->key);
        char named[300] = ""; /* "g.yaml:3:1: unknown key 'x'", "x: unknown key" */
        if (!kb_config_place_names(k->file, k->key_line, k->key))
            snprintf(named, sizeof named, " '%s'", k->key);
        if (in_list(grid_keys, k->key))
            kb_config_error_loc(c, k->file, k->key_line, k->key_col,
                                "'%s' describes the AHBM grid, not a graph (a graph takes "
                                "nodes, links, routes, pe, ipcq, clock_ghz, flit_bytes, fabric)", k->key);
        else if (best)
            kb_config_error_loc(c, k->file, k->key_line, k->key_col,
                                "unknown key%s (did you mean '%s'?)", named, best);
        else
            kb_config_error_loc(c, k->file, k->key_line, k->key_col,
                                "unknown key%s in a graph (expected nodes, links, routes, "
                                "pe, ipcq, clock_ghz, flit_bytes, fabric)", named);
    }
}

static const struct kb_config_node *seq_of(struct kb_config *c, const struct kb_config_node *root,
                                           const char *key)
{
    const struct kb_config_node *n = kb_config_get(root, key);
    if (!n) {
        kb_config_error_at(c, root, "missing key '%s'", key);
        return NULL;
    }
    /* an empty Lua table reads as an empty map */
    if (n->kind != KB_CONFIG_SEQ && !(n->kind == KB_CONFIG_MAP && n->n == 0)) {
        char fk[300];
        kb_config_error_at(c, n, "expected a list%s", kb_config_for_key(n, key, fk, sizeof fk));
        return NULL;
    }
    return n;
}

/* Where a node was written, for "first at ...": "file:line:col", or the
 * file string itself for a tree built from Lua (it holds the table path). */
static void place(const struct kb_config_node *n, char *buf, size_t len)
{
    if (n->line > 0)
        snprintf(buf, len, "%s:%d:%d", n->file, n->line, n->col);
    else
        snprintf(buf, len, "%s", n->file);
}

/* "links[3]: " for a YAML item (its line and column say little about which
 * item it is); nothing for a Lua item, whose location is the table path. */
static const char *label(const struct kb_config_node *item, const char *what, char *buf,
                         size_t len)
{
    if (item->line > 0)
        snprintf(buf, len, "%s: ", what);
    else
        buf[0] = 0;
    return buf;
}

static int find_name(const struct kb_graph_cfg *g, const char *name)
{
    for (size_t i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* The node called s->text, or an error at the value. */
static int resolve(struct kb_config *c, const struct kb_graph_cfg *g,
                   const struct kb_config_node *item, const char *key,
                   const struct kb_config_str *s, const char *what)
{
    int i = find_name(g, s->text);
    char lb[80];
    if (i < 0)
        kb_config_error_at(c, kb_config_get(item, key), "%slink %s unknown node '%s'",
                           label(item, what, lb, sizeof lb),
                           strcmp(key, "from") == 0 ? "from" : "to", s->text);
    return i;
}

/* Link a -> b, or the "wired twice" error naming the first place. */
static void add_direction(struct kb_config *c, struct kb_graph_cfg *g, const char **where,
                          const struct kb_config_node *item, const char *what, int a, int b,
                          const struct raw_link *r)
{
    char lb[80];
    for (size_t j = 0; j < g->n_links; j++) {
        const struct kb_graph_link_cfg *l = &g->links[j];
        if (l->from == a && l->to == b) {
            kb_config_error_at(c, item, "%sdirection '%s' -> '%s' is wired twice (first at %s)",
                               label(item, what, lb, sizeof lb), g->nodes[a].name,
                               g->nodes[b].name, where[j]);
            return;
        }
    }
    char buf[512];
    place(item, buf, sizeof buf);
    where[g->n_links] = kb_config_strdup(c, buf, strlen(buf));
    if (!where[g->n_links])
        return; /* out of memory: c->nomem, the error recorded */
    g->links[g->n_links++] = (struct kb_graph_link_cfg){
        a, b, {.bw_gbps = r->bw, .latency_ns = r->latency, .overhead_ns = r->overhead},
        r->bidirectional};
}

static bool linked(const struct kb_graph_cfg *g, int a, int b)
{
    for (size_t j = 0; j < g->n_links; j++)
        if (g->links[j].from == a && g->links[j].to == b)
            return true;
    return false;
}

/* The node named by scalar n, or an error at it; `lb` is the item's label. */
static int route_node(struct kb_config *c, const struct kb_graph_cfg *g,
                      const struct kb_config_node *n, const char *lb, const char *key)
{
    if (!n || n->kind != KB_CONFIG_SCALAR) {
        kb_config_error_at(c, n, "%s'%s' must be a node name", lb, key);
        return -1;
    }
    int i = find_name(g, n->text);
    if (i < 0)
        kb_config_error_at(c, n, "%sunknown node '%s'", lb, n->text);
    return i;
}

/* routes: [{from:, to:, via: [...]}, ...] into g->routes. */
static void read_routes(struct kb_config *c, const struct kb_config_node *seq,
                        struct kb_graph_cfg *g)
{
    if (!seq)
        return;
    if (seq->kind != KB_CONFIG_SEQ && !(seq->kind == KB_CONFIG_MAP && seq->n == 0)) {
        kb_config_error_at(c, seq, "expected a list for 'routes'");
        return;
    }
    g->routes = calloc(seq->n + 1, sizeof *g->routes);
    if (!g->routes)
        abort();
    for (size_t i = 0; i < seq->n; i++) {
        const struct kb_config_node *item = seq->kids[i];
        char what[64], lb[80];
        snprintf(what, sizeof what, "routes[%zu]", i + 1);
        label(item, what, lb, sizeof lb);
        if (item->kind != KB_CONFIG_MAP) {
            kb_config_error_at(c, item, "%sexpected a map with from, to, via", lb);
            continue;
        }
        bool bad = false;
        for (size_t k = 0; k < item->n; k++) {
            const char *key = item->kids[k]->key;
            if (strcmp(key, "from") && strcmp(key, "to") && strcmp(key, "via")) {
                const struct kb_config_node *kid = item->kids[k];
                char named[300] = "";
                if (!kb_config_place_names(kid->file, kid->key_line, key))
                    snprintf(named, sizeof named, " '%s'", key);
                kb_config_error_loc(c, kid->file, kid->key_line, kid->key_col,
                                    "%sunknown key%s (expected from, to, via)", lb, named);
                bad = true;
            }
        }
        const struct kb_config_node *via = kb_config_get(item, "via");
        if (via && via->kind != KB_CONFIG_SEQ && !(via->kind == KB_CONFIG_MAP && via->n == 0)) {
            kb_config_error_at(c, via, "%s'via' must be a list of node names", lb);
            continue;
        }
        size_t nv = via ? via->n : 0;
        int *nodes = calloc(nv + 2, sizeof *nodes);
        if (!nodes)
            abort();
        const struct kb_config_node *from = kb_config_get(item, "from");
        const struct kb_config_node *to = kb_config_get(item, "to");
        if (!from || !to) {
            kb_config_error_at(c, item, "%smissing key '%s'", lb, from ? "to" : "from");
            free(nodes);
            continue;
        }
        nodes[0] = route_node(c, g, from, lb, "from");
        for (size_t k = 0; k < nv; k++)
            nodes[k + 1] = route_node(c, g, via->kids[k], lb, "via");
        nodes[nv + 1] = route_node(c, g, to, lb, "to");
        for (size_t k = 0; k < nv + 2; k++)
            bad |= nodes[k] < 0;
        if (!bad && nodes[0] == nodes[nv + 1]) {
            kb_config_error_at(c, item, "%sa route from '%s' to itself", lb, from->text);
            bad = true;
        }
        for (size_t k = 0; !bad && k + 1 < nv + 2; k++) {
            if (!linked(g, nodes[k], nodes[k + 1])) {
                kb_config_error_at(c, k < nv ? via->kids[k] : item,
                                   "%sno link from '%s' to '%s'", lb,
                                   g->nodes[nodes[k]].name, g->nodes[nodes[k + 1]].name);
                bad = true;
            }
        }
        for (size_t r = 0; !bad && r < g->n_routes; r++) {
            const struct kb_graph_route_cfg *o = &g->routes[r];
            if (o->nodes[0] == nodes[0] && o->nodes[o->n - 1] == nodes[nv + 1]) {
                kb_config_error_at(c, item, "%sa second route from '%s' to '%s'", lb,
                                   from->text, to->text);
                bad = true;
            }
        }
        if (bad) {
            free(nodes);
            continue;
        }
        g->routes[g->n_routes++] = (struct kb_graph_route_cfg){nodes, nv + 2};
    }
}

int kb_graph_cfg_from_tree(struct kb_config *c, const struct kb_config_node *root,
                           unsigned flit, struct kb_graph_cfg *g)
{
    size_t before = c->errors->n;
    memset(g, 0, sizeof *g);
    if (!root || !kb_config_expect_map(c, root, "the graph"))
        return -1;
    check_top_keys(c, root);
    const struct kb_config_node *nodes = seq_of(c, root, "nodes");
    const struct kb_config_node *links = seq_of(c, root, "links");
    if (!nodes || !links) {
        kb_graph_cfg_release(g);
        return -1;
    }
    g->nodes = calloc(nodes->n ? nodes->n : 1, sizeof *g->nodes);
    /* a bidirectional link is two directions */
    g->links = calloc(2 * links->n + 1, sizeof *g->links);
    const char **where = calloc(2 * links->n + 1, sizeof *where);
    if (!g->nodes || !g->links || !where) {
        free(where);
        kb_graph_cfg_release(g);
        kb_config_error_at(c, root, "out of memory reading the graph");
        return -1;
    }
    char what[64];
    for (size_t i = 0; i < nodes->n; i++) {
        const struct kb_config_node *item = nodes->kids[i];
        struct raw_node r = {0};
        snprintf(what, sizeof what, "nodes[%zu]", i + 1);
        if (!kb_config_schema_apply(c, node_keys, item, what, &r))
            continue;
        const struct kb_config_node *nn = kb_config_get(item, "name");
        char lb[80];
        if (!r.name.text[0]) {
            kb_config_error_at(c, nn, "%sempty node name", label(item, what, lb, sizeof lb));
            continue;
        }
        int dup = find_name(g, r.name.text);
        if (dup >= 0) {
            kb_config_error_at(c, nn, "%sduplicate node '%s' (first at %s)",
                               label(item, what, lb, sizeof lb), r.name.text,
                               g->nodes[dup].where);
            continue;
        }
        struct kb_graph_node_cfg *n = &g->nodes[g->n_nodes];
        n->name = strdup(r.name.text);
        if (!n->name) {
            kb_config_error_at(c, nn, "out of memory reading the graph");
            break;
        }
        g->n_nodes++;
        n->pe = r.pe;
        g->n_pes += r.pe;
        place(nn, n->where, sizeof n->where);
    }
    for (size_t i = 0; i < links->n; i++) {
        const struct kb_config_node *item = links->kids[i];
        struct raw_link r = {0};
        snprintf(what, sizeof what, "links[%zu]", i + 1);
        if (!kb_config_schema_apply(c, link_keys, item, what, &r))
            continue;
        int a = resolve(c, g, item, "from", &r.from, what);
        int b = resolve(c, g, item, "to", &r.to, what);
        if (a < 0 || b < 0)
            continue;
        char lb[80];
        if (a == b) {
            kb_config_error_at(c, item, "%slink from '%s' to itself",
                               label(item, what, lb, sizeof lb), r.from.text);
            continue;
        }
        add_direction(c, g, where, item, what, a, b, &r);
        if (r.bidirectional)
            add_direction(c, g, where, item, what, b, a, &r);
    }
    free(where);
    if (!g->n_pes && c->errors->n == before)
        kb_config_error_at(c, nodes, "the graph has no PE (mark nodes with 'pe: true')");
    for (size_t j = 0; j < g->n_links; j++)
        g->links[j].p.flit_bytes = flit;
    if (c->errors->n == before && !c->nomem)
        read_routes(c, kb_config_get(root, "routes"), g);
    if (c->errors->n != before || c->nomem) {
        kb_graph_cfg_release(g);
        return -1;
    }
    return 0;
}

int kb_graph_system_from_tree(struct kb_config *c, struct kb_config_node *topo_root,
                              const struct kb_config_node *graph_root,
                              const char *const *sets, size_t n_sets,
                              struct kb_topology_cfg *topo, struct kb_graph_cfg *g)
{
    memset(g, 0, sizeof *g);
    if (graph_root && graph_root->kind == KB_CONFIG_MAP) {
        /* the system keys, in a map of their own laid over the defaults */
        struct kb_config_node *keys =
            kb_config_new_node(c, KB_CONFIG_MAP, graph_root->file, graph_root->line,
                               graph_root->col);
        for (size_t i = 0; i < graph_root->n; i++) {
            struct kb_config_node *k = graph_root->kids[i];
            if (in_list(system_keys, k->key))
                kb_config_map_set(c, keys, k->key, k);
        }
        topo_root = kb_config_merge(c, topo_root, keys);
    }
    kb_config_apply_sets(c, topo_root, kb_topo_schema(), sets, n_sets, true);
    size_t before = c->errors->n;
    int rt = kb_topo_cfg_from_tree_graph(c, topo_root, topo);
    int rg = kb_graph_cfg_from_tree(c, graph_root, rt == 0 ? (unsigned)topo->flit_bytes : 1, g);
    /* fabric.flow_control: credit on every link, one VC class (a graph's
     * routes carry no deadlock-freedom argument; docs/components/noc.md) */
    if (rt == 0 && rg == 0 && topo->fabric.flow_control == KB_TOPO_FC_CREDIT)
        for (size_t j = 0; j < g->n_links; j++) {
            g->links[j].p.buffer_flits = (uint32_t)topo->fabric.buffer_flits;
            g->links[j].p.vcs = (uint32_t)topo->fabric.vcs;
            g->links[j].p.vc_classes = 1;
            g->links[j].p.credit_ns = topo->fabric.credit_ns;
        }
    if (rt < 0 || rg < 0 || c->errors->n != before || c->nomem) {
        kb_graph_cfg_release(g);
        return -1;
    }
    return 0;
}

/* ---- the built graph ----------------------------------------------------- */

#define GRAPH_TREES 16
struct route_tree {
    int src;
    int *par;      /* n links into each node, -1 for the source and unreached */
    uint64_t used; /* tick of the last route from it */
};

struct kb_graph {
    struct kb_fabric *f;
    int n, base;        /* nodes are fabric ids base .. base + n - 1 */
    int *pe_node;       /* rank -> fabric node */
    int n_pes;
    /* adjacency in CSR form, each node's out-links sorted by (dst, link) */
    int *adj_start, *adj_link, *adj_dst;
    /* BFS trees of the most recently routed-from sources (the link into
     * each node); a source not among them is searched again. A tree per
     * source would grow as n^2 (decision 0018). */
    struct route_tree trees[GRAPH_TREES];
    int n_trees;
    uint64_t tick;
    int *queue;
    /* user-given paths: from, to and links of each */
    struct user_route {
        int from, to, n;
        int *links;
    } *user;
    size_t n_user;
    char err[256];
};

struct edge {
    int src, dst, link;
};

static int cmp_edge(const void *a, const void *b)
{
    const struct edge *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    return (x->link > y->link) - (x->link < y->link);
}

struct kb_graph *kb_graph_new(struct kb_fabric *f, const struct kb_graph_cfg *g, char *err,
                              size_t errlen)
{
    struct kb_graph *gr = calloc(1, sizeof *gr);
    size_t nl = g->n_links;
    struct edge *e = calloc(nl + 1, sizeof *e);
    if (gr) {
        gr->f = f;
        gr->n = (int)g->n_nodes;
        gr->base = kb_fabric_node_count(f);
        gr->pe_node = calloc((size_t)g->n_pes + 1, sizeof *gr->pe_node);
        gr->adj_start = calloc((size_t)gr->n + 1, sizeof *gr->adj_start);
        gr->adj_link = calloc(nl + 1, sizeof *gr->adj_link);
        gr->adj_dst = calloc(nl + 1, sizeof *gr->adj_dst);
        gr->queue = calloc((size_t)gr->n + 1, sizeof *gr->queue);
    }
    if (!gr || !e || !gr->pe_node || !gr->adj_start || !gr->adj_link || !gr->adj_dst ||
        !gr->queue) {
        snprintf(err, errlen, "graph: out of memory");
        goto fail;
    }
    for (size_t i = 0; i < g->n_nodes; i++) {
        int id = kb_fabric_add_node(f, g->nodes[i].name);
        if (id < 0) {
            snprintf(err, errlen, "%s: %s", g->nodes[i].where, kb_fabric_errmsg(f));
            goto fail;
        }
        if (g->nodes[i].pe)
            gr->pe_node[gr->n_pes++] = id;
    }
    for (size_t j = 0; j < nl; j++) {
        const struct kb_graph_link_cfg *l = &g->links[j];
        int id = kb_fabric_add_link(f, gr->base + l->from, gr->base + l->to, NULL, &l->p);
        if (id < 0) {
            snprintf(err, errlen, "%s", kb_fabric_errmsg(f));
            goto fail;
        }
        e[j] = (struct edge){l->from, l->to, id};
    }
    qsort(e, nl, sizeof *e, cmp_edge);
    for (size_t j = 0; j < nl; j++) {
        gr->adj_start[e[j].src + 1]++;
        gr->adj_link[j] = e[j].link;
        gr->adj_dst[j] = e[j].dst;
    }
    for (int i = 0; i < gr->n; i++)
        gr->adj_start[i + 1] += gr->adj_start[i];
    free(e);
    if (g->n_routes && !(gr->user = calloc(g->n_routes, sizeof *gr->user))) {
        snprintf(err, errlen, "graph: out of memory");
        kb_graph_free(gr);
        return NULL;
    }
    for (size_t r = 0; r < g->n_routes; r++) {
        const struct kb_graph_route_cfg *rc = &g->routes[r];
        struct user_route *u = &gr->user[gr->n_user++];
        u->from = rc->nodes[0];
        u->to = rc->nodes[rc->n - 1];
        u->n = (int)rc->n - 1;
        if (!(u->links = malloc((size_t)u->n * sizeof *u->links))) {
            snprintf(err, errlen, "graph: out of memory");
            kb_graph_free(gr);
            return NULL;
        }
        for (int k = 0; k < u->n; k++) /* the first link a -> b, as the table takes */
            u->links[k] = kb_fabric_find_link(f, gr->base + rc->nodes[k],
                                              gr->base + rc->nodes[k + 1]);
    }
    return gr;
fail:
    free(e);
    kb_graph_free(gr);
    return NULL;
}

void kb_graph_free(struct kb_graph *gr)
{
    if (!gr)
        return;
    for (int i = 0; i < GRAPH_TREES; i++)
        free(gr->trees[i].par);
    for (size_t i = 0; i < gr->n_user; i++)
        free(gr->user[i].links);
    free(gr->user);
    free(gr->pe_node);
    free(gr->adj_start);
    free(gr->adj_link);
    free(gr->adj_dst);
    free(gr->queue);
    free(gr);
}

int kb_graph_size(const struct kb_graph *gr) { return gr->n; }
int kb_graph_n_pes(const struct kb_graph *gr) { return gr->n_pes; }
int kb_graph_max_hops(const struct kb_graph *gr)
{
    int m = gr->n > 1 ? gr->n - 1 : 0;
    for (size_t i = 0; i < gr->n_user; i++)
        if (gr->user[i].n > m)
            m = gr->user[i].n;
    return m;
}
const char *kb_graph_errmsg(const struct kb_graph *gr) { return gr->err; }

int kb_graph_node(const struct kb_graph *gr, int i)
{
    return i >= 0 && i < gr->n ? gr->base + i : -1;
}

int kb_graph_pe_node(const struct kb_graph *gr, int rank)
{
    return rank >= 0 && rank < gr->n_pes ? gr->pe_node[rank] : -1;
}

/* Breadth-first search from s into par: parent link of every node
 * reached, -1 for the source and the unreached. */
static void bfs(struct kb_graph *gr, int s, int *par)
{
    for (int i = 0; i < gr->n; i++)
        par[i] = -2; /* unseen */
    par[s] = -1;
    int head = 0, tail = 0;
    gr->queue[tail++] = s;
    while (head < tail) {
        int u = gr->queue[head++];
        for (int k = gr->adj_start[u]; k < gr->adj_start[u + 1]; k++) {
            int v = gr->adj_dst[k];
            if (par[v] != -2)
                continue;
            par[v] = gr->adj_link[k];
            gr->queue[tail++] = v;
        }
    }
    for (int i = 0; i < gr->n; i++)
        if (par[i] == -2)
            par[i] = -1;
}

/* The BFS tree of source s: a kept one, else searched into the least
 * recently used slot. NULL when out of memory. */
static const int *tree_of(struct kb_graph *gr, int s)
{
    gr->tick++;
    struct route_tree *t = NULL;
    for (int i = 0; i < gr->n_trees; i++) {
        if (gr->trees[i].src == s) {
            gr->trees[i].used = gr->tick;
            return gr->trees[i].par;
        }
        if (!t || gr->trees[i].used < t->used)
            t = &gr->trees[i];
    }
    if (gr->n_trees < GRAPH_TREES) {
        t = &gr->trees[gr->n_trees];
        if (!(t->par = malloc((size_t)gr->n * sizeof *t->par)))
            return NULL;
        gr->n_trees++;
    }
    bfs(gr, s, t->par);
    t->src = s;
    t->used = gr->tick;
    return t->par;
}

int kb_graph_route(struct kb_graph *gr, int src_node, int dst_node, int *links, int max)
{
    int s = src_node - gr->base, d = dst_node - gr->base;
    if (s < 0 || s >= gr->n || d < 0 || d >= gr->n)
        return KB_SETERR(gr, SIM_EINVAL, "route from node %d to node %d: not a node of the graph", src_node,
                      dst_node);
    if (s == d)
        return 0;
    for (size_t i = 0; i < gr->n_user; i++) {
        const struct user_route *u = &gr->user[i];
        if (u->from != s || u->to != d)
            continue;
        if (u->n > max)
            return KB_SETERR(gr, SIM_EINVAL, "route from '%s' to '%s': more than %d links",
                          kb_fabric_node_name(gr->f, src_node),
                          kb_fabric_node_name(gr->f, dst_node), max);
        memcpy(links, u->links, (size_t)u->n * sizeof *links);
        return u->n;
    }
    const int *par = tree_of(gr, s);
    if (!par)
        return KB_SETERR(gr, SIM_EINVAL, "route: out of memory");
    if (par[d] < 0)
        return KB_SETERR(gr, SIM_EINVAL, "no path from '%s' to '%s'", kb_fabric_node_name(gr->f, src_node),
                      kb_fabric_node_name(gr->f, dst_node));
    int k = 0;
    for (int v = d; v != s; v = kb_fabric_link_src(gr->f, par[v]) - gr->base)
        k++;
    if (k > max)
        return KB_SETERR(gr, SIM_EINVAL, "route from '%s' to '%s': more than %d links",
                      kb_fabric_node_name(gr->f, src_node),
                      kb_fabric_node_name(gr->f, dst_node), max);
    int i = k;
    for (int v = d; v != s; v = kb_fabric_link_src(gr->f, par[v]) - gr->base)
        links[--i] = par[v];
    return k;
}
