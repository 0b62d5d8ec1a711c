/* config_schema.c — validation of a config tree against a key table,
 * --set overrides and user-over-defaults loading */
#include "config_schema.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FOR_KEY(n, key, buf) kb_config_for_key((n), (key), (buf), sizeof(buf))

/* ---- suggestions ----------------------------------------------------- */

/* How far `typed` is from `known`: the edit distance, or one more than the
 * distance to a prefix of `known` of about the typed length, so that
 * 'bandwith' still finds 'bandwidth_gbps'. */
static int key_score(const char *typed, const char *known)
{
    int best = kb_config_edit_distance(typed, known);
    size_t lt = strlen(typed), lk = strlen(known);
    char prefix[65];
    for (size_t k = lt > 2 ? lt - 2 : 1; k <= lt + 2 && k < lk && k < sizeof prefix; k++) {
        memcpy(prefix, known, k);
        prefix[k] = 0;
        int d = kb_config_edit_distance(typed, prefix) + 1;
        if (d < best)
            best = d;
    }
    return best;
}

static bool close_enough(const char *typed, int score)
{
    int len = (int)strlen(typed);
    return score <= (len / 3 > 2 ? len / 3 : 2);
}

/* ---- validation ------------------------------------------------------ */

static const struct kb_config_key *table_find(const struct kb_config_key *t, const char *name)
{
    for (; t->name; t++)
        if (strcmp(t->name, name) == 0)
            return t;
    return NULL;
}

static void unknown_key(struct kb_config *c, const struct kb_config_node *kid,
                        const struct kb_config_key *table)
{
    if (c->errors->truncated)
        return; /* no message would be kept: spare the edit distances */
    const struct kb_config_key *best = NULL;
    int best_score = INT_MAX, n = 0;
    for (const struct kb_config_key *t = table; t->name; t++, n++) {
        int s = key_score(kid->key, t->name);
        if (s < best_score) {
            best_score = s;
            best = t;
        }
    }
    /* "f.yaml:3:5: unknown key 'cnt'", but "sips.cnt: unknown key" */
    char named[300] = "";
    if (!kb_config_place_names(kid->file, kid->key_line, kid->key))
        snprintf(named, sizeof named, " '%s'", kid->key);
    if (best && close_enough(kid->key, best_score)) {
        kb_config_error_loc(c, kid->file, kid->key_line, kid->key_col,
                            "unknown key%s (did you mean '%s'?)", named, best->name);
        return;
    }
    /* no near miss: a short table is worth listing */
    char list[512] = "";
    if (n <= 10) {
        size_t len = 0;
        for (const struct kb_config_key *t = table; t->name; t++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                                    t == table ? " (known: " : ", ", t->name);
        if (len < sizeof list - 1)
            snprintf(list + len, sizeof list - len, ")");
    }
    kb_config_error_loc(c, kid->file, kid->key_line, kid->key_col, "unknown key%s%s", named,
                        list);
}

/* A limit as the user would write it: a byte size with its binary suffix
 * when it has one ("1TiB"), a whole number in full (1000000), any other
 * with %g. */
static void show_limit(char *buf, size_t size, const struct kb_config_key *k, double v)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (k->type == KB_CONFIG_T_BYTES && v >= 1024) {
        uint64_t b = (uint64_t)v;
        int u = -1;
        while (u < 3 && b % 1024 == 0 && b >= 1024) {
            b /= 1024;
            u++;
        }
        if (u >= 0) {
            snprintf(buf, size, "%llu%s", (unsigned long long)b, units[u]);
            return;
        }
    }
    if (v > -1e15 && v < 1e15 && v == (double)(int64_t)v)
        snprintf(buf, size, "%lld", (long long)v);
    else
        snprintf(buf, size, "%g", v);
}

static bool check_range(struct kb_config *c, const struct kb_config_node *n,
                        const struct kb_config_key *k, double v)
{
    bool lo_ok = true, hi_ok = true;
    if (k->flags & KB_CONFIG_F_GT_MIN)
        lo_ok = v > k->min;
    else if (k->flags & KB_CONFIG_F_MIN)
        lo_ok = v >= k->min;
    if (k->flags & KB_CONFIG_F_MAX)
        hi_ok = v <= k->max;
    if (lo_ok && hi_ok)
        return true;
    char want[128], lo[32], hi[32];
    show_limit(lo, sizeof lo, k, k->min);
    show_limit(hi, sizeof hi, k, k->max);
    const char *op = (k->flags & KB_CONFIG_F_GT_MIN) ? ">" : ">=";
    bool has_lo = k->flags & (KB_CONFIG_F_GT_MIN | KB_CONFIG_F_MIN);
    if (has_lo && (k->flags & KB_CONFIG_F_MAX))
        snprintf(want, sizeof want, "a value %s %s and <= %s", op, lo, hi);
    else if (has_lo)
        snprintf(want, sizeof want, "a value %s %s", op, lo);
    else
        snprintf(want, sizeof want, "a value <= %s", hi);
    char fk[300];
    kb_config_error_at(c, n, "expected %s%s, got %s", want, FOR_KEY(n, k->name, fk), n->text);
    return false;
}

static bool check_pow2(struct kb_config *c, const struct kb_config_node *n,
                       const struct kb_config_key *k, uint64_t v)
{
    if (!(k->flags & KB_CONFIG_F_POW2) || (v && !(v & (v - 1))))
        return true;
    char fk[300];
    kb_config_error_at(c, n, "expected a power of two%s, got %s", FOR_KEY(n, k->name, fk),
                       n->text);
    return false;
}

static bool read_enum(struct kb_config *c, const struct kb_config_node *n,
                      const struct kb_config_key *k, int *out)
{
    const char *s;
    char want[256] = "one of ", fk[300];
    size_t len = strlen(want);
    for (int i = 0; k->choices[i]; i++)
        len += (size_t)snprintf(want + len, sizeof want - len, "%s%s", i ? ", " : "",
                                k->choices[i]);
    if (n->kind != KB_CONFIG_SCALAR || !kb_config_to_string(c, n, k->name, &s)) {
        if (n->kind != KB_CONFIG_SCALAR)
            kb_config_error_at(c, n, "expected %s%s, got a %s", want, FOR_KEY(n, k->name, fk),
                               n->kind == KB_CONFIG_MAP ? "mapping" : "sequence");
        return false;
    }
    int best = -1, best_score = INT_MAX;
    for (int i = 0; k->choices[i]; i++) {
        if (strcmp(s, k->choices[i]) == 0) {
            *out = i;
            return true;
        }
        int d = kb_config_edit_distance(s, k->choices[i]);
        if (d < best_score) {
            best_score = d;
            best = i;
        }
    }
    if (best >= 0 && close_enough(s, best_score))
        kb_config_error_at(c, n, "expected %s%s, got '%s' (did you mean '%s'?)", want,
                           FOR_KEY(n, k->name, fk), s, k->choices[best]);
    else
        kb_config_error_at(c, n, "expected %s%s, got '%s'", want, FOR_KEY(n, k->name, fk), s);
    return false;
}

static bool read_value(struct kb_config *c, const struct kb_config_key *k,
                       const struct kb_config_node *n, const char *path, void *out)
{
    char *field = (char *)out + k->offset;
    switch (k->type) {
    case KB_CONFIG_T_INT: {
        int64_t v;
        if (!kb_config_to_int(c, n, k->name, &v) || !check_range(c, n, k, (double)v))
            return false;
        if (v < INT_MIN || v > INT_MAX) {
            char fk[300];
            kb_config_error_at(c, n, "expected an integer%s, got '%s' (out of range)",
                               FOR_KEY(n, k->name, fk), n->text);
            return false;
        }
        if (!check_pow2(c, n, k, (uint64_t)v))
            return false;
        *(int *)field = (int)v;
        return true;
    }
    case KB_CONFIG_T_BYTES: {
        uint64_t v;
        if (!kb_config_to_bytes(c, n, k->name, &v))
            return false;
        if (!check_range(c, n, k, (double)v) || !check_pow2(c, n, k, v))
            return false;
        *(uint64_t *)field = v;
        return true;
    }
    case KB_CONFIG_T_FLOAT: {
        double v;
        if (!kb_config_to_double(c, n, k->name, &v) || !check_range(c, n, k, v))
            return false;
        *(double *)field = v;
        return true;
    }
    case KB_CONFIG_T_BOOL:
        return kb_config_to_bool(c, n, k->name, (bool *)field);
    case KB_CONFIG_T_STRING: {
        const char *s;
        if (!kb_config_to_string(c, n, k->name, &s))
            return false;
        if (strlen(s) >= KB_CONFIG_STR_MAX) {
            char fk[300];
            kb_config_error_at(c, n, "string too long%s (at most %d bytes)",
                               FOR_KEY(n, k->name, fk), KB_CONFIG_STR_MAX - 1);
            return false;
        }
        struct kb_config_str *str = (struct kb_config_str *)(void *)field;
        snprintf(str->text, sizeof str->text, "%s", s);
        if (n->line > 0)
            snprintf(str->where, sizeof str->where, "%s:%d:%d", n->file, n->line, n->col);
        else
            snprintf(str->where, sizeof str->where, "%s", n->file);
        return true;
    }
    case KB_CONFIG_T_ENUM:
        return read_enum(c, n, k, (int *)field);
    case KB_CONFIG_T_MAP:
        if (!kb_config_expect_map(c, n, k->name))
            return false;
        return kb_config_schema_apply(c, k->sub, n, path, out);
    case KB_CONFIG_T_DICT: {
        if (!kb_config_expect_map(c, n, k->name))
            return false;
        bool ok = true;
        for (size_t i = 0; i < n->n; i++)
            ok &= kb_config_expect_map(c, n->kids[i], n->kids[i]->key);
        return ok;
    }
    }
    return false;
}

bool kb_config_schema_apply(struct kb_config *c, const struct kb_config_key *table,
                            const struct kb_config_node *map, const char *prefix, void *out)
{
    size_t before = c->errors->n;
    if (!kb_config_expect_map(c, map, *prefix ? prefix : "the top level"))
        return false;
    for (size_t i = 0; i < map->n; i++)
        if (!table_find(table, map->kids[i]->key))
            unknown_key(c, map->kids[i], table);
    for (const struct kb_config_key *k = table; k->name; k++) {
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", k->name);
        const struct kb_config_node *n = kb_config_get(map, k->name);
        if (!n) {
            if (!(k->flags & KB_CONFIG_F_OPTIONAL))
                kb_config_error_at(c, map, "missing key '%s'", path);
            continue;
        }
        read_value(c, k, n, path, out);
    }
    return c->errors->n == before;
}

/* ---- --set ----------------------------------------------------------- */

const struct kb_config_key *kb_config_schema_find(const struct kb_config_key *schema,
                                                  const char *path)
{
    const struct kb_config_key *table = schema, *k = NULL;
    bool any_name = false, on_name = false;
    while (*path) {
        on_name = any_name;
        const char *dot = strchr(path, '.');
        size_t len = dot ? (size_t)(dot - path) : strlen(path);
        if (!len || !table)
            return NULL;
        if (any_name) {
            any_name = false; /* a DICT entry's name: anything goes */
        } else {
            k = NULL;
            for (const struct kb_config_key *t = table; t->name; t++)
                if (strlen(t->name) == len && memcmp(t->name, path, len) == 0)
                    k = t;
            if (!k)
                return NULL;
            table = k->sub;
            any_name = k->type == KB_CONFIG_T_DICT;
        }
        path += len;
        if (*path == '.' && !*++path)
            return NULL;
    }
    /* a DICT itself or one of its entries is a section, not a value */
    return any_name || on_name ? NULL : k;
}

/* Every leaf path of a schema, for "nearest" lists; false when out of
 * memory (the paths so far stay in *v for the caller to free). */
static bool leaf_paths(const struct kb_config_key *t, const char *prefix, char ***v, size_t *n,
                       size_t *cap)
{
    for (; t->name; t++) {
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", t->name);
        if (t->type == KB_CONFIG_T_MAP || t->type == KB_CONFIG_T_DICT) {
            if (t->type == KB_CONFIG_T_DICT)
                strncat(path, ".NAME", sizeof path - strlen(path) - 1);
            if (!leaf_paths(t->sub, path, v, n, cap))
                return false;
            continue;
        }
        if (*n == *cap) {
            size_t nc = *cap ? 2 * *cap : 64;
            char **nv = realloc(*v, nc * sizeof *nv);
            if (!nv)
                return false;
            *v = nv;
            *cap = nc;
        }
        if (!((*v)[*n] = strdup(path)))
            return false;
        (*n)++;
    }
    return true;
}

/* A dotted key against a known path: the whole path, or as many of its
 * last parts as the key has ('bandwith' is near 'cube.noc.bandwidth_gbps'). */
static int path_score(const char *key, const char *path)
{
    int best = key_score(key, path);
    int parts = 1;
    for (const char *s = key; *s; s++)
        parts += *s == '.';
    const char *tail = path + strlen(path);
    while (tail > path && parts) {
        tail--;
        if (*tail == '.' && !--parts) {
            tail++;
            break;
        }
    }
    if (tail != path) {
        int d = key_score(key, tail);
        if (d < best)
            best = d;
    }
    return best;
}

/* "sips.cuont" → "sips.count" (up to three equally near keys); false
 * when out of memory. */
static bool nearest_keys(const struct kb_config_key *const *schemas, size_t n_schemas,
                         const char *key, char *buf, size_t size)
{
    char **paths = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    for (size_t s = 0; s < n_schemas && ok; s++)
        ok = leaf_paths(schemas[s], "", &paths, &n, &cap);
    int best = INT_MAX;
    int *score = ok ? malloc((n ? n : 1) * sizeof *score) : NULL;
    if (!score) {
        for (size_t i = 0; i < n; i++)
            free(paths[i]);
        free(paths);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        score[i] = path_score(key, paths[i]);
        if (score[i] < best)
            best = score[i];
    }
    size_t len = 0, shown = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (shown < 3 && score[i] == best && len < size) {
            len += (size_t)snprintf(buf + len, size - len, "%s%s", shown ? ", " : "", paths[i]);
            shown++;
        }
        free(paths[i]);
    }
    free(paths);
    free(score);
    return true;
}

/* Split "KEY=VALUE"; false when there is no '=' or no key. */
static bool split_set(const char *set, char *key, size_t size, const char **value)
{
    const char *eq = strchr(set, '=');
    if (!eq || eq == set || (size_t)(eq - set) >= size)
        return false;
    memcpy(key, set, (size_t)(eq - set));
    key[eq - set] = 0;
    *value = eq + 1;
    return true;
}

static bool owns_root(const struct kb_config_key *schema, const char *key)
{
    size_t len = strcspn(key, ".");
    for (const struct kb_config_key *t = schema; t->name; t++)
        if (strlen(t->name) == len && memcmp(t->name, key, len) == 0)
            return true;
    return false;
}

static void report_unknown_set(struct kb_config_errors *e,
                               const struct kb_config_key *const *schemas, size_t n_schemas,
                               const char *key)
{
    if (e->truncated)
        return;
    char near[512];
    if (nearest_keys(schemas, n_schemas, key, near, sizeof near))
        kb_config_errors_add(e, "--set: unknown key '%s' (nearest: %s)", key, near);
    else
        kb_config_errors_add(e, "--set: unknown key '%s' (out of memory finding the nearest)",
                             key);
}

static bool set_is_section(struct kb_config_errors *e, const struct kb_config_key *k,
                           const char *key)
{
    if (k->type != KB_CONFIG_T_MAP && k->type != KB_CONFIG_T_DICT)
        return false;
    kb_config_errors_add(e, "--set: '%s' is a section, not a value; set one of its keys", key);
    return true;
}

void kb_config_apply_sets(struct kb_config *c, struct kb_config_node *root,
                          const struct kb_config_key *schema, const char *const *sets,
                          size_t n_sets, bool foreign_ok)
{
    for (size_t i = 0; i < n_sets; i++) {
        char key[256];
        const char *value;
        if (!split_set(sets[i], key, sizeof key, &value)) {
            kb_config_errors_add(c->errors, "--set: expected KEY=VALUE, got '%s'", sets[i]);
            continue;
        }
        if (foreign_ok && !owns_root(schema, key))
            continue;
        const struct kb_config_key *k = kb_config_schema_find(schema, key);
        if (!k) {
            report_unknown_set(c->errors, &schema, 1, key);
            continue;
        }
        if (set_is_section(c->errors, k, key) || !root || root->kind != KB_CONFIG_MAP)
            continue;
        /* a YAML file's plain value is trimmed, a --set value is taken as
         * written: "--set ccl.algorithm='ring '" would be the name "ring "
         * and a number "4 " not a number; said rather than guessed */
        size_t vn = strlen(value);
        if (vn && (isspace((unsigned char)value[0]) || isspace((unsigned char)value[vn - 1]))) {
            kb_config_errors_add(c->errors,
                                 "--set %s: the value '%s' %s with white space (remove it)", key,
                                 value, isspace((unsigned char)value[0]) ? "starts" : "ends");
            continue;
        }
        /* the value's "file" names the override, so a bad value reads
         * "--set sips.count: expected an integer for 'count', got 'x'" */
        char label[300];
        snprintf(label, sizeof label, "--set %s", key);
        const char *file = kb_config_strdup(c, label, strlen(label));
        struct kb_config_node *map = root;
        char *part = key;
        for (char *dot; file && map && (dot = strchr(part, '.')); part = dot + 1) {
            *dot = 0;
            struct kb_config_node *next = kb_config_get(map, part);
            if (!next || next->kind != KB_CONFIG_MAP) {
                next = kb_config_new_node(c, KB_CONFIG_MAP, file, 0, 0);
                kb_config_map_set(c, map, part, next);
            }
            map = next;
        }
        struct kb_config_node *v =
            file && map ? kb_config_new_node(c, KB_CONFIG_SCALAR, file, 0, 0) : NULL;
        if (v && (v->text = kb_config_strdup(c, value, strlen(value))))
            kb_config_map_set(c, map, part, v);
        if (c->nomem)
            return; /* "out of memory" is in the errors */
    }
}

void kb_config_check_sets(struct kb_config_errors *errors,
                          const struct kb_config_key *const *schemas, size_t n_schemas,
                          const char *const *sets, size_t n_sets)
{
    for (size_t i = 0; i < n_sets; i++) {
        char key[256];
        const char *value;
        if (!split_set(sets[i], key, sizeof key, &value))
            continue; /* kb_config_apply_sets reports the form */
        bool owned = false;
        for (size_t s = 0; s < n_schemas; s++)
            owned |= owns_root(schemas[s], key);
        if (!owned)
            report_unknown_set(errors, schemas, n_schemas, key);
    }
}

/* ---- loading --------------------------------------------------------- */

struct kb_config_node *kb_config_load(struct kb_config *c, const struct kb_config_key *schema,
                                      const struct kb_config_src *src)
{
    struct kb_config_node *root = NULL;
    if (src->defaults_path)
        root = kb_config_parse_file(c, src->defaults_path);
    struct kb_config_node *user = NULL;
    if (src->user_path)
        user = kb_config_parse_file(c, src->user_path);
    else if (src->user_text)
        user = kb_config_parse_string(c, src->user_name ? src->user_name : "<string>",
                                      src->user_text, strlen(src->user_text));
    /* A user file that is not a map would replace the whole defaults tree
     * and hide every other message behind one. */
    if (user && user->kind != KB_CONFIG_MAP) {
        kb_config_expect_map(c, user, "the top level");
        user = NULL;
    }
    root = kb_config_merge(c, root, user);
    if (!root && src->n_sets)
        root = kb_config_new_node(c, KB_CONFIG_MAP, "--set", 0, 0);
    kb_config_apply_sets(c, root, schema, src->sets, src->n_sets, src->sets_foreign_ok);
    return root;
}
