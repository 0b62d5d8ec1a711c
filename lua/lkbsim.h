/* lkbsim.h — the Lua binding of kbsim as the command line sees it
 *
 * The binding (lua/l*.c) is the single door between C and Lua. The CLI
 * (kbsim.c) uses only what is declared here, in the headers of the
 * binding's parts it drives (lsweep.h, lserve.h, ltrace.h, lsweep_mpi.h)
 * and the Lua API. What the binding's own files share is in
 * lkb_internal.h. Every symbol of the binding is prefixed lkb_ (LKB_ for
 * macros): kb_ belongs to the components, sim_ to the engine.
 */
#ifndef KBSIM_LKBSIM_H
#define KBSIM_LKBSIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <lua.h>

/* What the command line gives a script as kb.options. The strings must
 * outlive the call to lkb_new_state (they are copied into Lua). */
struct lkb_options {
    const char *out;      /* output folder */
    int jobs;             /* parallel sweep points */
    const char **set;     /* "KEY=VALUE" strings */
    int nset;
    const char *topology; /* system description, or NULL */
    bool quiet;
    bool fast;            /* --fast: reuse cached sweep points */
    const char *trace;    /* --trace FILE, or NULL (lua/ltrace.h) */
    int trace_point;      /* --trace-point N (0: the first) */
    double point_timeout; /* --point-timeout S (0: none; lua/lsweep.h) */
    int shard, shards;    /* --shard I/N (0/0: none; lua/lsweep.h) */
    bool merge;           /* --merge: sweeps take every point from the cache */
};

/* Opens the module and leaves it on the stack (for package.preload or
 * luaL_requiref); lkb_new_state preloads it. kb.options is empty unless
 * lkb_preload (lkb_internal.h) set it first.
 * The host must zero the main thread's lua_getextraspace area after
 * creating the state: the module keeps its state pointer there. */
int luaopen_kbsim(lua_State *L);

/* A Lua state for a kbsim script (lstate.c): the standard libraries,
 * package.path with the kbsim Lua library (lua/kbsim/) first, `kbsim`
 * and `kbsim.tlcore` preloaded with opt as kb.options (lkb_preload), Lua
 * source only. NULL, with the reason in err, if it cannot be made (out of
 * memory). The CLI and every kb.sweep point make theirs here. Close it
 * with lua_close. */
lua_State *lkb_new_state(const struct lkb_options *opt, char *err, size_t errsize);

/* luaL_loadfile for source only: a precompiled chunk gives an error
 * naming the file (lload.c). */
int lkb_loadfile(lua_State *L, const char *path);

/* Message handler for lua_pcall: the message plus a traceback. */
int lkb_traceback(lua_State *L);

/* lua_pcall with lkb_traceback as the message handler. */
int lkb_pcall(lua_State *L, int nargs, int nresults);

/* Number of kb.check calls that failed so far in this Lua state. */
long lkb_failed_checks(lua_State *L);

/* Checks the configuration the command line names before any script runs:
 * the topology (configs/topology.yaml, the --topology file over it, a
 * graph file as it is) and every --set key against the topology and ccl
 * schemas. Prints each problem as "file:line:col: problem" on stderr and
 * returns 2, else 0. */
int lkb_check_config(const struct lkb_options *opt);

/* In a --shard run, kb.outdir() gives the script a scratch folder (the
 * run writes no outputs; kb.sweep's cache stays in kb.options.out):
 * removes it and everything in it, if it was made. */
void lkb_remove_scratch(lua_State *L);

/* kbsim --describe SCRIPT: from lkb_describe_begin on, every kb.system
 * the state makes is kept and described (sys:describe with ports and every
 * PE's units) when the script closes it or, still open, at
 * lkb_describe_end, which writes each listing to `text` (NULL: none) after
 * a line "# system K of N, made at FILE:LINE", and the first system's
 * Graphviz graph to dot_file (NULL: none). 0, or 2 with the problem on
 * stderr (no system made, one that cannot be described, a file not
 * written). Decision 0040. */
void lkb_describe_begin(lua_State *L);
int lkb_describe_end(lua_State *L, FILE *text, const char *dot_file);

#endif
