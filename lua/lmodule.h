/* lmodule.h — what the two halves of Lua modules share (private to them)
 *
 * lmodule.c: kb.module, its ports, binds, processes and Lua exports.
 * lmodule_ifs.c: the Lua wrappers of the C interfaces a module's OUT port
 * reaches (kb_dma_if, kb_mem_if, kb_cpu_if, kb_math_if, kb_gemm_if,
 * kb_ipcq_if) and the C units and memories a script places (kb.unit,
 * kb.memory). Decision 0035; docs/modules.md. */
#ifndef KBSIM_LMODULE_H
#define KBSIM_LMODULE_H

#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>

struct kb_system;
struct sim;
struct sim_port;

/* ---- lmodule.c ---------------------------------------------------------- */

/* The userdata at i if its metatable is the one registered at key (the
 * address of a static char), else NULL; lkb_checkud raises a type error
 * naming tname instead. */
void *lkb_testud(lua_State *L, int i, const char *key);
void *lkb_checkud(lua_State *L, int i, const char *key, const char *tname);
/* The system at user value 1 of the userdata at idx, checked open (with
 * its simulation); pushes nothing. */
struct kb_system *lkb_module_system(lua_State *L, int idx);
/* Whether that system and its simulation are still open (raises nothing):
 * a handle's C pointers into the simulation are valid only then. */
bool lkb_module_system_open(lua_State *L, int idx);
/* Whether `name` is a Lua module's port of the system at sysidx. */
bool lkb_is_module_port(lua_State *L, int sysidx, const char *name);
/* The port of sim s named `name`, or NULL. */
struct sim_port *lkb_find_port(struct sim *s, const char *name);
/* Makes the PE units' and memories' ports a port name may belong to
 * (they are made on first use); raises on a failure to make them. */
void lkb_make_ports_for(lua_State *L, struct kb_system *sys, const char *name);
/* Registers a hidden metatable tname, also at registry key `key`, with
 * these methods, __tostring and __gc (may be NULL). */
void lkb_newclass(lua_State *L, const char *tname, const char *key, const luaL_Reg *methods,
                  lua_CFunction tostring, lua_CFunction gc);

/* ---- lmodule_ifs.c ------------------------------------------------------ */

/* The C interface types a Lua module calls, NULL-terminated. */
extern const char *const lkb_cif_types[];
/* The index of a C interface type in lkb_cif_types, or -1. */
int lkb_cif_kind_of(const char *type);
/* The functions a Lua export of C interface type `type` must implement
 * (NULL-terminated), or NULL when type is not a C interface type. */
const char *const *lkb_cif_fns(const char *type);
/* Pushes the wrapper of the C interface iface of kind `kind` (from
 * lkb_cif_kind_of), exported on port `port`, of the system at sysidx. */
void lkb_push_cif(lua_State *L, int kind, const void *iface, const char *port, int sysidx);
/* The export of the kbsim.memory at i (checked open), or NULL when the
 * value is not a kbsim.memory. */
struct sim_port *lkb_memory_port(lua_State *L, int i);
/* Registers the types kbsim.iface, kbsim.memory, kbsim.unit. */
void lkb_open_module_ifs(lua_State *L);
/* kb.memory and kb.unit */
int lkb_module_memory(lua_State *L);
int lkb_module_unit(lua_State *L);

#endif
