/* lrender.c — figures rendered in the background: lrender.h
 *
 * A render is one gnuplot process started with posix_spawnp, its stdout
 * and stderr going to an unnamed temporary file (read only when it fails).
 * The renders of the process are one list in the order they were asked
 * for, under a mutex (a sweep point's state may draw a figure too): a
 * render is queued, running, then done; it stays in the list until it
 * ended well, or until its failure has been reported.
 *
 * results.figure never waits: a render starts at once when a CPU is free
 * (and no earlier render writes the same files), else it is queued. One
 * thread of this file (the reaper, signals blocked) waits for the running
 * renders, oldest first, and starts the queued ones as they end; so a
 * script busy in kb.sweep does not hold its figures up, nor they it. No
 * Lua error is raised while the mutex is held.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "lrender.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lauxlib.h>

#include "lsweep_mpi.h"

extern char **environ;

/* outputs of one render (SVG and PNG for results.figure), gnuplot's
 * arguments before the script, renders running at once */
#define MAX_OUT 4
#define MAX_ARGS 16
#define MAX_RUNNING 16
/* at most this much of gnuplot's output goes into a failure's message */
#define MAX_LOG 4096

enum job_state { QUEUED, RUNNING, DONE };

struct job {
    struct job *next;
    enum job_state state;
    pid_t pid;
    FILE *log;       /* gnuplot's stdout and stderr */
    char *name;      /* the figure's */
    char *dir;       /* gnuplot runs there */
    char *script;    /* DIR/SCRIPT, for messages */
    char *argv[MAX_ARGS + 3];
    int nout;
    char *tmp[MAX_OUT], *out[MAX_OUT];
    char *err;       /* why it failed (once done), or NULL */
    bool reported;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER; /* a render started or ended */
static struct job *head;
static int running;
static bool reaper_started;

/* what a message becomes when there is no memory to format it */
static char no_memory[] = "out of memory";

static char *format(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return n < 0 ? no_memory : s;
}

static void free_msg(char *s)
{
    if (s != no_memory)
        free(s);
}

static void job_free(struct job *j)
{
    if (j->log)
        fclose(j->log);
    free(j->name);
    free(j->dir);
    free(j->script);
    for (int i = 0; j->argv[i]; i++)
        free(j->argv[i]);
    for (int i = 0; i < j->nout; i++) {
        free(j->tmp[i]);
        free(j->out[i]);
    }
    free_msg(j->err);
    free(j);
}

/* Under an MPI launcher, gnuplot is not held to the core the launcher
 * bound the rank to: it may run on every CPU of the machine (as far as
 * the job's cpuset allows), where the ranks waiting for rank 0 leave
 * room. Otherwise (a plain run, or taskset) it keeps kbsim's CPUs. */
static bool unbound(void)
{
    return lkb_mpi_started();
}

/* The renders that may run at once: the CPUs gnuplot may run on (at most
 * MAX_RUNNING). */
static int max_running(void)
{
    long n = 0;
    cpu_set_t set;
    if (unbound())
        n = sysconf(_SC_NPROCESSORS_ONLN);
    else if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
    return n < 1 ? 1 : n > MAX_RUNNING ? MAX_RUNNING : (int)n;
}

/* gnuplot's output, its trailing newlines cut; "" if none. */
static char *read_log(FILE *log)
{
    char *buf = malloc(MAX_LOG + 1);
    if (buf == NULL)
        return NULL;
    size_t n = 0;
    if (log && fseek(log, 0, SEEK_SET) == 0)
        n = fread(buf, 1, MAX_LOG, log);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    buf[n] = '\0';
    return buf;
}

/* A render that ended with wstatus: its outputs renamed into place, or
 * why it failed. */
static void finish(struct job *j, int wstatus)
{
    j->state = DONE;
    j->pid = 0;
    running--;
    bool exited_ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
    bool wrote_all = true;
    for (int i = 0; i < j->nout; i++)
        wrote_all = wrote_all && access(j->tmp[i], F_OK) == 0;
    if (exited_ok && wrote_all) {
        for (int i = 0; i < j->nout && j->err == NULL; i++)
            if (rename(j->tmp[i], j->out[i]) != 0)
                j->err = format("cannot rename '%s' to '%s': %s", j->tmp[i], j->out[i],
                                strerror(errno));
    } else {
        char *log = read_log(j->log);
        for (int i = 0; i < j->nout; i++)
            remove(j->tmp[i]);
        if (exited_ok)
            j->err = format("gnuplot failed on '%s': it wrote no SVG or PNG", j->script);
        else if (log && log[0])
            j->err = format("gnuplot failed on '%s': %s", j->script, log);
        else if (WIFSIGNALED(wstatus))
            j->err = format("gnuplot failed on '%s': killed by signal %d", j->script,
                            WTERMSIG(wstatus));
        else
            j->err = format("gnuplot failed on '%s': exit status %d", j->script,
                            WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
        free(log);
    }
    if (j->log) {
        fclose(j->log);
        j->log = NULL;
    }
}

/* Starts j (queued): gnuplot ARGS SCRIPT in its folder. Either running,
 * or done with the reason it could not start. */
static void spawn(struct job *j)
{
    j->log = tmpfile();
    if (j->log == NULL) {
        j->err = format("cannot make a temporary file for gnuplot's output: %s", strerror(errno));
        j->state = DONE;
        return;
    }
    posix_spawn_file_actions_t fa;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0) {
        j->err = format("cannot start gnuplot: %s", strerror(rc));
        j->state = DONE;
        return;
    }
    int fd = fileno(j->log);
    rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, fd, 1);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, fd, 2);
    if (rc == 0)
        rc = posix_spawn_file_actions_addchdir_np(&fa, j->dir);
    /* the child takes this thread's CPU affinity: widened for it when
     * unbound(), then put back */
    cpu_set_t mine, all;
    bool widened = false;
    if (rc == 0 && unbound() && pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) == 0) {
        CPU_ZERO(&all);
        long n = sysconf(_SC_NPROCESSORS_CONF);
        for (long c = 0; c < n && c < CPU_SETSIZE; c++)
            CPU_SET((int)c, &all);
        widened = pthread_setaffinity_np(pthread_self(), sizeof all, &all) == 0;
    }
    /* its own process group: a Ctrl-C at the terminal stops the sweep,
     * not the drawing of what is finished */
    posix_spawnattr_t at;
    bool have_at = rc == 0 && posix_spawnattr_init(&at) == 0;
    if (have_at && (posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP) != 0 ||
                    posix_spawnattr_setpgroup(&at, 0) != 0)) {
        posix_spawnattr_destroy(&at);
        have_at = false;
    }
    if (rc == 0)
        rc = posix_spawnp(&j->pid, j->argv[0], &fa, have_at ? &at : NULL, j->argv, environ);
    if (have_at)
        posix_spawnattr_destroy(&at);
    if (widened)
        pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        j->pid = 0;
        j->err = format("cannot start gnuplot in '%s': %s", j->dir, strerror(rc));
        j->state = DONE;
        return;
    }
    j->state = RUNNING;
    running++;
}

/* Whether a render before j, not done, writes one of j's files. */
static bool clashes(const struct job *j)
{
    for (const struct job *e = head; e && e != j; e = e->next)
        for (int i = 0; i < e->nout && e->state != DONE; i++)
            for (int k = 0; k < j->nout; k++)
                if (strcmp(e->out[i], j->out[k]) == 0)
                    return true;
    return false;
}

/* Starts the queued renders that may start, in order. */
static void start_queued(void)
{
    int max = max_running();
    for (struct job *j = head; j && running < max; j = j->next)
        if (j->state == QUEUED && !clashes(j)) {
            spawn(j);
            pthread_cond_broadcast(&changed);
        }
}

/* Drops the renders that ended well, or whose failure was reported. */
static void drop_done(void)
{
    for (struct job **p = &head; *p;) {
        struct job *j = *p;
        if (j->state == DONE && (j->err == NULL || j->reported)) {
            *p = j->next;
            job_free(j);
        } else {
            p = &j->next;
        }
    }
}

/* The reaper: waits for the oldest running render, then starts what may
 * start; sleeps while nothing runs. */
static void *reaper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        struct job *j = head;
        while (j && j->state != RUNNING)
            j = j->next;
        if (j == NULL) {
            pthread_cond_wait(&changed, &lock);
            continue;
        }
        pid_t pid = j->pid;
        pthread_mutex_unlock(&lock);
        int st = 0;
        pid_t r;
        do
            r = waitpid(pid, &st, 0);
        while (r < 0 && errno == EINTR);
        pthread_mutex_lock(&lock);
        /* r < 0: not our child any more (reaped elsewhere): its outputs
         * decide */
        finish(j, r == pid ? st : 0);
        start_queued();
        pthread_cond_broadcast(&changed);
    }
    return NULL;
}

/* Starts the reaper thread, every signal blocked in it. 0 or an errno. */
static int start_reaper(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        pthread_t t;
        rc = pthread_create(&t, &attr, reaper, NULL);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static void check_strings(lua_State *L, int arg, int max)
{
    luaL_checktype(L, arg, LUA_TTABLE);
    lua_Integer n = luaL_len(L, arg);
    luaL_argcheck(L, n <= max, arg, "too many entries");
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_geti(L, arg, i) != LUA_TSTRING)
            luaL_error(L, "bad argument #%d: entry %d is not a string", arg, (int)i);
        lua_pop(L, 1);
    }
}

static char *dup_at(lua_State *L, int t, int i)
{
    lua_geti(L, t, i);
    char *s = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);
    return s;
}

/* kb._render.start(name, dir, script, args, tmp_outputs, outputs):
 * renders `gnuplot ARGS... SCRIPT` in dir in the background (at once, or
 * when a CPU is free). When it ends with status 0 having written every
 * tmp_outputs[i], each is renamed to outputs[i]; otherwise they are
 * removed and the failure is reported. */
static int l_start(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    const char *dir = luaL_checkstring(L, 2);
    const char *script = luaL_checkstring(L, 3);
    check_strings(L, 4, MAX_ARGS);
    check_strings(L, 5, MAX_OUT);
    check_strings(L, 6, MAX_OUT);
    int nargs = (int)luaL_len(L, 4), nout = (int)luaL_len(L, 5);
    luaL_argcheck(L, nout == (int)luaL_len(L, 6), 6, "as many outputs as temporary outputs");

    /* every string the render keeps, copied before the lock is taken */
    struct job *j = calloc(1, sizeof *j);
    if (j == NULL)
        return luaL_error(L, "results.figure: out of memory");
    bool ok = (j->name = strdup(name)) != NULL && (j->dir = strdup(dir)) != NULL &&
              (j->argv[0] = strdup("gnuplot")) != NULL;
    for (int i = 1; i <= nargs && ok; i++)
        ok = (j->argv[i] = dup_at(L, 4, i)) != NULL;
    ok = ok && (j->argv[nargs + 1] = strdup(script)) != NULL;
    if (ok && (j->script = format("%s/%s", dir, script)) == no_memory) {
        j->script = NULL;
        ok = false;
    }
    for (int i = 0; i < nout && ok; i++) {
        j->nout = i + 1;
        j->tmp[i] = dup_at(L, 5, i + 1);
        j->out[i] = dup_at(L, 6, i + 1);
        ok = j->tmp[i] && j->out[i];
    }
    if (!ok) {
        job_free(j);
        return luaL_error(L, "results.figure: out of memory");
    }

    pthread_mutex_lock(&lock);
    int rc = reaper_started ? 0 : start_reaper();
    reaper_started = rc == 0;
    if (rc == 0) {
        struct job **p = &head;
        while (*p)
            p = &(*p)->next;
        *p = j;
        drop_done();
        start_queued();
    }
    pthread_mutex_unlock(&lock);
    if (rc != 0) {
        job_free(j);
        return luaL_error(L, "results.figure '%s': cannot start a thread: %s", name, strerror(rc));
    }
    return 0;
}

/* Waits for every render and marks the failures reported. to: prints
 * each on it ("kbsim: figure 'NAME': WHY"); else returns them joined by
 * newlines (NULL: none; no_memory: no memory to join them). Under lock. */
static char *wait_all(FILE *to, int *nfailed)
{
    for (;;) {
        bool busy = false;
        for (struct job *j = head; j && !busy; j = j->next)
            busy = j->state != DONE;
        if (!busy)
            break;
        pthread_cond_wait(&changed, &lock);
    }
    *nfailed = 0;
    char *all = NULL;
    for (struct job *j = head; j; j = j->next) {
        if (j->err == NULL || j->reported)
            continue;
        j->reported = true;
        ++*nfailed;
        if (to) {
            fprintf(to, "kbsim: figure '%s': %s\n", j->name, j->err);
            continue;
        }
        char *s = format("%s%sfigure '%s': %s", all && all != no_memory ? all : "",
                         all ? "\n" : "", j->name, j->err);
        free_msg(all);
        all = s;
    }
    drop_done();
    return all;
}

/* kb._render.wait() -> nil when every render asked for so far succeeded,
 * else the failures not yet reported, one after the other. */
static int l_wait(lua_State *L)
{
    int n;
    pthread_mutex_lock(&lock);
    char *all = wait_all(NULL, &n);
    pthread_mutex_unlock(&lock);
    if (all == NULL)
        return 0;
    lua_pushstring(L, all);
    free_msg(all);
    return 1;
}

int lkb_render_wait_all(void)
{
    int n;
    pthread_mutex_lock(&lock);
    wait_all(stderr, &n);
    pthread_mutex_unlock(&lock);
    return n;
}

void lkb_open_render(lua_State *L)
{
    static const luaL_Reg funcs[] = {{"start", l_start}, {"wait", l_wait}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    lua_setfield(L, -2, "_render");
}
