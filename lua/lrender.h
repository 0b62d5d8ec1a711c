/* lrender.h — figures rendered in the background (kbsim.results)
 *
 * results.figure writes NAME.gp and has `gnuplot` draw it in the
 * background: it returns at once, and the script goes on (its next sweep,
 * its next figure) while the figure is drawn. gnuplot draws into
 * NAME.tmp.svg/.png, renamed to NAME.svg/.png when it succeeds, so a
 * figure is complete or absent. At most as many gnuplots run at once as
 * they have CPUs (under an MPI launcher every CPU of the machine, not only
 * the core the rank is bound to: the other ranks wait for rank 0's
 * figures); the others queue, as does a figure writing the files of one
 * not yet drawn. A thread of lrender.c reaps them and starts the queued
 * ones. The run waits for every figure before it exits
 * (lkb_render_wait_all) and reports each failed one, naming its figure,
 * in the order they were asked for. See docs/results.md and
 * docs/decisions/0043-figures-in-the-background.md.
 *
 * Lua side (private to kbsim.results): kb._render.start(name, dir, script,
 * args, tmp_outputs, outputs) and kb._render.wait() -> nil or the failures.
 */
#ifndef KBSIM_LRENDER_H
#define KBSIM_LRENDER_H

#include <lua.h>

/* Sets kb._render on the kbsim module at the top of the stack. */
void lkb_open_render(lua_State *L);

/* Waits for every render still running; prints each failure not yet
 * reported on stderr ("kbsim: figure 'NAME': ..."), in the order the
 * renders were started. Returns how many failed. */
int lkb_render_wait_all(void);

#endif
