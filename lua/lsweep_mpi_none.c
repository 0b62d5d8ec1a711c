/* lsweep_mpi_none.c — lsweep_mpi.h for a build without MPI: one rank.
 * kb.sweep calls nothing here but lkb_mpi_rank and lkb_mpi_size. */
#include "lsweep_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Started by mpirun as one of several ranks, this build would run the
 * whole script in every rank, all writing the same outputs: refused. */
int lkb_mpi_init(int *argc, char ***argv)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
    (void)argc, (void)argv;
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && atoi(v) > 1) {
            fprintf(stderr, "kbsim: started as one of %s MPI ranks, but this kbsim was built "
                    "without MPI (install libopenmpi-dev and rebuild; see docs/cluster.md)\n", v);
            return 2;
        }
    }
    return 0;
}

void lkb_mpi_finalize(void) {}
void lkb_mpi_abort(int status) { exit(status); }
bool lkb_mpi_started(void) { return false; }
int lkb_mpi_rank(void) { return 0; }
int lkb_mpi_size(void) { return 1; }

const char *lkb_mpi_host(int rank)
{
    static char host[256];
    (void)rank;
    if (host[0] == '\0' && gethostname(host, sizeof host - 1) != 0)
        host[0] = '?';
    return host;
}

bool lkb_mpi_bcast(void *buf, size_t n)
{
    (void)buf, (void)n;
    return true;
}

bool lkb_mpi_bcast_blob(struct lkb_blob *b)
{
    (void)b;
    return true;
}

struct lkb_dispatch *lkb_dispatch_start(lkb_claim_fn claim, lkb_ended_fn ended, void *ud)
{
    (void)claim, (void)ended, (void)ud;
    return NULL;
}

void lkb_dispatch_finish(struct lkb_dispatch *d, lkb_results_fn got, void *ud)
{
    (void)d, (void)got, (void)ud;
}

long lkb_mpi_request(size_t slot)
{
    (void)slot;
    return -1;
}

void lkb_mpi_ended(size_t index) { (void)index; }
void lkb_mpi_send_results(const struct lkb_blob *b) { (void)b; }

void lkb_mpi_error_once(const char *msg, bool said)
{
    if (msg && !said)
        fprintf(stderr, "kbsim: %s\n", msg);
}
