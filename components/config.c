/* config.c — strict YAML reader on libyaml's event parser, located nodes,
 * collected errors and strict scalar conversion */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

/* ---- errors ---------------------------------------------------------- */

void kb_config_errors_init(struct kb_config_errors *e)
{
    memset(e, 0, sizeof *e);
}

/* What an error list holds when a message could not get memory: the last
 * message, and the list stops there (nothing is freed of these). */
static char nomem_msg[] = "out of memory (recording a configuration error)";
static char *nomem_list[1] = {nomem_msg};

void kb_config_errors_release(struct kb_config_errors *e)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->msgs[i] != nomem_msg)
            free(e->msgs[i]);
    if (e->msgs != nomem_list)
        free(e->msgs);
    memset(e, 0, sizeof *e);
}

static void errors_vadd(struct kb_config_errors *e, const char *prefix, const char *fmt,
                        va_list ap)
{
    if (e->truncated)
        return;
    if (e->n == KB_CONFIG_MAX_ERRORS) {
        e->truncated = true;
        prefix = "";
        fmt = NULL;
    }
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 16;
        char **m = realloc(e->msgs, cap * sizeof *m);
        if (!m) {
            /* the list still says that something went wrong */
            e->truncated = true;
            if (!e->n) {
                e->msgs = nomem_list;
                e->n = e->cap = 1;
            } else {
                free(e->msgs[e->n - 1]);
                e->msgs[e->n - 1] = nomem_msg;
            }
            return;
        }
        e->msgs = m;
        e->cap = cap;
    }
    char body[1024];
    if (fmt)
        vsnprintf(body, sizeof body, fmt, ap);
    else
        snprintf(body, sizeof body, "too many errors, stopped after %d", KB_CONFIG_MAX_ERRORS);
    size_t len = strlen(prefix) + strlen(body) + 1;
    char *msg = malloc(len);
    if (!msg) {
        e->truncated = true;
        e->msgs[e->n++] = nomem_msg;
        return;
    }
    snprintf(msg, len, "%s%s", prefix, body);
    /* one message, one line: keys and values quoted in it may hold
     * newlines or escapes from the file */
    for (char *s = msg; *s; s++)
        if (iscntrl((unsigned char)*s))
            *s = '?';
    e->msgs[e->n++] = msg;
}

void kb_config_errors_add(struct kb_config_errors *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    errors_vadd(e, "", fmt, ap);
    va_end(ap);
}

void kb_config_errors_print(const struct kb_config_errors *e, FILE *out)
{
    for (size_t i = 0; i < e->n; i++)
        fprintf(out, "%s\n", e->msgs[i]);
}

static void error_vloc(struct kb_config *c, const char *file, int line, int col,
                       const char *fmt, va_list ap)
{
    char prefix[512];
    if (line > 0)
        snprintf(prefix, sizeof prefix, "%s:%d:%d: ", file, line, col);
    else
        snprintf(prefix, sizeof prefix, "%s: ", file);
    errors_vadd(c->errors, prefix, fmt, ap);
}

void kb_config_error_loc(struct kb_config *c, const char *file, int line, int col,
                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vloc(c, file, line, col, fmt, ap);
    va_end(ap);
}

void kb_config_error_at(struct kb_config *c, const struct kb_config_node *n, const char *fmt,
                        ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vloc(c, n->file, n->line, n->col, fmt, ap);
    va_end(ap);
}

bool kb_config_place_names(const char *file, int line, const char *key)
{
    size_t nf = file ? strlen(file) : 0, nk = strlen(key);
    return line <= 0 && nf >= nk && strcmp(file + nf - nk, key) == 0 &&
           (nf == nk || file[nf - nk - 1] == '.' || file[nf - nk - 1] == ' ');
}

const char *kb_config_for_key(const struct kb_config_node *n, const char *key, char *buf,
                              size_t size)
{
    if (kb_config_place_names(n->file, n->line, key))
        return "";
    snprintf(buf, size, " for '%s'", key);
    return buf;
}

/* ---- context, nodes, strings ----------------------------------------- */

/* Out of memory: one "out of memory" error in the list (the first time),
 * and c->nomem stays set so that the parse stops and callers see it. */
static void config_nomem(struct kb_config *c, const char *doing)
{
    if (!c->nomem)
        kb_config_errors_add(c->errors, "out of memory (%s)", doing);
    c->nomem = true;
}

void kb_config_init(struct kb_config *c, struct kb_config_errors *errors)
{
    memset(c, 0, sizeof *c);
    c->errors = errors;
    c->max_depth = KB_CONFIG_MAX_DEPTH;
    c->max_bytes = KB_CONFIG_MAX_BYTES;
}

void kb_config_release(struct kb_config *c)
{
    for (struct kb_config_node *n = c->nodes, *next; n; n = next) {
        next = n->next_alloc;
        free(n->kids);
        free(n);
    }
    for (size_t i = 0; i < c->n_strings; i++)
        free(c->strings[i]);
    free(c->strings);
    c->nodes = NULL;
    c->strings = NULL;
    c->n_strings = c->cap_strings = 0;
}

const char *kb_config_strdup(struct kb_config *c, const char *s, size_t len)
{
    if (c->n_strings == c->cap_strings) {
        size_t cap = c->cap_strings ? 2 * c->cap_strings : 64;
        char **v = realloc(c->strings, cap * sizeof *v);
        if (!v) {
            config_nomem(c, "reading a configuration");
            return NULL;
        }
        c->strings = v;
        c->cap_strings = cap;
    }
    char *d = malloc(len + 1);
    if (!d) {
        config_nomem(c, "reading a configuration");
        return NULL;
    }
    memcpy(d, s, len);
    d[len] = 0;
    c->strings[c->n_strings++] = d;
    return d;
}

struct kb_config_node *kb_config_new_node(struct kb_config *c, enum kb_config_kind kind,
                                          const char *file, int line, int col)
{
    struct kb_config_node *n = calloc(1, sizeof *n);
    if (!n) {
        config_nomem(c, "reading a configuration");
        return NULL;
    }
    n->kind = kind;
    n->file = file;
    n->line = line;
    n->col = col;
    n->text = "";
    n->next_alloc = c->nodes;
    c->nodes = n;
    return n;
}

/* false (and c->nomem) when the parent cannot grow */
static bool add_kid(struct kb_config *c, struct kb_config_node *parent,
                    struct kb_config_node *kid)
{
    if (parent->n == parent->cap) {
        size_t cap = parent->cap ? 2 * parent->cap : 8;
        struct kb_config_node **k = realloc(parent->kids, cap * sizeof *k);
        if (!k) {
            config_nomem(c, "reading a configuration");
            return false;
        }
        parent->kids = k;
        parent->cap = cap;
    }
    parent->kids[parent->n++] = kid;
    return true;
}

bool kb_config_seq_append(struct kb_config *c, struct kb_config_node *seq,
                          struct kb_config_node *item)
{
    return item && add_kid(c, seq, item);
}

struct kb_config_node *kb_config_get(const struct kb_config_node *map, const char *key)
{
    if (!map || map->kind != KB_CONFIG_MAP)
        return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->kids[i]->key, key) == 0)
            return map->kids[i];
    return NULL;
}

struct kb_config_node *kb_config_lookup(const struct kb_config_node *root, const char *path)
{
    const struct kb_config_node *n = root;
    char part[256];
    while (n && *path) {
        const char *dot = strchr(path, '.');
        size_t len = dot ? (size_t)(dot - path) : strlen(path);
        if (len >= sizeof part)
            return NULL;
        memcpy(part, path, len);
        part[len] = 0;
        n = kb_config_get(n, part);
        path += len + (dot != NULL);
    }
    return (struct kb_config_node *)n;
}

void kb_config_map_set(struct kb_config *c, struct kb_config_node *map, const char *key,
                       struct kb_config_node *value)
{
    if (!map || !value)
        return; /* an allocation failed: c->nomem is set */
    const char *k = kb_config_strdup(c, key, strlen(key));
    if (!k)
        return;
    value->key = k;
    if (!value->key_line) {
        value->key_line = value->line;
        value->key_col = value->col;
    }
    for (size_t i = 0; i < map->n; i++) {
        if (strcmp(map->kids[i]->key, key) == 0) {
            map->kids[i] = value;
            return;
        }
    }
    add_kid(c, map, value);
}

struct kb_config_node *kb_config_merge(struct kb_config *c, struct kb_config_node *base,
                                       struct kb_config_node *over)
{
    if (!base)
        return over;
    if (!over)
        return base;
    if (base->kind != KB_CONFIG_MAP || over->kind != KB_CONFIG_MAP) {
        over->key = base->key;
        return over;
    }
    /* New members are appended after the loop so lookups only scan the
     * original members: merging a huge map stays linear in its size. */
    size_t n_base = base->n;
    for (size_t i = 0; i < over->n; i++) {
        struct kb_config_node *o = over->kids[i];
        size_t j = 0;
        while (j < n_base && strcmp(base->kids[j]->key, o->key) != 0)
            j++;
        if (j < n_base) {
            struct kb_config_node *m = kb_config_merge(c, base->kids[j], o);
            m->key = o->key;
            m->key_line = o->key_line;
            m->key_col = o->key_col;
            if (m == base->kids[j] && o->kind == KB_CONFIG_MAP) {
                /* the member now mostly comes from `over`: point there */
                m->file = o->file;
                m->line = o->line;
                m->col = o->col;
            }
            base->kids[j] = m;
        } else {
            add_kid(c, base, o);
        }
    }
    return base;
}

/* ---- parsing --------------------------------------------------------- */

struct frame {
    struct kb_config_node *node; /* NULL: a complex key being skipped */
    bool have_key, drop_value;
    const char *key;
    int key_line, key_col;
};

struct parse {
    struct kb_config *c;
    const char *file;
    const char *text;
    struct frame *stack;
    int depth;
    int documents;
    struct kb_config_node *root;
};

struct key_index {
    const char *key;
    size_t i;
};

/* Map members sorted by key, ties in file order, for duplicate search. */
static int cmp_key_index(const void *a, const void *b)
{
    const struct key_index *x = a, *y = b;
    int r = strcmp(x->key, y->key);
    if (r)
        return r;
    return (x->i > y->i) - (x->i < y->i);
}

/* Duplicate keys are found once a map is complete, by sorting, so a map
 * with a million keys costs n log n, not n². Reported in file order; the
 * later duplicates are dropped from the tree. */
static void check_duplicates(struct parse *p, struct kb_config_node *map)
{
    if (map->n < 2)
        return;
    struct key_index *order = malloc(map->n * sizeof *order);
    size_t *first = malloc(map->n * sizeof *first);
    if (!order || !first) {
        free(order);
        free(first);
        config_nomem(p->c, "checking for duplicate keys");
        return;
    }
    for (size_t i = 0; i < map->n; i++) {
        order[i] = (struct key_index){map->kids[i]->key, i};
        first[i] = i;
    }
    qsort(order, map->n, sizeof *order, cmp_key_index);
    bool any = false;
    for (size_t i = 1; i < map->n; i++) {
        if (strcmp(order[i].key, order[i - 1].key) == 0) {
            first[order[i].i] = first[order[i - 1].i];
            any = true;
        }
    }
    if (any) {
        size_t out = 0;
        for (size_t k = 0; k < map->n; k++) {
            struct kb_config_node *kid = map->kids[k];
            if (first[k] != k) {
                const struct kb_config_node *f = map->kids[first[k]];
                kb_config_error_loc(p->c, kid->file, kid->key_line, kid->key_col,
                                    "duplicate key '%s' (first at %d:%d)", kid->key,
                                    f->key_line, f->key_col);
            }
        }
        /* compact only after reporting: first[] indexes the original order */
        for (size_t k = 0; k < map->n; k++)
            if (first[k] == k)
                map->kids[out++] = map->kids[k];
        map->n = out;
    }
    free(order);
    free(first);
}

static void mark_error(struct parse *p, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void mark_error(struct parse *p, yaml_mark_t m, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kb_config_error_loc(p->c, p->file, (int)m.line + 1, (int)m.column + 1, "%s", msg);
}

/* Anchors and tags change meaning in ways a reader of the file cannot see
 * at a glance; a configuration has no use for them. */
static void reject_decorations(struct parse *p, yaml_mark_t m, const yaml_char_t *anchor,
                               const yaml_char_t *tag)
{
    if (anchor)
        mark_error(p, m, "anchors ('&%s') are not supported", (const char *)anchor);
    if (tag) {
        /* show "!!str" as written, not libyaml's expanded form */
        static const char core[] = "tag:yaml.org,2002:";
        const char *t = (const char *)tag;
        bool short_form = strncmp(t, core, sizeof core - 1) == 0;
        mark_error(p, m, "tags ('%s%s') are not supported", short_form ? "!!" : "",
                   short_form ? t + sizeof core - 1 : t);
    }
}

/* Hang a finished or starting node under the innermost open container. */
static void attach(struct parse *p, struct kb_config_node *n)
{
    if (!n)
        return; /* its allocation failed: the parse stops (c->nomem) */
    if (p->depth == 0) {
        p->root = n;
        return;
    }
    struct frame *f = &p->stack[p->depth - 1];
    if (!f->node)
        return; /* inside a skipped complex key */
    if (f->node->kind == KB_CONFIG_SEQ) {
        add_kid(p->c, f->node, n);
        return;
    }
    if (!f->have_key) {
        /* a scalar key is handled by the caller; this is a map or list key */
        return;
    }
    f->have_key = false;
    if (f->drop_value)
        return;
    n->key = f->key;
    n->key_line = f->key_line;
    n->key_col = f->key_col;
    add_kid(p->c, f->node, n);
}

/* True when the next node is a map key (the innermost container is a map
 * waiting for a key). */
static bool expecting_key(const struct parse *p)
{
    if (p->depth == 0)
        return false;
    const struct frame *f = &p->stack[p->depth - 1];
    return f->node && f->node->kind == KB_CONFIG_MAP && !f->have_key;
}

static void set_key(struct parse *p, const char *key, yaml_mark_t m, bool drop)
{
    struct frame *f = &p->stack[p->depth - 1];
    f->have_key = true;
    f->drop_value = drop;
    f->key = key;
    f->key_line = (int)m.line + 1;
    f->key_col = (int)m.column + 1;
}

static void parser_error(struct parse *p, const yaml_parser_t *y)
{
    if (y->error == YAML_READER_ERROR) {
        /* reader errors carry a byte offset: turn it into line and column */
        int line = 1, col = 1;
        for (size_t i = 0; i < y->problem_offset && p->text[i]; i++) {
            if (p->text[i] == '\n') {
                line++;
                col = 1;
            } else if (((unsigned char)p->text[i] & 0xC0) != 0x80) {
                col++;
            }
        }
        kb_config_error_loc(p->c, p->file, line, col, "%s", y->problem ? y->problem : "cannot read");
    } else if (y->error == YAML_MEMORY_ERROR) {
        kb_config_error_loc(p->c, p->file, 0, 0, "out of memory while parsing");
    } else if (y->context) {
        kb_config_error_loc(p->c, p->file, (int)y->problem_mark.line + 1,
                            (int)y->problem_mark.column + 1, "%s (%s at %d:%d)",
                            y->problem ? y->problem : "syntax error", y->context,
                            (int)y->context_mark.line + 1, (int)y->context_mark.column + 1);
    } else {
        kb_config_error_loc(p->c, p->file, (int)y->problem_mark.line + 1,
                            (int)y->problem_mark.column + 1, "%s",
                            y->problem ? y->problem : "syntax error");
    }
}

/* One event; returns 1 to go on, 0 at the end of the stream, -1 to stop. */
static int on_event(struct parse *p, yaml_event_t *ev)
{
    yaml_mark_t m = ev->start_mark;
    int line = (int)m.line + 1, col = (int)m.column + 1;
    switch (ev->type) {
    case YAML_STREAM_START_EVENT:
    case YAML_DOCUMENT_END_EVENT:
    case YAML_NO_EVENT:
        return 1;
    case YAML_STREAM_END_EVENT:
        return 0;
    case YAML_DOCUMENT_START_EVENT:
        if (p->documents++) {
            mark_error(p, m, "multiple documents are not supported");
            return -1;
        }
        if (ev->data.document_start.tag_directives.start !=
            ev->data.document_start.tag_directives.end)
            mark_error(p, m, "tag directives are not supported");
        return 1;
    case YAML_ALIAS_EVENT: {
        mark_error(p, m, "aliases ('*%s') are not supported", (const char *)ev->data.alias.anchor);
        /* stand in for the alias so keys and values stay paired */
        if (expecting_key(p)) {
            set_key(p, "", m, true);
            return 1;
        }
        attach(p, kb_config_new_node(p->c, KB_CONFIG_SCALAR, p->file, line, col));
        return 1;
    }
    case YAML_SCALAR_EVENT: {
        reject_decorations(p, m, ev->data.scalar.anchor, ev->data.scalar.tag);
        const char *v = (const char *)ev->data.scalar.value;
        size_t len = ev->data.scalar.length;
        bool bad = false;
        if (memchr(v, 0, len)) {
            mark_error(p, m, "a NUL character in a scalar is not supported");
            bad = true;
        }
        const char *text = kb_config_strdup(p->c, v, len);
        if (!text)
            return -1; /* out of memory */
        if (expecting_key(p)) {
            set_key(p, text, m, bad);
            return 1;
        }
        struct kb_config_node *n = kb_config_new_node(p->c, KB_CONFIG_SCALAR, p->file, line, col);
        if (!n)
            return -1;
        n->text = text;
        n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        attach(p, n);
        return 1;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool is_map = ev->type == YAML_MAPPING_START_EVENT;
        if (is_map)
            reject_decorations(p, m, ev->data.mapping_start.anchor, ev->data.mapping_start.tag);
        else
            reject_decorations(p, m, ev->data.sequence_start.anchor,
                               ev->data.sequence_start.tag);
        if (p->depth >= p->c->max_depth) {
            kb_config_error_loc(p->c, p->file, line, col, "nesting deeper than %d levels",
                                p->c->max_depth);
            return -1;
        }
        struct kb_config_node *n = NULL;
        if (expecting_key(p)) {
            mark_error(p, m, "a %s as a key is not supported", is_map ? "mapping" : "sequence");
        } else if (p->depth == 0 || p->stack[p->depth - 1].node) {
            n = kb_config_new_node(p->c, is_map ? KB_CONFIG_MAP : KB_CONFIG_SEQ, p->file, line,
                                   col);
            attach(p, n);
        }
        p->stack[p->depth++] = (struct frame){.node = n};
        return 1;
    }
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: {
        struct frame *f = &p->stack[--p->depth];
        if (f->node && f->node->kind == KB_CONFIG_MAP)
            check_duplicates(p, f->node);
        if (!f->node && p->depth > 0 && p->stack[p->depth - 1].node &&
            p->stack[p->depth - 1].node->kind == KB_CONFIG_MAP) {
            /* a complex key just ended: its value is dropped */
            set_key(p, "", m, true);
        }
        return 1;
    }
    }
    return 1;
}

struct kb_config_node *kb_config_parse_string(struct kb_config *c, const char *name,
                                              const char *text, size_t len)
{
    const char *file = kb_config_strdup(c, name, strlen(name));
    if (!file)
        return NULL;
    if (len > c->max_bytes) {
        kb_config_error_loc(c, file, 1, 1, "file too large: %zu bytes, the limit is %zu", len,
                            c->max_bytes);
        return NULL;
    }
    struct parse p = {.c = c, .file = file, .text = text};
    p.stack = calloc((size_t)c->max_depth + 1, sizeof *p.stack);
    if (!p.stack) {
        config_nomem(c, "reading a configuration");
        return NULL;
    }
    yaml_parser_t y;
    if (!yaml_parser_initialize(&y)) {
        free(p.stack);
        config_nomem(c, "reading a configuration");
        return NULL;
    }
    yaml_parser_set_input_string(&y, (const unsigned char *)text, len);
    yaml_parser_set_encoding(&y, YAML_UTF8_ENCODING);
    bool ok = true;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&y, &ev)) {
            parser_error(&p, &y);
            ok = false;
            break;
        }
        int r = on_event(&p, &ev);
        yaml_event_delete(&ev);
        if (c->nomem)
            r = -1; /* an allocation failed: the tree is incomplete */
        if (r < 0)
            ok = false;
        if (r <= 0)
            break;
    }
    yaml_parser_delete(&y);
    free(p.stack);
    if (!ok)
        return NULL;
    if (!p.root)
        p.root = kb_config_new_node(c, KB_CONFIG_MAP, file, 1, 1);
    return p.root;
}

struct kb_config_node *kb_config_parse_file(struct kb_config *c, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        kb_config_error_loc(c, path, 0, 0, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
        (uint64_t)st.st_size > c->max_bytes) {
        kb_config_error_loc(c, path, 1, 1, "file too large: %llu bytes, the limit is %zu",
                            (unsigned long long)st.st_size, c->max_bytes);
        fclose(f);
        return NULL;
    }
    /* read at most one byte past the limit: pipes have no size to stat */
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        config_nomem(c, "reading a configuration");
        return NULL;
    }
    for (;;) {
        if (len == cap) {
            cap *= 2;
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                config_nomem(c, "reading a configuration");
                return NULL;
            }
            buf = b;
        }
        size_t want = cap - len;
        if (len + want > c->max_bytes + 1)
            want = c->max_bytes + 1 - len;
        size_t got = fread(buf + len, 1, want, f);
        len += got;
        if (got == 0 || len > c->max_bytes)
            break;
    }
    bool read_error = ferror(f);
    fclose(f);
    struct kb_config_node *root = NULL;
    if (read_error)
        kb_config_error_loc(c, path, 0, 0, "cannot read: %s", strerror(errno));
    else if (len > c->max_bytes)
        kb_config_error_loc(c, path, 1, 1, "file too large: more than %zu bytes", c->max_bytes);
    else
        root = kb_config_parse_string(c, path, buf, len);
    free(buf);
    return root;
}

/* ---- strict scalars -------------------------------------------------- */

/* The value as shown in a message: quoted, short, control characters made
 * visible. */
static const char *shown(const struct kb_config_node *n, char *buf, size_t size)
{
    if (n->kind == KB_CONFIG_MAP)
        return "a mapping";
    if (n->kind == KB_CONFIG_SEQ)
        return "a sequence";
    if (!n->quoted && !n->text[0])
        return "nothing";
    size_t k = 0, max = size - 8;
    buf[k++] = n->quoted ? '"' : '\'';
    for (const char *s = n->text; *s && k < max; s++)
        buf[k++] = iscntrl((unsigned char)*s) ? '?' : *s;
    if (strlen(n->text) > max - 1) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k++] = n->quoted ? '"' : '\'';
    buf[k] = 0;
    return buf;
}

static bool reject(struct kb_config *c, const struct kb_config_node *n, const char *expected,
                   const char *what, const char *hint)
{
    char buf[64], fk[300];
    kb_config_error_at(c, n, "expected %s%s, got %s%s", expected,
                       kb_config_for_key(n, what, fk, sizeof fk), shown(n, buf, sizeof buf),
                       hint);
    return false;
}

/* Plain decimal digits with an optional minus, no leading zeros (YAML 1.1
 * readers take 010 as octal; refusing it avoids the question). Returns the
 * number of characters used. */
static size_t scan_int(const char *s, int64_t *out, bool *overflow)
{
    size_t i = 0;
    bool neg = s[0] == '-';
    if (neg)
        i++;
    if (!isdigit((unsigned char)s[i]))
        return 0;
    if (s[i] == '0' && isdigit((unsigned char)s[i + 1]))
        return 0;
    uint64_t v = 0;
    *overflow = false;
    for (; isdigit((unsigned char)s[i]); i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            *overflow = true;
        else
            v = v * 10 + d;
    }
    if (v > (uint64_t)INT64_MAX + neg)
        *overflow = true;
    if (!*overflow)
        *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return i;
}

bool kb_config_to_int(struct kb_config *c, const struct kb_config_node *n, const char *what,
                      int64_t *out)
{
    if (n->kind != KB_CONFIG_SCALAR || n->quoted)
        return reject(c, n, "an integer", what, "");
    int64_t v;
    bool overflow = false;
    size_t used = scan_int(n->text, &v, &overflow);
    if (!used || n->text[used])
        return reject(c, n, "an integer", what, "");
    if (overflow)
        return reject(c, n, "an integer", what, " (out of range)");
    *out = v;
    return true;
}

bool kb_config_to_bytes(struct kb_config *c, const struct kb_config_node *n, const char *what,
                        uint64_t *out)
{
    static const char hint[] = " (an integer, optionally with B, KiB, MiB, GiB or TiB)";
    if (n->kind != KB_CONFIG_SCALAR || n->quoted || n->text[0] == '-')
        return reject(c, n, "a byte size", what, hint);
    int64_t v;
    bool overflow = false;
    size_t used = scan_int(n->text, &v, &overflow);
    if (!used)
        return reject(c, n, "a byte size", what, hint);
    if (overflow)
        return reject(c, n, "a byte size", what, " (out of range)");
    const char *u = n->text + used;
    if (*u == ' ')
        u++;
    static const struct {
        const char *name;
        unsigned shift;
    } units[] = {{"", 0}, {"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(u, units[i].name) != 0 || (u != n->text + used && !*u))
            continue;
        if ((uint64_t)v > (UINT64_MAX >> units[i].shift))
            return reject(c, n, "a byte size", what, " (out of range)");
        *out = (uint64_t)v << units[i].shift;
        return true;
    }
    static const char *const decimal[] = {"k", "K", "kB", "KB", "M", "MB", "G", "GB", "T", "TB"};
    for (size_t i = 0; i < sizeof decimal / sizeof decimal[0]; i++)
        if (strcmp(u, decimal[i]) == 0)
            return reject(c, n, "a byte size", what,
                          " (decimal units are ambiguous: use KiB, MiB, GiB or TiB)");
    return reject(c, n, "a byte size", what, hint);
}

bool kb_config_to_double(struct kb_config *c, const struct kb_config_node *n, const char *what,
                         double *out)
{
    if (n->kind != KB_CONFIG_SCALAR || n->quoted)
        return reject(c, n, "a number", what, "");
    /* [sign] digits [. digits] [e [sign] digits], at least one mantissa
     * digit: strtod alone would also take inf, nan and hex */
    const char *s = n->text;
    size_t i = 0, digits = 0;
    if (s[i] == '-' || s[i] == '+')
        i++;
    while (isdigit((unsigned char)s[i]))
        i++, digits++;
    if (s[i] == '.') {
        i++;
        while (isdigit((unsigned char)s[i]))
            i++, digits++;
    }
    if (digits && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (s[i] == '-' || s[i] == '+')
            i++;
        if (!isdigit((unsigned char)s[i]))
            return reject(c, n, "a number", what, "");
        while (isdigit((unsigned char)s[i]))
            i++;
    }
    if (!digits || s[i])
        return reject(c, n, "a number", what, "");
    double v = strtod(s, NULL);
    if (!isfinite(v))
        return reject(c, n, "a number", what, " (out of range)");
    *out = v;
    return true;
}

bool kb_config_to_bool(struct kb_config *c, const struct kb_config_node *n, const char *what,
                       bool *out)
{
    if (n->kind == KB_CONFIG_SCALAR && !n->quoted) {
        if (strcmp(n->text, "true") == 0) {
            *out = true;
            return true;
        }
        if (strcmp(n->text, "false") == 0) {
            *out = false;
            return true;
        }
    }
    return reject(c, n, "true or false", what, "");
}

bool kb_config_expect_map(struct kb_config *c, const struct kb_config_node *n, const char *what)
{
    if (n->kind == KB_CONFIG_MAP)
        return true;
    return reject(c, n, "a mapping", what, "");
}

bool kb_config_to_string(struct kb_config *c, const struct kb_config_node *n, const char *what,
                         const char **out)
{
    /* a plain empty, ~ or null is YAML's null, not a string */
    if (n->kind != KB_CONFIG_SCALAR ||
        (!n->quoted && (!n->text[0] || !strcmp(n->text, "~") || !strcmp(n->text, "null"))))
        return reject(c, n, "a string", what, "");
    *out = n->text;
    return true;
}

int kb_config_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return (int)(la > lb ? la : lb);
    int d[65][65];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}
