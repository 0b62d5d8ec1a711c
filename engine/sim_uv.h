/* sim_uv.h — libuv driver of the kernel: batched runs and parallel sweeps
 *
 * sim_run_uv advances one simulation in batches from a uv_idle_t handle, so
 * the loop can serve timers (progress), signals (Ctrl-C) and I/O between
 * batches without paying one loop turn per event.
 *
 * sim_sweep_run runs independent points (one struct sim each, built and
 * freed by the point itself) on threads of their own, at most `jobs` at a
 * time. Each point writes its result into its own slot, so results come
 * back in input order whatever the number of threads.
 *
 * Both leave the loop they were given clean: every handle they opened is
 * closed before they return.
 */
#ifndef KBSIM_SIM_UV_H
#define KBSIM_SIM_UV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- batched run ----------------------------------------------------- */

/* Process activations per idle callback when `batch` is 0. */
#define SIM_UV_DEFAULT_BATCH 4096

/* Flags of sim_run_uv. */
enum {
    SIM_UV_SIGINT = 1, /* SIGINT requests a stop (SIM_STOPPED) instead of
                          killing the process */
};

/* Runs `s` until sim_step stops returning SIM_MORE, calling
 * sim_step(s, until, batch) once per loop iteration from an idle handle
 * inside uv_run(loop). `loop` NULL uses a private loop. Other handles of
 * `loop` are served between batches; the call returns as soon as the
 * simulation ends, even if they are still active. Returns sim_step's final
 * status (SIM_DONE, SIM_UNTIL, SIM_STOPPED or a negative SIM_E* code), or a
 * negative SIM_E* code if a libuv handle could not be set up. */
int sim_run_uv(struct sim *s, uv_loop_t *loop, sim_time until,
               uint64_t batch, unsigned flags);

/* ---- sweeps ---------------------------------------------------------- */

/* Outcome of one point. */
enum sim_sweep_status {
    SIM_SWEEP_NOT_RUN = 0, /* never started (the sweep was stopped first) */
    SIM_SWEEP_DONE = 1,    /* run returned 0 */
    SIM_SWEEP_FAILED = 2,  /* run returned non-zero */
    SIM_SWEEP_STOPPED = 3, /* run returned non-zero after a stop request:
                              interrupted, its result is incomplete */
    SIM_SWEEP_TIMED_OUT = 4, /* ran past opts->timeout, then returned
                                non-zero (it saw the stop request) */
    SIM_SWEEP_TIMEOUT_ABANDONED = 5, /* still running SIM_SWEEP_GRACE_MS
                                        after its timeout: abandoned */
    SIM_SWEEP_STOP_ABANDONED = 6,    /* still running at a second SIGINT:
                                        abandoned, as if stopped */
};

/* How long a point past its timeout may take to notice before it is
 * abandoned. */
#define SIM_SWEEP_GRACE_MS 1000

/* True for the statuses of a point the sweep left running. */
static inline bool sim_sweep_abandoned(unsigned char st)
{
    return st == SIM_SWEEP_TIMEOUT_ABANDONED || st == SIM_SWEEP_STOP_ABANDONED;
}

/* One running point, handed to its run function. */
struct sim_sweep_point;

/* The work of point `index`: runs on a thread of its own, so it must touch
 * only its own data (its own struct sim, its own result slot). Returns 0
 * on success, non-zero on failure; a failed point does not stop the
 * others. A point may be abandoned (see sim_sweep_run): then everything it
 * uses must stay valid until it returns, and the caller must not read what
 * it writes. */
typedef int (*sim_sweep_run_fn)(struct sim_sweep_point *pt, size_t index,
                                void *ud);

/* On the loop thread after each finished point (done counts every point
 * that ended, whatever its status). Return true to stop the sweep, as
 * Ctrl-C would. */
typedef bool (*sim_sweep_progress_fn)(size_t done, size_t total, void *ud);

struct sim_sweep_opts {
    int jobs;           /* points running at once; <= 0 means 1 */
    bool catch_sigint;  /* SIGINT stops the sweep (see sim_sweep_run) */
    bool catch_sigterm; /* SIGTERM stops it likewise (a batch system's end
                           of a job), so the caller keeps what finished */
    int *stopped_by;    /* optional: receives the signal that stopped the
                           sweep (SIGINT, SIGTERM), else 0 */
    uv_loop_t *loop;    /* NULL: a private loop */
    sim_sweep_progress_fn progress; /* optional */
    double timeout;     /* seconds a point may run; <= 0: no limit */
    /* optional: called once no point's run function uses ud any more
     * (see sim_sweep_run), possibly on another thread after
     * sim_sweep_run returned */
    void (*release)(void *ud);
};

/* Runs run(pt, i, ud) for every i in 0..n_points-1, at most opts->jobs at
 * a time, each on a thread of its own, and waits for all of them. status,
 * if not NULL, receives one enum sim_sweep_status per point.
 *
 * A stop (SIGINT with catch_sigint, or progress returning true) starts no
 * further point and asks every running point to stop: its
 * sim_sweep_point_stopping turns true and its attached simulation
 * (sim_sweep_point_attach) gets sim_request_stop. Finished points keep
 * their results and status.
 *
 * A second SIGINT (or SIGTERM, with catch_sigterm) abandons the points
 * still running: the sweep stops
 * waiting for them (SIM_SWEEP_STOP_ABANDONED) and returns. So does a point
 * still running SIM_SWEEP_GRACE_MS after it was asked to stop because it
 * ran past opts->timeout (SIM_SWEEP_TIMEOUT_ABANDONED; the sweep goes on).
 * An abandoned point's thread runs on until its run function returns; the
 * caller must keep valid whatever that run function uses (ud, for
 * instance) until opts->release(ud) is called, and must not read what it
 * writes. release is called once (unless run is NULL): before
 * sim_sweep_run returns if no point was abandoned, else by the last
 * abandoned point's thread as it ends (never, if kbsim exits first).
 *
 * Returns 0 if every point is done, SIM_STOPPED after a stop, SIM_EPROC if
 * a point failed or timed out, or SIM_EINVAL / SIM_ENOMEM (no point ran). */
int sim_sweep_run(size_t n_points, sim_sweep_run_fn run, void *ud,
                  const struct sim_sweep_opts *opts, unsigned char *status);

/* From a run function: registers the point's simulation so that a stop of
 * the sweep reaches it through sim_request_stop (immediately, if the sweep
 * is already stopping). Attach NULL before freeing the simulation. */
void sim_sweep_point_attach(struct sim_sweep_point *pt, struct sim *s);

/* From a run function: true once the sweep is stopping or the point ran
 * past its timeout, for points that run several simulations or long
 * non-simulation work. */
bool sim_sweep_point_stopping(const struct sim_sweep_point *pt);

#ifdef __cplusplus
}
#endif
#endif
