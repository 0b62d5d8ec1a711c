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
 * build: kb_mpi_size() is 1 and kb.sweep never calls the rest.
 */
#ifndef KBSIM_LSWEEP_MPI_H
#define KBSIM_LSWEEP_MPI_H

#include <stdbool.h>
#include <stddef.h>

#include "lsweep_cache.h"

/* Starts MPI if kbsim was started by an MPI launcher (mpirun, srun); a
 * plain run starts nothing. 0, or an exit status after a message. */
int kb_mpi_init(int *argc, char ***argv);
/* Ends MPI (collective) if it was started. */
void kb_mpi_finalize(void);
/* Ends the whole job with this status (an unrecoverable disagreement). */
void kb_mpi_abort(int status);

int kb_mpi_rank(void);            /* 0 without MPI */
int kb_mpi_size(void);            /* 1 without MPI */
const char *kb_mpi_host(int rank); /* a rank's host name */

/* ---- collectives (every rank, in the same order) ---------------------- */

/* Rank 0's n bytes at buf to every rank. false: MPI failed. */
bool kb_mpi_bcast(void *buf, size_t n);
/* Rank 0's blob to every rank (the others' is replaced). */
bool kb_mpi_bcast_blob(struct blob *b);

/* ---- rank 0: the dispatcher ------------------------------------------- */

/* The next point (0-based) for a worker rank, or -1: none left. Called on
 * the dispatcher's thread. */
typedef long (*kb_claim_fn)(void *ud);
/* A worker rank finished a point (progress). Dispatcher's thread. */
typedef void (*kb_ended_fn)(void *ud);
/* The results a worker rank sent at the end of the sweep. Caller's thread,
 * in kb_dispatch_finish. */
typedef void (*kb_results_fn)(void *ud, int rank, const unsigned char *p, size_t n);

struct kb_dispatch;
/* Starts answering the worker ranks' requests on a thread of its own; NULL
 * if it cannot (out of memory). */
struct kb_dispatch *kb_dispatch_start(kb_claim_fn claim, kb_ended_fn ended, void *ud);
/* Waits until every worker rank has sent its results, hands each to got,
 * and frees d. */
void kb_dispatch_finish(struct kb_dispatch *d, kb_results_fn got, void *ud);

/* ---- worker ranks ------------------------------------------------------ */

/* Asks rank 0 for a point for this process's sweep slot `slot` (any
 * thread): its index, or -1 when none is left. */
long kb_mpi_request(size_t slot);
/* Tells rank 0 that a point ended (for its progress bar); any thread. */
void kb_mpi_ended(size_t index);
/* Sends this rank's results for the sweep; ends its part of it. */
void kb_mpi_send_results(const struct blob *b);

#endif
