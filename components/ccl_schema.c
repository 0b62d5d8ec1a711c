/* ccl_schema.c — the schema of ccl.yaml: default algorithm, message size,
 * IPCQ buffer kind and backpressure, per-algorithm overrides */
#include "ccl_schema.h"

#include <stddef.h>
#include <string.h>

#include "topology_schema.h"

const char *const kb_ccl_dtype_names[] = {"f16", "bf16", "f32", NULL};

#define F(field) offsetof(struct kb_ccl_cfg, field)

/* Offsets here are within struct kb_ccl_algo_cfg: each entry is applied to
 * its own element of cfg->algorithms. */
static const struct kb_config_key algo_keys[] = {
    {"world_size", KB_CONFIG_T_INT, KB_CONFIG_F_OPTIONAL | KB_CONFIG_F_MIN | KB_CONFIG_F_MAX, 1,
     KB_TOPO_MAX_PES, NULL, NULL,
     offsetof(struct kb_ccl_algo_cfg, world_size), "PEs taking part (default: all)"},
    {0},
};
static const struct kb_config_key ccl_keys[] = {
    {"algorithm", KB_CONFIG_T_STRING, 0, 0, 0, NULL, NULL, F(algorithm),
     "default all-reduce algorithm (a file in lua/kbsim/ccl/)"},
    {"n_elem", KB_CONFIG_T_INT, KB_CONFIG_F_MIN | KB_CONFIG_F_MAX, 1, 1 << 30, NULL, NULL,
     F(n_elem), "elements per PE"},
    {"dtype", KB_CONFIG_T_ENUM, 0, 0, 0, kb_ccl_dtype_names, NULL, F(dtype), "element type"},
    {"buffer_kind", KB_CONFIG_T_ENUM, 0, 0, 0, kb_topo_buffer_kind_names, NULL, F(buffer_kind),
     "memory of the IPCQ slots used by collectives"},
    {"backpressure", KB_CONFIG_T_ENUM, 0, 0, 0, kb_topo_backpressure_names, NULL,
     F(backpressure), "a sender without credit sleeps or polls"},
    {"algorithms", KB_CONFIG_T_DICT, KB_CONFIG_F_OPTIONAL, 0, 0, NULL, algo_keys, 0,
     "per-algorithm settings, by algorithm name"},
    {0},
};
static const struct kb_config_key root_keys[] = {
    {"ccl", KB_CONFIG_T_MAP, 0, 0, 0, NULL, ccl_keys, 0, "collective communication"},
    {0},
};

const struct kb_config_key *kb_ccl_schema(void)
{
    return root_keys;
}

int kb_ccl_cfg_from_tree(struct kb_config *c, const struct kb_config_node *root,
                         struct kb_ccl_cfg *cfg)
{
    size_t before = c->errors->n;
    memset(cfg, 0, sizeof *cfg);
    if (!root)
        return -1;
    kb_config_schema_apply(c, root_keys, root, "", cfg);
    const struct kb_config_node *algos = kb_config_lookup(root, "ccl.algorithms");
    if (algos && algos->kind == KB_CONFIG_MAP) {
        for (size_t i = 0; i < algos->n; i++) {
            const struct kb_config_node *e = algos->kids[i];
            if (cfg->n_algorithms == KB_CCL_MAX_ALGORITHMS) {
                kb_config_error_loc(c, e->file, e->key_line, e->key_col,
                                    "too many algorithm entries (at most %d)",
                                    KB_CCL_MAX_ALGORITHMS);
                break;
            }
            if (strlen(e->key) >= KB_CONFIG_STR_MAX) {
                kb_config_error_loc(c, e->file, e->key_line, e->key_col,
                                    "algorithm name too long: '%.20s...'", e->key);
                continue;
            }
            if (e->kind != KB_CONFIG_MAP)
                continue; /* reported by the schema */
            struct kb_ccl_algo_cfg *a = &cfg->algorithms[cfg->n_algorithms++];
            snprintf(a->name.text, sizeof a->name.text, "%s", e->key);
            snprintf(a->name.where, sizeof a->name.where, "%s:%d:%d", e->file, e->key_line,
                     e->key_col);
            char path[128];
            snprintf(path, sizeof path, "ccl.algorithms.%s", e->key);
            kb_config_schema_apply(c, algo_keys, e, path, a);
        }
    }
    return c->errors->n == before ? 0 : -1;
}

int kb_ccl_cfg_load(struct kb_ccl_cfg *cfg, const struct kb_config_src *src,
                    struct kb_config_errors *errors)
{
    struct kb_config c;
    kb_config_init(&c, errors);
    size_t before = errors->n;
    struct kb_config_node *root = kb_config_load(&c, root_keys, src);
    kb_ccl_cfg_from_tree(&c, root, cfg);
    kb_config_release(&c);
    return errors->n == before ? 0 : -1;
}

int kb_ccl_world_size(const struct kb_ccl_cfg *cfg, const char *algorithm, int fallback)
{
    for (size_t i = 0; i < cfg->n_algorithms; i++)
        if (strcmp(cfg->algorithms[i].name.text, algorithm) == 0)
            return cfg->algorithms[i].world_size ? cfg->algorithms[i].world_size : fallback;
    return fallback;
}
