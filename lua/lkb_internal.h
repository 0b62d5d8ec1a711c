/* lkb_internal.h — what the binding's own files share (lua/l*.c)
 *
 * Not for the CLI, which has lkbsim.h (included here). Symbols are
 * prefixed lkb_, as in every header of the binding: kb_ is the
 * components', sim_ the engine's. Out of memory follows engine/sim.h: a
 * Lua error ("... out of memory") raised to the script, never an abort.
 */
#ifndef KBSIM_LKB_INTERNAL_H
#define KBSIM_LKB_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <lua.h>
#include <uv.h>

#include "lkbsim.h"

/* ---- making a state (lkbsim.c, lload.c) -------------------------------- */

/* Registers `kbsim` in package.preload with these options, and makes the
 * state load Lua source only (lkb_open_source_only). */
void lkb_preload(lua_State *L, const struct lkb_options *opt);

/* Makes the state load Lua source only: package.searchers[2] (modules on
 * package.path), load, loadfile and dofile take no precompiled chunks
 * (lload.c; lkb_preload calls it). */
void lkb_open_source_only(lua_State *L);

/* ---- simulations, options and names (lkbsim.c) ------------------------ */

/* Creates the folder kb.options.out (the table at index options) names,
 * with its parents, and pushes its name; an error if it cannot. */
const char *lkb_push_outdir(lua_State *L, int options);

/* The kernel of the open kbsim.sim at index i (an error otherwise). */
struct sim *lkb_checksim(lua_State *L, int i);
/* The same for a value the binding stored itself and knows to be a
 * kbsim.sim (a system's user value): its type is not looked up by name,
 * only whether it is still open (the per-call path of tl.*). */
struct sim *lkb_checksim_known(lua_State *L, int i);
/* luaL_newmetatable, the metatable hidden from scripts: getmetatable
 * gives the type name, so a script cannot call __gc on a live object. */
int lkb_newmetatable(lua_State *L, const char *tname);
/* Whether the value at index i is a kbsim.sim not yet closed. */
bool lkb_sim_is_open(lua_State *L, int i);
/* Pushes the NULL-terminated names joined by ", ". */
void lkb_push_names(lua_State *L, const char *const names[]);
/* The one check of a table's keys, for C and (kb._check_keys) the Lua
 * library: the table at idx holds only string keys among `known`
 * (NULL-terminated); otherwise raises "WHAT: unknown NOUN 'KEY' (LABELa,
 * b, ...)", placed at `level` as error() places (1: the caller of the C
 * function; 0: nowhere). A non-string key shows as tostring shows a
 * number or boolean, else as its type name. */
struct lkb_keys_words {
    const char *what;  /* "kb.sweep" */
    const char *noun;  /* "option", "field" */
    const char *label; /* before the names: "", "fields: " */
};
void lkb_check_keys_as(lua_State *L, int idx, const struct lkb_keys_words *w,
                       const char *const known[], int level);
/* lkb_check_keys_as as "WHAT: unknown option 'KEY' (a, b, ...)" at the
 * caller's line: the options tables of the binding's functions. */
void lkb_check_keys(lua_State *L, int idx, const char *what, const char *const known[]);
/* Keeps the value at validx alive as long as the simulation at simidx. */
/* In a function of the kbsim module whose upvalue 1 is the module: raises
 * "FN is a function, not a method: call it with a dot" when it was called
 * with a colon (kb:wait(ev), kb:sweep{...}). */
void lkb_nocolon(lua_State *L, const char *fn);
void lkb_anchor(lua_State *L, int simidx, int validx);
/* Before a blocking C call: the running Lua thread process of simulation
 * s, or an error naming `what`. Pass the result to lkb_block_end once the
 * call has returned (other processes ran meanwhile). */
void *lkb_block_begin(lua_State *L, struct sim *s, const char *what);
void lkb_block_end(void *proc);
/* Two pointers kbsim.tlcore keeps for the running Lua thread process while L is its thread, or NULL. */
void **lkb_tl_slots(lua_State *L);
/* Runs the kbsim.sim at index i to its end (until SIM_FOREVER) or to
 * `until` (ps) as sim:run does, but in batches from sim_run_uv on `loop`
 * (0: its default batch), so the loop's other handles are served
 * meanwhile; they must not run this simulation themselves. Pushes "done",
 * "until" or "stopped" (sim_request_stop), or raises the failing process's
 * message (lua/lserve.c). */
int lkb_sim_run_uv(lua_State *L, int i, uv_loop_t *loop, uint64_t batch, uint64_t until);
/* Adds kb.system and the kbsim.system type to the module table on top
 * of the stack (lsystem.c). */
void lkb_open_system(lua_State *L);
/* sys:inject (ltraffic.c), and its handle type, registered by
 * lkb_open_traffic (called from lkb_open_system). */
int lkb_sys_inject(lua_State *L);
void lkb_open_traffic(lua_State *L);
/* Adds kb.module, kb.memory and kb.unit, and the types of Lua modules,
 * their ports and the C interfaces they call, to the module table on top
 * of the stack (lmodule.c and lmodule_ifs.c, called from lkb_open_system). */
void lkb_open_module(lua_State *L);
/* kbsim --describe SCRIPT: describes the systems it collects whose
 * simulation is the kbsim.sim at index i, before that is closed
 * (lsystem.c; lkb_describe_begin in lkbsim.h). */
void lkb_describe_sim_closing(lua_State *L, int i);
/* The open kbsim.system at index i (an error otherwise); its simulation is
 * the userdata's first user value (lsystem.c). */
struct kb_system *lkb_checksystem(lua_State *L, int i);
/* lkb_checksystem for a value the binding stored itself and knows to be a
 * kbsim.system (a kernel context's user value): the same open checks and
 * errors, without looking the types up by name. */
struct kb_system *lkb_checksystem_known(lua_State *L, int i);
/* Where the kbsim.system at index i (a known one) keeps its kb_system, NULL once closed. */
struct kb_system *const *lkb_system_open_slot(lua_State *L, int i);
/* A PE's memory for host access: the kbsim.system at sysidx, the rank at
 * rankidx, the kind ("tcm", "sram", "hbm") at kindidx, default HBM or TCM
 * where there is none; makes none of the PE's units (ltl.c). */
struct kb_mem;
struct kb_mem *lkb_check_pe_mem(lua_State *L, int sysidx, int rankidx, int kindidx);
/* Registers the kbsim.tlcore module in package.preload (ltl.c). */
void lkb_open_tl(lua_State *L);
/* Adds the host-vector functions (vec_*) and the kbsim.vec type to the
 * module table on top of the stack (lvec.c). */
void lkb_open_vec(lua_State *L);

#endif
