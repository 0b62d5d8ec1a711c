/* config_schema.h — declarative configuration schemas: key tables with
 * type and range, validation into plain C structs, --set overrides, and
 * merging a user file over the defaults file
 *
 * A schema is a table of struct kb_config_key ending with an all-zero
 * entry. Every value lands in a field of the caller's struct at `offset`.
 * Defaults are not in the table: they live in the configs/ YAML files (one place,
 * documented), and a key that is not optional must be present once the
 * user's file is laid over the defaults file. */
#ifndef KBSIM_CONFIG_SCHEMA_H
#define KBSIM_CONFIG_SCHEMA_H

#include "config.h"

enum kb_config_type {
    KB_CONFIG_T_INT,    /* int */
    KB_CONFIG_T_BYTES,  /* uint64_t; takes B, KiB, MiB, GiB, TiB */
    KB_CONFIG_T_FLOAT,  /* double */
    KB_CONFIG_T_BOOL,   /* bool */
    KB_CONFIG_T_STRING, /* struct kb_config_str */
    KB_CONFIG_T_ENUM,   /* int: the index of the value in `choices` */
    KB_CONFIG_T_MAP,    /* a nested table `sub`; no field of its own */
    KB_CONFIG_T_DICT,   /* free names, each a map checked against `sub`;
                           kb_config_schema_apply checks the shape only,
                           the owner reads the entries (see ccl_schema.c) */
};

enum {
    KB_CONFIG_F_MIN = 1 << 0,      /* value >= min */
    KB_CONFIG_F_GT_MIN = 1 << 1,   /* value > min (bandwidths, clocks) */
    KB_CONFIG_F_MAX = 1 << 2,      /* value <= max */
    KB_CONFIG_F_OPTIONAL = 1 << 3, /* may be absent: the field stays 0 */
    KB_CONFIG_F_POW2 = 1 << 4,     /* a power of two (address bit fields) */
};

/* The ranges every schema draws from (docs/topology.md, "Ranges"). They
 * keep each value physical and each derived time inside the simulated
 * time of the engine (ps in 64 bits, about 9.2e15 ns): a time key is at
 * most 1 s; a bandwidth 1 MB/s ... 1 PB/s; a byte size at most 1 TiB, so
 * that moving any size at any bandwidth takes at most 1.1e15 ns; a clock
 * 1 MHz ... 1 THz (a cycle is 1 ps to 1 us). */
#define KB_CONFIG_MAX_NS 1e9
#define KB_CONFIG_MIN_GBPS 1e-3
#define KB_CONFIG_MAX_GBPS 1e6
#define KB_CONFIG_MAX_SIZE ((double)((uint64_t)1 << 40))
#define KB_CONFIG_MIN_GHZ 1e-3
#define KB_CONFIG_MAX_GHZ 1e3

struct kb_config_key {
    const char *name;
    enum kb_config_type type;
    unsigned flags;
    double min, max;
    const char *const *choices;      /* ENUM: NULL-terminated */
    const struct kb_config_key *sub; /* MAP, DICT */
    size_t offset;                   /* of the field in the output struct */
    const char *doc;                 /* one line: meaning and unit */
};

/* A string value and where it was written, for messages raised later
 * (for example by the Lua side, which knows the algorithm names). */
#define KB_CONFIG_STR_MAX 64
struct kb_config_str {
    char text[KB_CONFIG_STR_MAX];
    char where[192]; /* "file:line:col" */
};

/* Where one configuration comes from. */
struct kb_config_src {
    const char *defaults_path; /* configs/<name>.yaml; NULL: none */
    const char *user_path;     /* a user file laid over it; NULL: none */
    const char *user_name;     /* or a user text with this name in messages */
    const char *user_text;
    const char *const *sets; /* "a.b.c=VALUE" overrides, applied last */
    size_t n_sets;
    /* When several configurations share one --set list: skip a key whose
     * first part is not in this schema, instead of calling it unknown
     * (then check the list once with kb_config_check_sets). */
    bool sets_foreign_ok;
};

/* Read defaults, lay the user file over them, apply the --set overrides.
 * Returns the merged tree (owned by c), NULL when nothing could be read.
 * Problems go to c->errors. */
struct kb_config_node *kb_config_load(struct kb_config *c, const struct kb_config_key *schema,
                                      const struct kb_config_src *src);

/* Check `map` against `table` and fill `out`: unknown keys (with a "did you
 * mean"), missing keys, types, ranges, enum values. `prefix` is the dotted
 * path of `map` for messages ("" at the top). Returns true when no error
 * was found. */
bool kb_config_schema_apply(struct kb_config *c, const struct kb_config_key *table,
                            const struct kb_config_node *map, const char *prefix, void *out);

/* Apply "a.b.c=VALUE" overrides to a tree, each checked against the
 * schema: "--set: unknown key 'sips.cuont' (nearest: sips.count)". */
void kb_config_apply_sets(struct kb_config *c, struct kb_config_node *root,
                          const struct kb_config_key *schema, const char *const *sets,
                          size_t n_sets, bool foreign_ok);

/* Report every --set whose key is known to none of the schemas (the CLI's
 * check when one --set list feeds several configurations). */
void kb_config_check_sets(struct kb_config_errors *errors,
                          const struct kb_config_key *const *schemas, size_t n_schemas,
                          const char *const *sets, size_t n_sets);

/* The key at a dotted path ("cube.noc.bandwidth_gbps"), or NULL; a DICT
 * takes any name in its place. */
const struct kb_config_key *kb_config_schema_find(const struct kb_config_key *schema,
                                                  const char *path);

#endif
