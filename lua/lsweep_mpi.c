/* lsweep_mpi.c — lsweep_mpi.h with MPI (Open MPI, MPICH): kb.sweep's
 * points handed out by rank 0
 *
 * Messages on a duplicate of MPI_COMM_WORLD, all bytes:
 *   worker -> 0  TAG_REQ      u64 slot: "a point for this slot"
 *   0 -> worker  TAG_REPLY+s  i64 index, or -1: none left
 *   worker -> 0  TAG_ENDED    u64 index: a point ended (progress)
 *   worker -> 0  TAG_RESULTS  the rank's results for the sweep (lsweep.c's
 *                             format); its last message of the sweep
 * A rank waiting for a message polls (MPI_Iprobe / MPI_Test) and sleeps
 * between polls, up to KB_POLL_MAX_US: blocking MPI calls spin a core in
 * Open MPI, which would take it from the points. Calls are serialised by
 * one mutex, so MPI_THREAD_SERIALIZED is enough.
 */
#include "lsweep_mpi.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

enum { TAG_REQ = 1, TAG_ENDED = 2, TAG_RESULTS = 3, TAG_REPLY = 16 };
/* Reply tags: TAG_REPLY + slot mod this (at most 1024 slots run at once). */
#define KB_REPLY_TAGS 16384

/* Sleep between polls: doubles from the first to the last while nothing
 * comes. The last bounds the dispatch delay of a point. */
#define KB_POLL_MIN_US 20
#define KB_POLL_MAX_US 500

#define KB_HOST_MAX 64
/* the longest error message lkb_mpi_error_once gathers from a rank */
#define KB_ERROR_MAX (64 << 10)
/* how long a rank with a script error waits for the others before it says
 * its error itself (lkb_mpi_error_once) */
#define KB_ERROR_WAIT_S 5.0

static bool started;
static int rank, size = 1;
static MPI_Comm comm;
static char (*hosts)[KB_HOST_MAX];
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;

static void nap(unsigned *us)
{
    struct timespec ts = {0, (long)*us * 1000};
    nanosleep(&ts, NULL);
    *us = *us * 2 > KB_POLL_MAX_US ? KB_POLL_MAX_US : *us * 2;
}

/* Waits for a request without spinning a core. */
static void wait_req(MPI_Request *req)
{
    unsigned us = KB_POLL_MIN_US;
    for (;;) {
        int done = 0;
        pthread_mutex_lock(&mpi_lock);
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        pthread_mutex_unlock(&mpi_lock);
        if (done)
            return;
        nap(&us);
    }
}

/* Rank 0 only: mpirun ends the job with SIGTERM when a rank dies or on
 * Ctrl-C. Say what that means for the user's points (async-signal-safe:
 * a message made in advance, write, _exit). */
static char term_msg[512];

/* what rank 0 says when mpirun ends the job before any of its sweeps has
 * handed out a point (another rank's usage or script error, Ctrl-C during
 * set-up): the cache advice of term_msg would be wrong */
static char term_msg_early[512];
static volatile sig_atomic_t swept; /* a sweep has started dispatching */

static void on_term(int sig)
{
    (void)sig;
    const char *m = swept ? term_msg : term_msg_early;
    ssize_t r = write(2, m, strlen(m));
    (void)r;
    _exit(143);
}

static bool under_launcher(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE",
                                       "PMI_RANK", "MPI_LOCALNRANKS", NULL};
    for (int i = 0; vars[i]; i++)
        if (getenv(vars[i]) != NULL)
            return true;
    return false;
}

/* The launcher's PMIx server, from PMIX_SERVER_URI* ("NSPACE.RANK;tcp4://
 * 127.0.0.1:PORT" or "...;tcp6://[::1]:PORT"), as a socket address; false
 * if there is none or it is not TCP. */
static bool pmix_server(struct sockaddr_storage *sa)
{
    static const char *const vars[] = {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4",
                                       "PMIX_SERVER_URI3", "PMIX_SERVER_URI21",
                                       "PMIX_SERVER_URI2", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *uri = getenv(vars[i]);
        const char *at = uri ? strstr(uri, "://") : NULL;
        if (at == NULL)
            continue;
        bool v6 = at - uri >= 4 && strncmp(at - 4, "tcp6", 4) == 0;
        char host[INET6_ADDRSTRLEN + 2];
        const char *h = at + 3, *colon = strrchr(h, ':');
        if (colon == NULL || (size_t)(colon - h) >= sizeof host)
            continue;
        memcpy(host, h, (size_t)(colon - h));
        host[colon - h] = '\0';
        long port = strtol(colon + 1, NULL, 10);
        memset(sa, 0, sizeof *sa);
        if (v6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)sa;
            char *name = host[0] == '[' ? host + 1 : host;
            char *end = strchr(name, ']');
            if (end)
                *end = '\0';
            a->sin6_family = AF_INET6;
            a->sin6_port = htons((uint16_t)port);
            if (inet_pton(AF_INET6, name, &a->sin6_addr) == 1)
                return true;
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)sa;
            a->sin_family = AF_INET;
            a->sin_port = htons((uint16_t)port);
            if (inet_pton(AF_INET, host, &a->sin_addr) == 1)
                return true;
        }
    }
    return false;
}

/* Open MPI 4.1 talks to its launcher's PMIx server over a TCP connection
 * to localhost with Nagle's algorithm on. MPI_Finalize sends a message
 * that gets no answer, then the ones that do: Nagle holds them until the
 * server's delayed acknowledgement of the first, and every rank waits
 * 40 ms to end (decision 0046). Turning Nagle off on that one socket (found
 * by its peer, the address in PMIX_SERVER_URI*) sends them at once. */
static void pmix_nodelay(void)
{
    struct sockaddr_storage server;
    if (!pmix_server(&server))
        return;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name), type = 0;
        socklen_t tlen = sizeof type;
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(d) ||
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM ||
            getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 ||
            peer.ss_family != server.ss_family)
            continue;
        bool same;
        if (peer.ss_family == AF_INET) {
            const struct sockaddr_in *a = (const void *)&peer, *b = (const void *)&server;
            same = a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
        } else {
            const struct sockaddr_in6 *a = (const void *)&peer, *b = (const void *)&server;
            same = a->sin6_port == b->sin6_port &&
                   memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr) == 0;
        }
        int one = 1;
        if (same)
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    closedir(d);
}

int lkb_mpi_init(int *argc, char ***argv)
{
    if (!under_launcher())
        return 0;
#ifdef OPEN_MPI
    /* Open MPI's ob1 messaging layer unless the user chose one (mpirun
     * --mca pml, OMPI_MCA_pml): kb.sweep's messages are few and small, and
     * probing the others (UCX, and PSM2/OFI through cm) takes about 0.2 s
     * of every start (decision 0043). */
    if (getenv("OMPI_MCA_pml") == NULL)
        setenv("OMPI_MCA_pml", "ob1", 0);
#endif
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        fputs("kbsim: MPI_Init_thread failed\n", stderr);
        return 2;
    }
    started = true;
    pmix_nodelay();
    if (provided < MPI_THREAD_SERIALIZED) {
        fputs("kbsim: this MPI library does not allow calls from several threads "
              "(MPI_THREAD_SERIALIZED), which kb.sweep needs\n", stderr);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    hosts = calloc((size_t)size, sizeof *hosts);
    char me[KB_HOST_MAX] = {0};
    if (gethostname(me, sizeof me - 1) != 0)
        strcpy(me, "?");
    if (hosts == NULL) {
        fputs("kbsim: out of memory\n", stderr);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Allgather(me, KB_HOST_MAX, MPI_CHAR, hosts, KB_HOST_MAX, MPI_CHAR, comm);
    if (rank == 0 && size > 1) {
        snprintf(term_msg, sizeof term_msg,
                 "kbsim: rank 0 on %s: the MPI job was ended (a rank died or was killed, "
                 "or Ctrl-C: see mpirun's message); every sweep point that finished is in "
                 "the cache: run the same command with --fast to run only the others\n", me);
        snprintf(term_msg_early, sizeof term_msg_early,
                 "kbsim: rank 0 on %s: the MPI job was ended before any sweep began (another "
                 "rank ended first, or Ctrl-C: see the messages above and mpirun's)\n", me);
        struct sigaction sa = {.sa_handler = on_term};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
    }
    return 0;
}

void lkb_mpi_finalize(void)
{
    if (!started)
        return;
    /* ranks wait here for rank 0's outputs: without spinning */
    MPI_Request req;
    MPI_Ibarrier(comm, &req);
    wait_req(&req);
    /* under the lock: an abandoned point's thread (its timeout) may still
     * report its end (lkb_mpi_ended) */
    pthread_mutex_lock(&mpi_lock);
    started = false;
    MPI_Comm_free(&comm);
    MPI_Finalize();
    pthread_mutex_unlock(&mpi_lock);
    free(hosts);
    hosts = NULL;
}

void lkb_mpi_abort(int status)
{
    if (started)
        MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

bool lkb_mpi_started(void) { return started; }
int lkb_mpi_rank(void) { return rank; }
int lkb_mpi_size(void) { return size; }

const char *lkb_mpi_host(int r)
{
    return hosts && r >= 0 && r < size ? hosts[r] : "?";
}

/* ---- collectives ------------------------------------------------------- */

bool lkb_mpi_bcast(void *buf, size_t n)
{
    if (!started)
        return true;
    char *p = buf;
    while (n > 0) {
        int k = n > INT_MAX ? INT_MAX : (int)n;
        MPI_Request req;
        pthread_mutex_lock(&mpi_lock);
        int rc = MPI_Ibcast(p, k, MPI_BYTE, 0, comm, &req);
        pthread_mutex_unlock(&mpi_lock);
        if (rc != MPI_SUCCESS)
            return false;
        wait_req(&req);
        p += k;
        n -= (size_t)k;
    }
    return true;
}

bool lkb_mpi_bcast_blob(struct lkb_blob *b)
{
    uint64_t n = b->n;
    if (!lkb_mpi_bcast(&n, sizeof n))
        return false;
    if (rank != 0) {
        b->n = 0;
        if (!lkb_blob_reserve(b, (size_t)n))
            lkb_mpi_abort(2);
        b->n = (size_t)n;
    }
    return lkb_mpi_bcast(b->p, (size_t)n);
}

/* A rank's error not yet said, made in advance for on_term_say: if the
 * job is ended meanwhile (another rank's MPI error, mpirun's SIGTERM), the
 * rank says it before it goes, as it said it before it waited. */
static char *unsaid;

static void on_term_say(int sig)
{
    (void)sig;
    ssize_t r = write(2, unsaid, strlen(unsaid));
    (void)r;
    _exit(143);
}

/* Waits for a request at most `seconds` (< 0: no limit): 1 completed, 0
 * not yet, -1 failed (on a communicator whose errors return). */
static int wait_req_for(MPI_Request *req, double seconds)
{
    unsigned us = KB_POLL_MIN_US;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int done = 0;
        pthread_mutex_lock(&mpi_lock);
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        pthread_mutex_unlock(&mpi_lock);
        if (rc != MPI_SUCCESS)
            return -1;
        if (done)
            return 1;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (seconds >= 0 &&
            (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 > seconds)
            return 0;
        nap(&us);
    }
}

void lkb_mpi_error_once(const char *msg, bool said)
{
    if (!started || size == 1) {
        if (msg && !said)
            fprintf(stderr, "kbsim: %s\n", msg);
        return;
    }
    /* a flag byte ('1': printed already), the message, its NUL; a message
     * is cut at 64 KiB (a traceback is short) */
    size_t len = msg ? strlen(msg) : 0;
    int n = msg ? (int)(len > KB_ERROR_MAX ? KB_ERROR_MAX : len) + 2 : 0;
    char *mine = NULL;
    if (n > 0 && (mine = malloc((size_t)n)) != NULL) {
        mine[0] = said ? '1' : '0';
        memcpy(mine + 1, msg, (size_t)n - 2);
        mine[n - 1] = 0;
    } else {
        n = 0;
    }
    /* First every rank meets here, as before MPI_Finalize. A rank whose
     * script went another way may wait in a sweep the others left: after a
     * while a rank says its own error (rank 0 has said its own at once) and
     * waits on; a collective that does not match (MPI's error) ends the job
     * after it, as MPI_Finalize's barrier did. */
    struct sigaction old_term;
    bool on_guard = false;
    if (rank > 0 && mine && mine[0] == '0') {
        size_t k = strlen(mine + 1) + strlen(lkb_mpi_host(rank)) + 64;
        if ((unsaid = malloc(k)) != NULL) {
            snprintf(unsaid, k, "kbsim: rank %d on %s: %s\n", rank, lkb_mpi_host(rank), mine + 1);
            struct sigaction sa = {.sa_handler = on_term_say};
            sigemptyset(&sa.sa_mask);
            on_guard = sigaction(SIGTERM, &sa, &old_term) == 0;
        }
    }
    MPI_Request req;
    pthread_mutex_lock(&mpi_lock);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Ibarrier(comm, &req);
    pthread_mutex_unlock(&mpi_lock);
    int got = rc == MPI_SUCCESS ? wait_req_for(&req, KB_ERROR_WAIT_S) : -1;
    if (got != 1 && mine && mine[0] == '0') {
        if (on_guard)
            sigaction(SIGTERM, &old_term, NULL); /* said now: not twice */
        on_guard = false;
        fprintf(stderr, "kbsim: rank %d on %s: %s\n", rank, lkb_mpi_host(rank), mine + 1);
        mine[0] = '1';
    }
    if (got == 0 && rank == 0 && mine) {
        /* Rank 0 failed and the others did not follow within the wait:
         * they went another way, into a sweep rank 0 will not run (the
         * error depended on the rank, a file only rank 0 could not read)
         * or on through the script, where nothing is written but by
         * rank 0. They would wait for it for ever: end the job. Its error
         * is said; mpirun's own note follows. */
        fprintf(stderr, "kbsim: rank 0 on %s: the other ranks did not meet this error "
                "within %.0f s (the script went another way on them, maybe into a "
                "sweep): ending the MPI job\n", lkb_mpi_host(0), KB_ERROR_WAIT_S);
        fflush(NULL); /* what the script printed before its error too */
        signal(SIGTERM, SIG_DFL); /* not on_term's "a rank died" */
        MPI_Abort(MPI_COMM_WORLD, 2);
        _exit(2);
    }
    if (got == 0)
        got = wait_req_for(&req, -1);
    if (got < 0)
        lkb_mpi_abort(2);
    pthread_mutex_lock(&mpi_lock);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    pthread_mutex_unlock(&mpi_lock);
    /* every rank is here: rank 0 says what is left */
    if (on_guard)
        sigaction(SIGTERM, &old_term, NULL);
    free(unsaid);
    unsaid = NULL;
    int *ns = NULL, *at = NULL;
    char *all = NULL;
    if (rank == 0) {
        ns = calloc((size_t)size, sizeof *ns);
        at = calloc((size_t)size, sizeof *at);
        if (ns == NULL || at == NULL)
            lkb_mpi_abort(2);
    }
    pthread_mutex_lock(&mpi_lock);
    MPI_Igather(&n, 1, MPI_INT, ns, 1, MPI_INT, 0, comm, &req);
    pthread_mutex_unlock(&mpi_lock);
    wait_req(&req);
    if (rank == 0) {
        size_t total = 0;
        for (int r = 0; r < size; r++) {
            at[r] = total > INT_MAX ? INT_MAX : (int)total;
            total += (size_t)ns[r];
        }
        all = total <= INT_MAX ? malloc(total ? total : 1) : NULL;
        if (all == NULL)
            lkb_mpi_abort(2);
    }
    pthread_mutex_lock(&mpi_lock);
    MPI_Igatherv(mine, n, MPI_CHAR, all, ns, at, MPI_CHAR, 0, comm, &req);
    pthread_mutex_unlock(&mpi_lock);
    wait_req(&req);
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            if (ns[r] == 0)
                continue;
            const char *m = all + at[r] + 1;
            bool seen = all[at[r]] == '1';
            for (int q = 0; q < r && !seen; q++)
                seen = ns[q] > 0 && strcmp(all + at[q] + 1, m) == 0;
            if (seen)
                continue;
            if (r == 0)
                fprintf(stderr, "kbsim: %s\n", m);
            else
                fprintf(stderr, "kbsim: rank %d on %s: %s\n", r, lkb_mpi_host(r), m);
        }
    }
    free(all);
    free(at);
    free(ns);
    free(mine);
}

/* ---- rank 0: the dispatcher -------------------------------------------- */

struct lkb_dispatch {
    pthread_t thread;
    lkb_claim_fn claim;
    lkb_ended_fn ended;
    void *ud;
    unsigned char **results; /* per rank */
    size_t *nresults;
};

/* Receives the message st announced; NULL if out of memory. */
static unsigned char *recv_probed(MPI_Status *st, size_t *n)
{
    int count = 0;
    MPI_Get_count(st, MPI_BYTE, &count);
    unsigned char *p = malloc(count > 0 ? (size_t)count : 1);
    if (p == NULL)
        lkb_mpi_abort(2);
    MPI_Recv(p, count, MPI_BYTE, st->MPI_SOURCE, st->MPI_TAG, comm, MPI_STATUS_IGNORE);
    *n = (size_t)count;
    return p;
}

static void *dispatch_main(void *arg)
{
    struct lkb_dispatch *d = arg;
    int left = size - 1;
    unsigned us = KB_POLL_MIN_US;
    while (left > 0) {
        int flag = 0;
        MPI_Status st;
        pthread_mutex_lock(&mpi_lock);
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &st);
        if (!flag) {
            pthread_mutex_unlock(&mpi_lock);
            nap(&us);
            continue;
        }
        us = KB_POLL_MIN_US;
        size_t n;
        unsigned char *msg = recv_probed(&st, &n);
        pthread_mutex_unlock(&mpi_lock);
        int src = st.MPI_SOURCE;
        if (st.MPI_TAG == TAG_REQ && n == 8) {
            uint64_t slot;
            memcpy(&slot, msg, 8);
            int64_t index = d->claim(d->ud);
            pthread_mutex_lock(&mpi_lock);
            MPI_Send(&index, 8, MPI_BYTE, src, TAG_REPLY + (int)(slot % KB_REPLY_TAGS), comm);
            pthread_mutex_unlock(&mpi_lock);
            free(msg);
        } else if (st.MPI_TAG == TAG_ENDED) {
            d->ended(d->ud);
            free(msg);
        } else if (st.MPI_TAG == TAG_RESULTS && d->results[src] == NULL) {
            d->results[src] = msg;
            d->nresults[src] = n;
            left--;
        } else {
            fprintf(stderr, "kbsim: rank 0: unexpected message (tag %d) from rank %d\n",
                    st.MPI_TAG, src);
            lkb_mpi_abort(2);
        }
    }
    return NULL;
}

struct lkb_dispatch *lkb_dispatch_start(lkb_claim_fn claim, lkb_ended_fn ended, void *ud)
{
    swept = 1; /* from now, a job ended by mpirun may have finished points */
    struct lkb_dispatch *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    *d = (struct lkb_dispatch){.claim = claim, .ended = ended, .ud = ud};
    d->results = calloc((size_t)size, sizeof *d->results);
    d->nresults = calloc((size_t)size, sizeof *d->nresults);
    if (!d->results || !d->nresults || pthread_create(&d->thread, NULL, dispatch_main, d) != 0) {
        free(d->results);
        free(d->nresults);
        free(d);
        return NULL;
    }
    return d;
}

void lkb_dispatch_finish(struct lkb_dispatch *d, lkb_results_fn got, void *ud)
{
    pthread_join(d->thread, NULL);
    for (int r = 1; r < size; r++) {
        got(ud, r, d->results[r], d->nresults[r]);
        free(d->results[r]);
    }
    free(d->results);
    free(d->nresults);
    free(d);
}

/* ---- worker ranks ------------------------------------------------------ */

long lkb_mpi_request(size_t slot)
{
    uint64_t s = slot;
    int tag = TAG_REPLY + (int)(slot % KB_REPLY_TAGS);
    pthread_mutex_lock(&mpi_lock);
    MPI_Send(&s, 8, MPI_BYTE, 0, TAG_REQ, comm);
    pthread_mutex_unlock(&mpi_lock);
    unsigned us = KB_POLL_MIN_US;
    for (;;) {
        int flag = 0;
        int64_t index = -1;
        pthread_mutex_lock(&mpi_lock);
        MPI_Iprobe(0, tag, comm, &flag, MPI_STATUS_IGNORE);
        if (flag)
            MPI_Recv(&index, 8, MPI_BYTE, 0, tag, comm, MPI_STATUS_IGNORE);
        pthread_mutex_unlock(&mpi_lock);
        if (flag)
            return (long)index;
        nap(&us);
    }
}

void lkb_mpi_ended(size_t index)
{
    uint64_t i = index;
    pthread_mutex_lock(&mpi_lock);
    if (started)
        MPI_Send(&i, 8, MPI_BYTE, 0, TAG_ENDED, comm);
    pthread_mutex_unlock(&mpi_lock);
}

void lkb_mpi_send_results(const struct lkb_blob *b)
{
    if (b->n > INT_MAX) {
        fprintf(stderr, "kbsim: rank %d: the rows of this sweep exceed 2 GiB\n", rank);
        lkb_mpi_abort(2);
    }
    MPI_Request req;
    pthread_mutex_lock(&mpi_lock);
    MPI_Isend(b->p, (int)b->n, MPI_BYTE, 0, TAG_RESULTS, comm, &req);
    pthread_mutex_unlock(&mpi_lock);
    wait_req(&req);
}
