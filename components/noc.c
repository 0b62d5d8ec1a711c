/* noc.c — kb_noc: mesh, torus, ring and switch builders; deterministic
 * dimension-order routing */
#include "noc.h"

#include "kb_err.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kb_noc {
    struct kb_fabric *f;
    enum kb_noc_kind kind;
    int w, h, n;
    int *node;  /* n router node ids */
    int *link;  /* n × KB_NOC_NDIRS link ids, -1 where none */
    int xbar;   /* switch: crossbar node, its up links in link[i*4 + 0],
                 * its down links in link[i*4 + 1] */
    char err[256];
};

static const char *const dir_name[KB_NOC_NDIRS] = {"E", "W", "S", "N"};

static const char *kind_name(enum kb_noc_kind k)
{
    switch (k) {
    case KB_NOC_MESH: return "mesh";
    case KB_NOC_TORUS: return "torus";
    case KB_NOC_RING: return "ring";
    case KB_NOC_SWITCH: return "switch";
    }
    return "?";
}

/* "<prefix>.<rest>", or just rest without a prefix */
static void join(char *out, size_t len, const char *prefix, const char *rest)
{
    if (prefix && *prefix)
        snprintf(out, len, "%s.%s", prefix, rest);
    else
        snprintf(out, len, "%s", rest);
}

/* A link named name, or, name NULL, "<src's name>.<suffix>" (made when
 * asked for: the mesh's links hold no string) */
/* "<prefix>.r<i>" (or "r<i>" without a prefix), as join would make it,
 * without a printf a router: a system of 1024 SIPs names 262,144 */
static void router_name(char *out, size_t len, const char *prefix, int i)
{
    char digits[16];
    int nd = 0;
    unsigned u = (unsigned)i;
    do
        digits[nd++] = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    size_t pl = prefix ? strlen(prefix) : 0, k = 0;
    if (pl + 3 + (size_t)nd > len) { /* does not fit: as join truncates */
        char rest[16];
        snprintf(rest, sizeof rest, "r%d", i);
        join(out, len, prefix, rest);
        return;
    }
    if (pl) {
        memcpy(out, prefix, pl);
        out[pl] = '.';
        k = pl + 1;
    }
    out[k++] = 'r';
    while (nd)
        out[k++] = digits[--nd];
    out[k] = 0;
}

static int add_link(struct kb_noc *n, int src, int dst, const char *name, const char *suffix,
                    const struct kb_link_params *p, char *err, size_t errlen)
{
    int id = name ? kb_fabric_add_link(n->f, src, dst, name, p)
                  : kb_fabric_add_link_suffixed(n->f, src, dst, suffix, p);
    if (id < 0)
        kb_errf(err, errlen, "%s", kb_fabric_errmsg(n->f));
    return id;
}

/* The neighbour of router i toward d, or -1 (mesh edges, size-1 rings). */
static int neighbour(const struct kb_noc *n, int i, enum kb_noc_dir d)
{
    int x = i % n->w, y = i / n->w;
    int dx = d == KB_NOC_E ? 1 : d == KB_NOC_W ? -1 : 0;
    int dy = d == KB_NOC_S ? 1 : d == KB_NOC_N ? -1 : 0;
    int size = dx ? n->w : n->h;
    if (size < 2)
        return -1;
    x += dx;
    y += dy;
    if (n->kind == KB_NOC_MESH) {
        if (x < 0 || x >= n->w || y < 0 || y >= n->h)
            return -1;
    } else {
        x = (x + n->w) % n->w;
        y = (y + n->h) % n->h;
    }
    return y * n->w + x;
}

static int build_grid(struct kb_noc *n, const struct kb_link_params *p,
                      char *err, size_t errlen)
{
    for (int i = 0; i < n->n; i++) {
        for (int d = 0; d < KB_NOC_NDIRS; d++) {
            int j = neighbour(n, i, (enum kb_noc_dir)d);
            if (j < 0)
                continue;
            /* credit flow control: a wrap link is its ring's dateline, a
             * message crossing it moves up a VC class (link_credit.c) */
            struct kb_link_params q = *p;
            int xi = i % n->w, xj = j % n->w, yi = i / n->w, yj = j / n->w;
            bool wrap = (d == KB_NOC_E && xj < xi) || (d == KB_NOC_W && xj > xi) ||
                        (d == KB_NOC_S && yj < yi) || (d == KB_NOC_N && yj > yi);
            q.dateline = wrap && p->buffer_flits && p->vc_classes > 1;
            int id = add_link(n, n->node[i], n->node[j], NULL, dir_name[d], &q, err, errlen);
            if (id < 0)
                return id;
            n->link[i * KB_NOC_NDIRS + d] = id;
        }
    }
    return 0;
}

static int build_switch(struct kb_noc *n, const char *prefix,
                        const struct kb_link_params *p, char *err,
                        size_t errlen)
{
    char name[512], rest[64];
    join(name, sizeof name, prefix, "xbar");
    n->xbar = kb_fabric_add_node(n->f, name);
    if (n->xbar < 0) {
        kb_errf(err, errlen, "%s", kb_fabric_errmsg(n->f));
        return n->xbar;
    }
    for (int i = 0; i < n->n; i++) {
        int up = add_link(n, n->node[i], n->xbar, NULL, "up", p, err, errlen);
        if (up < 0)
            return up;
        snprintf(rest, sizeof rest, "xbar.%d", i);
        join(name, sizeof name, prefix, rest);
        int down = add_link(n, n->xbar, n->node[i], name, NULL, p, err, errlen);
        if (down < 0)
            return down;
        n->link[i * KB_NOC_NDIRS + 0] = up;
        n->link[i * KB_NOC_NDIRS + 1] = down;
    }
    return 0;
}

struct kb_noc *kb_noc_new(struct kb_fabric *f, const struct kb_noc_params *p,
                          char *err, size_t errlen)
{
    const char *prefix = p->prefix ? p->prefix : "";
    const char *what = kind_name(p->kind);
    if (p->kind != KB_NOC_MESH && p->kind != KB_NOC_TORUS &&
        p->kind != KB_NOC_RING && p->kind != KB_NOC_SWITCH) {
        kb_errf(err, errlen, "noc '%s': unknown kind %d", prefix, (int)p->kind);
        return NULL;
    }
    int h = p->kind == KB_NOC_RING || p->kind == KB_NOC_SWITCH ? 1 : p->h;
    if (p->w < 1 || h < 1) {
        kb_errf(err, errlen, "%s '%s': size must be at least 1×1, got %d×%d",
             what, prefix, p->w, p->h);
        return NULL;
    }
    if ((long long)p->w * h > 1 << 24) {
        kb_errf(err, errlen, "%s '%s': %d×%d routers is too many", what, prefix,
             p->w, h);
        return NULL;
    }
    char name[512];
    join(name, sizeof name, prefix, "*"); /* all the network's links */
    if (kb_link_params_check(&p->link, name, err, errlen) < 0)
        return NULL;
    struct kb_noc *n = calloc(1, sizeof *n);
    if (!n) {
        kb_errf(err, errlen, "%s '%s': out of memory", what, prefix);
        return NULL;
    }
    n->f = f;
    n->kind = p->kind;
    n->w = p->w;
    n->h = h;
    n->n = p->w * h;
    n->xbar = -1;
    n->node = malloc((size_t)n->n * sizeof *n->node);
    n->link = malloc((size_t)n->n * KB_NOC_NDIRS * sizeof *n->link);
    if (!n->node || !n->link) {
        kb_errf(err, errlen, "%s '%s': out of memory", what, prefix);
        kb_noc_free(n);
        return NULL;
    }
    for (int i = 0; i < n->n * KB_NOC_NDIRS; i++)
        n->link[i] = -1;
    for (int i = 0; i < n->n; i++) {
        if (p->nodes) {
            n->node[i] = p->nodes[i];
            if (!kb_fabric_node_name(f, n->node[i])) {
                kb_errf(err, errlen, "%s '%s': router %d is node %d, which the "
                     "fabric does not have", what, prefix, i, n->node[i]);
                kb_noc_free(n);
                return NULL;
            }
            continue;
        }
        router_name(name, sizeof name, prefix, i);
        n->node[i] = kb_fabric_add_node(f, name);
        if (n->node[i] < 0) {
            kb_errf(err, errlen, "%s", kb_fabric_errmsg(f));
            kb_noc_free(n);
            return NULL;
        }
    }
    int rc = p->kind == KB_NOC_SWITCH ? build_switch(n, prefix, &p->link, err,
                                                     errlen)
                                      : build_grid(n, &p->link, err, errlen);
    if (rc < 0) {
        kb_noc_free(n);
        return NULL;
    }
    return n;
}

void kb_noc_free(struct kb_noc *n)
{
    if (!n)
        return;
    free(n->node);
    free(n->link);
    free(n);
}

const char *kb_noc_errmsg(const struct kb_noc *n) { return n->err; }
int kb_noc_size(const struct kb_noc *n) { return n->n; }
int kb_noc_xbar(const struct kb_noc *n) { return n->xbar; }

int kb_noc_node(const struct kb_noc *n, int i)
{
    return i >= 0 && i < n->n ? n->node[i] : -1;
}

int kb_noc_link(const struct kb_noc *n, int i, enum kb_noc_dir d)
{
    if (i < 0 || i >= n->n || (unsigned)d >= KB_NOC_NDIRS ||
        n->kind == KB_NOC_SWITCH)
        return -1;
    return n->link[i * KB_NOC_NDIRS + d];
}

int kb_noc_max_hops(const struct kb_noc *n)
{
    switch (n->kind) {
    case KB_NOC_MESH: return (n->w - 1) + (n->h - 1);
    case KB_NOC_TORUS:
    case KB_NOC_RING: return n->w / 2 + n->h / 2;
    case KB_NOC_SWITCH: return n->n > 1 ? 2 : 0;
    }
    return 0;
}

/* Steps along one dimension from a to b (coordinates of a ring of `size`,
 * or a line when !wrap): the direction and the number of steps. */
static int steps(int a, int b, int size, int wrap, int *plus)
{
    if (!wrap) {
        *plus = b >= a;
        return *plus ? b - a : a - b;
    }
    int up = ((b - a) % size + size) % size, down = size - up;
    if (up == 0)
        return *plus = 1, 0;
    *plus = up <= down;
    return *plus ? up : down;
}

int kb_noc_route(struct kb_noc *n, int src, int dst, int *links, int max)
{
    if (src < 0 || src >= n->n || dst < 0 || dst >= n->n) {
        snprintf(n->err, sizeof n->err, "route from %d to %d: the %s has "
                 "routers 0..%d", src, dst, kind_name(n->kind), n->n - 1);
        return SIM_EINVAL;
    }
    int k = 0;
    if (n->kind == KB_NOC_SWITCH) {
        if (src != dst) {
            if (max < 2)
                goto short_buffer;
            links[k++] = n->link[src * KB_NOC_NDIRS + 0];
            links[k++] = n->link[dst * KB_NOC_NDIRS + 1];
        }
        return k;
    }
    int wrap = n->kind != KB_NOC_MESH;
    int x = src % n->w, y = src / n->w, plus;
    int sx = steps(x, dst % n->w, n->w, wrap, &plus);
    enum kb_noc_dir dx = plus ? KB_NOC_E : KB_NOC_W;
    int sy = steps(y, dst / n->w, n->h, wrap, &plus);
    enum kb_noc_dir dy = plus ? KB_NOC_S : KB_NOC_N;
    if (sx + sy > max)
        goto short_buffer;
    int at = src;
    for (int i = 0; i < sx + sy; i++) {
        enum kb_noc_dir d = i < sx ? dx : dy;
        links[k++] = n->link[at * KB_NOC_NDIRS + d];
        at = neighbour(n, at, d);
    }
    return k;

short_buffer:
    snprintf(n->err, sizeof n->err, "route from %d to %d: more than %d "
             "links", src, dst, max);
    return SIM_EINVAL;
}

int kb_noc_hops(struct kb_noc *n, int src, int dst)
{
    int buf[2];
    if (n->kind == KB_NOC_SWITCH)
        return kb_noc_route(n, src, dst, buf, 2);
    if (src < 0 || src >= n->n || dst < 0 || dst >= n->n)
        return kb_noc_route(n, src, dst, buf, 0);
    int wrap = n->kind != KB_NOC_MESH, plus;
    return steps(src % n->w, dst % n->w, n->w, wrap, &plus) +
           steps(src / n->w, dst / n->w, n->h, wrap, &plus);
}
