/* config.h — strict YAML reader: a tree of located nodes and a list of errors
 *
 * A YAML file or string is read with libyaml's event parser into a tree of
 * map / sequence / scalar nodes, each carrying the file, line and column
 * (1-based) it came from, so every later complaint can name its place.
 * The reader refuses what a configuration should never contain: duplicate
 * keys, anchors, aliases, tags, several documents, nesting deeper than a
 * limit, files larger than a limit. It does not stop at the first problem:
 * every error goes to a list of "file:line:col: problem" strings.
 *
 * Scalars stay text until a conversion helper reads them, strictly:
 * integers are decimal, booleans are exactly true or false, a quoted scalar
 * is always a string. Byte sizes (kb_config_to_bytes) also take the binary
 * suffixes KiB, MiB, GiB, TiB; decimal suffixes (MB, GB) are rejected as
 * ambiguous. */
#ifndef KBSIM_CONFIG_H
#define KBSIM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KB_CONFIG_MAX_DEPTH 64
#define KB_CONFIG_MAX_BYTES ((size_t)4 << 20)
/* Past this many errors the list says so and stops growing: a fuzzed or
 * wildly wrong file should not produce megabytes of messages. */
#define KB_CONFIG_MAX_ERRORS 100

/* The errors of one load, in the order found. */
struct kb_config_errors {
    char **msgs;
    size_t n, cap;
    bool truncated;
};

void kb_config_errors_init(struct kb_config_errors *e);
void kb_config_errors_release(struct kb_config_errors *e);
/* Append one message (printf format, no trailing newline). */
void kb_config_errors_add(struct kb_config_errors *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Print every message, one a line. */
void kb_config_errors_print(const struct kb_config_errors *e, FILE *out);

enum kb_config_kind { KB_CONFIG_MAP, KB_CONFIG_SEQ, KB_CONFIG_SCALAR };

struct kb_config_node {
    enum kb_config_kind kind;
    const char *file; /* owned by the struct kb_config that made the node */
    int line, col;    /* 1-based; line 0 for a value from --set */
    /* As a member of a map: its key and where the key was written. */
    const char *key;
    int key_line, key_col;
    /* Scalar: its text; quoted scalars never read as numbers or booleans. */
    const char *text;
    bool quoted;
    /* Map members (each with .key) or sequence items. */
    struct kb_config_node **kids;
    size_t n, cap;
    struct kb_config_node *next_alloc; /* every node of a kb_config, to free */
};

/* The context of one load: owns every node, string and file name it
 * produced, so trees of several files may be merged freely. */
struct kb_config {
    struct kb_config_errors *errors; /* where problems go; not owned */
    int max_depth;                   /* KB_CONFIG_MAX_DEPTH by default */
    size_t max_bytes;                /* KB_CONFIG_MAX_BYTES by default */
    struct kb_config_node *nodes;
    char **strings;
    size_t n_strings, cap_strings;
    /* An allocation failed: "out of memory (...)" is in the error list
     * (once), and a parse in progress stops with NULL. */
    bool nomem;
};

void kb_config_init(struct kb_config *c, struct kb_config_errors *errors);
void kb_config_release(struct kb_config *c);

/* Read a file / a string. The result is the document's root (an empty map
 * for an empty document), or NULL when the text could not be read into a
 * tree. Problems are added to c->errors either way; a tree may come back
 * with errors (duplicate keys, anchors...) recorded, so callers check the
 * error count, not only the pointer. */
struct kb_config_node *kb_config_parse_file(struct kb_config *c, const char *path);
struct kb_config_node *kb_config_parse_string(struct kb_config *c, const char *name,
                                              const char *text, size_t len);

/* Add an error located at a node ("file:line:col: ...", or "file: ..." for a
 * node without a line), or at an explicit place. */
void kb_config_error_at(struct kb_config *c, const struct kb_config_node *n,
                        const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void kb_config_error_loc(struct kb_config *c, const char *file, int line, int col,
                         const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* " for 'KEY'" for a message about node n's value, or "" when n's place
 * names the key already: a Lua table's path ("sips.count: expected an
 * integer, got ...") or a --set ("--set sips.count: ..."), which have no
 * line; a file's "f.yaml:3:9: expected an integer for 'count'" keeps it.
 * Uses buf (size bytes). */
const char *kb_config_for_key(const struct kb_config_node *n, const char *key, char *buf,
                              size_t size);
/* Whether a place without a line (a table's path, "--set PATH") ends with
 * the key, so that a message there need not repeat it. */
bool kb_config_place_names(const char *file, int line, const char *key);

/* A map member by key, or NULL. */
struct kb_config_node *kb_config_get(const struct kb_config_node *map, const char *key);
/* A node by dotted path from a map ("cube.noc.bandwidth_gbps"), or NULL. */
struct kb_config_node *kb_config_lookup(const struct kb_config_node *root, const char *path);

/* Lay `over` onto `base`: maps merge key by key (recursively), anything
 * else in `over` replaces what `base` had. Returns the merged tree (base,
 * changed in place, or over when the kinds differ). */
struct kb_config_node *kb_config_merge(struct kb_config *c, struct kb_config_node *base,
                                       struct kb_config_node *over);

/* Node construction, for overrides made by code (--set). Out of memory,
 * they return NULL with c->nomem set and the error recorded;
 * kb_config_map_set then does nothing (a NULL map or value is ignored). */
struct kb_config_node *kb_config_new_node(struct kb_config *c, enum kb_config_kind kind,
                                          const char *file, int line, int col);
const char *kb_config_strdup(struct kb_config *c, const char *s, size_t len);
/* Put `value` under `key` in a map, replacing an existing member. */
void kb_config_map_set(struct kb_config *c, struct kb_config_node *map, const char *key,
                       struct kb_config_node *value);
/* Append `item` to a sequence; false when out of memory or item is NULL. */
bool kb_config_seq_append(struct kb_config *c, struct kb_config_node *seq,
                          struct kb_config_node *item);

/* Strict scalar readers. `what` names the value in messages (the key).
 * On a bad value they add "file:line:col: expected ... for 'what', got '...'"
 * and return false, leaving *out unchanged. */
bool kb_config_to_int(struct kb_config *c, const struct kb_config_node *n, const char *what,
                      int64_t *out);
bool kb_config_to_bytes(struct kb_config *c, const struct kb_config_node *n, const char *what,
                        uint64_t *out);
bool kb_config_to_double(struct kb_config *c, const struct kb_config_node *n, const char *what,
                         double *out);
bool kb_config_to_bool(struct kb_config *c, const struct kb_config_node *n, const char *what,
                       bool *out);
/* A mapping, or "expected a mapping for 'what', got ..." and false. */
bool kb_config_expect_map(struct kb_config *c, const struct kb_config_node *n, const char *what);
bool kb_config_to_string(struct kb_config *c, const struct kb_config_node *n, const char *what,
                         const char **out);

/* Optimal-string-alignment edit distance (a swap of neighbours costs 1),
 * for "did you mean" suggestions. */
int kb_config_edit_distance(const char *a, const char *b);

#endif
