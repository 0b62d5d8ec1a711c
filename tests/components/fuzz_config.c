/* fuzz_config.c — libFuzzer target for the YAML configuration reader: the
 * input is a user topology.yaml / ccl.yaml laid over the defaults, or a
 * list of --set overrides. Any crash, leak or sanitizer report is a bug;
 * configuration errors are the expected outcome. */
#include <stdlib.h>
#include <string.h>

#include "ccl_schema.h"
#include "topology_schema.h"

#define TOPO_DEFAULTS KBSIM_SOURCE_DIR "/configs/topology.yaml"
#define CCL_DEFAULTS KBSIM_SOURCE_DIR "/configs/ccl.yaml"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0] % 4;
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;

    struct kb_config_errors errs;
    kb_config_errors_init(&errs);
    struct kb_config_src src = {.user_name = "fuzz.yaml"};
    struct kb_topology_cfg topo;
    struct kb_ccl_cfg ccl;
    switch (mode) {
    case 0:
        src.defaults_path = TOPO_DEFAULTS;
        src.user_text = text;
        kb_topo_cfg_load(&topo, &src, &errs);
        break;
    case 1:
        src.defaults_path = CCL_DEFAULTS;
        src.user_text = text;
        kb_ccl_cfg_load(&ccl, &src, &errs);
        break;
    case 2: {
        /* one --set a line */
        const char *sets[4];
        size_t n = 0;
        for (char *line = text, *nl; line && n < 4; line = nl) {
            nl = strchr(line, '\n');
            if (nl)
                *nl++ = 0;
            sets[n++] = line;
        }
        src.defaults_path = TOPO_DEFAULTS;
        src.sets = sets;
        src.n_sets = n;
        kb_topo_cfg_load(&topo, &src, &errs);
        break;
    }
    default: {
        /* the bare reader, with small limits so they are reached */
        struct kb_config c;
        kb_config_init(&c, &errs);
        c.max_depth = 8;
        c.max_bytes = 1024;
        kb_config_parse_string(&c, "fuzz.yaml", (const char *)data + 1, size - 1);
        kb_config_release(&c);
        break;
    }
    }
    /* every message must be a located, printable line */
    for (size_t i = 0; i < errs.n; i++)
        if (!errs.msgs[i][0] || strchr(errs.msgs[i], '\n'))
            abort();
    kb_config_errors_release(&errs);
    free(text);
    return 0;
}
