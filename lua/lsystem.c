/* lsystem.c — Lua binding of systems: kb.system(sim, spec, opts) and the
 * kbsim.system type (counts, PEs, neighbours, routed paths, transfers);
 * kb.ccl_config(spec), the reader of ccl.yaml; the command line's
 * configuration check
 *
 * A spec is nil (configs/topology.yaml, the --topology file, --set), the
 * path of a YAML file (a topology laid over the defaults, or a graph), or
 * a Lua table mirroring either. A table becomes a configuration tree whose
 * nodes are located at the calling script's "file:line" plus their table
 * path ("sips.count", "links[3].to"), so the schema's messages name both.
 * --set overrides apply last to every form (a graph's PE keys too).
 *
 * The system lives as long as its simulation (it is anchored there): its
 * links are processes of that simulation. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>

#include "ccl_schema.h"
#include "graph_topology.h"
#include "lkb_internal.h"
#include "system.h"
#include "topology_schema.h"

#define KB_SYSTEM "kbsim.system"
#define TOPO_DEFAULTS KBSIM_CONFIG_DIR "/topology.yaml"
#define CCL_DEFAULTS KBSIM_CONFIG_DIR "/ccl.yaml"

struct lsys {
    struct kb_system *sys; /* NULL once closed */
    struct kb_system *parked; /* closed while its simulation was open */
};

/* ---- Lua table -> configuration tree ------------------------------------ */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The shortest text that reads back as v (1e+300, not
 * 1.0000000000000001e+300), as a message shows it. */
static void shortest_double(char *buf, size_t len, double v)
{
    if (isnan(v)) { /* not "-nan", as printf may write it */
        snprintf(buf, len, "nan");
        return;
    }
    for (int digits = 15; digits < 17; digits++) {
        snprintf(buf, len, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            return;
    }
    snprintf(buf, len, "%.17g", v);
}

/* The value at idx as a node located at "where: path". Tables with keys
 * 1..n only are sequences, others maps with string keys (read in sorted
 * order, so messages come in a stable order); an empty table is a map.
 * NULL when out of memory (c->nomem, the error recorded). */
static struct kb_config_node *from_lua(lua_State *L, struct kb_config *c, int idx,
                                       const char *where, const char *path, int depth)
{
    idx = lua_absindex(L, idx);
    char buf[512];
    size_t pl = strlen(path);
    if (pl > 120) /* a cycle's path: its ends, so that the message fits */
        snprintf(buf, sizeof buf, "%s: %.50s ... %s", where, path, path + pl - 50);
    else
        snprintf(buf, sizeof buf, "%s: %s", where, *path ? path : "the table");
    const char *file = kb_config_strdup(c, buf, strlen(buf));
    if (!file)
        return NULL;
    int t = lua_type(L, idx);
    if (t == LUA_TTABLE) {
        if (depth >= KB_CONFIG_MAX_DEPTH) {
            kb_config_error_loc(c, file, 0, 0, "nested deeper than %d levels (a cycle?)",
                                KB_CONFIG_MAX_DEPTH);
            return kb_config_new_node(c, KB_CONFIG_MAP, file, 0, 0);
        }
        luaL_checkstack(L, 4, "configuration table");
        lua_Integer len = (lua_Integer)lua_rawlen(L, idx), count = 0;
        bool all_ints = true;
        for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
            count++;
            all_ints &= lua_isinteger(L, -2) != 0;
        }
        char sub[512];
        if (count > 0 && all_ints && count == len) {
            struct kb_config_node *seq = kb_config_new_node(c, KB_CONFIG_SEQ, file, 0, 0);
            for (lua_Integer i = 1; seq && i <= len; i++) {
                lua_rawgeti(L, idx, i);
                snprintf(sub, sizeof sub, "%s[%lld]", path, (long long)i);
                bool ok = kb_config_seq_append(c, seq, from_lua(L, c, -1, where, sub, depth + 1));
                lua_pop(L, 1);
                if (!ok)
                    return NULL;
            }
            return seq;
        }
        struct kb_config_node *map = kb_config_new_node(c, KB_CONFIG_MAP, file, 0, 0);
        if (!map)
            return NULL;
        const char **keys = calloc((size_t)count + 1, sizeof *keys);
        size_t n = 0;
        if (!keys) {
            kb_config_errors_add(c->errors, "%s: out of memory", file);
            c->nomem = true;
            return NULL;
        }
        for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING) {
                kb_config_error_loc(c, file, 0, 0, "a key of type %s (names are strings)",
                                    luaL_typename(L, -2));
                continue;
            }
            size_t kl;
            const char *k = lua_tolstring(L, -2, &kl);
            if (!(keys[n++] = kb_config_strdup(c, k, kl))) {
                lua_pop(L, 2);
                free(keys);
                return NULL;
            }
        }
        qsort(keys, n, sizeof *keys, cmp_str);
        for (size_t i = 0; i < n; i++) {
            lua_getfield(L, idx, keys[i]);
            snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", keys[i]);
            kb_config_map_set(c, map, keys[i], from_lua(L, c, -1, where, sub, depth + 1));
            lua_pop(L, 1);
        }
        free(keys);
        return c->nomem ? NULL : map;
    }
    struct kb_config_node *s = kb_config_new_node(c, KB_CONFIG_SCALAR, file, 0, 0);
    if (!s)
        return NULL;
    switch (t) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            snprintf(buf, sizeof buf, "%lld", (long long)lua_tointeger(L, idx));
        else
            shortest_double(buf, sizeof buf, (double)lua_tonumber(L, idx));
        s->text = kb_config_strdup(c, buf, strlen(buf));
        if (!s->text)
            return NULL;
        break;
    case LUA_TBOOLEAN:
        s->text = lua_toboolean(L, idx) ? "true" : "false";
        break;
    case LUA_TSTRING: {
        size_t len;
        const char *v = lua_tolstring(L, idx, &len);
        s->text = kb_config_strdup(c, v, len);
        if (!s->text)
            return NULL;
        s->quoted = true; /* "8" stays a string, as in YAML */
        break;
    }
    default:
        kb_config_error_loc(c, file, 0, 0, "a %s is not a configuration value",
                            luaL_typename(L, idx));
    }
    return s;
}

/* ---- building ------------------------------------------------------------ */

/* kb.options.set as "KEY=VALUE" strings, sorted (the options table is a
 * map); the strings live in a table left on the stack. */
static const char **option_sets(lua_State *L, size_t *n)
{
    lua_getfield(L, lua_upvalueindex(1), "options");
    lua_getfield(L, -1, "set");
    lua_remove(L, -2);
    lua_newtable(L); /* keeps the strings */
    *n = 0;
    if (lua_type(L, -2) == LUA_TTABLE)
        for (lua_pushnil(L); lua_next(L, -3); lua_pop(L, 1))
            if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING) {
                const char *k = lua_tostring(L, -2), *v = lua_tostring(L, -1);
                lua_pushfstring(L, "%s=%s", k, v);
                lua_rawseti(L, -4, (lua_Integer)++*n);
            }
    const char **v = lua_newuserdatauv(L, (*n + 1) * sizeof *v, 0);
    for (size_t i = 0; i < *n; i++) {
        lua_rawgeti(L, -2, (lua_Integer)i + 1);
        v[i] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    qsort(v, *n, sizeof *v, cmp_str);
    return v;
}

/* A system's configuration from the user's tree (NULL: none): a graph,
 * with its system keys over the topology defaults, or a topology laid over
 * them (over BASE first, a grid --topology file under a Lua table, when not
 * NULL); then --set. GRID: the checks of a grid's own (the VC classes its
 * routing needs) are made too. Returns 0 or -1 with the problems in
 * c->errors. */
static int system_cfg(struct kb_config *c, struct kb_config_node *base,
                      struct kb_config_node *user, bool grid,
                      const char *const *sets, size_t n_sets, struct kb_topology_cfg *topo,
                      struct kb_graph_cfg *graph, bool *is_graph)
{
    size_t before = c->errors->n;
    struct kb_config_node *root = kb_config_parse_file(c, TOPO_DEFAULTS);
    if (c->errors->n != before)
        return -1;
    *is_graph = kb_graph_tree_is_graph(user);
    if (*is_graph)
        return kb_graph_system_from_tree(c, root, user, sets, n_sets, topo, graph);
    if (user && user->kind != KB_CONFIG_MAP) {
        kb_config_expect_map(c, user, "the top level");
        return -1;
    }
    if (base)
        root = kb_config_merge(c, root, base);
    root = kb_config_merge(c, root, user);
    kb_config_apply_sets(c, root, kb_topo_schema(), sets, n_sets, true);
    int rt = grid ? kb_topo_cfg_from_tree(c, root, topo) : kb_topo_cfg_from_tree_graph(c, root, topo);
    return rt < 0 || c->errors->n != before ? -1 : 0;
}

/* Everything a build needs, freed in one place whatever happened. */
struct build {
    struct kb_config_errors errs;
    struct kb_config c;
    struct kb_topology_cfg topo;
    struct kb_graph_cfg graph;
    bool is_graph;
};

/* The --topology file (kb.options.topology) or NULL. */
static const char *option_topology(lua_State *L)
{
    lua_getfield(L, lua_upvalueindex(1), "options");
    lua_getfield(L, -1, "topology");
    const char *path = lua_tostring(L, -1); /* the options table keeps it */
    lua_pop(L, 2);
    return path;
}

/* Whether the file a script names (at where, calling what) can be read;
 * if not, an error said at the script's line (the file has no line to
 * name): missing, unreadable, or a folder. */
static bool file_readable(struct kb_config *c, const char *where, const char *what,
                          const char *path)
{
    struct stat st;
    bool folder = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    FILE *f = folder ? NULL : fopen(path, "r");
    if (!f) {
        kb_config_error_loc(c, where, 0, 0, "%s: cannot open '%s': %s", what, path,
                            folder ? "it is a folder" : strerror(errno));
        return false;
    }
    fclose(f);
    return true;
}

/* The YAML file a user named, parsed (NULL: the problems are in c's
 * errors): by a script's call `what` at `where`, or on the command line
 * (where NULL). A Lua file read as YAML would give a message about YAML
 * syntax that misleads, so it is refused with where a Lua table goes. */
static struct kb_config_node *parse_user_file(struct kb_config *c, const char *where,
                                              const char *what, const char *path)
{
    size_t pl = strlen(path);
    if (pl > 4 && strcmp(path + pl - 4, ".lua") == 0) {
        kb_config_error_loc(c, path, 0, 0,
                            "a Lua file, where a YAML file is read (a system described in Lua "
                            "is a table given to kb.system(sim, TABLE) in the script)");
        return NULL;
    }
    if (where && !file_readable(c, where, what, path))
        return NULL;
    struct kb_config_node *n = kb_config_parse_file(c, path);
    /* an empty file (or comments alone: one not saved, a failed copy) ran
     * the defaults as if it described them */
    if (n && n->kind == KB_CONFIG_MAP && n->n == 0) {
        kb_config_error_loc(c, path, 0, 0,
                            "no keys (an empty file?): a system file names what differs from "
                            "configs/topology.yaml; for the defaults give no file");
        return NULL;
    }
    return n;
}

/* Reads the spec at index `spec` (nil, path, table) into b. Returns 0 or
 * -1 with the problems in b->errs. A table is laid over the --topology
 * file when that is a grid topology, as the file is over the defaults. */
static int read_spec(lua_State *L, struct build *b, int spec, const char *where,
                     const char *const *sets, size_t n_sets)
{
    struct kb_config *c = &b->c;
    const char *path = NULL;
    bool named = lua_type(L, spec) == LUA_TSTRING; /* by the script, not --topology */
    if (lua_isnoneornil(L, spec))
        path = option_topology(L);
    else if (named)
        path = lua_tostring(L, spec);
    struct kb_config_node *user = NULL;
    if (path) {
        user = parse_user_file(c, named ? where : NULL, "kb.system", path);
        if (!user)
            return -1;
    } else if (lua_type(L, spec) == LUA_TTABLE) {
        user = from_lua(L, c, spec, where, "", 0);
        if (!user)
            return -1; /* out of memory, in the errors */
    }
    /* a table is laid over a grid --topology file, as the file is over the defaults */
    struct kb_config_node *base = NULL;
    const char *base_path = option_topology(L);
    if (lua_type(L, spec) == LUA_TTABLE && base_path) {
        base = parse_user_file(c, NULL, NULL, base_path);
        if (!base)
            return -1;
        if (kb_graph_tree_is_graph(base))
            base = NULL;
    }
    return system_cfg(c, base, user, true, sets, n_sets, &b->topo, &b->graph, &b->is_graph);
}

/* True for a chunk of the kbsim Lua library (lua/kbsim/). */
static bool library_chunk(const char *source)
{
    static const char lib[] = "@" KBSIM_LUA_DIR "/kbsim/";
    return strncmp(source, lib, sizeof lib - 1) == 0;
}

/* "file:line" of the innermost Lua function calling (through pcall and
 * other C functions, and past the kbsim library, so torch.init and
 * init_process_group name their caller), where the table was most likely
 * written. */
static void script_place(lua_State *L, char *buf, size_t len)
{
    lua_Debug ar;
    snprintf(buf, len, "kb.system");
    bool fallback = false;
    for (int level = 1; lua_getstack(L, level, &ar); level++) {
        if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0)
            continue;
        if (!library_chunk(ar.source)) {
            snprintf(buf, len, "%s:%d", ar.short_src, ar.currentline);
            return;
        }
        if (!fallback)
            snprintf(buf, len, "%s:%d", ar.short_src, ar.currentline);
        fallback = true;
    }
}

/* Pushes the messages of a failed read, one a line. */
static void push_errors(lua_State *L, const struct kb_config_errors *errs)
{
    luaL_Buffer msg;
    luaL_buffinit(L, &msg);
    for (size_t i = 0; i < errs->n; i++) {
        luaL_addstring(&msg, errs->msgs[i]);
        if (i + 1 < errs->n)
            luaL_addchar(&msg, '\n');
    }
    luaL_pushresult(&msg);
}


/* ---- kbsim --describe SCRIPT: every system a script makes -------------- */

/* Registry key of the list {{sys =, where =, text =, dot =, err =}, ...}
 * of the systems made while lkb_describe_begin is in force, in the order
 * made (strong references: a system is described before it is freed). */
static const char describe_key = 'd';

static void note_for_describe(lua_State *L, int sysidx, const char *where)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &describe_key) != LUA_TTABLE) {
        lua_pop(L, 1);
        return;
    }
    lua_createtable(L, 0, 4);
    lua_pushvalue(L, sysidx);
    lua_setfield(L, -2, "sys");
    lua_pushstring(L, where);
    lua_setfield(L, -2, "where");
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    lua_pop(L, 1);
}

static int sys_describe(lua_State *L);

/* Describes the system of entry `e` (a table at index e) once, while it is
 * open: its listing (ports, every PE's units made) in e.text, its Graphviz
 * graph in e.dot, or the failure in e.err. */
static void describe_entry(lua_State *L, int e)
{
    e = lua_absindex(L, e);
    bool done = lua_getfield(L, e, "text") != LUA_TNIL;
    done = lua_getfield(L, e, "err") != LUA_TNIL || done;
    lua_pop(L, 2);
    if (done)
        return;
    static const char *const fields[] = {"text", "dot"};
    for (int k = 0; k < 2; k++) {
        lua_pushcfunction(L, sys_describe);
        lua_getfield(L, e, "sys");
        lua_createtable(L, 0, 3);
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "ports");
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "units");
        lua_pushstring(L, k ? "dot" : "text");
        lua_setfield(L, -2, "format");
        if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
            lua_setfield(L, e, "err");
            return;
        }
        lua_setfield(L, e, fields[k]);
    }
}

/* Describes, among the systems --describe collects, those being closed:
 * the one at index i (by_sim false: a system; only one can match), or
 * every one whose simulation is the kbsim.sim at index i (by_sim true). */
static void describe_closing(lua_State *L, int i, bool by_sim)
{
    i = lua_absindex(L, i);
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &describe_key) != LUA_TTABLE) {
        lua_pop(L, 1);
        return;
    }
    int list = lua_gettop(L);
    lua_Integer n = (lua_Integer)lua_rawlen(L, list);
    for (lua_Integer k = 1; k <= n; k++) {
        lua_rawgeti(L, list, k);
        lua_getfield(L, -1, "sys");
        if (by_sim)
            lua_getiuservalue(L, -1, 1);
        bool same = lua_rawequal(L, -1, i);
        lua_pop(L, by_sim ? 2 : 1);
        if (same)
            describe_entry(L, -1);
        lua_pop(L, 1);
        if (same && !by_sim)
            break;
    }
    lua_pop(L, 1);
}

void lkb_describe_sim_closing(lua_State *L, int i)
{
    describe_closing(L, i, true);
}

void lkb_describe_begin(lua_State *L)
{
    lua_newtable(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &describe_key);
}

static int describe_end_l(lua_State *L)
{
    FILE *text = lua_touserdata(L, 1);
    const char *dot_file = lua_tostring(L, 2);
    int status = 0;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &describe_key) != LUA_TTABLE) {
        lua_pushinteger(L, 0);
        return 1;
    }
    int list = lua_gettop(L);
    lua_Integer n = (lua_Integer)lua_rawlen(L, list);
    if (n == 0) {
        fprintf(stderr, "kbsim: --describe: the script made no system (kb.system; those of kb.sweep "
                        "points are not listed)\n");
        status = 2;
    }
    for (lua_Integer k = 1; k <= n && status == 0; k++) {
        lua_rawgeti(L, list, k);
        int e = lua_gettop(L);
        describe_entry(L, e);
        lua_getfield(L, e, "where");
        const char *where = lua_tostring(L, -1);
        if (lua_getfield(L, e, "err") != LUA_TNIL) {
            fprintf(stderr, "kbsim: --describe: system %lld (made at %s): %s\n", (long long)k,
                    where, lua_tostring(L, -1));
            status = 2;
        } else if (text) {
            lua_getfield(L, e, "text");
            fprintf(text, "# system %lld of %lld, made at %s\n%s", (long long)k, (long long)n,
                    where, lua_tostring(L, -1));
            lua_pop(L, 1);
        }
        if (status == 0 && dot_file && k == 1) {
            lua_getfield(L, e, "dot");
            FILE *f = fopen(dot_file, "w");
            if (!f || fputs(lua_tostring(L, -1), f) < 0 || fclose(f) != 0) {
                fprintf(stderr, "kbsim: --describe-dot: %s: %s\n", dot_file, strerror(errno));
                status = 2;
            }
            if (n > 1 && status == 0)
                fprintf(stderr, "kbsim: --describe-dot drew system 1 of %lld (made at %s)\n",
                        (long long)n, where);
            lua_pop(L, 1);
        }
        lua_settop(L, list);
    }
    lua_pushnil(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &describe_key);
    lua_pushinteger(L, status);
    return 1;
}

int lkb_describe_end(lua_State *L, FILE *text, const char *dot_file)
{
    lua_pushcfunction(L, describe_end_l);
    lua_pushlightuserdata(L, text);
    if (dot_file)
        lua_pushstring(L, dot_file);
    else
        lua_pushnil(L);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
        fprintf(stderr, "kbsim: --describe: %s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
        return 2;
    }
    int status = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    return status;
}

/* kb.system(sim, spec, {timing_only = bool}) -> system */
static uint64_t memory_room(void);

/* What a grid system takes (~1.6 KiB a PE measured on 131,072 and 524,288
 * PEs; with some room). A system far larger than the memory the process
 * can have was made until an allocation failed, or the kernel's OOM
 * killer ended kbsim (or another process) first: refused at once. */
#define KB_SYSTEM_PE_BYTES (2u << 10)

static bool too_large(const struct kb_topology_cfg *cfg, char *err, size_t errsize)
{
    uint64_t pes = (uint64_t)cfg->sips.count * (uint64_t)cfg->sip.cube_mesh.w *
                   (uint64_t)cfg->sip.cube_mesh.h * (uint64_t)cfg->cube.corners *
                   (uint64_t)cfg->cube.pes_per_corner;
    uint64_t need = pes * KB_SYSTEM_PE_BYTES, room = memory_room();
    if (room == 0 || need <= room)
        return false;
    snprintf(err, errsize,
             "kb.system: %llu PEs need about %.1f GiB (~%u KiB a PE), more than the %.1f GiB "
             "this process can still have (available memory, cgroup limit, ulimit -v)",
             (unsigned long long)pes, (double)need / (1u << 30), KB_SYSTEM_PE_BYTES >> 10,
             (double)room / (1u << 30));
    return true;
}

static int l_system(lua_State *L)
{
    lkb_nocolon(L, "kb.system");
    struct sim *s = lkb_checksim(L, 1);
    lua_settop(L, 3); /* fixed places for spec and opts below what we push */
    int t = lua_type(L, 2);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TSTRING || t == LUA_TTABLE,
                     2, "nil, a file name or a table");
    struct kb_system_opts opts = {false};
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        static const char *const known[] = {"timing_only", NULL};
        lkb_check_keys(L, 3, "kb.system", known);
        lua_getfield(L, 3, "timing_only");
        opts.timing_only = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    char where[256];
    script_place(L, where, sizeof where);
    size_t n_sets;
    const char **sets = option_sets(L, &n_sets);

    struct lsys *h = lua_newuserdatauv(L, sizeof *h, 1);
    h->sys = h->parked = NULL;
    luaL_setmetatable(L, KB_SYSTEM);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);

    struct build *b = calloc(1, sizeof *b);
    if (!b)
        return luaL_error(L, "kb.system: out of memory");
    kb_config_errors_init(&b->errs);
    kb_config_init(&b->c, &b->errs);
    char err[512] = "";
    if (read_spec(L, b, 2, where, sets, n_sets) == 0 &&
        (b->is_graph || !too_large(&b->topo, err, sizeof err))) /* else refused: err */
        h->sys = b->is_graph ? kb_system_new_graph(s, &b->graph, &b->topo, &opts, err, sizeof err)
                             : kb_system_new(s, &b->topo, &opts, err, sizeof err);
    if (b->errs.n)
        push_errors(L, &b->errs);
    else
        lua_pushstring(L, err);
    kb_graph_cfg_release(&b->graph);
    kb_config_release(&b->c);
    kb_config_errors_release(&b->errs);
    free(b);
    if (!h->sys)
        return lua_error(L);
    lua_pop(L, 1);
    lkb_anchor(L, 1, -1);
    note_for_describe(L, lua_gettop(L), where);
    return 1;
}

/* ---- ccl.yaml ------------------------------------------------------------ */

/* The settings as a table {algorithm=, where=, n_elem=, dtype=,
 * buffer_kind=, backpressure=, algorithms={NAME={world_size=}}}. */
static void push_ccl(lua_State *L, const struct kb_ccl_cfg *cfg)
{
    lua_createtable(L, 0, 7);
    lua_pushstring(L, cfg->algorithm.text);
    lua_setfield(L, -2, "algorithm");
    lua_pushstring(L, cfg->algorithm.where);
    lua_setfield(L, -2, "where");
    lua_pushinteger(L, cfg->n_elem);
    lua_setfield(L, -2, "n_elem");
    lua_pushstring(L, kb_ccl_dtype_names[cfg->dtype]);
    lua_setfield(L, -2, "dtype");
    lua_pushstring(L, kb_topo_buffer_kind_names[cfg->buffer_kind]);
    lua_setfield(L, -2, "buffer_kind");
    lua_pushstring(L, kb_topo_backpressure_names[cfg->backpressure]);
    lua_setfield(L, -2, "backpressure");
    lua_createtable(L, 0, (int)cfg->n_algorithms);
    for (size_t i = 0; i < cfg->n_algorithms; i++) {
        lua_createtable(L, 0, 1);
        if (cfg->algorithms[i].world_size > 0) {
            lua_pushinteger(L, cfg->algorithms[i].world_size);
            lua_setfield(L, -2, "world_size");
        }
        lua_setfield(L, -2, cfg->algorithms[i].name.text);
    }
    lua_setfield(L, -2, "algorithms");
}

/* kb.ccl_config([spec]) -> settings: configs/ccl.yaml, the spec laid over
 * it (nil: nothing; a YAML file's path; a table mirroring the YAML, read
 * like kb.system's, its messages naming the calling script's line), then
 * --set. */
static int l_ccl_config(lua_State *L)
{
    lua_settop(L, 1);
    int t = lua_type(L, 1);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TSTRING || t == LUA_TTABLE, 1,
                     "nil, a file name or a table");
    char where[256];
    script_place(L, where, sizeof where);
    size_t n_sets;
    const char **sets = option_sets(L, &n_sets);
    struct kb_config_errors errs;
    struct kb_config c;
    kb_config_errors_init(&errs);
    kb_config_init(&c, &errs);
    struct kb_config_node *root = kb_config_parse_file(&c, CCL_DEFAULTS);
    struct kb_config_node *user = NULL;
    if (t == LUA_TSTRING)
        user = parse_user_file(&c, where, "kb.ccl_config", lua_tostring(L, 1));
    else if (t == LUA_TTABLE)
        user = from_lua(L, &c, 1, where, "", 0);
    if (user && user->kind != KB_CONFIG_MAP)
        kb_config_expect_map(&c, user, "the top level");
    struct kb_ccl_cfg *cfg = lua_newuserdatauv(L, sizeof *cfg, 0);
    if (!errs.n) {
        root = kb_config_merge(&c, root, user);
        kb_config_apply_sets(&c, root, kb_ccl_schema(), sets, n_sets, true);
        kb_ccl_cfg_from_tree(&c, root, cfg);
    }
    kb_config_release(&c);
    if (errs.n) {
        push_errors(L, &errs);
        kb_config_errors_release(&errs);
        return lua_error(L);
    }
    kb_config_errors_release(&errs);
    push_ccl(L, cfg);
    return 1;
}

/* ---- kbsim.system -------------------------------------------------------- */

static struct lsys *checksys(lua_State *L, int i)
{
    struct lsys *h = luaL_checkudata(L, i, KB_SYSTEM);
    if (!h->sys)
        luaL_error(L, "attempt to use a closed system");
    lua_getiuservalue(L, i, 1);
    lkb_checksim(L, -1);
    lua_pop(L, 1);
    return h;
}

struct kb_system *lkb_checksystem(lua_State *L, int i)
{
    return checksys(L, i)->sys;
}

struct kb_system *lkb_checksystem_known(lua_State *L, int i)
{
    struct lsys *h = lua_touserdata(L, i);
    if (!h->sys)
        luaL_error(L, "attempt to use a closed system");
    lua_getiuservalue(L, i, 1);
    lkb_checksim_known(L, -1);
    lua_pop(L, 1);
    return h->sys;
}

struct kb_system *const *lkb_system_open_slot(lua_State *L, int i)
{
    return &((struct lsys *)lua_touserdata(L, i))->sys;
}

static int checkrank(lua_State *L, struct lsys *h, int i)
{
    lua_Integer r = luaL_checkinteger(L, i);
    struct kb_system_counts n;
    kb_system_get_counts(h->sys, &n);
    if (r < 0 || r >= n.pes)
        luaL_argerror(L, i, lua_pushfstring(L, "no PE of rank %I (ranks 0..%d)", r, n.pes - 1));
    return (int)r;
}

/* A node given as a PE rank or a fabric node name. */
static int checknode(lua_State *L, struct lsys *h, int i)
{
    if (lua_type(L, i) == LUA_TSTRING) {
        const char *name = lua_tostring(L, i);
        int node = kb_fabric_find_node(kb_system_fabric(h->sys), name);
        if (node < 0)
            luaL_argerror(L, i, lua_pushfstring(L, "no node '%s'", name));
        return node;
    }
    return kb_system_pe(h->sys, checkrank(L, h, i))->node;
}

static void setint(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

/* sys:set_ipcq{buffer_kind=, backpressure=}: the IPCQ settings the PE
 * units are made with; only before any PE has them (or when they match) */
/* Field `key` of the table at index 2: one of names (an error naming the
 * key and the choices otherwise). */
static int ipcq_option(lua_State *L, const char *key, const char *const names[])
{
    lua_getfield(L, 2, key);
    const char *v = lua_tostring(L, -1);
    for (int i = 0; v && names[i]; i++)
        if (strcmp(v, names[i]) == 0) {
            lua_pop(L, 1);
            return i;
        }
    lkb_push_names(L, names);
    return luaL_error(L, "sys:set_ipcq: '%s' must be one of %s, got %s", key, lua_tostring(L, -1),
                      v ? v : luaL_typename(L, -2));
}

/* sys:set_ipcq{buffer_kind=, backpressure=}: both keys, nothing else */
static int sys_set_ipcq(lua_State *L)
{
    struct lsys *h = checksys(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    static const char *const known[] = {"buffer_kind", "backpressure", NULL};
    lkb_check_keys(L, 2, "sys:set_ipcq", known);
    int kind = ipcq_option(L, "buffer_kind", kb_topo_buffer_kind_names);
    int bp = ipcq_option(L, "backpressure", kb_topo_backpressure_names);
    if (kb_system_set_ipcq(h->sys, (enum kb_topo_buffer_kind)kind,
                           (enum kb_topo_backpressure)bp) < 0)
        return luaL_error(L, "%s", kb_system_errmsg(h->sys));
    return 0;
}

static int sys_counts(lua_State *L)
{
    struct lsys *h = checksys(L, 1);
    struct kb_system_counts n;
    kb_system_get_counts(h->sys, &n);
    lua_createtable(L, 0, 5);
    setint(L, "sips", n.sips);
    setint(L, "cubes", n.cubes);
    setint(L, "pes", n.pes);
    setint(L, "nodes", n.nodes);
    setint(L, "links", n.links);
    return 1;
}

/* sys:pe(rank) -> {rank, sip, cube, local_pe, name, hbm, sram} */
static int sys_pe(lua_State *L)
{
    struct lsys *h = checksys(L, 1);
    const struct kb_pe *pe = kb_system_pe(h->sys, checkrank(L, h, 2));
    struct kb_fabric *f = kb_system_fabric(h->sys);
    lua_createtable(L, 0, 7);
    setint(L, "rank", pe->rank);
    if (pe->sip >= 0) {
        setint(L, "sip", pe->sip);
        setint(L, "cube", pe->cube);
    }
    setint(L, "local_pe", pe->local_pe);
    lua_pushstring(L, pe->name);
    lua_setfield(L, -2, "name");
    if (pe->hbm_node >= 0) {
        lua_pushstring(L, kb_fabric_node_name(f, pe->hbm_node));
        lua_setfield(L, -2, "hbm");
    }
    if (pe->sram_node >= 0) {
        lua_pushstring(L, kb_fabric_node_name(f, pe->sram_node));
        lua_setfield(L, -2, "sram");
    }
    return 1;
}

/* sys:neighbor(rank, dir) -> rank or nil */
static int sys_neighbor(lua_State *L)
{
    struct lsys *h = checksys(L, 1);
    int rank = checkrank(L, h, 2);
    const char *dir = luaL_checkstring(L, 3);
    int d = kb_system_dir_parse(dir);
    if (d < 0)
        return luaL_argerror(L, 3, lua_pushfstring(L, "unknown direction '%s' (N, S, E, W, "
                                                      "global_N, global_S, global_E, global_W)",
                                                   dir));
    int r = kb_system_neighbor(h->sys, rank, (enum kb_system_dir)d);
    if (r < 0)
        lua_pushnil(L);
    else
        lua_pushinteger(L, r);
    return 1;
}

static uint64_t checkbytes(lua_State *L, int i)
{
    lua_Integer b = luaL_checkinteger(L, i);
    luaL_argcheck(L, b >= 0, i, "bytes must be >= 0");
    return (uint64_t)b;
}

static uint64_t checkaddr(lua_State *L, int i)
{
    lua_Integer a = luaL_checkinteger(L, i);
    luaL_argcheck(L, a >= 0, i, "an address must be >= 0");
    return (uint64_t)a;
}

/* path.latency_ns(bytes): upvalues system, source node, destination node */
static int path_latency(lua_State *L)
{
    struct lsys *h = checksys(L, lua_upvalueindex(1));
    int a = (int)lua_tointeger(L, lua_upvalueindex(2));
    int b = (int)lua_tointeger(L, lua_upvalueindex(3));
    sim_time t = kb_system_path_time(h->sys, a, b, checkbytes(L, 1));
    if (t == SIM_FOREVER)
        return luaL_error(L, "%s", kb_system_errmsg(h->sys));
    lua_pushnumber(L, (lua_Number)t / 1000.0);
    return 1;
}

/* sys:links() -> {{name, from, to, latency_ns, overhead_ns, bw_gbps,
 * messages, bytes}, ...}: the links the run has used so far (a link is
 * made on its first use), with their counters. Read only; for measuring
 * tools such as bench/lua/partition_stats.lua. */
static int sys_links(lua_State *L)
{
    struct lsys *h = checksys(L, 1);
    struct kb_fabric *f = kb_system_fabric(h->sys);
    int n = kb_fabric_link_count(f);
    lua_createtable(L, kb_fabric_links_made(f), 0);
    lua_Integer k = 0;
    for (int i = 0; i < n; i++) {
        /* kb_fabric_link would make the unused ones: ask for made links
         * only, through their counters */
        if (!kb_fabric_link_made(f, i))
            continue;
        struct kb_link *l = kb_fabric_link(f, i);
        struct kb_link_stats st;
        kb_link_get_stats(l, &st);
        const struct kb_link_params *p = kb_link_params(l);
        lua_createtable(L, 0, 8);
        lua_pushstring(L, kb_link_name(l));
        lua_setfield(L, -2, "name");
        lua_pushstring(L, kb_fabric_node_name(f, kb_fabric_link_src(f, i)));
        lua_setfield(L, -2, "from");
        lua_pushstring(L, kb_fabric_node_name(f, kb_fabric_link_dst(f, i)));
        lua_setfield(L, -2, "to");
        lua_pushnumber(L, p->latency_ns);
        lua_setfield(L, -2, "latency_ns");
        lua_pushnumber(L, p->overhead_ns);
        lua_setfield(L, -2, "overhead_ns");
        lua_pushnumber(L, p->bw_gbps);
        lua_setfield(L, -2, "bw_gbps");
        setint(L, "messages", (lua_Integer)st.messages);
        setint(L, "bytes", (lua_Integer)st.bytes);
        lua_rawseti(L, -2, ++k);
    }
    return 1;
}

/* sys:config(key) -> value, {type=, min=, max=, above=, doc=}: one
 * topology.yaml setting of the built system by its dotted key, and its
 * range (above = true: min itself is excluded) */
static int sys_config(lua_State *L)
{
    struct lsys *h = checksys(L, 1);
    const char *key = luaL_checkstring(L, 2);
    const struct kb_config_key *k = kb_config_schema_find(kb_topo_schema(), key);
    if (!k || k->type == KB_CONFIG_T_MAP || k->type == KB_CONFIG_T_DICT)
        return luaL_error(L, "sys:config: '%s' is not a key of topology.yaml (docs/topology.md)",
                          key);
    const char *base = (const char *)kb_system_config(h->sys);
    const char *field = base + k->offset;
    static const char *const types[] = {"integer", "bytes", "number", "boolean",
                                        "string", "choice", "map", "dict"};
    switch (k->type) {
    case KB_CONFIG_T_INT: {
        int v;
        memcpy(&v, field, sizeof v);
        lua_pushinteger(L, v);
        break;
    }
    case KB_CONFIG_T_BYTES: {
        uint64_t v;
        memcpy(&v, field, sizeof v);
        lua_pushinteger(L, (lua_Integer)v);
        break;
    }
    case KB_CONFIG_T_FLOAT: {
        double v;
        memcpy(&v, field, sizeof v);
        lua_pushnumber(L, v);
        break;
    }
    case KB_CONFIG_T_BOOL: {
        bool v;
        memcpy(&v, field, sizeof v);
        lua_pushboolean(L, v);
        break;
    }
    case KB_CONFIG_T_STRING:
        lua_pushstring(L, ((const struct kb_config_str *)(const void *)field)->text);
        break;
    case KB_CONFIG_T_ENUM: {
        int v;
        memcpy(&v, field, sizeof v);
        lua_pushstring(L, k->choices[v]);
        break;
    }
    default:
        return luaL_error(L, "sys:config: '%s' is a section", key);
    }
    lua_createtable(L, 0, 5);
    lua_pushstring(L, types[k->type]);
    lua_setfield(L, -2, "type");
    if (k->flags & (KB_CONFIG_F_MIN | KB_CONFIG_F_GT_MIN)) {
        lua_pushnumber(L, k->min);
        lua_setfield(L, -2, "min");
        lua_pushboolean(L, (k->flags & KB_CONFIG_F_GT_MIN) != 0);
        lua_setfield(L, -2, "above");
    }
    if (k->flags & KB_CONFIG_F_MAX) {
        lua_pushnumber(L, k->max);
        lua_setfield(L, -2, "max");
    }
    if (k->doc) {
        lua_pushstring(L, k->doc);
        lua_setfield(L, -2, "doc");
    }
    return 2;
}

/* sys:path(a, b) -> {hops, nodes = {names}, links = {names},
 * latency_ns = function(bytes)}; a and b are ranks or node names */
static int sys_path(lua_State *L)
{
    struct lsys *h = checksys(L, 1);
    int a = checknode(L, h, 2), b = checknode(L, h, 3);
    int max = kb_system_max_hops(h->sys);
    int *links = lua_newuserdatauv(L, ((size_t)max + 1) * sizeof *links, 0);
    int k = kb_system_route(h->sys, a, b, links, max);
    if (k < 0)
        return luaL_error(L, "%s", kb_system_errmsg(h->sys));
    struct kb_fabric *f = kb_system_fabric(h->sys);
    lua_createtable(L, 0, 4);
    setint(L, "hops", k);
    lua_createtable(L, k + 1, 0);
    lua_pushstring(L, kb_fabric_node_name(f, a));
    lua_rawseti(L, -2, 1);
    for (int i = 0; i < k; i++) {
        lua_pushstring(L, kb_fabric_node_name(f, kb_fabric_link_dst(f, links[i])));
        lua_rawseti(L, -2, i + 2);
    }
    lua_setfield(L, -2, "nodes");
    lua_createtable(L, k, 0);
    for (int i = 0; i < k; i++) {
        lua_pushstring(L, kb_link_name(kb_fabric_link(f, links[i])));
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "links");
    lua_pushvalue(L, 1);
    lua_pushinteger(L, a);
    lua_pushinteger(L, b);
    lua_pushcclosure(L, path_latency, 3);
    lua_setfield(L, -2, "latency_ns");
    return 1;
}

/* ---- modules and ports (decision 0027) ----------------------------------- */

/* A growing string that never raises a Lua error (the listing keeps Lua
 * tables on the stack while it writes). */
/* Where a listing goes: a growing string, or a file it is written to as
 * it is made (kbsim --describe of a large system: the text of 4096 SIPs
 * is 1.4 GB). */
struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
    FILE *f; /* set: written there, p unused */
};

static void sb_add(struct sbuf *b, const char *str)
{
    size_t l = strlen(str);
    if (b->oom)
        return;
    if (b->f) {
        if (fwrite(str, 1, l, b->f) != l)
            b->oom = true;
        return;
    }
    if (b->n + l + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + l + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, str, l + 1);
    b->n += l;
}

static void sb_addn(struct sbuf *b, const char *str, size_t n)
{
    char chunk[256];
    while (n > 0) {
        size_t k = n < sizeof chunk - 1 ? n : sizeof chunk - 1;
        memcpy(chunk, str, k);
        chunk[k] = 0;
        sb_add(b, chunk);
        str += k;
        n -= k;
    }
}

/* str in a Graphviz record label: the characters that shape a record
 * ("a->b" names a link) are escaped. */
static void sb_add_label(struct sbuf *b, const char *str, size_t n)
{
    char one[3] = {0};
    for (const char *end = str + n; str < end; str++) {
        bool special = strchr("<>{}|\\\"", *str) != NULL;
        one[0] = special ? '\\' : *str;
        one[1] = special ? *str : 0;
        sb_add(b, one);
    }
}

/* The module of a port "a.b.unit.port" is "a.b.unit": the length of the
 * name before its last dot (0: none). */
static size_t module_len(const char *port)
{
    const char *dot = strrchr(port, '.');
    return dot ? (size_t)(dot - port) : 0;
}

static const char *dir_word(enum sim_port_dir d)
{
    return d == SIM_PORT_IN ? "in" : d == SIM_PORT_OUT ? "out" : "inout";
}

/* Every port of a simulation grouped by module, modules in the order of
 * their first port, ports in creation order: arrays only (16 bytes a
 * port and 12 a module), where a Lua table of modules and ports took
 * ~26 KB a PE (kbsim --describe of 4096 SIPs peaked at 21.9 GB). */
struct modlist {
    struct sim_port **port; /* grouped by module */
    int *first;             /* module m's ports: port[first[m] .. first[m + 1]) */
    int np, nm;
};

static uint64_t name_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* 0, or -1 when out of memory (ml freed). */
static int modlist_make(struct sim *s, struct modlist *ml)
{
    memset(ml, 0, sizeof *ml);
    int np = 0;
    for (struct sim_port *p = sim_port_next(s, NULL); p; p = sim_port_next(s, p))
        np++;
    size_t slots = 16;
    while (slots < (size_t)np * 2)
        slots *= 2;
    struct sim_port **all = malloc(((size_t)np + 1) * sizeof *all);
    int *mod = malloc(((size_t)np + 1) * sizeof *mod);
    int *table = malloc(slots * sizeof *table); /* module + 1, 0: free */
    int *mfirst = malloc(((size_t)np + 1) * sizeof *mfirst); /* a module's first port */
    int *count = calloc((size_t)np + 2, sizeof *count);
    ml->port = malloc(((size_t)np + 1) * sizeof *ml->port);
    if (!all || !mod || !table || !mfirst || !count || !ml->port) {
        free(all), free(mod), free(table), free(mfirst), free(count), free(ml->port);
        ml->port = NULL;
        return -1;
    }
    memset(table, 0, slots * sizeof *table);
    int i = 0, nm = 0;
    for (struct sim_port *p = sim_port_next(s, NULL); p; p = sim_port_next(s, p), i++) {
        const char *full = sim_port_name(p);
        size_t len = module_len(full);
        size_t k = (size_t)name_hash(full, len) & (slots - 1);
        int m = -1;
        for (; table[k] != 0; k = (k + 1) & (slots - 1)) {
            const char *other = sim_port_name(all[mfirst[table[k] - 1]]);
            if (module_len(other) == len && memcmp(other, full, len) == 0) {
                m = table[k] - 1;
                break;
            }
        }
        if (m < 0) {
            m = nm++;
            table[k] = m + 1;
            mfirst[m] = i;
        }
        all[i] = p;
        mod[i] = m;
        count[m + 1]++;
    }
    /* a counting sort by module, stable */
    for (int m = 0; m < nm; m++)
        count[m + 1] += count[m];
    for (int j = 0; j < np; j++)
        ml->port[count[mod[j]]++] = all[j];
    /* count[m] is now the end of module m, the start of m + 1 */
    memmove(count + 1, count, (size_t)nm * sizeof *count);
    count[0] = 0;
    free(all), free(mod), free(table), free(mfirst);
    ml->first = count;
    ml->np = np;
    ml->nm = nm;
    return 0;
}

static void modlist_free(struct modlist *ml)
{
    free(ml->port);
    free(ml->first);
}

/* The text listing: one line a module, one a port with its bindings. */
static void ports_text(struct sbuf *b, const struct modlist *ml)
{
    int nb = 0;
    for (int j = 0; j < ml->np; j++)
        if (sim_port_dir(ml->port[j]) != SIM_PORT_IN)
            nb += sim_port_bound_count(ml->port[j]);
    char line[512];
    snprintf(line, sizeof line, "modules %d, ports %d, bindings %d\n", ml->nm, ml->np, nb);
    sb_add(b, line);
    for (int m = 0; m < ml->nm; m++) {
        const char *full = sim_port_name(ml->port[ml->first[m]]);
        size_t len = module_len(full);
        snprintf(line, sizeof line, "%.*s\n", (int)len, full);
        sb_add(b, line);
        for (int j = ml->first[m]; j < ml->first[m + 1]; j++) {
            struct sim_port *p = ml->port[j];
            const char *pf = sim_port_name(p);
            size_t pl = module_len(pf);
            int mn, mx;
            sim_port_multiplicity(p, &mn, &mx);
            char maxs[24];
            if (mx >= 1000000)
                snprintf(maxs, sizeof maxs, "*");
            else
                snprintf(maxs, sizeof maxs, "%lld", (long long)mx);
            bool in = sim_port_dir(p) == SIM_PORT_IN;
            snprintf(line, sizeof line, "  %-5s %-5s %-10s %lld..%s", dir_word(sim_port_dir(p)),
                     pl ? pf + pl + 1 : pf, sim_port_type(p), (long long)mn, maxs);
            sb_add(b, line);
            int n = sim_port_bound_count(p);
            if (n == 0)
                sb_add(b, "  (unbound)");
            for (int k = 0; k < n; k++) {
                sb_add(b, k == 0 ? (in ? "  <- " : "  -> ") : ", ");
                sb_add(b, sim_port_name(sim_port_peer(p, k)));
            }
            sb_add(b, "\n");
        }
    }
}

/* Graphviz: a record node a module with a field a port, an edge a binding
 * from the OUT (or INOUT) side, labelled with the interface type. */
static void ports_dot(struct sbuf *b, const struct modlist *ml)
{
    sb_add(b, "digraph kbsim {\n  rankdir=LR;\n"
                      "  node [shape=record, fontname=\"Helvetica\", fontsize=10];\n"
                      "  edge [fontname=\"Helvetica\", fontsize=8];\n");
    for (int m = 0; m < ml->nm; m++) {
        const char *full = sim_port_name(ml->port[ml->first[m]]);
        size_t len = module_len(full);
        sb_add(b, "  \"");
        sb_addn(b, full, len);
        sb_add(b, "\" [label=\"{");
        sb_add_label(b, full, len);
        sb_add(b, "|{");
        for (int j = ml->first[m]; j < ml->first[m + 1]; j++) {
            const char *pf = sim_port_name(ml->port[j]);
            size_t pl = module_len(pf);
            if (j > ml->first[m])
                sb_add(b, "|");
            sb_add(b, "<p_");
            sb_add(b, pl ? pf + pl + 1 : pf);
            sb_add(b, "> ");
            sb_add(b, pl ? pf + pl + 1 : pf);
        }
        sb_add(b, "}}\"];\n");
    }
    for (int j = 0; j < ml->np; j++) {
        struct sim_port *p = ml->port[j];
        const char *full = sim_port_name(p);
        enum sim_port_dir dir = sim_port_dir(p);
        for (int k = 0; k < sim_port_bound_count(p); k++) {
            const char *peer = sim_port_name(sim_port_peer(p, k));
            /* an in port's binding is drawn from its peer; inout once */
            if (dir != SIM_PORT_IN && (dir == SIM_PORT_OUT || strcmp(full, peer) < 0)) {
                char line[640];
                size_t a = module_len(full), c = module_len(peer);
                snprintf(line, sizeof line,
                         "  \"%.*s\":\"p_%s\" -> \"%.*s\":\"p_%s\" [label=\"%s\"%s];\n",
                         (int)a, full, full + a + 1, (int)c, peer, peer + c + 1,
                         sim_port_type(p), dir == SIM_PORT_INOUT ? ", dir=both" : "");
                sb_add(b, line);
            }
        }
    }
    sb_add(b, "}\n");
}

/* Bytes this process may still take: the smallest of the machine's
 * available memory (MemAvailable), its cgroup's room (memory.max less
 * memory.current) and the address space left under RLIMIT_AS; 0 if
 * none of them can be read. */
static uint64_t memory_room(void)
{
    uint64_t room = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
                room = (uint64_t)kb * 1024;
        fclose(f);
    }
    unsigned long long max = 0, cur = 0;
    f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (f) {
        if (fscanf(f, "%llu", &max) != 1) /* "max": no limit */
            max = 0;
        fclose(f);
    }
    f = max ? fopen("/sys/fs/cgroup/memory.current", "r") : NULL;
    if (f) {
        if (fscanf(f, "%llu", &cur) == 1 && cur < max && (room == 0 || max - cur < room))
            room = max - cur;
        fclose(f);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        unsigned long long pages = 0;
        f = fopen("/proc/self/statm", "r");
        if (f) {
            if (fscanf(f, "%llu", &pages) != 1)
                pages = 0;
            fclose(f);
        }
        uint64_t used = (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
        uint64_t left = rl.rlim_cur > used ? rl.rlim_cur - used : 0;
        if (room == 0 || left < room)
            room = left ? left : 1;
    }
    return room;
}

/* What making every PE's units and every link, then listing them, takes
 * beyond the system itself (measured on 64 and 256 SIPs of the default
 * topology: ~6.3 KiB a PE's units, ~0.6 KiB a link, ~0.7 KiB a PE the
 * listing's index; with some room). Refused before anything is made when
 * it exceeds what the process can have: an allocation failing half way
 * took the machine's memory first (4096 SIPs peaked at 21.9 GB). */
#define KB_DESCRIBE_PE_BYTES (10u << 10)
#define KB_DESCRIBE_LINK_BYTES 700u

static void check_describe_room(lua_State *L, struct kb_system *sys, bool units, bool links)
{
    struct kb_system_counts c;
    kb_system_get_counts(sys, &c);
    uint64_t need = (units ? (uint64_t)c.pes * KB_DESCRIBE_PE_BYTES : 0) +
                    (links ? (uint64_t)c.links * KB_DESCRIBE_LINK_BYTES : 0);
    uint64_t room = memory_room();
    if (room == 0 || need <= room)
        return;
    char msg[512];
    snprintf(msg, sizeof msg,
             "sys:describe: listing %d PEs and %d links needs about %.1f GiB (~%u KiB a PE, "
             "~%u B a link), more than the %.1f GiB this process can still have (available "
             "memory, cgroup limit, ulimit -v): describe a smaller system (the listing of a "
             "few SIPs shows every kind of module)",
             c.pes, c.links, (double)need / (1u << 30), KB_DESCRIBE_PE_BYTES >> 10,
             KB_DESCRIBE_LINK_BYTES, (double)room / (1u << 30));
    lua_pushstring(L, msg);
    lua_error(L);
}

/* sys:describe([{ports = true, units = true, links = true, format = "text" | "dot"}]):
 * the summary; with ports, the modules made so far, their ports and
 * bindings after it (units = true makes every PE's units first, links =
 * true every link, and so its two nodes, decision 0038); format "dot"
 * gives only the Graphviz graph of the modules. */
static int sys_describe(lua_State *L)
{
    struct lsys *h = checksys(L, 1);
    bool ports = false, units = false, links = false, dot = false;
    FILE *to = NULL; /* {to = file}: the listing written there, not returned */
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_getfield(L, 2, "ports");
        ports = lua_toboolean(L, -1);
        lua_getfield(L, 2, "units");
        units = lua_toboolean(L, -1);
        lua_getfield(L, 2, "links");
        links = lua_toboolean(L, -1);
        lua_pop(L, 1);
        lua_getfield(L, 2, "format");
        const char *fmt = luaL_optstring(L, -1, "text");
        if (strcmp(fmt, "dot") == 0)
            dot = ports = true;
        else if (strcmp(fmt, "text") != 0)
            return luaL_error(L, "sys:describe: format must be 'text' or 'dot', got '%s'", fmt);
        lua_pop(L, 3);
        lua_getfield(L, 2, "to");
        if (!lua_isnil(L, -1)) {
            luaL_Stream *st = luaL_testudata(L, -1, LUA_FILEHANDLE);
            if (st == NULL || st->closef == NULL)
                return luaL_error(L, "sys:describe: 'to' must be an open file (io.stdout, "
                                     "io.open(name, 'w')), got %s", luaL_typename(L, -1));
            to = st->f;
        }
        lua_settop(L, 3); /* 3: the file or nil */
    }
    if (units || links)
        check_describe_room(L, h->sys, units, links);
    if (units) {
        struct kb_system_counts c;
        kb_system_get_counts(h->sys, &c);
        for (int r = 0; r < c.pes; r++) {
            struct kb_pe *pe = kb_system_pe_units(h->sys, r);
            if (!pe)
                return luaL_error(L, "sys:describe: %s", kb_system_errmsg(h->sys));
            /* the memories too, bound or not */
            struct kb_mem *mems[] = {pe->tcm, pe->sram, pe->hbm};
            for (int k = 0; k < 3; k++)
                if (mems[k] && !kb_mem_port(mems[k]))
                    return luaL_error(L, "sys:describe: %s", kb_mem_errmsg(mems[k]));
        }
    }
    struct kb_fabric *f = kb_system_fabric(h->sys);
    if (links)
        for (int i = 0; i < kb_fabric_link_count(f); i++)
            if (!kb_fabric_link(f, i))
                return luaL_error(L, "sys:describe: %s", kb_fabric_errmsg(f));
    if (ports) {
        struct sim *s = kb_system_sim(h->sys);
        if (sim_port_make_deferred(s) < 0) /* the fabric's (decision 0038) */
            return luaL_error(L, "describe: %s", sim_errmsg(s));
        struct modlist ml;
        if (modlist_make(s, &ml) < 0)
            return luaL_error(L, "sys:describe: out of memory");
        struct sbuf b = {.f = to};
        if (dot) {
            ports_dot(&b, &ml);
        } else {
            char buf[1024];
            kb_system_describe(h->sys, buf, sizeof buf);
            sb_add(&b, buf);
            /* links and their nodes are modules from a link's first use */
            snprintf(buf, sizeof buf, "links made %d of %d\n", kb_fabric_links_made(f),
                     kb_fabric_link_count(f));
            sb_add(&b, buf);
            ports_text(&b, &ml);
        }
        modlist_free(&ml);
        if (b.oom) {
            free(b.p);
            if (to)
                return luaL_error(L, "sys:describe: cannot write the listing: %s",
                                  strerror(errno));
            return luaL_error(L, "sys:describe: out of memory");
        }
        if (to) /* written: the file, as file:write returns */
            return lua_settop(L, 3), 1;
        lua_pushlstring(L, b.p ? b.p : "", b.n);
        free(b.p);
        return 1;
    }
    char buf[1024];
    kb_system_describe(h->sys, buf, sizeof buf);
    if (to) {
        if (fputs(buf, to) < 0)
            return luaL_error(L, "sys:describe: cannot write the listing: %s", strerror(errno));
        return lua_settop(L, 3), 1;
    }
    lua_pushstring(L, buf);
    return 1;
}

static uint64_t optaddr(lua_State *L, int opts, const char *key)
{
    if (lua_isnoneornil(L, opts))
        return 0;
    luaL_checktype(L, opts, LUA_TTABLE);
    lua_getfield(L, opts, key);
    int isint;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!lua_isnil(L, -1) && (!isint || v < 0))
        luaL_error(L, "bad '%s' (non-negative integer expected)", key);
    lua_pop(L, 1);
    return (uint64_t)v;
}

/* sys:transfer(a, b, bytes, {src_addr=, dst_addr=}) -> ns taken; from a
 * thread process: TCM of rank a to TCM of rank b along the routed path */
static int sys_transfer(lua_State *L)
{
    struct lsys *h = checksys(L, 1);
    int a = checkrank(L, h, 2), b = checkrank(L, h, 3);
    uint64_t bytes = checkbytes(L, 4);
    uint64_t sa = optaddr(L, 5, "src_addr"), da = optaddr(L, 5, "dst_addr");
    struct sim *s = kb_fabric_sim(kb_system_fabric(h->sys));
    void *proc = lkb_block_begin(L, s, "sys:transfer");
    sim_time t0 = sim_now(s);
    int rc = kb_system_transfer(h->sys, a, sa, b, da, bytes);
    lkb_block_end(proc);
    if (rc < 0)
        return luaL_error(L, "sys:transfer: %s", kb_system_errmsg(h->sys));
    lua_pushnumber(L, (lua_Number)(sim_now(s) - t0) / 1000.0);
    return 1;
}

static enum kb_mem_kind optmem(lua_State *L, int opts, const char *key)
{
    static const char *const names[] = {"tcm", "sram", "hbm", NULL};
    static const enum kb_mem_kind kinds[] = {KB_MEM_TCM, KB_MEM_SRAM, KB_MEM_HBM};
    if (lua_isnoneornil(L, opts))
        return KB_MEM_TCM;
    lua_getfield(L, opts, key);
    int i = luaL_checkoption(L, -1, "tcm", names);
    lua_pop(L, 1);
    return kinds[i];
}

/* sys:dma(a, b, bytes, {src = "tcm", dst = "tcm", src_addr =, dst_addr =,
 * class = "write"}) -> ns taken, closed-form ns; from a thread process:
 * PE a's DMA copies from a's memory to b's */
static int sys_dma(lua_State *L)
{
    static const char *const classes[] = {"read", "write", "comm", NULL};
    struct lsys *h = checksys(L, 1);
    int a = checkrank(L, h, 2), b = checkrank(L, h, 3);
    uint64_t bytes = checkbytes(L, 4);
    enum kb_dma_class cl = KB_DMA_WRITE;
    if (!lua_isnoneornil(L, 5)) {
        luaL_checktype(L, 5, LUA_TTABLE);
        lua_getfield(L, 5, "class");
        cl = (enum kb_dma_class)luaL_checkoption(L, -1, "write", classes);
        lua_pop(L, 1);
    }
    struct kb_dma_end src, dst;
    struct kb_pe *pa = kb_system_pe_units(h->sys, a), *pb = kb_system_pe(h->sys, b);
    if (!pa)
        return luaL_error(L, "sys:dma: %s", kb_system_errmsg(h->sys));
    src.mem = kb_pe_mem(pa, optmem(L, 5, "src"), &src.node);
    dst.mem = kb_pe_mem(pb, optmem(L, 5, "dst"), &dst.node);
    if (!src.mem || !dst.mem)
        return luaL_error(L, "sys:dma: no such memory at '%s'", !src.mem ? pa->name : pb->name);
    src.addr = optaddr(L, 5, "src_addr");
    dst.addr = optaddr(L, 5, "dst_addr");
    struct sim *s = kb_fabric_sim(kb_system_fabric(h->sys));
    void *proc = lkb_block_begin(L, s, "sys:dma");
    /* through the PE_CPU's port "dma", as a kernel's op would go */
    const struct kb_dma_if *d = kb_cpu_dma(pa->cpu);
    sim_time formula = d->time(d->ctx, src, dst, bytes);
    sim_time t0 = sim_now(s);
    int rc = d->copy(d->ctx, cl, src, dst, bytes);
    lkb_block_end(proc);
    if (rc < 0)
        return luaL_error(L, "sys:dma: %s", d->errmsg(d->ctx));
    lua_pushnumber(L, (lua_Number)(sim_now(s) - t0) / 1000.0);
    lua_pushnumber(L, (lua_Number)formula / 1000.0);
    return 2;
}

/* sys:tcm_write(rank, addr, string) and sys:tcm_read(rank, addr, n):
 * contents only, no time passes */
static int sys_tcm_write(lua_State *L)
{
    struct lsys *h = checksys(L, 1);
    const struct kb_pe *pe = kb_system_pe(h->sys, checkrank(L, h, 2));
    uint64_t addr = checkaddr(L, 3);
    size_t len;
    const char *v = luaL_checklstring(L, 4, &len);
    if (kb_mem_write(pe->tcm, addr, v, len) < 0)
        return luaL_error(L, "sys:tcm_write: %s", kb_mem_errmsg(pe->tcm));
    return 0;
}

static int sys_tcm_read(lua_State *L)
{
    struct lsys *h = checksys(L, 1);
    const struct kb_pe *pe = kb_system_pe(h->sys, checkrank(L, h, 2));
    uint64_t addr = checkaddr(L, 3), n = checkbytes(L, 4);
    luaL_argcheck(L, n <= kb_mem_params(pe->tcm)->capacity, 4, "more bytes than the tcm has");
    luaL_Buffer b;
    char *p = luaL_buffinitsize(L, &b, (size_t)n);
    if (kb_mem_read(pe->tcm, addr, p, n) < 0)
        return luaL_error(L, "sys:tcm_read: %s", kb_mem_errmsg(pe->tcm));
    luaL_pushresultsize(&b, (size_t)n);
    return 1;
}

static int sys_close(lua_State *L)
{
    struct lsys *h = luaL_checkudata(L, 1, KB_SYSTEM);
    if (!h->sys)
        return 0;
    if (kb_fabric_in_flight(kb_system_fabric(h->sys)))
        return luaL_error(L, "attempt to close a system with transfers in flight");
    describe_closing(L, 1, false);
    /* The processes of its PE units (DMA channels, ...) live in the
     * simulation, which may run them again: while it is open, the system
     * is only hidden, and freed when the simulation lets it go (it anchors
     * the system). */
    lua_getiuservalue(L, 1, 1);
    if (lkb_sim_is_open(L, -1))
        h->parked = h->sys;
    else
        kb_system_free(h->sys);
    h->sys = NULL;
    return 0;
}

static int sys_gc(lua_State *L)
{
    struct lsys *h = luaL_checkudata(L, 1, KB_SYSTEM);
    kb_system_free(h->sys ? h->sys : h->parked);
    h->sys = h->parked = NULL;
    return 0;
}

static int sys_tostring(lua_State *L)
{
    struct lsys *h = luaL_checkudata(L, 1, KB_SYSTEM);
    if (!h->sys) {
        lua_pushliteral(L, "system (closed)");
        return 1;
    }
    struct kb_system_counts n;
    kb_system_get_counts(h->sys, &n);
    lua_pushfstring(L, "system (%d PEs, %d nodes, %d links)", n.pes, n.nodes, n.links);
    return 1;
}

static const luaL_Reg sys_methods[] = {
    {"counts", sys_counts},       {"set_ipcq", sys_set_ipcq},       {"pe", sys_pe},           {"neighbor", sys_neighbor},
    {"path", sys_path},           {"describe", sys_describe}, {"config", sys_config}, {"transfer", sys_transfer},
    {"links", sys_links},         {"inject", lkb_sys_inject},
    {"dma", sys_dma}, {"tcm_write", sys_tcm_write}, {"tcm_read", sys_tcm_read}, {"close", sys_close},
    {NULL, NULL}};
static const luaL_Reg sys_meta[] = {
    {"__gc", sys_gc}, {"__close", sys_close}, {"__tostring", sys_tostring}, {NULL, NULL}};

void lkb_open_system(lua_State *L)
{
    lkb_open_traffic(L);
    lkb_open_module(L);
    lkb_newmetatable(L, KB_SYSTEM);
    luaL_setfuncs(L, sys_meta, 0);
    lua_newtable(L);
    luaL_setfuncs(L, sys_methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, l_system, 1); /* upvalue: the module, for kb.options */
    lua_setfield(L, -2, "system");
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, l_ccl_config, 1);
    lua_setfield(L, -2, "ccl_config");
}

/* ---- the command line's check ------------------------------------------- */

int lkb_check_config(const struct lkb_options *opt)
{
    struct kb_config_errors errs;
    kb_config_errors_init(&errs);
    const char *const *sets = opt->set;
    size_t n = (size_t)opt->nset;
    struct kb_config c;
    kb_config_init(&c, &errs);
    struct kb_config_node *user = opt->topology ? parse_user_file(&c, NULL, NULL, opt->topology)
                                                : NULL;
    if (!errs.n) {
        struct kb_topology_cfg topo;
        struct kb_graph_cfg graph = {0};
        bool is_graph;
        /* without --topology the script may build a graph: the grid's
         * own checks wait for kb.system */
        system_cfg(&c, NULL, user, user != NULL, sets, n, &topo, &graph, &is_graph);
        kb_graph_cfg_release(&graph);
    }
    kb_config_release(&c);
    struct kb_config_src ccl_src = {.defaults_path = CCL_DEFAULTS, .sets = sets, .n_sets = n,
                                     .sets_foreign_ok = true};
    struct kb_ccl_cfg ccl;
    kb_ccl_cfg_load(&ccl, &ccl_src, &errs);
    const struct kb_config_key *schemas[] = {kb_topo_schema(), kb_ccl_schema()};
    kb_config_check_sets(&errs, schemas, 2, sets, n);
    int rc = errs.n ? 2 : 0;
    kb_config_errors_print(&errs, stderr);
    kb_config_errors_release(&errs);
    return rc;
}
