/* fabric.c — kb_fabric: node and link tables, path checks, transfers
 *
 * End-to-end timing. A B-byte message over hops j = 1..h travels as
 * n = ceil(B / flit) flits of sizes f_1..f_n (f_n = B - (n-1)·flit is the
 * only partial one). With overhead o_j, latency l_j and bandwidth bw_j,
 * and no other traffic, its last byte arrives after
 *
 *     T = Σ_{j=1..h} (o_j + l_j + f_1/bw_j)  +  Σ_{i=2..n} f_i / min_j bw_j
 *
 * the head pays every hop in full and the body streams behind it at the
 * rate of the slowest link. Every f/bw is rounded to the ps per flit, as
 * the links charge it. The links' per-flit rule (link.c) gives exactly T
 * when all hops have one bandwidth, or when all flits are full and no
 * overhead lies downstream of the slowest hop; otherwise T is an upper
 * bound, because on a faster hop downstream a worm closes up behind a head
 * that paid an overhead, and a short last flit crosses it faster than at
 * the bottleneck. With other traffic each link serves whole worms in the
 * order their heads arrive, so flows sharing a link take the serialised
 * time. Credit-mode paths take the links' own closed form
 * (kb_link_credit_path_time, link_credit.c). */
#include "fabric.h"

#include "huge_pages.h"
#include "kb_port.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
    char *name;
};

/* A link as added: what it needs to exist. Its kb_link (a process, an
 * event and queues) is made on first use (link_of), so a large system
 * pays only for the links its runs use. */
struct flink {
    /* the link's own name (in the fabric's strings), kb_fabric_add_link_
     * suffixed's suffix (FL_SUFFIX, not owned: "<src>.<suffix>"), or NULL
     * ("src->dst"); the name is made with the link */
    const char *label;
    int src, dst;
    uint32_t params; /* index into kb_fabric.params, | FL_SUFFIX */
    uint32_t made;   /* 1 + its index in kb_fabric.pool, 0 until first used */
};
#define FL_SUFFIX 0x80000000u

/* Names, packed in blocks freed with the fabric. */
#define STR_BLOCK 65536
struct strblock {
    struct strblock *next;
    char s[];
};

/* A node's ports: "NAME.net.in" (0..*, exports kb_fabric.node_if: heads
 * and flits from the links into the node) and "NAME.net.out" (0..*, bound
 * to the links out of it). */
struct nport {
    struct sim_port *in, *out;
};

/* A thread blocked in kb_fabric_transfer waits on one of these. */
struct waiter {
    struct sim_event *ev;
    struct waiter *next_free, *next_all;
};

/* A message and what to do when it is delivered; one allocation holds the
 * path and the links' per-hop words too. */
struct fmsg {
    struct kb_link_msg m;
    struct kb_fabric *f;
    struct sim_event *done;
    void (*cb)(void *ud, sim_time at); /* kb_fabric_send_cb */
    void *cb_ud;
    struct fmsg *prev, *next; /* in flight, so kb_fabric_free finds them */
    int cls;                  /* room for 1 << cls hops; -1: an open path's own block */
    struct open_path *op;     /* an open path's routing, else NULL */
};

/* What an open path (kb_fabric_send_open) keeps: its link ids, where it
 * goes, the router's state and the candidates the head waits at. */
struct open_path {
    int dst;
    uint32_t state;
    int *ids; /* room */
    struct kb_fabric_hop pend[KB_LINK_MAX_CANDS];
};

/* Free messages by room: class c holds 1 << c hops. A message goes back
 * to its class when delivered, so a run allocates only its peak of
 * messages in flight, not one a transfer. */
#define FMSG_CLASSES 32

struct kb_fabric {
    struct sim *sim;
    struct node *nodes;
    int n_nodes, cap_nodes;
    /* open addressing on node names; slots hold id + 1, 0 is empty */
    int *hash;
    size_t cap_hash;
    struct flink *links;
    int n_links, cap_links;
    /* the distinct link parameters; links added together mostly share them;
     * kinds[i] is params[i]'s kb_link_kind, made with its first link */
    struct kb_link_params *params;
    struct kb_link_kind **kinds;
    int n_params, cap_params;
    struct kb_link_pool *pool; /* the links made */
    int n_made; /* links made: the first n_made of pool, in order */
    struct strblock *strs;
    char *str_cur;
    size_t str_left;
    struct fmsg *live;
    uint64_t n_live;
    struct fmsg *free_msgs[FMSG_CLASSES]; /* linked through next */
    struct waiter *free_waiters, *all_waiters;
    kb_fabric_classify_fn *classify;
    void *classify_ud;
    uint8_t *classes; /* the classifier's output, cap_classes hops */
    int cap_classes;
    /* the nodes as modules (decision 0038): node NAME is the module
     * "NAME.net" (not "NAME": the memory at node sip0.cube0.sram exports
     * sip0.cube0.sram.in), its ports made with the first link at it (NULL
     * before), in cap_nport entries; every node exports node_if */
    struct nport *nport;
    int cap_nport;
    /* links made whose ports are not (decision 0038, "Lazy records"), in
     * the order made; runs of them, each with the port they would have
     * followed (links made with no other port between share it) */
    int *pend;
    int n_pend, cap_pend;
    struct pend_run {
        struct sim_port *after;
        int start; /* its first link in pend */
    } *runs;
    int n_runs, cap_runs;
    struct sim_port_defer *defer;
    struct kb_flit_if node_if;
    kb_fabric_route_fn *router;
    void *router_ud;
    char err[256];
};

static int seterr(struct kb_fabric *f, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* link fl's kb_link, NULL until made */
static inline struct kb_link *made_link(const struct kb_fabric *f, const struct flink *fl)
{
    return fl->made ? kb_link_pool_at(f->pool, fl->made - 1) : NULL;
}

static inline int fl_params(const struct flink *fl) { return (int)(fl->params & ~FL_SUFFIX); }
static int seterr(struct kb_fabric *f, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, sizeof f->err, fmt, ap);
    va_end(ap);
    return code;
}

static int make_pending_ports(void *ud);

struct kb_fabric *kb_fabric_new(struct sim *s)
{
    struct kb_fabric *f = calloc(1, sizeof *f);
    if (f) {
        f->sim = s;
        /* every node forwards a worm to its route's next link (link.h) */
        f->node_if = (struct kb_flit_if){f, kb_link_route_head, kb_link_route_flit};
        if (!(f->pool = kb_link_pool_new()) ||
            !(f->defer = sim_port_defer(s, make_pending_ports, f))) {
            kb_link_pool_free(f->pool);
            free(f);
            return NULL;
        }
    }
    return f;
}

void kb_fabric_free(struct kb_fabric *f)
{
    if (!f)
        return;
    while (f->live) {
        struct fmsg *m = f->live;
        f->live = m->next;
        free(m->m.credit);
        free(m);
    }
    for (int c = 0; c < FMSG_CLASSES; c++)
        while (f->free_msgs[c]) {
            struct fmsg *m = f->free_msgs[c];
            f->free_msgs[c] = m->next;
            free(m);
        }
    for (struct waiter *w = f->all_waiters, *nx; w; w = nx) {
        nx = w->next_all;
        free(w);
    }
    for (int i = 0; i < f->n_made; i++)
        kb_link_free(kb_link_pool_at(f->pool, (size_t)i));
    kb_link_pool_free(f->pool);
    for (int i = 0; i < f->n_params; i++)
        kb_link_kind_free(f->kinds[i]);
    free(f->kinds);
    for (struct strblock *b = f->strs, *nx; b; b = nx) {
        nx = b->next;
        free(b);
    }
    free(f->classes);
    free(f->nport);
    free(f->pend);
    free(f->runs);
    sim_port_defer_release(f->defer); /* the simulation may be gone */
    free(f->links);
    free(f->params);
    free(f->nodes);
    free(f->hash);
    free(f);
}

const char *kb_fabric_errmsg(const struct kb_fabric *f) { return f->err; }
struct sim *kb_fabric_sim(const struct kb_fabric *f) { return f->sim; }

/* ---- nodes ------------------------------------------------------------- */

/* A copy of s among the fabric's strings; NULL when out of memory. */
static char *str_copy(struct kb_fabric *f, const char *s)
{
    size_t n = strlen(s) + 1;
    if (n > f->str_left) {
        size_t sz = n > STR_BLOCK / 4 ? n : STR_BLOCK;
        struct strblock *b = malloc(sizeof *b + sz);
        if (!b)
            return NULL;
        b->next = f->strs;
        f->strs = b;
        if (sz != STR_BLOCK) { /* a long one alone */
            memcpy(b->s, s, n);
            return b->s;
        }
        f->str_cur = b->s;
        f->str_left = sz;
    }
    char *d = f->str_cur;
    memcpy(d, s, n);
    f->str_cur += n;
    f->str_left -= n;
    return d;
}

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* The slot holding name, or the empty slot where it would go. */
static size_t hash_slot(const struct kb_fabric *f, const char *name)
{
    size_t mask = f->cap_hash - 1, i = hash_str(name) & mask;
    while (f->hash[i] && strcmp(f->nodes[f->hash[i] - 1].name, name) != 0)
        i = (i + 1) & mask;
    return i;
}

static int hash_grow(struct kb_fabric *f)
{
    size_t cap = f->cap_hash ? 2 * f->cap_hash : 64;
    int *h = calloc(cap, sizeof *h);
    if (!h)
        return SIM_ENOMEM;
    free(f->hash);
    f->hash = h;
    f->cap_hash = cap;
    for (int id = 0; id < f->n_nodes; id++)
        f->hash[hash_slot(f, f->nodes[id].name)] = id + 1;
    return 0;
}

int kb_fabric_add_node(struct kb_fabric *f, const char *name)
{
    if (!name || !*name)
        return seterr(f, SIM_EINVAL, "node name is empty");
    if (kb_fabric_find_node(f, name) >= 0)
        return seterr(f, SIM_EINVAL, "duplicate node '%s'", name);
    /* keep the table at most half full */
    if ((size_t)(f->n_nodes + 1) * 2 > f->cap_hash && hash_grow(f) < 0)
        return seterr(f, SIM_ENOMEM, "out of memory adding node '%s'", name);
    if (f->n_nodes == f->cap_nodes) {
        int cap = f->cap_nodes ? 2 * f->cap_nodes : 16;
        struct node *n = realloc(f->nodes, (size_t)cap * sizeof *n);
        if (!n)
            return seterr(f, SIM_ENOMEM, "out of memory adding node '%s'",
                          name);
        f->nodes = n;
        f->cap_nodes = cap;
    }
    char *copy = str_copy(f, name);
    if (!copy)
        return seterr(f, SIM_ENOMEM, "out of memory adding node '%s'", name);
    int id = f->n_nodes++;
    f->nodes[id].name = copy;
    f->hash[hash_slot(f, name)] = id + 1;
    return id;
}

int kb_fabric_find_node(const struct kb_fabric *f, const char *name)
{
    if (!f->cap_hash || !name)
        return -1;
    return f->hash[hash_slot(f, name)] - 1;
}

const char *kb_fabric_node_name(const struct kb_fabric *f, int node)
{
    return node >= 0 && node < f->n_nodes ? f->nodes[node].name : NULL;
}

int kb_fabric_node_count(const struct kb_fabric *f) { return f->n_nodes; }

/* ---- links ------------------------------------------------------------- */

/* The index of params *p among the last few of f->params (links added
 * together mostly share them), or -1. */
static int params_find(const struct kb_fabric *f, const struct kb_link_params *p)
{
    for (int i = f->n_params - 1; i >= 0 && i >= f->n_params - 8; i--) {
        const struct kb_link_params *q = &f->params[i];
        if (q->bw_gbps == p->bw_gbps && q->latency_ns == p->latency_ns &&
            q->overhead_ns == p->overhead_ns && q->flit_bytes == p->flit_bytes &&
            q->buffer_flits == p->buffer_flits && q->vcs == p->vcs &&
            q->vc_classes == p->vc_classes && q->credit_ns == p->credit_ns &&
            q->dateline == p->dateline)
            return i;
    }
    return -1;
}

/* Adds params *p (checked) to f->params; its index, or SIM_ENOMEM. */
static int params_add(struct kb_fabric *f, const struct kb_link_params *p)
{
    if (f->n_params == f->cap_params) {
        int cap = f->cap_params ? 2 * f->cap_params : 8;
        struct kb_link_params *a = realloc(f->params, (size_t)cap * sizeof *a);
        if (!a)
            return SIM_ENOMEM;
        f->params = a;
        struct kb_link_kind **k = realloc(f->kinds, (size_t)cap * sizeof *k);
        if (!k)
            return SIM_ENOMEM;
        f->kinds = k;
        f->cap_params = cap;
    }
    f->params[f->n_params] = *p;
    f->kinds[f->n_params] = NULL;
    return f->n_params++;
}

/* The name of a link from src to dst with its own name, suffix or neither
 * into buf (see struct flink). */
static const char *name_of(const struct kb_fabric *f, const char *name, const char *suffix,
                           int src, int dst, char *buf, size_t len)
{
    if (name)
        return name;
    /* "a.suffix" or "a->b", truncated to len as snprintf would; no printf:
     * a link's name is made with the link, thousands a run */
    const char *part[3] = {f->nodes[src].name, suffix ? "." : "->",
                           suffix ? suffix : f->nodes[dst].name};
    size_t k = 0;
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(part[i]);
        if (l > len - 1 - k)
            l = len - 1 - k;
        memcpy(buf + k, part[i], l);
        k += l;
    }
    buf[k] = 0;
    return buf;
}

/* The name of link `id` into buf: its own, or made as above. */
static const char *link_name(const struct kb_fabric *f, int id, char *buf, size_t len)
{
    const struct flink *fl = &f->links[id];
    bool suffixed = fl->params & FL_SUFFIX;
    return name_of(f, suffixed ? NULL : fl->label, suffixed ? fl->label : NULL, fl->src, fl->dst,
                   buf, len);
}

/* A link's name is formatted only for an error: parameters equal to a
 * recent link's were checked with it. */
static int add_link(struct kb_fabric *f, int src, int dst, const char *name,
                    const char *suffix, const struct kb_link_params *p)
{
    if (src < 0 || src >= f->n_nodes || dst < 0 || dst >= f->n_nodes)
        return seterr(f, SIM_EINVAL, "link from node %d to node %d: no such "
                      "node (fabric has %d)", src, dst, f->n_nodes);
    char buf[512];
    int pi = params_find(f, p);
    if (pi < 0 && kb_link_params_check(p, name_of(f, name, suffix, src, dst, buf, sizeof buf),
                                       f->err, sizeof f->err) < 0)
        return SIM_EINVAL;
    if (f->n_links == f->cap_links) {
        int cap = f->cap_links ? 2 * f->cap_links : 16;
        struct flink *l = realloc(f->links, (size_t)cap * sizeof *l);
        if (!l)
            return seterr(f, SIM_ENOMEM, "link '%s': out of memory",
                          name_of(f, name, suffix, src, dst, buf, sizeof buf));
        f->links = l;
        f->cap_links = cap;
        kb_huge_hint(l, (size_t)cap * sizeof *l);
    }
    if (pi < 0)
        pi = params_add(f, p);
    char *copy = name ? str_copy(f, name) : NULL;
    if (pi < 0 || (name && !copy)) {
        return seterr(f, SIM_ENOMEM, "link '%s': out of memory",
                      name_of(f, name, suffix, src, dst, buf, sizeof buf));
    }
    int id = f->n_links++;
    f->links[id] = (struct flink){name ? copy : suffix, src, dst,
                                  (uint32_t)pi | (suffix && !name ? FL_SUFFIX : 0), 0};
    return id;
}

int kb_fabric_add_link(struct kb_fabric *f, int src, int dst,
                       const char *name, const struct kb_link_params *p)
{
    return add_link(f, src, dst, name, NULL, p);
}

int kb_fabric_add_link_suffixed(struct kb_fabric *f, int src, int dst, const char *suffix,
                                const struct kb_link_params *p)
{
    return add_link(f, src, dst, NULL, suffix, p);
}

/* Node `node`'s ports, made on first use; NULL with f->err set when out
 * of memory. */
static struct nport *node_ports(struct kb_fabric *f, int node)
{
    if (node >= f->cap_nport) {
        int cap = f->cap_nport ? f->cap_nport : 16;
        while (cap <= node)
            cap *= 2;
        struct nport *a = realloc(f->nport, (size_t)cap * sizeof *a);
        if (!a) {
            seterr(f, SIM_ENOMEM, "node '%s': out of memory", f->nodes[node].name);
            return NULL;
        }
        memset(a + f->cap_nport, 0, (size_t)(cap - f->cap_nport) * sizeof *a);
        f->nport = a;
        f->cap_nport = cap;
    }
    struct nport *np = &f->nport[node];
    if (!np->in) {
        const char *name = f->nodes[node].name;
        np->in = kb_port_export(f->sim, name, "net", KB_FLIT_IF, &f->node_if, KB_PORT_MANY,
                                f->err, sizeof f->err);
        if (!np->in)
            return NULL;
    }
    if (!np->out) {
        np->out = kb_port_new(f->sim, f->nodes[node].name, "net", "out", SIM_PORT_OUT,
                              KB_FLIT_IF, 0, KB_PORT_MANY, f->err, sizeof f->err);
        if (!np->out)
            return NULL;
    }
    return np;
}

/* Makes link fl's kb_link; where its worms go is set now (the interface
 * its `out` is bound to), its ports and theirs later (make_ports_of). */
static struct kb_link *make_link(struct kb_fabric *f, struct flink *fl, const char *name)
{
    if (f->n_pend == f->cap_pend) {
        int cap = f->cap_pend ? 2 * f->cap_pend : 64;
        int *a = realloc(f->pend, (size_t)cap * sizeof *a);
        if (!a) {
            seterr(f, SIM_ENOMEM, "link '%s': out of memory", name);
            return NULL;
        }
        f->pend = a;
        f->cap_pend = cap;
    }
    if (f->n_runs == f->cap_runs) {
        int cap = f->cap_runs ? 2 * f->cap_runs : 16;
        struct pend_run *a = realloc(f->runs, (size_t)cap * sizeof *a);
        if (!a) {
            seterr(f, SIM_ENOMEM, "link '%s': out of memory", name);
            return NULL;
        }
        f->runs = a;
        f->cap_runs = cap;
    }
    struct kb_link_kind **k = &f->kinds[fl_params(fl)];
    if (!*k && !(*k = kb_link_kind_new(f->sim, &f->params[fl_params(fl)], name, f->err,
                                       sizeof f->err)))
        return NULL;
    struct kb_link *l = kb_link_new_unported(*k, f->pool, name, f->err, sizeof f->err);
    if (!l)
        return NULL;
    kb_link_set_out(l, &f->node_if);
    struct sim_port *after = sim_port_last(f->sim);
    if (!f->n_pend || f->runs[f->n_runs - 1].after != after)
        f->runs[f->n_runs++] = (struct pend_run){after, f->n_pend};
    f->pend[f->n_pend++] = (int)(fl - f->links);
    return l;
}

/* Makes link fl's ports, its nodes' (on their first link) and binds them:
 * its source node's `out` to the link's `in`, the link's `out` to its
 * destination node's `in`; -1 with f->err set when out of memory. */
static int make_ports_of(struct kb_fabric *f, struct flink *fl)
{
    /* the nodes' ports first (listings show a node before its links); both
     * before either is used: making one may move the other */
    if (!node_ports(f, fl->src) || !node_ports(f, fl->dst) ||
        kb_link_make_ports(made_link(f, fl), f->err, sizeof f->err) < 0)
        return -1;
    /* each step once, so that a call again after running out of memory
     * finishes the job */
    struct nport *src = &f->nport[fl->src], *dst = &f->nport[fl->dst];
    struct sim_port *in = kb_link_in_port(made_link(f, fl));
    struct sim_port *out = kb_link_out_port(made_link(f, fl));
    if ((!sim_port_bound_count(in) &&
         kb_port_bind(f->sim, src->out, in, f->err, sizeof f->err) < 0) ||
        (!sim_port_bound_count(out) &&
         kb_port_bind(f->sim, out, dst->in, f->err, sizeof f->err) < 0))
        return -1;
    return 0;
}

/* The engine asks for the ports (a listing, a lookup by name): makes those
 * of the links made since the last time, each where it would have been
 * made with its link, so listings are as if made then. Out of memory:
 * SIM_ENOMEM, the links not done stay pending (the links still work). */
static int make_pending_ports(void *ud)
{
    struct kb_fabric *f = ud;
    if (!f->n_pend)
        return 0;
    int i = 0, r = 0;
    for (; i < f->n_pend; i++) {
        if (r + 1 < f->n_runs && f->runs[r + 1].start == i)
            r++;
        if (f->runs[r].start == i)
            sim_port_insert_after(f->sim, true, f->runs[r].after);
        if (make_ports_of(f, &f->links[f->pend[i]]) < 0)
            break;
    }
    sim_port_insert_after(f->sim, false, NULL);
    if (i < f->n_pend) {
        /* what is left starts a run of its own (the first link's port is
         * placed again on the next call) */
        memmove(f->pend, f->pend + i, (size_t)(f->n_pend - i) * sizeof *f->pend);
        memmove(f->runs, f->runs + r, (size_t)(f->n_runs - r) * sizeof *f->runs);
        f->n_runs -= r;
        for (int k = 0; k < f->n_runs; k++)
            f->runs[k].start = k ? f->runs[k].start - i : 0;
    } else {
        f->n_runs = 0;
    }
    f->n_pend -= i;
    return f->n_pend ? SIM_ENOMEM : 0;
}

/* Link `id`'s kb_link, made on first use; NULL when out of memory. */
static struct kb_link *link_of(struct kb_fabric *f, int id)
{
    struct flink *fl = &f->links[id];
    if (!fl->made) {
        char buf[512];
        struct kb_link *l = make_link(f, fl, link_name(f, id, buf, sizeof buf));
        if (!l)
            return NULL;
        fl->made = (uint32_t)++f->n_made; /* l is the pool's last */
    }
    return made_link(f, fl);
}

int kb_fabric_link_count(const struct kb_fabric *f) { return f->n_links; }
int kb_fabric_links_made(const struct kb_fabric *f) { return f->n_made; }

bool kb_fabric_link_made(const struct kb_fabric *f, int link)
{
    return link >= 0 && link < f->n_links && made_link(f, &f->links[link]) != NULL;
}

struct kb_link *kb_fabric_link(struct kb_fabric *f, int link)
{
    return link >= 0 && link < f->n_links ? link_of(f, link) : NULL;
}

int kb_fabric_link_src(const struct kb_fabric *f, int link)
{
    return link >= 0 && link < f->n_links ? f->links[link].src : -1;
}

int kb_fabric_link_dst(const struct kb_fabric *f, int link)
{
    return link >= 0 && link < f->n_links ? f->links[link].dst : -1;
}

int kb_fabric_find_link(const struct kb_fabric *f, int src, int dst)
{
    for (int i = 0; i < f->n_links; i++)
        if (f->links[i].src == src && f->links[i].dst == dst)
            return i;
    return -1;
}

/* ---- paths and transfers ----------------------------------------------- */

int kb_fabric_check_path(struct kb_fabric *f, const int *links, int n_links)
{
    if (n_links < 0)
        return seterr(f, SIM_EINVAL, "path: negative length %d", n_links);
    for (int j = 0; j < n_links; j++) {
        int id = links[j];
        if (id < 0 || id >= f->n_links)
            return seterr(f, SIM_EINVAL, "path: hop %d names link %d, the "
                          "fabric has %d", j, id, f->n_links);
        if (j == 0)
            continue;
        const struct flink *a = &f->links[links[j - 1]], *b = &f->links[id];
        char na[512], nb[512];
        if (a->dst != b->src)
            return seterr(f, SIM_EINVAL, "path: link '%s' ends at '%s' but "
                          "the next, '%s', starts at '%s'",
                          link_name(f, links[j - 1], na, sizeof na),
                          f->nodes[a->dst].name, link_name(f, id, nb, sizeof nb),
                          f->nodes[b->src].name);
        uint32_t fa = f->params[fl_params(a)].flit_bytes;
        uint32_t fb = f->params[fl_params(b)].flit_bytes;
        if (fa != fb)
            return seterr(f, SIM_EINVAL, "path: flit size %u of link '%s' "
                          "differs from %u of link '%s'", fb,
                          link_name(f, id, nb, sizeof nb), fa,
                          link_name(f, links[j - 1], na, sizeof na));
        if (!f->params[fl_params(a)].buffer_flits != !f->params[fl_params(b)].buffer_flits)
            return seterr(f, SIM_EINVAL, "path: link '%s' runs %s flow control but "
                          "the next, '%s', runs %s: a path keeps one mode",
                          link_name(f, links[j - 1], na, sizeof na),
                          f->params[fl_params(a)].buffer_flits ? "credit" : "wormhole_unbounded",
                          link_name(f, id, nb, sizeof nb),
                          f->params[fl_params(b)].buffer_flits ? "credit" : "wormhole_unbounded");
    }
    for (int j = 0; j < n_links; j++)
        if (!link_of(f, links[j]))
            return SIM_ENOMEM;
    return 0;
}

/* kb_fabric_path_time in credit mode: the links' own closed form */
static sim_time credit_path_time(struct kb_fabric *f, const int *links, int n_links,
                                 uint32_t flit, uint64_t bytes)
{
    struct kb_link **path = malloc((size_t)n_links * sizeof *path);
    if (!path)
        return SIM_FOREVER;
    for (int j = 0; j < n_links; j++)
        path[j] = made_link(f, &f->links[links[j]]);
    sim_time t = kb_link_credit_path_time(path, (uint32_t)n_links, flit, bytes);
    free(path);
    return t;
}

sim_time kb_fabric_path_time(struct kb_fabric *f, const int *links,
                             int n_links, uint64_t bytes)
{
    if (kb_fabric_check_path(f, links, n_links) < 0)
        return SIM_FOREVER;
    if (n_links == 0)
        return 0;
    uint64_t flit = kb_link_params(made_link(f, &f->links[links[0]]))->flit_bytes;
    if (kb_link_credit_mode(made_link(f, &f->links[links[0]])))
        return credit_path_time(f, links, n_links, (uint32_t)flit, bytes);
    uint64_t n = bytes ? bytes / flit + (bytes % flit != 0) : 1;
    uint64_t f1 = n == 1 ? bytes : flit, fn = bytes - (n - 1) * flit;
    sim_time t = 0;
    const struct kb_link *slow = NULL;
    for (int j = 0; j < n_links; j++) {
        const struct kb_link *l = made_link(f, &f->links[links[j]]);
        t += kb_link_overhead_ps(l) + kb_link_latency_ps(l) +
             kb_link_ser_ps(l, f1);
        if (!slow || kb_link_params(l)->bw_gbps < kb_link_params(slow)->bw_gbps)
            slow = l;
    }
    if (n >= 2)
        t += (n - 2) * kb_link_ser_ps(slow, flit) + kb_link_ser_ps(slow, fn);
    return t;
}

static void msg_done(struct kb_link_msg *lm, sim_time at)
{
    struct fmsg *m = lm->ud;
    struct kb_fabric *f = m->f;
    if (m->done)
        sim_notify_at(m->done, at - sim_now(f->sim));
    if (m->cb)
        m->cb(m->cb_ud, at);
    if (m->prev)
        m->prev->next = m->next;
    else
        f->live = m->next;
    if (m->next)
        m->next->prev = m->prev;
    f->n_live--;
    if (m->cls < 0) {
        free(m);
        return;
    }
    m->next = f->free_msgs[m->cls];
    f->free_msgs[m->cls] = m;
}

/* Fills m's link message for `bytes` over path[0..n_hops) (its flits, the
 * per-hop words in body, msg_done at the end; the other fields zero) and
 * puts m on the live list; the caller sets what its kind of message adds. */
static void msg_start(struct kb_fabric *f, struct fmsg *m, struct kb_link **path,
                      uint32_t n_hops, sim_time *body, uint64_t bytes, struct sim_event *done,
                      void (*cb)(void *ud, sim_time at), void *cb_ud)
{
    uint32_t flit = kb_link_params(path[0])->flit_bytes;
    uint64_t n = bytes ? bytes / flit + (bytes % flit != 0) : 1;
    m->m = (struct kb_link_msg){
        .path = path,
        .n_hops = n_hops,
        .n_flits = n,
        .flit_bytes = flit,
        .last_bytes = (uint32_t)(bytes - (n - 1) * flit),
        .body = body,
        .done = msg_done,
        .ud = m,
    };
    m->f = f;
    m->done = done;
    m->cb = cb;
    m->cb_ud = cb_ud;
    m->prev = NULL;
    m->next = f->live;
    if (f->live)
        f->live->prev = m;
    f->live = m;
    f->n_live++;
}

/* kb_fabric_send on a path known to be good (kb_fabric_check_path passed
 * on it before, and links are never removed). */
static int send_full(struct kb_fabric *f, const int *links, struct kb_link *const *made,
                     int n_links, uint64_t bytes, struct sim_event *done, uint32_t vc_class,
                     void (*cb)(void *ud, sim_time at), void *cb_ud)
{
    if (n_links == 0) {
        if (done)
            sim_notify_delta(done);
        if (cb)
            cb(cb_ud, sim_now(f->sim));
        return 0;
    }
    /* one block: the message, then the path, then the per-hop words,
     * recycled by room */
    int cls = 0;
    while ((1 << cls) < n_links)
        cls++;
    struct fmsg *m = f->free_msgs[cls];
    if (m) {
        f->free_msgs[cls] = m->next;
    } else {
        size_t room = (size_t)1 << cls;
        size_t sz = sizeof(struct fmsg) + room * sizeof(struct kb_link *)
                    + 2 * room * sizeof(sim_time);
        /* on a cache line of its own: what a hop reads of the message is
         * its first 64 bytes (link.h) */
        if (!(m = aligned_alloc(64, (sz + 63) & ~(size_t)63)))
            return seterr(f, SIM_ENOMEM, "out of memory sending %llu bytes",
                          (unsigned long long)bytes);
        m->cls = cls;
    }
    struct kb_link **path = (struct kb_link **)(m + 1);
    sim_time *body = (sim_time *)(path + ((size_t)1 << m->cls));
    if (made)
        memcpy(path, made, (size_t)n_links * sizeof *path);
    else
        kb_fabric_path_links(f, links, n_links, path);
    msg_start(f, m, path, (uint32_t)n_links, body, bytes, done, cb, cb_ud);
    m->m.vc_class = vc_class;
    m->op = NULL;
    if (f->classify && kb_link_credit_mode(path[0])) {
        if (n_links > f->cap_classes) {
            uint8_t *c = realloc(f->classes, (size_t)n_links);
            if (!c) {
                m->m.n_hops = 0; /* kb_link_inject refuses it: the message goes back */
            } else {
                f->classes = c;
                f->cap_classes = n_links;
            }
        }
        if (m->m.n_hops) {
            f->classify(f->classify_ud, links, n_links, vc_class, f->classes);
            m->m.hop_class = f->classes;
        }
    }
    int rc = kb_link_inject(&m->m);
    if (rc < 0) {
        /* only an allocation in the first link's queue can fail here */
        f->live = m->next;
        if (f->live)
            f->live->prev = NULL;
        f->n_live--;
        m->next = f->free_msgs[m->cls];
        f->free_msgs[m->cls] = m;
        free(m->m.credit);
        m->m.credit = NULL;
        if (rc == SIM_EINVAL)
            rc = SIM_ENOMEM; /* the classes could not be held */
        return seterr(f, rc, "out of memory sending %llu bytes",
                      (unsigned long long)bytes);
    }
    return 0;
}

static int send_checked(struct kb_fabric *f, const int *links, int n_links,
                        uint64_t bytes, struct sim_event *done, uint32_t vc_class)
{
    return send_full(f, links, NULL, n_links, bytes, done, vc_class, NULL, NULL);
}

int kb_fabric_send_cb(struct kb_fabric *f, const int *links, int n_links, uint64_t bytes,
                      uint32_t vc_class, void (*cb)(void *ud, sim_time at), void *ud)
{
    int rc = kb_fabric_check_path(f, links, n_links);
    if (rc < 0)
        return rc;
    return send_full(f, links, NULL, n_links, bytes, NULL, vc_class, cb, ud);
}

int kb_fabric_send_cb_checked(struct kb_fabric *f, const int *links, int n_links,
                              uint64_t bytes, uint32_t vc_class,
                              void (*cb)(void *ud, sim_time at), void *ud)
{
    return send_full(f, links, NULL, n_links, bytes, NULL, vc_class, cb, ud);
}

void kb_fabric_path_links(const struct kb_fabric *f, const int *links, int n_links,
                          struct kb_link **out)
{
    for (int j = 0; j < n_links; j++)
        out[j] = made_link(f, &f->links[links[j]]);
}

int kb_fabric_send_cb_links(struct kb_fabric *f, const int *links, struct kb_link *const *path,
                            int n_links, uint64_t bytes, uint32_t vc_class,
                            void (*cb)(void *ud, sim_time at), void *ud)
{
    return send_full(f, links, path, n_links, bytes, NULL, vc_class, cb, ud);
}

int kb_fabric_send(struct kb_fabric *f, const int *links, int n_links,
                   uint64_t bytes, struct sim_event *done)
{
    int rc = kb_fabric_check_path(f, links, n_links);
    if (rc < 0)
        return rc;
    return send_checked(f, links, n_links, bytes, done, 0);
}

static int transfer(struct kb_fabric *f, const int *links, int n_links,
                    uint64_t bytes, bool checked, uint32_t vc_class)
{
    if (!sim_current(f->sim))
        return seterr(f, SIM_EPERM, "transfer: not called from a thread "
                      "process");
    if (n_links == 0)
        return checked ? 0 : kb_fabric_check_path(f, links, n_links);
    struct waiter *w = f->free_waiters;
    if (w) {
        f->free_waiters = w->next_free;
    } else {
        w = calloc(1, sizeof *w);
        if (!w || !(w->ev = sim_event_new(f->sim, "fabric.transfer"))) {
            free(w);
            return seterr(f, SIM_ENOMEM, "out of memory in transfer");
        }
        w->next_all = f->all_waiters;
        f->all_waiters = w;
    }
    int rc = checked ? send_checked(f, links, n_links, bytes, w->ev, vc_class)
                     : kb_fabric_send(f, links, n_links, bytes, w->ev);
    if (rc >= 0) {
        rc = sim_wait_event(f->sim, w->ev);
        if (rc < 0) {
            /* A method process cannot block. The transfer still runs and
             * will notify w->ev, so w is never handed out again. */
            return seterr(f, rc, "transfer: not called from a thread "
                          "process");
        }
    }
    w->next_free = f->free_waiters;
    f->free_waiters = w;
    return rc;
}

int kb_fabric_transfer(struct kb_fabric *f, const int *links, int n_links,
                       uint64_t bytes)
{
    return transfer(f, links, n_links, bytes, false, 0);
}

int kb_fabric_transfer_checked(struct kb_fabric *f, const int *links, int n_links,
                               uint64_t bytes)
{
    return transfer(f, links, n_links, bytes, true, 0);
}

int kb_fabric_transfer_class(struct kb_fabric *f, const int *links, int n_links,
                             uint64_t bytes, uint32_t vc_class)
{
    return transfer(f, links, n_links, bytes, true, vc_class);
}

uint64_t kb_fabric_in_flight(const struct kb_fabric *f) { return f->n_live; }

int kb_fabric_link_backlog(const struct kb_fabric *f, int link)
{
    return link >= 0 && link < f->n_links && made_link(f, &f->links[link])
               ? kb_link_backlog(made_link(f, &f->links[link]))
               : 0;
}

void kb_fabric_set_classifier(struct kb_fabric *f, kb_fabric_classify_fn *fn, void *ud)
{
    f->classify = fn;
    f->classify_ud = ud;
}

/* ---- open paths (per-hop routing) ---------------------------------------- */

void kb_fabric_set_router(struct kb_fabric *f, kb_fabric_route_fn *fn, void *ud)
{
    f->router = fn;
    f->router_ud = ud;
}

/* kb_link_msg.next_hop of an open path: the router's candidates from the
 * far end of the last hop, as links (made on first use) */
static int open_next_hop(struct kb_link_msg *lm, struct kb_link_cand *c, int max)
{
    struct fmsg *m = lm->ud;
    struct kb_fabric *f = m->f;
    struct open_path *op = m->op;
    if (lm->n_hops >= lm->room)
        return seterr(f, SIM_EINVAL, "open path: more than %u hops", lm->room);
    int last = op->ids[lm->n_hops - 1];
    int n = f->router(f->router_ud, f->links[last].dst, op->dst, op->state, op->pend, max);
    if (n < 1)
        return n < 0 ? n : SIM_EINVAL;
    const struct kb_link_params *pl = &f->params[fl_params(&f->links[last])];
    for (int i = 0; i < n; i++) {
        const struct kb_fabric_hop *h = &op->pend[i];
        if (h->link < 0 || h->link >= f->n_links || f->links[h->link].src != f->links[last].dst ||
            h->n_cls < 1 || h->n_cls > 2)
            return SIM_EINVAL;
        const struct kb_link_params *p = &f->params[fl_params(&f->links[h->link])];
        if (!p->buffer_flits || p->flit_bytes != pl->flit_bytes)
            return SIM_EINVAL;
        struct kb_link *l = link_of(f, h->link);
        if (!l)
            return SIM_ENOMEM;
        c[i] = (struct kb_link_cand){l, {h->cls[0], h->cls[1]}, h->n_cls, (uint32_t)i, h->delay};
    }
    return n;
}

/* kb_link_msg.took of an open path: candidate c served the head in class
 * cls; the path grows by its link */
static void open_took(struct kb_link_msg *lm, const struct kb_link_cand *c, uint32_t cls)
{
    struct fmsg *m = lm->ud;
    struct open_path *op = m->op;
    const struct kb_fabric_hop *h = &op->pend[c->tag];
    op->state = h->n_cls > 1 && cls != h->cls[0] ? h->state[1] : h->state[0];
    op->ids[lm->n_hops] = h->link;
    lm->path[lm->n_hops++] = c->link;
    if (m->f->links[h->link].dst == op->dst)
        lm->open = 0;
}

int kb_fabric_send_open(struct kb_fabric *f, const int *prefix, int n_prefix,
                        const uint8_t *prefix_cls, int room, int dst, uint32_t state,
                        uint64_t bytes, void (*cb)(void *ud, sim_time at), void *ud)
{
    int rc = kb_fabric_check_path(f, prefix, n_prefix);
    if (rc < 0)
        return rc;
    if (n_prefix < 1 || room < n_prefix || !f->router || dst < 0 || dst >= f->n_nodes ||
        !f->params[fl_params(&f->links[prefix[0]])].buffer_flits)
        return seterr(f, SIM_EINVAL, "open path: needs a router, credit flow control, a "
                      "first hop and room for it");
    size_t r = (size_t)room;
    struct fmsg *m = malloc(sizeof *m + sizeof(struct open_path) + r * sizeof(struct kb_link *) +
                            2 * r * sizeof(sim_time) + r * sizeof(int));
    if (!m)
        return seterr(f, SIM_ENOMEM, "out of memory sending %llu bytes",
                      (unsigned long long)bytes);
    struct open_path *op = (struct open_path *)(m + 1);
    struct kb_link **path = (struct kb_link **)(op + 1);
    sim_time *body = (sim_time *)(path + r);
    op->ids = (int *)(body + 2 * r);
    op->dst = dst;
    op->state = state;
    for (int j = 0; j < n_prefix; j++) {
        path[j] = made_link(f, &f->links[prefix[j]]);
        op->ids[j] = prefix[j];
    }
    msg_start(f, m, path, (uint32_t)n_prefix, body, bytes, NULL, cb, ud);
    m->m.hop_class = prefix_cls;
    m->m.open = f->links[prefix[n_prefix - 1]].dst != dst;
    m->m.room = (uint32_t)room;
    m->m.next_hop = open_next_hop;
    m->m.took = open_took;
    m->cls = -1;
    m->op = op;
    rc = kb_link_inject(&m->m);
    if (rc < 0) {
        f->live = m->next;
        if (f->live)
            f->live->prev = NULL;
        f->n_live--;
        free(m);
        return seterr(f, rc, "out of memory sending %llu bytes", (unsigned long long)bytes);
    }
    return 0;
}
