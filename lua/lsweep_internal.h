/* lsweep_internal.h — what lsweep.c (kb.sweep) and lsweep_ranks.c (its
 * parts across MPI ranks) share: one kb.sweep call and its points.
 * Private to the two; the door to MPI itself is lsweep_mpi.h. */
#ifndef KBSIM_LSWEEP_INTERNAL_H
#define KBSIM_LSWEEP_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <lua.h>
#include <uv.h>

#include "lblob.h"
#include "sim_uv.h"

struct point {
    struct lkb_blob params; /* plain, canonical: shipped and hashed */
    struct lkb_blob result; /* the returned row, filled by the worker */
    bool has_result;
    bool reused;        /* taken from the cache, not simulated */
    uint64_t key;
    char *err;          /* failure: message (first part, with file:line) */
    char *trace;        /* failure: message and traceback */
    char *cache_err;    /* its cache file could not be written: why */
    long checks_failed;
};

/* One kb.sweep call, held by a userdata so that everything is freed even
 * if an error is raised half-way. Point threads read the shared fields and
 * write only their own point. If a point was abandoned (its timeout, or a
 * second Ctrl-C), its thread may still be running and using all this
 * after kb.sweep returned: the runner holds a reference until it calls
 * sweep_release, and the last reference frees. */
struct sweep {
    atomic_int refs;     /* the userdata, and the runner while it may run points */
    char *name;
    char *cachedir;      /* where points write their cache file, or NULL */
    struct lkb_blob fn;      /* the point function and its upvalues */
    struct lkb_blob options; /* kb.options */
    struct lkb_blob arg;     /* the global `arg` */
    char *path, *cpath;
    size_t n;
    struct point *pts;
    long trace_index;    /* the point that gets --trace, or -1 */
    size_t *pending_pts;        /* points to simulate */
    size_t n_pending;
    unsigned char *status; /* per pending_pts entry: enum sim_sweep_status */
    /* progress bar */
    bool bar;
    uint64_t t0;
    size_t ndone, nreused;
    uv_timer_t timer;
    /* An MPI job of several ranks (lsweep_mpi.h): sim_sweep_run's slots
     * take their points from a queue, rank 0's own and the other ranks'
     * (rank 0), or from rank 0 (the other ranks). */
    bool mpi;
    /* the signal that stopped the sweep (SIGINT, SIGTERM), else 0 */
    int stop_signal;
    bool qlock_ok;
    uv_mutex_t qlock;     /* rank 0: the queue */
    size_t qnext;         /* rank 0: next pending_pts entry to hand out */
    bool trace_taken;     /* rank 0: the traced point went to a local slot */
    atomic_bool exhausted; /* other ranks: rank 0 has no point left */
    atomic_size_t nfinished; /* rank 0: points ended, on any rank */
    size_t *slot_pt;      /* slot -> point, or KB_NO_POINT */
    unsigned char *pstatus; /* point -> enum sim_sweep_status */
    int *prank;           /* point -> the rank that ran it */
};

#define KB_NO_POINT SIZE_MAX

/* ---- lsweep.c ----------------------------------------------------------- */

/* Point `index` in its own Lua state; 0 if it succeeded. */
int lkb_sweep_run_point(struct sim_sweep_point *sp, struct sweep *sw, size_t index);
/* Adds the report on top of the stack (popped) to this state's record of
 * sweeps ({reports = {...}, interrupted = signal}), and marks it interrupted
 * by `signal` (SIGINT, SIGTERM) unless that is 0. */
void lkb_sweep_record_report(lua_State *L, int signal);
/* What every rank compares with rank 0's before a sweep: its name and
 * its points' keys. */
uint64_t lkb_sweep_digest(const struct sweep *sw);

/* ---- lsweep_ranks.c: a sweep across MPI ranks (docs/cluster.md) --------- */

/* Rank 0's dispatcher (lkb_dispatch_start): the next point for another
 * rank, or -1; another rank's point ended. */
long lkb_ranks_claim(void *ud);
void lkb_ranks_ended(void *ud);
/* sim_sweep_run_fn of rank 0's slots (points from the shared queue) and
 * of the other ranks' (points from rank 0). */
int lkb_ranks_run_root(struct sim_sweep_point *sp, size_t k, void *ud);
int lkb_ranks_run_worker(struct sim_sweep_point *sp, size_t k, void *ud);
/* A rank's results for rank 0, and rank 0 taking them in (lkb_results_fn;
 * ud: a struct lkb_ranks_unpack). */
bool lkb_ranks_pack(const struct sweep *sw, size_t nslots, struct lkb_blob *b);
struct lkb_ranks_unpack {
    struct sweep *sw;
    const char *bad; /* what was wrong, or NULL */
};
void lkb_ranks_unpack(void *ud, int rank, const unsigned char *p, size_t n);
/* Every rank before a sweep: rank 0's digest and count checked. */
bool lkb_ranks_start(struct sweep *sw);
/* Rank 0: the summary at index idx to the other ranks. */
bool lkb_ranks_bcast_summary(lua_State *L, int idx);
/* The other ranks: rank 0's rows and summary pushed (returns 2). */
int lkb_ranks_worker_result(lua_State *L);

#endif
