/* ltransport.h — Lua values, bytecode and upvalues from one Lua state to
 * another, as bytes
 *
 * A lua_State is not thread-safe, so a value that must reach another
 * state (a sweep point's function, parameters and row: lsweep.c) travels
 * as bytes: plain data is copied; with LKB_PACK_CODE a Lua function goes
 * as bytecode with its upvalues rebuilt (shared upvalues stay shared,
 * modules and the functions they export are looked up again by name in
 * the other state, other Lua functions are dumped recursively). Table
 * keys are written in a canonical order, so equal values give equal bytes
 * (kb.sweep hashes them for its cache). Integers are little-endian
 * whatever the host. See docs/decisions/0006-sweep-points-in-separate-states.md.
 */
#ifndef KBSIM_LTRANSPORT_H
#define KBSIM_LTRANSPORT_H

#include <stdbool.h>

#include <lua.h>

#include "lblob.h"

enum lkb_pack_mode {
    LKB_PACK_PLAIN, /* numbers, strings, booleans, nil, tables of them */
    LKB_PACK_CODE,  /* also Lua functions, modules and their C functions */
};

/* How to write a value, and what to say when it cannot be written. */
struct lkb_pack_how {
    enum lkb_pack_mode mode;
    bool strip;       /* dump functions without debug information */
    int mods;         /* LKB_PACK_CODE: stack indices of the two tables */
    int members;      /* that lkb_push_module_maps pushed */
    /* Error messages: "<prefix> '<path>'<after> <problem><suffix>", path
     * naming the part of the value at fault (it starts as given). */
    const char *prefix, *after, *suffix;
    char path[160];
};

/* Appends the value at idx to b, which must not move while this runs (it
 * belongs to a userdata or a struct that outlives the call). Raises a Lua
 * error naming the part that cannot travel (a userdata, a cycle, a table
 * with a metatable, a function in LKB_PACK_PLAIN, ...) or out of memory. */
void lkb_pack(lua_State *L, int idx, struct lkb_blob *b, const struct lkb_pack_how *how);

/* Pushes the value held in b (written by lkb_pack, in any state): modules
 * are taken from package.loaded, or required. Raises a Lua error if one
 * is missing. */
void lkb_unpack(lua_State *L, const struct lkb_blob *b);

/* Pushes two tables for LKB_PACK_CODE: value -> module name for every
 * value of package.loaded, and function -> {module, key} for the
 * functions that modules export (C functions of any module; Lua functions
 * too, except those of _G, which may be the script's own globals and
 * exist in no other state). */
void lkb_push_module_maps(lua_State *L);

#endif
