/* lkbsim.h — Lua binding of the kbsim kernel: the `kbsim` module
 *
 * The binding is the single door between C and Lua. The CLI (kbsim.c) uses
 * only what is declared here plus the Lua API.
 */
#ifndef KBSIM_LKBSIM_H
#define KBSIM_LKBSIM_H

#include <stdbool.h>
#include <stddef.h>

#include <lua.h>
#include <uv.h>

/* What the command line gives a script as kb.options. The strings must
 * outlive the call to kb_preload (they are copied into Lua). */
struct kb_options {
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
 * luaL_requiref). kb.options is empty unless kb_preload set it first.
 * The host must zero the main thread's lua_getextraspace area after
 * creating the state: the module keeps its state pointer there. */
int luaopen_kbsim(lua_State *L);

/* A Lua state for a kbsim script (lstate.c): the standard libraries,
 * package.path with the kbsim Lua library (lua/kbsim/) first, `kbsim`
 * and `kbsim.tlcore` preloaded with opt as kb.options (kb_preload), Lua
 * source only. NULL, with the reason in err, if it cannot be made (out of
 * memory). The CLI and every kb.sweep point make theirs here. */
lua_State *kb_new_state(const struct kb_options *opt, char *err, size_t errsize);

/* Registers `kbsim` in package.preload with these options, and makes the
 * state load Lua source only (kb_open_source_only). */
void kb_preload(lua_State *L, const struct kb_options *opt);

/* Makes the state load Lua source only: package.searchers[2] (modules on
 * package.path), load, loadfile and dofile take no precompiled chunks
 * (lload.c; kb_preload calls it). */
void kb_open_source_only(lua_State *L);

/* luaL_loadfile for source only: a precompiled chunk gives an error
 * naming the file (lload.c). */
int kb_loadfile(lua_State *L, const char *path);

/* Message handler for lua_pcall: the message plus a traceback. */
int kb_traceback(lua_State *L);

/* lua_pcall with kb_traceback as the message handler. */
int kb_pcall(lua_State *L, int nargs, int nresults);

/* Number of kb.check calls that failed so far in this Lua state. */
long kb_failed_checks(lua_State *L);

/* Checks the configuration the command line names before any script runs:
 * the topology (configs/topology.yaml, the --topology file over it, a
 * graph file as it is) and every --set key against the topology and ccl
 * schemas. Prints each problem as "file:line:col: problem" on stderr and
 * returns 2, else 0. */
int kb_check_config(const struct kb_options *opt);

/* In a --shard run, kb.outdir() gives the script a scratch folder (the
 * run writes no outputs; kb.sweep's cache stays in kb.options.out):
 * removes it and everything in it, if it was made. */
void kb_remove_scratch(lua_State *L);

/* ---- for the binding's own files (lsystem.c) ------------------------- */

/* Creates the folder kb.options.out (the table at index options) names,
 * with its parents, and pushes its name; an error if it cannot. */
const char *kb_push_outdir(lua_State *L, int options);

/* The kernel of the open kbsim.sim at index i (an error otherwise). */
struct sim *kb_checksim(lua_State *L, int i);
/* The same for a value the binding stored itself and knows to be a
 * kbsim.sim (a system's user value): its type is not looked up by name,
 * only whether it is still open (the per-call path of tl.*). */
struct sim *kb_checksim_known(lua_State *L, int i);
/* luaL_newmetatable, the metatable hidden from scripts: getmetatable
 * gives the type name, so a script cannot call __gc on a live object. */
int kb_newmetatable(lua_State *L, const char *tname);
/* Whether the value at index i is a kbsim.sim not yet closed. */
bool kb_sim_is_open(lua_State *L, int i);
/* Pushes the NULL-terminated names joined by ", ". */
void kb_push_names(lua_State *L, const char *const names[]);
/* The options table at idx holds only keys among `known` (NULL-terminated);
 * otherwise "WHAT: unknown option 'KEY' (known, ...)". */
void kb_check_keys(lua_State *L, int idx, const char *what, const char *const known[]);
/* Keeps the value at validx alive as long as the simulation at simidx. */
void kb_anchor(lua_State *L, int simidx, int validx);
/* Before a blocking C call: the running Lua thread process of simulation
 * s, or an error naming `what`. Pass the result to kb_block_end once the
 * call has returned (other processes ran meanwhile). */
void *kb_block_begin(lua_State *L, struct sim *s, const char *what);
void kb_block_end(void *proc);
/* Runs the kbsim.sim at index i to its end (until SIM_FOREVER) or to
 * `until` (ps) as sim:run does, but in batches from sim_run_uv on `loop`
 * (0: its default batch), so the loop's other handles are served
 * meanwhile; they must not run this simulation themselves. Pushes "done",
 * "until" or "stopped" (sim_request_stop), or raises the failing process's
 * message (lua/lserve.c). */
int kb_sim_run_uv(lua_State *L, int i, uv_loop_t *loop, uint64_t batch, uint64_t until);
/* Adds kb.system and the kbsim.system type to the module table on top
 * of the stack (lsystem.c). */
void kb_open_system(lua_State *L);
/* The open kbsim.system at index i (an error otherwise); its simulation is
 * the userdata's first user value (lsystem.c). */
struct kb_system *kb_checksystem(lua_State *L, int i);
/* kb_checksystem for a value the binding stored itself and knows to be a
 * kbsim.system (a kernel context's user value): the same open checks and
 * errors, without looking the types up by name. */
struct kb_system *kb_checksystem_known(lua_State *L, int i);
/* A PE's memory for host access: the kbsim.system at sysidx, the rank at
 * rankidx, the kind ("tcm", "sram", "hbm") at kindidx, default HBM or TCM
 * where there is none; makes none of the PE's units (ltl.c). */
struct kb_mem;
struct kb_mem *kb_check_pe_mem(lua_State *L, int sysidx, int rankidx, int kindidx);
/* Registers the kbsim.tlcore module in package.preload (ltl.c). */
void kb_open_tl(lua_State *L);
/* Adds the host-vector functions (vec_*) and the kbsim.vec type to the
 * module table on top of the stack (lvec.c). */
void kb_open_vec(lua_State *L);

#endif
