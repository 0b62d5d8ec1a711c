/* lrender.c — figures rendered in the background: lrender.h
 *
 * A render is drawn by a plotter: a gnuplot process started with
 * posix_spawnp that reads its commands from a pipe and draws one render
 * after another, each after `reset session` (decision 0046: gnuplot's
 * start-up — loading its libraries, fontconfig, cairo — was 40 % of the CPU
 * of drawing a figure; the bytes drawn are the same). Per render it is sent
 *     reset session / reset errors / cd "DIR" / the -e commands /
 *     load "SCRIPT" / set output / print the marker and GPVAL_ERRNO
 * and the render ends when the marker comes back on gnuplot's stdout: a
 * non-zero GPVAL_ERRNO is a failure, and its message is what gnuplot wrote
 * on stderr (an unnamed temporary file per plotter) since the render began.
 * A plotter that exits (a script's `exit`, a crash) ends its render with
 * its exit status, as a one-shot gnuplot would, and a new one is started
 * for the next render. Plotters' pipes are close-on-exec, so each sees
 * end-of-file on its stdin when kbsim closes it or dies.
 *
 * The renders of the process are one list in the order they were asked
 * for, under a mutex (a sweep point's state may draw a figure too): a
 * render is queued, running, then done; it stays in the list until it
 * ended well, or until its failure has been reported.
 *
 * results.figure never waits: a render starts at once when a plotter is
 * idle or another may start (one per CPU), and no earlier render writes
 * the same files; else it is queued. One thread of this file (the reaper,
 * signals blocked) reads the plotters' stdout, ends their renders and
 * starts the queued ones; so a script busy in kb.sweep does not hold its
 * figures up, nor they it. No Lua error is raised while the mutex is held.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "lrender.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
    char *name;      /* the figure's */
    char *dir;       /* as given, for messages */
    char *script;    /* DIR/SCRIPT, for messages */
    char *commands;  /* what the plotter is sent for it */
    int nout;
    char *tmp[MAX_OUT], *out[MAX_OUT];
    char *err;       /* why it failed (once done), or NULL */
    bool reported;
};

/* A gnuplot drawing renders one after the other. */
struct plotter {
    pid_t pid;       /* 0: not running */
    int in, out;     /* its stdin (ours to write), its stdout (ours to read) */
    FILE *log;       /* its stderr */
    long log_from;   /* where the current render's messages begin */
    struct job *job; /* the render it draws, or NULL: idle */
    char line[256];  /* the start of the stdout line being read */
    size_t len;
};

/* What a plotter prints after each render, with GPVAL_ERRNO. */
#define MARKER "kbsim-render-done"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER; /* a render started or ended */
static struct job *head;
static struct plotter plotters[MAX_RUNNING];
static int nplotters; /* running */
static bool reaper_started;
static int wake[2] = {-1, -1}; /* a byte here makes the reaper look again */

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
    free(j->name);
    free(j->dir);
    free(j->script);
    free(j->commands);
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

/* gnuplot's output from offset from, its leading blanks and trailing
 * newlines cut; "" if none. */
static char *read_log(FILE *log, long from)
{
    char *buf = malloc(MAX_LOG + 1);
    if (buf == NULL)
        return NULL;
    size_t n = 0;
    if (log && fseek(log, from, SEEK_SET) == 0)
        n = fread(buf, 1, MAX_LOG, log);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    buf[n] = '\0';
    /* gnuplot reading commands from a pipe indents its messages */
    size_t lead = strspn(buf, " \t\r\n");
    memmove(buf, buf + lead, n - lead + 1);
    return buf;
}

/* A render that ended: ok (gnuplot said no error, or exited with
 * status 0), else failed with why (or gnuplot's messages since from). Its
 * outputs renamed into place, or why it failed. */
static void finish(struct plotter *p, bool ok, const char *why)
{
    struct job *j = p->job;
    p->job = NULL;
    j->state = DONE;
    bool wrote_all = true;
    for (int i = 0; i < j->nout; i++)
        wrote_all = wrote_all && access(j->tmp[i], F_OK) == 0;
    if (ok && wrote_all) {
        for (int i = 0; i < j->nout && j->err == NULL; i++)
            if (rename(j->tmp[i], j->out[i]) != 0)
                j->err = format("cannot rename '%s' to '%s': %s", j->tmp[i], j->out[i],
                                strerror(errno));
        return;
    }
    fflush(p->log);
    char *log = read_log(p->log, p->log_from);
    for (int i = 0; i < j->nout; i++)
        remove(j->tmp[i]);
    if (ok)
        j->err = format("gnuplot failed on '%s': it wrote no SVG or PNG", j->script);
    else if (log && log[0])
        j->err = format("gnuplot failed on '%s': %s", j->script, log);
    else
        j->err = format("gnuplot failed on '%s': %s", j->script, why);
    free(log);
}

/* A plotter that exited with wstatus: its render (if any) ends as a
 * one-shot gnuplot's would; its pipes are closed. */
static void plotter_gone(struct plotter *p, int wstatus)
{
    if (p->job) {
        bool ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
        char why[64];
        if (WIFSIGNALED(wstatus))
            snprintf(why, sizeof why, "killed by signal %d", WTERMSIG(wstatus));
        else
            snprintf(why, sizeof why, "exit status %d",
                     WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
        finish(p, ok, why);
    }
    if (p->in >= 0)
        close(p->in);
    close(p->out);
    fclose(p->log);
    *p = (struct plotter){.in = -1, .out = -1};
    nplotters--;
}

/* Starts a plotter in p (free). false if it could not start: why in
 * *err. */
static bool plotter_start(struct plotter *p, char **err)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    FILE *log = tmpfile();
    if (log == NULL) {
        *err = format("cannot make a temporary file for gnuplot's output: %s", strerror(errno));
        return false;
    }
    /* stdin a socket: written with MSG_NOSIGNAL, a plotter that exited is
     * an error to handle, not a SIGPIPE */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0 ||
        pipe2(out, O_CLOEXEC) != 0) {
        *err = format("cannot start gnuplot: %s", strerror(errno));
        if (in[0] >= 0)
            close(in[0]), close(in[1]);
        fclose(log);
        return false;
    }
    posix_spawn_file_actions_t fa;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0) {
        *err = format("cannot start gnuplot: %s", strerror(rc));
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        fclose(log);
        return false;
    }
    rc = posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, fileno(log), 2);
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
    char *argv[] = {"gnuplot", NULL};
    pid_t pid = 0;
    if (rc == 0)
        rc = posix_spawnp(&pid, argv[0], &fa, have_at ? &at : NULL, argv, environ);
    if (have_at)
        posix_spawnattr_destroy(&at);
    if (widened)
        pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
        *err = format("cannot start gnuplot: %s", strerror(rc));
        close(in[1]), close(out[0]);
        fclose(log);
        return false;
    }
    *p = (struct plotter){.pid = pid, .in = in[1], .out = out[0], .log = log};
    nplotters++;
    if (wake[1] >= 0) {
        ssize_t w = write(wake[1], "", 1);
        (void)w;
    }
    return true;
}

/* Hands j (queued) to plotter p (idle): running, or done with the reason
 * it could not be sent. */
static void plotter_draw(struct plotter *p, struct job *j)
{
    fflush(p->log);
    p->log_from = ftell(p->log);
    p->job = j;
    j->state = RUNNING;
    size_t n = strlen(j->commands);
    const char *c = j->commands;
    while (n > 0) {
        ssize_t w = send(p->in, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        c += w, n -= (size_t)w;
    }
    /* a plotter that cannot be written to has exited: the reaper sees its
     * stdout end and ends the render with its exit status */
}

/* Starts j (queued) on an idle plotter, or a new one if fewer than max
 * run: running, done (it could not start), or still queued. */
static void spawn(struct job *j, int max)
{
    struct plotter *idle = NULL, *free_slot = NULL;
    for (int i = 0; i < MAX_RUNNING && !idle; i++) {
        if (plotters[i].pid != 0 && plotters[i].job == NULL && plotters[i].in >= 0)
            idle = &plotters[i];
        else if (plotters[i].pid == 0 && free_slot == NULL)
            free_slot = &plotters[i];
    }
    if (idle == NULL && free_slot && nplotters < max) {
        char *err = NULL;
        if (!plotter_start(free_slot, &err)) {
            j->err = err;
            j->state = DONE;
            return;
        }
        idle = free_slot;
    }
    if (idle)
        plotter_draw(idle, j);
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
    for (struct job *j = head; j; j = j->next)
        if (j->state == QUEUED && !clashes(j)) {
            spawn(j, max);
            if (j->state == QUEUED)
                break; /* every plotter is busy */
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

/* Reads what plotter p wrote on stdout: a marker ends its render. */
static void plotter_read(struct plotter *p)
{
    char buf[512];
    ssize_t n = read(p->out, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) { /* it exited */
        int st = 0;
        pid_t r;
        do
            r = waitpid(p->pid, &st, 0);
        while (r < 0 && errno == EINTR);
        plotter_gone(p, r == p->pid ? st : 0);
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] != '\n') {
            if (p->len < sizeof p->line - 1)
                p->line[p->len++] = buf[i];
            continue;
        }
        p->line[p->len] = '\0';
        p->len = 0;
        size_t m = strlen(MARKER);
        if (p->job && strncmp(p->line, MARKER " ", m + 1) == 0)
            finish(p, atol(p->line + m + 1) == 0, "it reported an error");
    }
}

/* The reaper: waits for the plotters' output (or end), ends their
 * renders, then starts what may start; sleeps while no plotter runs. */
static void *reaper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        if (nplotters == 0) {
            pthread_cond_wait(&changed, &lock);
            continue;
        }
        struct pollfd fds[MAX_RUNNING + 1];
        struct plotter *who[MAX_RUNNING + 1];
        nfds_t n = 0;
        fds[n] = (struct pollfd){.fd = wake[0], .events = POLLIN};
        who[n++] = NULL;
        for (int i = 0; i < MAX_RUNNING; i++)
            if (plotters[i].pid != 0) {
                fds[n] = (struct pollfd){.fd = plotters[i].out, .events = POLLIN};
                who[n++] = &plotters[i];
            }
        pthread_mutex_unlock(&lock);
        int rc = poll(fds, n, -1);
        pthread_mutex_lock(&lock);
        if (rc < 0)
            continue;
        if (fds[0].revents) {
            char c[64];
            while (read(wake[0], c, sizeof c) > 0)
                ;
        }
        /* a plotter is freed only here: who[] still names the same ones */
        for (nfds_t i = 1; i < n; i++)
            if (fds[i].revents)
                plotter_read(who[i]);
        start_queued();
        pthread_cond_broadcast(&changed);
    }
    return NULL;
}

/* Starts the reaper thread, every signal blocked in it. 0 or an errno. */
static int start_reaper(void)
{
    if (wake[0] < 0 && pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return errno;
    for (int i = 0; i < MAX_RUNNING; i++)
        plotters[i] = (struct plotter){.in = -1, .out = -1};
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

/* Appends s to the growing string *b as a gnuplot double-quoted string. */
static bool add_quoted(luaL_Buffer *b, const char *s)
{
    luaL_addchar(b, '"');
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            luaL_addchar(b, '\\'), luaL_addchar(b, *s);
        else if (*s == '\n')
            luaL_addstring(b, "\\n");
        else
            luaL_addchar(b, *s);
    }
    luaL_addchar(b, '"');
    return true;
}

/* Pushes what a plotter is sent to draw SCRIPT in folder dir after the
 * commands of args ({"-e", CMD, ...}, as gnuplot's command line takes
 * them): every setting back to gnuplot's start (reset session), then the
 * marker with GPVAL_ERRNO, non-zero after any error. */
static void push_commands(lua_State *L, const char *dir, const char *script, int args)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "reset session\nreset errors\ncd ");
    if (dir[0] != '/') { /* the plotter's folder is the one it was left in */
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof cwd) == NULL)
            luaL_error(L, "results.figure: cannot tell the current folder: %s", strerror(errno));
        lua_pushfstring(L, "%s/%s", cwd, dir);
        add_quoted(&b, lua_tostring(L, -1));
        lua_pop(L, 1);
    } else {
        add_quoted(&b, dir);
    }
    luaL_addchar(&b, '\n');
    lua_Integer n = luaL_len(L, args);
    for (lua_Integer i = 1; i <= n; i += 2) {
        lua_geti(L, args, i);
        lua_geti(L, args, i + 1);
        const char *opt = lua_tostring(L, -2), *cmd = lua_tostring(L, -1);
        if (opt == NULL || strcmp(opt, "-e") != 0 || cmd == NULL || strchr(cmd, '\n'))
            luaL_error(L, "results.figure: gnuplot's arguments must be -e COMMAND pairs, "
                          "each command one line");
        luaL_addstring(&b, "if (GPVAL_ERRNO == 0) ");
        luaL_addstring(&b, cmd);
        luaL_addchar(&b, '\n');
        lua_pop(L, 2);
    }
    luaL_addstring(&b, "if (GPVAL_ERRNO == 0) load ");
    add_quoted(&b, script);
    luaL_addstring(&b, "\nset output\nset print \"-\"\nprint sprintf(\"" MARKER
                       " %d\", GPVAL_ERRNO)\nset print\n");
    luaL_pushresult(&b);
}

/* kb._render.start(name, dir, script, args, tmp_outputs, outputs):
 * renders `gnuplot ARGS... SCRIPT` in dir in the background (at once, or
 * when a plotter is free); args are -e COMMAND pairs. When it ends without
 * an error having written every tmp_outputs[i], each is renamed to
 * outputs[i]; otherwise they are removed and the failure is reported. */
static int l_start(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    const char *dir = luaL_checkstring(L, 2);
    const char *script = luaL_checkstring(L, 3);
    check_strings(L, 4, MAX_ARGS);
    check_strings(L, 5, MAX_OUT);
    check_strings(L, 6, MAX_OUT);
    int nout = (int)luaL_len(L, 5);
    luaL_argcheck(L, nout == (int)luaL_len(L, 6), 6, "as many outputs as temporary outputs");
    push_commands(L, dir, script, 4);

    /* every string the render keeps, copied before the lock is taken */
    struct job *j = calloc(1, sizeof *j);
    if (j == NULL)
        return luaL_error(L, "results.figure: out of memory");
    bool ok = (j->name = strdup(name)) != NULL && (j->dir = strdup(dir)) != NULL &&
              (j->commands = strdup(lua_tostring(L, -1))) != NULL;
    lua_pop(L, 1);
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
    /* the plotters, idle now, end on their stdin's end; the reaper reaps
     * them */
    for (int i = 0; i < MAX_RUNNING; i++)
        if (plotters[i].pid != 0 && plotters[i].in >= 0) {
            close(plotters[i].in);
            plotters[i].in = -1;
        }
    while (nplotters > 0)
        pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    return n;
}

void lkb_open_render(lua_State *L)
{
    static const luaL_Reg funcs[] = {{"start", l_start}, {"wait", l_wait}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    lua_setfield(L, -2, "_render");
}
