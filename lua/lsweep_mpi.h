/* lsweep_mpi.h — kb.sweep across the ranks of an MPI job
 *
 * Under `mpirun -n N kbsim ... SCRIPT.lua` every rank runs the script;
 * every kb.sweep is collective: rank 0 hands its points out one at a time
 * to the ranks that ask (and runs points itself), gathers the rows and
 * sends every rank the sweep's result, so the script goes on the same way
 * everywhere; only rank 0 writes outputs. See docs/cluster.md and
 * docs/decisions/0019-mpi-sweeps.md.
 *
 * This is the only door to MPI. lsweep_mpi.c implements it with MPI (CMake
 * option KBSIM_MPI, on when MPI is found); lsweep_mpi_none.c is the one-rank
 * build: lkb_mpi_size() is 1 and kb.sweep never calls the rest.
 */
#ifndef KBSIM_LSWEEP_MPI_H
#define KBSIM_LSWEEP_MPI_H

#include <stdbool.h>
#include <stddef.h>

#include "lsweep_cache.h"

/* Starts MPI if kbsim was started by an MPI launcher (mpirun, srun); a
 * plain run starts nothing. 0, or an exit status after a message. */
int lkb_mpi_init(int *argc, char ***argv);
/* Ends MPI (collective) if it was started. */
void lkb_mpi_finalize(void);
/* Ends the whole job with this status (an unrecoverable disagreement). */
void lkb_mpi_abort(int status);

/* Whether MPI was started (kbsim runs under mpirun or srun, even as one
 * rank): the launcher may have bound the rank to a core. */
bool lkb_mpi_started(void);
int lkb_mpi_rank(void);            /* 0 without MPI */
int lkb_mpi_size(void);            /* 1 without MPI */
const char *lkb_mpi_host(int rank); /* a rank's host name */

/* ---- collectives (every rank, in the same order) ---------------------- */

/* Rank 0's n bytes at buf to every rank. false: MPI failed. */
bool lkb_mpi_bcast(void *buf, size_t n);
/* Rank 0's blob to every rank (the others' is replaced). */
bool lkb_mpi_bcast_blob(struct lkb_blob *b);

/* Collective: every rank's error message (NULL: none), said once: rank 0
 * prints each distinct one as "kbsim: MSG", in rank order, but those
 * already printed (`said`: rank 0 says its own at once); one rank 0 did not
 * have names the rank and host ("kbsim: rank 2 on HOST: MSG"). A rank the
 * others do not join within seconds (one waits in a sweep) says its own.
 * A script error of every rank was printed by every rank. Without MPI (or
 * one rank) MSG is printed unless said. */
void lkb_mpi_error_once(const char *msg, bool said);

/* ---- rank 0: the dispatcher ------------------------------------------- */

/* The next point (0-based) for a worker rank, or -1: none left. Called on
 * the dispatcher's thread. */
typedef long (*lkb_claim_fn)(void *ud);
/* A worker rank finished a point (progress). Dispatcher's thread. */
typedef void (*lkb_ended_fn)(void *ud);
/* The results a worker rank sent at the end of the sweep. Caller's thread,
 * in lkb_dispatch_finish. */
typedef void (*lkb_results_fn)(void *ud, int rank, const unsigned char *p, size_t n);

struct lkb_dispatch;
/* Starts answering the worker ranks' requests on a thread of its own; NULL
 * if it cannot (out of memory). */
struct lkb_dispatch *lkb_dispatch_start(lkb_claim_fn claim, lkb_ended_fn ended, void *ud);
/* Waits until every worker rank has sent its results, hands each to got,
 * and frees d. */
void lkb_dispatch_finish(struct lkb_dispatch *d, lkb_results_fn got, void *ud);

/* ---- worker ranks ------------------------------------------------------ */

/* Asks rank 0 for a point for this process's sweep slot `slot` (any
 * thread): its index, or -1 when none is left. */
long lkb_mpi_request(size_t slot);
/* Tells rank 0 that a point ended (for its progress bar); any thread. */
void lkb_mpi_ended(size_t index);
/* Sends this rank's results for the sweep; ends its part of it. */
void lkb_mpi_send_results(const struct lkb_blob *b);

#endif
