/* ccl_schema.h — the collective defaults of ccl.yaml as a plain C struct
 *
 * Algorithm names are kept as strings with the place they were written:
 * the Lua side knows which algorithms exist and reports an unknown one at
 * that place. Keys and defaults: docs/topology.md, configs/ccl.yaml. */
#ifndef KBSIM_CCL_SCHEMA_H
#define KBSIM_CCL_SCHEMA_H

#include "config_schema.h"

enum kb_ccl_dtype { KB_CCL_F16, KB_CCL_BF16, KB_CCL_F32 };
extern const char *const kb_ccl_dtype_names[]; /* indexed by the enum */

#define KB_CCL_MAX_ALGORITHMS 32

/* Settings of one algorithm, under ccl.algorithms.<name>. */
struct kb_ccl_algo_cfg {
    struct kb_config_str name;
    int world_size; /* 0: every PE of the system */
};

struct kb_ccl_cfg {
    struct kb_config_str algorithm; /* the default collective algorithm */
    int n_elem;                     /* elements per PE */
    int dtype;                      /* enum kb_ccl_dtype */
    int buffer_kind;                /* enum kb_topo_buffer_kind: IPCQ slot memory */
    int backpressure;               /* enum kb_topo_backpressure */
    size_t n_algorithms;
    struct kb_ccl_algo_cfg algorithms[KB_CCL_MAX_ALGORITHMS];
};

const struct kb_config_key *kb_ccl_schema(void);

/* Load defaults + user file + --set overrides. Returns 0, or -1 with every
 * problem in `errors`. */
int kb_ccl_cfg_load(struct kb_ccl_cfg *cfg, const struct kb_config_src *src,
                    struct kb_config_errors *errors);

/* Validate a built tree (from a Lua table) into *cfg; problems go to
 * c->errors. Returns 0 or -1. */
int kb_ccl_cfg_from_tree(struct kb_config *c, const struct kb_config_node *root,
                         struct kb_ccl_cfg *cfg);

/* The world size for `algorithm`: its entry's override, else `fallback`. */
int kb_ccl_world_size(const struct kb_ccl_cfg *cfg, const char *algorithm, int fallback);

#endif
