/* trace.h — a simulation's trace recorder: Chrome / Perfetto trace-event JSON
 *
 * A simulation owns at most one recorder (sim_trace_open). Any layer may
 * record into it: components (link occupancy, DMA copies), the Lua binding
 * (kernel spans). The file is the JSON Object Format of the trace-event
 * spec, {"traceEvents":[...],"displayTimeUnit":"ns"}, which the Perfetto
 * UI and chrome://tracing open as they are.
 *
 * Tracks: a track is a (pid, tid) pair. Processes are named groups (a SIP,
 * "system"), threads are rows inside them (a PE, a link, a DMA channel).
 * Both get ids in order of first use and their names are written as
 * metadata events when the track is first asked for, so the same run
 * writes the same bytes.
 *
 * Time: ts and dur are microseconds written with six decimals, i.e. exact
 * picoseconds; no floating point is involved.
 *
 * Cost: call sites test the recorder pointer and record only when it is
 * set, so a simulation without a trace pays one pointer test per site:
 *
 *     if (l->tr) trace_msg(l, m);   // l->tr = sim_tracer(s) at creation
 *
 * Components look the recorder up once, when created: open the trace right
 * after sim_new. Events are written as they are recorded (spans when they
 * end) through a fixed buffer, so memory stays bounded however long the
 * run; viewers sort events by time themselves. */
#ifndef KBSIM_TRACE_H
#define KBSIM_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sim.h"

/* An argument of an event: a string, or (str NULL) an unsigned number. */
struct sim_trace_arg {
    const char *key;
    const char *str;
    uint64_t num;
};

/* Opens a trace of simulation s into the file `path` (created or
 * truncated). SIM_EINVAL if s already has one or the file cannot be
 * opened, SIM_ENOMEM; err then says why ("cannot open trace 'x': ..."). */
int sim_trace_open(struct sim *s, const char *path, char *err, size_t errlen);

/* The same into a stream the caller owns: sim_trace_close flushes it but
 * does not close it. `label` names the stream in error messages. */
int sim_trace_open_file(struct sim *s, FILE *f, const char *label, char *err,
                        size_t errlen);

/* Ends the JSON, flushes, and closes the file (not a caller's stream).
 * The recorder stays attached, ignoring further records, until sim_free,
 * so components holding it stay safe. 0, nothing to do when s has no
 * trace or it is closed already; SIM_EINVAL if a write failed (err says
 * which file and why); SIM_ENOMEM if a track could not be made for lack
 * of memory, so that its records are missing. sim_free closes a trace
 * left open. */
int sim_trace_close(struct sim *s, char *err, size_t errlen);

/* The track of thread `thread` in process `process`, made on first use;
 * a track id >= 0, or -1 when out of memory (records on -1 are dropped). */
int sim_trace_track(struct sim_trace *t, const char *process,
                    const char *thread);

/* The track of a hierarchical name: process up to the first '.', thread
 * the rest ("sip0.cube1.pe3.dma.read0" -> "sip0", "cube1.pe3.dma.read0");
 * a name without a '.' goes to process "system". */
int sim_trace_track_path(struct sim_trace *t, const char *name);

/* A complete span [start, end) on a track ("ph":"X"); `cat` is a category
 * ("link", "dma", "kernel"), args may be NULL when nargs is 0. */
void sim_trace_span(struct sim_trace *t, int track, const char *cat,
                    const char *name, sim_time start, sim_time end,
                    const struct sim_trace_arg *args, int nargs);

/* An instant event on a track ("ph":"i", thread scope). */
void sim_trace_instant(struct sim_trace *t, int track, const char *cat,
                       const char *name, sim_time at,
                       const struct sim_trace_arg *args, int nargs);

/* A counter sample ("ph":"C") named `name` in the track's process; a value
 * that is not finite is not recorded (JSON has no NaN or infinity). */
void sim_trace_counter(struct sim_trace *t, int track, const char *name,
                       sim_time at, double value);

/* Events written so far (metadata included). */
uint64_t sim_trace_events(const struct sim_trace *t);

/* Pauses (true) or resumes (false) recording: while paused, spans,
 * instants and counters are dropped (a span is kept or dropped whole, by
 * the state when it ends); tracks asked for meanwhile are still named.
 * kbsim serve's trace operation. */
void sim_trace_pause(struct sim_trace *t, bool paused);
bool sim_trace_paused(const struct sim_trace *t);

/* Hands the recorder of `from` to `to`, which has none: the same file goes
 * on with to's records (tracks are found by name, so a component of `to`
 * named as one of `from` writes on the same row), and `from` has no trace
 * any more. Components of `from` that looked the recorder up still hold
 * it: call this only when `from` will not run again (kbsim serve replaces
 * a stopped machine by a new one and closes the old one). 0, or
 * SIM_EINVAL if `from` has no open trace or `to` has one. */
int sim_trace_move(struct sim *from, struct sim *to);

/* ---- engine internal (sim.c) ----------------------------------------- */

/* Attaches t as the recorder of s (trace.c, on open). */
void sim__set_tracer(struct sim *s, struct sim_trace *t);
/* Closes and frees the recorder; sim_free calls it. */
void sim__trace_free(struct sim_trace *t);

#endif
