/* lsweep.h — kb.sweep: sweep points in parallel, each in its own Lua state
 *
 * See docs/results.md for the Lua side and
 * docs/decisions/0006-sweep-points-in-separate-states.md for why every
 * point gets its own lua_State and how the point function travels there.
 */
#ifndef KBSIM_LSWEEP_H
#define KBSIM_LSWEEP_H

#include <stdbool.h>
#include <lua.h>

/* Exit status for a sweep stopped by Ctrl-C (128 + SIGINT, as shells do);
 * by SIGTERM, 128 + SIGTERM (143). */
#define LKB_EXIT_INTERRUPTED 130

/* Adds kb.sweep to the module table on top of the stack. */
void lkb_open_sweep(lua_State *L);

/* At the end of a script: prints, on stderr, one summary per sweep of this
 * state that had failed points or was stopped, and returns the exit status
 * they call for: 0 none, 1 a point failed, LKB_EXIT_INTERRUPTED a sweep was
 * stopped by Ctrl-C, 128 + SIGTERM by SIGTERM. */
int lkb_sweep_status(lua_State *L);

/* After the script: -1, or the exit status a kb.sweep that ended the run
 * asked for (--shard: 0 after its share; --merge: 1, points missing from
 * the cache), the kb.sweep having said why on stderr. The script then
 * ended with an error that kbsim does not print. */
int lkb_sweep_end_status(lua_State *L);

/* True if the error value at idx is that end of the run (a script that
 * catches it and then fails otherwise has its own error printed). */
bool lkb_sweep_is_end(lua_State *L, int idx);

#endif
