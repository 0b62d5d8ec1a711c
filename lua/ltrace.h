/* ltrace.h — --trace in the Lua binding: which simulation records, and
 * the trace methods of kbsim.sim (lua/ltrace.c)
 *
 * kb.options.trace (a path) and kb.options.trace_point (N, default 1) ask
 * for one trace per script run: the Nth simulation the script creates
 * records into the file, unless a kb.sweep comes first, which hands the
 * trace to its point N instead (that point's state then traces its first
 * simulation). The trace is handed out once per Lua state.
 */
#ifndef KBSIM_LTRACE_H
#define KBSIM_LTRACE_H

#include <stdbool.h>

#include <lua.h>

struct sim;

/* Adds trace_track and trace_span to the kbsim.sim methods (the class
 * must exist). */
void lkb_open_trace(lua_State *L);

/* kb.sim made simulation s: counts it, and if it is the one to trace
 * opens the trace; raises an error naming the file when that fails.
 * `module` is the index of the kbsim module table (for kb.options). */
void lkb_trace_sim_created(lua_State *L, int module, struct sim *s);

/* Before s is freed: ends its trace, printing on stderr why if the file
 * could not be written (this runs from __gc, where raising is no use). */
void lkb_trace_sim_closing(struct sim *s);

/* For kb.sweep: true if this state still holds the trace (it then no
 * longer does: the sweep gives it to a point). */
bool lkb_trace_take(lua_State *L);

/* After the script: true if the trace was handed out (to a simulation of
 * this state or to a sweep point). */
bool lkb_trace_taken(lua_State *L);

#endif
