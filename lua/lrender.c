/* lrender.c — figures rendered in the background: lrender.h
 *
 * A render is one gnuplot process started with posix_spawnp, its stdout
 * and stderr going to an unnamed temporary file (read only when it fails).
 * The renders of the process are one list in start order, under a mutex
 * (a sweep point's state may draw a figure too): a render stays in it
 * until it ended well, or until its failure has been reported. No Lua
 * error is raised while the mutex is held.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "lrender.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lauxlib.h>

extern char **environ;

/* outputs of one render (SVG and PNG for results.figure) */
#define MAX_OUT 4
/* at most this much of gnuplot's output goes into a failure's message */
#define MAX_LOG 4096

struct job {
    struct job *next;
    pid_t pid;       /* 0 once reaped */
    FILE *log;       /* gnuplot's stdout and stderr */
    char *name;      /* the figure's */
    char *script;    /* DIR/SCRIPT, for messages */
    int nout;
    char *tmp[MAX_OUT], *out[MAX_OUT];
    char *err;       /* why it failed (after reaping), or NULL */
    bool reported;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct job *head;
static int running;

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
    free(j->script);
    for (int i = 0; i < j->nout; i++) {
        free(j->tmp[i]);
        free(j->out[i]);
    }
    free_msg(j->err);
    free(j);
}

/* The renders that may run at once: the CPUs this process may run on. */
static int max_running(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
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

/* A reaped render: its outputs renamed into place, or why it failed. */
static void finish(struct job *j, int wstatus)
{
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

/* Reaps j if it has ended (or waits until it has, when block). */
static void reap(struct job *j, bool block)
{
    if (j->pid == 0)
        return;
    int st = 0;
    pid_t r;
    do
        r = waitpid(j->pid, &st, block ? 0 : WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == j->pid) {
        finish(j, st);
    } else if (r < 0) {
        /* not our child any more (reaped elsewhere): its outputs decide */
        finish(j, 0);
    }
}

/* Drops the renders that ended well. */
static void drop_done(void)
{
    for (struct job **p = &head; *p;) {
        struct job *j = *p;
        if (j->pid == 0 && (j->err == NULL || j->reported)) {
            *p = j->next;
            job_free(j);
        } else {
            p = &j->next;
        }
    }
}

/* Makes room for a render writing outs: reaps what ended, waits for a
 * render writing the same files, then for the oldest while too many run. */
static void make_room(char *const outs[], int nout)
{
    for (struct job *j = head; j; j = j->next)
        reap(j, false);
    for (struct job *j = head; j; j = j->next)
        for (int i = 0; i < j->nout && j->pid; i++)
            for (int k = 0; k < nout; k++)
                if (strcmp(j->out[i], outs[k]) == 0)
                    reap(j, true);
    int max = max_running();
    for (struct job *j = head; j && running >= max; j = j->next)
        reap(j, true);
    drop_done();
}

/* Starts gnuplot ARGS SCRIPT in dir; NULL, or why it could not. */
static char *spawn(struct job *j, const char *dir, const char *const argv[])
{
    j->log = tmpfile();
    if (j->log == NULL)
        return format("cannot make a temporary file for gnuplot's output: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0)
        return format("cannot start gnuplot: %s", strerror(rc));
    int fd = fileno(j->log);
    rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, fd, 1);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, fd, 2);
    if (rc == 0)
        rc = posix_spawn_file_actions_addchdir_np(&fa, dir);
    if (rc == 0)
        rc = posix_spawnp(&j->pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        j->pid = 0;
        return format("cannot start gnuplot in '%s': %s", dir, strerror(rc));
    }
    running++;
    return NULL;
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

/* kb._render.start(name, dir, script, args, tmp_outputs, outputs):
 * starts `gnuplot ARGS... SCRIPT` in dir without waiting. When it ends
 * with status 0 having written every tmp_outputs[i], each is renamed to
 * outputs[i]; otherwise they are removed and the failure is reported. */
static int l_start(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    const char *dir = luaL_checkstring(L, 2);
    const char *script = luaL_checkstring(L, 3);
    check_strings(L, 4, 16);
    check_strings(L, 5, MAX_OUT);
    check_strings(L, 6, MAX_OUT);
    int nargs = (int)luaL_len(L, 4), nout = (int)luaL_len(L, 5);
    luaL_argcheck(L, nout == (int)luaL_len(L, 6), 6, "as many outputs as temporary outputs");

    /* every string the render keeps, copied before the lock is taken */
    struct job *j = calloc(1, sizeof *j);
    if (j == NULL)
        return luaL_error(L, "results.figure: out of memory");
    j->nout = nout;
    bool ok = (j->name = strdup(name)) != NULL &&
              (j->script = format("%s/%s", dir, script)) != no_memory;
    if (!ok)
        j->script = NULL;
    for (int i = 0; i < nout && ok; i++) {
        lua_geti(L, 5, i + 1);
        lua_geti(L, 6, i + 1);
        j->tmp[i] = strdup(lua_tostring(L, -2));
        j->out[i] = strdup(lua_tostring(L, -1));
        lua_pop(L, 2);
        ok = j->tmp[i] && j->out[i];
    }
    const char *argv[16 + 3];
    int argc = 0;
    argv[argc++] = "gnuplot";
    for (int i = 1; i <= nargs; i++) {
        lua_geti(L, 4, i); /* stays on the stack: argv points into it */
        argv[argc++] = lua_tostring(L, -1);
    }
    argv[argc++] = script;
    argv[argc] = NULL;
    if (!ok) {
        job_free(j);
        return luaL_error(L, "results.figure: out of memory");
    }

    pthread_mutex_lock(&lock);
    make_room(j->out, j->nout);
    char *err = spawn(j, dir, argv);
    if (err == NULL) {
        struct job **p = &head;
        while (*p)
            p = &(*p)->next;
        *p = j;
    }
    pthread_mutex_unlock(&lock);
    if (err != NULL) {
        job_free(j);
        lua_pushfstring(L, "results.figure '%s': %s", name, err);
        free_msg(err);
        return lua_error(L);
    }
    return 0;
}

/* Waits for every render and marks the failures reported. to: prints
 * each on it ("kbsim: figure 'NAME': WHY"); else returns them joined by
 * newlines (NULL: none; no_memory: no memory to join them). */
static char *wait_all(FILE *to, int *nfailed)
{
    *nfailed = 0;
    char *all = NULL;
    for (struct job *j = head; j; j = j->next) {
        reap(j, true);
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

/* kb._render.wait() -> nil when every render started so far succeeded,
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
