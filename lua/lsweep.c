/* lsweep.c — kb.sweep: sweep points in parallel, each in its own Lua state
 *
 * A lua_State is not thread-safe, and a simulation's processes are Lua
 * threads of the state that created them, so every point gets a fresh
 * state (and builds its own simulation) on a thread of its own. What a
 * point needs travels as bytes (ltransport.c): the point function as
 * bytecode with its upvalues rebuilt, its parameters and its returned row
 * as a deep copy. The same bytes are hashed for the --fast cache
 * (lsweep_cache.c). See docs/decisions/0006-sweep-points-in-separate-states.md.
 */
#include "lsweep.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>

#include "lkb_internal.h"
#include "lsweep_cache.h"
#include "lsweep_internal.h"
#include "lsweep_mpi.h"
#include "ltransport.h"
#include "ltrace.h"
#include "sim_uv.h"

#define KB_SWEEP "kbsim.sweep"

/* VM instructions between two looks at the stop flag in a point. */
#define KB_STOP_HOOK_COUNT 10000

/* Registry keys (their addresses are unique). */
static const char kb_sweeps_key = 'w'; /* main state: reports, interrupted (a signal) */
static const char kb_point_key = 'p';  /* worker state: its sweep point */
static const char kb_end_key = 'e';    /* main state: a sweep ended the run */

/* FNV-1a, 64 bits: enough to tell a few thousand cached points apart, and
 * small enough to read at a glance. */
#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= FNV_PRIME;
    }
    return h;
}

/* A length-prefixed segment, so that two inputs cannot run into each
 * other. */
static uint64_t fnv_seg(uint64_t h, const void *p, size_t n)
{
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    return fnv(fnv(h, len, 8), p, n);
}

/* ---- points and their states ----------------------------------------- */

static void sweep_free(struct sweep *sw)
{
    free(sw->name);
    free(sw->cachedir);
    lkb_blob_free(&sw->fn);
    lkb_blob_free(&sw->options);
    lkb_blob_free(&sw->arg);
    free(sw->path);
    free(sw->cpath);
    for (size_t i = 0; sw->pts && i < sw->n; i++) {
        lkb_blob_free(&sw->pts[i].params);
        lkb_blob_free(&sw->pts[i].result);
        free(sw->pts[i].err);
        free(sw->pts[i].trace);
        free(sw->pts[i].cache_err);
    }
    free(sw->pts);
    free(sw->pending_pts);
    free(sw->status);
    free(sw->slot_pt);
    free(sw->pstatus);
    free(sw->prank);
    if (sw->qlock_ok)
        uv_mutex_destroy(&sw->qlock);
    free(sw);
}

/* Drops one reference (sim_sweep_opts.release, and the userdata's). */
static void sweep_release(void *ud)
{
    struct sweep *sw = ud;
    if (atomic_fetch_sub(&sw->refs, 1) == 1)
        sweep_free(sw);
}

static int sweep_gc(lua_State *L)
{
    struct sweep **box = luaL_checkudata(L, 1, KB_SWEEP);
    if (*box != NULL)
        sweep_release(*box);
    *box = NULL;
    return 0;
}

struct worker {
    struct sweep *sw;
    struct point *pt;
    struct sim_sweep_point *sp;
    size_t index;
};

/* A stopping sweep (Ctrl-C) must also end points that are busy in Lua:
 * their simulations are theirs, not attached to the sweep, so they learn
 * of it here. */
static void stop_hook(lua_State *L, lua_Debug *ar)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &kb_point_key);
    struct worker *wk = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (wk != NULL && sim_sweep_point_stopping(wk->sp))
        luaL_error(L, "kb.sweep: point stopped (interrupted)");
}

static char *dupstr(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* os.exit in a point: exiting from a point's thread would take the other
 * points and every unwritten row with it, so it fails the point
 * instead. */
static int point_exit(lua_State *W)
{
    return luaL_error(W, "os.exit called in a sweep point; a point ends by returning its row "
                         "or fails by raising an error");
}

/* Writes the finished point's cache file, its row being at index row:
 * now, so that a point survives whatever happens to kbsim later. A failure
 * is kept for a warning; the row is kept in any case. */
static void cache_point(lua_State *W, struct worker *wk, int row)
{
    struct sweep *sw = wk->sw;
    struct point *pt = wk->pt;
    char why[512];
    row = lua_absindex(W, row);
    lkb_unpack(W, &pt->params);
    if (lkb_cache_store(W, sw->cachedir, sw->name, wk->index, pt->key, -1, row, why,
                       sizeof why) < 0)
        pt->cache_err = dupstr(why, strlen(why));
    lua_pop(W, 1);
}

/* In a fresh state (lkb_new_state) on a thread of its own: the same
 * package paths, the kbsim module with the caller's kb.options and `arg`;
 * then run(p), and its row serialised back. */
static int worker_main(lua_State *W)
{
    struct worker *wk = lua_touserdata(W, 1);
    struct sweep *sw = wk->sw;
    struct point *pt = wk->pt;
    lua_getglobal(W, "os");
    lua_pushcfunction(W, point_exit);
    lua_setfield(W, -2, "exit");
    lua_pop(W, 1);
    lua_getglobal(W, "package");
    lua_pushstring(W, sw->path);
    lua_setfield(W, -2, "path");
    lua_pushstring(W, sw->cpath);
    lua_setfield(W, -2, "cpath");
    lua_pop(W, 1);
    lua_pushlightuserdata(W, wk);
    lua_rawsetp(W, LUA_REGISTRYINDEX, &kb_point_key);

    /* kb.options (empty from lkb_new_state) is replaced by the caller's */
    lua_getglobal(W, "require");
    lua_pushliteral(W, "kbsim");
    lua_call(W, 1, 1);
    lkb_unpack(W, &sw->options);
    /* --trace goes to one point, which traces its first simulation */
    if ((long)wk->index == sw->trace_index) {
        lua_pushinteger(W, 1);
        lua_setfield(W, -2, "trace_point");
    } else {
        lua_pushnil(W);
        lua_setfield(W, -2, "trace");
    }
    lua_pushnil(W); /* a point runs the same in a shard (kb.outdir) */
    lua_setfield(W, -2, "shard");
    lua_setfield(W, -2, "options");
    lua_pop(W, 1);
    lkb_unpack(W, &sw->arg);
    lua_setglobal(W, "arg");

    lua_sethook(W, stop_hook, LUA_MASKCOUNT, KB_STOP_HOOK_COUNT);
    lua_pushcfunction(W, lkb_traceback);
    int msgh = lua_gettop(W);
    lkb_unpack(W, &sw->fn);
    lkb_unpack(W, &pt->params);
    if (lua_pcall(W, 1, 1, msgh) != LUA_OK) {
        size_t n;
        const char *msg = lua_tolstring(W, -1, &n);
        if (msg == NULL)
            msg = "(error object is not a string)", n = strlen(msg);
        const char *tb = strstr(msg, "\nstack traceback:");
        pt->trace = dupstr(msg, n);
        pt->err = dupstr(msg, tb ? (size_t)(tb - msg) : n);
        if (pt->err == NULL)
            return luaL_error(W, "out of memory");
    } else {
        struct lkb_pack_how proto = {
            .mode = LKB_PACK_PLAIN,
            .prefix = lua_pushfstring(W, "kb.sweep: point %d returned a row whose",
                                      (int)wk->index + 1),
            .after = "",
            .suffix = "; a row must be plain data (numbers, strings, "
                      "booleans, tables of them)",
            .path = "row",
        };
        pt->result.n = 0;
        lkb_pack(W, -2, &pt->result, &proto);
        pt->has_result = true;
    }
    pt->checks_failed = lkb_failed_checks(W);
    /* a point asked to stop (timed out, Ctrl-C) may be reported as not
     * done: it is not cached, so no later --fast reuses it */
    if (pt->has_result && pt->checks_failed == 0 && sw->cachedir &&
        !sim_sweep_point_stopping(wk->sp))
        cache_point(W, wk, -2);
    return 0;
}

/* Point `index` in its own Lua state; 0 if it succeeded. */
int lkb_sweep_run_point(struct sim_sweep_point *sp, struct sweep *sw, size_t index)
{
    struct point *pt = &sw->pts[index];
    struct worker wk = {sw, pt, sp, index};
    /* As the CLI makes its own, so that every module it preloads is
     * there */
    const char *noset[1] = {NULL};
    struct lkb_options o = {.out = "", .jobs = 1, .set = noset};
    char err[256];
    lua_State *W = lkb_new_state(&o, err, sizeof err);
    if (W == NULL) {
        pt->err = dupstr(err, strlen(err));
        return 1;
    }
    lua_pushcfunction(W, worker_main);
    lua_pushlightuserdata(W, &wk);
    if (lua_pcall(W, 1, 0, 0) != LUA_OK && pt->err == NULL) {
        const char *msg = lua_tostring(W, -1);
        if (msg == NULL)
            msg = "(error object is not a string)";
        pt->err = dupstr(msg, strlen(msg));
        pt->has_result = false;
    }
    lua_close(W);
    return pt->err != NULL || pt->checks_failed > 0;
}

/* sim_sweep_run_fn: point pending_pts[k]. */
static int point_run(struct sim_sweep_point *sp, size_t k, void *ud)
{
    struct sweep *sw = ud;
    return lkb_sweep_run_point(sp, sw, sw->pending_pts[k]);
}

/* What every rank compares with rank 0's before a sweep: its name and
 * its points' keys. */
uint64_t lkb_sweep_digest(const struct sweep *sw)
{
    uint64_t h = fnv_seg(FNV_OFFSET, sw->name, strlen(sw->name));
    for (size_t i = 0; i < sw->n; i++) {
        unsigned char d[8];
        lkb_put_le64(d, sw->pts[i].key);
        h = fnv(h, d, 8);
    }
    return h;
}

/* ---- progress --------------------------------------------------------- */

static void bar_draw(struct sweep *sw)
{
    double el = (double)(uv_hrtime() - sw->t0) * 1e-9;
    size_t done = sw->mpi ? atomic_load(&sw->nfinished) : sw->ndone, total = sw->n_pending;
    char bar[25];
    size_t fill = total ? 24 * done / total : 24;
    memset(bar, '#', fill);
    memset(bar + fill, '.', 24 - fill);
    bar[24] = '\0';
    fprintf(stderr, "\r\033[Kkb.sweep '%s' [%s] %zu/%zu  %.1f s", sw->name, bar,
            done, total, el);
    if (done > 0 && done < total)
        fprintf(stderr, ", ~%.1f s left", el / (double)done * (double)(total - done));
    if (sw->nreused > 0)
        fprintf(stderr, "  (%zu reused)", sw->nreused);
    fflush(stderr);
}

static bool on_progress(size_t done, size_t total, void *ud)
{
    struct sweep *sw = ud;
    sw->ndone = done;
    if (sw->bar)
        bar_draw(sw);
    return false;
}

static void on_timer(uv_timer_t *t)
{
    bar_draw(t->data);
}

static void on_timer_closed(uv_handle_t *h)
{
    *(bool *)h->loop->data = false;
}

/* Runs nslots slots of fn (point_run: the points in pending_pts);
 * returns sim_sweep_run's status. */
static int run_points(struct sweep *sw, int jobs, double timeout, sim_sweep_run_fn fn,
                      size_t nslots)
{
    uv_loop_t loop;
    bool timer_open = false;
    int rc = uv_loop_init(&loop);
    if (rc < 0)
        return SIM_ENOMEM;
    loop.data = &timer_open;
    sw->t0 = uv_hrtime();
    if (sw->bar && uv_timer_init(&loop, &sw->timer) == 0) {
        timer_open = true;
        sw->timer.data = sw;
        uv_timer_start(&sw->timer, on_timer, 0, 250);
    }
    struct sim_sweep_opts opts = {
        .jobs = jobs, .catch_sigint = true, .loop = &loop,
        /* SIGTERM (a batch system ending the job) stops a sweep as Ctrl-C
         * does, so the script writes what finished; not under MPI, whose
         * rank 0 has its own SIGTERM handler (lsweep_mpi.c) */
        .catch_sigterm = !sw->mpi, .stopped_by = &sw->stop_signal,
        .progress = on_progress, .timeout = timeout, .release = sweep_release,
    };
    atomic_fetch_add(&sw->refs, 1);
    rc = sim_sweep_run(nslots, fn, sw, &opts, sw->status);
    if (timer_open) {
        uv_close((uv_handle_t *)&sw->timer, on_timer_closed);
        while (timer_open)
            uv_run(&loop, UV_RUN_NOWAIT);
        bar_draw(sw);
        fputc('\n', stderr);
    }
    uv_loop_close(&loop);
    return rc;
}

/* ---- the cache --------------------------------------------------------- */

/* A folder name from the sweep's name: no separators, no leading dot. */
static void safe_name(char *d, size_t size, const char *name)
{
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                  (c == '.' && i > 0);
        d[i] = ok ? c : '_';
    }
    d[i] = '\0';
    if (i == 0)
        snprintf(d, size, "sweep");
}

/* The sweep's cache folder OUT/cache/SAFE_NAME, pushed. Points write
 * there (sw->cachedir) only if it can be made and written: otherwise a
 * warning says why, and the sweep runs without writing the cache (an
 * existing one may still be read). */
static const char *open_cache(lua_State *L, struct sweep *sw, const char *out)
{
    char safe[128];
    safe_name(safe, sizeof safe, sw->name);
    const char *top = lua_pushfstring(L, "%s/cache", out);
    const char *dir = lua_pushfstring(L, "%s/%s", top, safe);
    lua_remove(L, -2);
    int e = 0;
    if ((mkdir(top, 0777) != 0 && errno != EEXIST) || (mkdir(dir, 0777) != 0 && errno != EEXIST))
        e = errno;
    if (e == 0)
        e = lkb_cache_probe(dir);
    if (e != 0) {
        fprintf(stderr, "kb.sweep '%s': warning: cannot write the cache in '%s': %s; "
                "no point of this sweep is cached\n", sw->name, dir, strerror(e));
        return dir;
    }
    lkb_cache_clean(dir);
    sw->cachedir = dupstr(dir, strlen(dir));
    if (sw->cachedir == NULL)
        luaL_error(L, "kb.sweep: out of memory");
    return dir;
}

static uint64_t fnv_file(lua_State *L, uint64_t h, const char *path)
{
    struct lkb_blob *b = lkb_newblob(L);
    h = fnv_seg(h, path, strlen(path));
    if (lkb_blob_read_file(path, b, SIZE_MAX))
        h = fnv_seg(h, b->p, b->n);
    else
        h = fnv_seg(h, "(unreadable)", 12);
    lua_pop(L, 1);
    return h;
}

/* Hash of what every point shares: kbsim's version, the point function's
 * code (without debug information, so that moving it in its file keeps
 * the cache), kb.options except those that cannot change a result, the
 * configuration files, and the sweep's key_extra. l_sweep adds the
 * script's arguments. */
static uint64_t base_key(lua_State *L, int fn, int options, int extra,
                         const struct lkb_pack_how *code)
{
    static const char *const ignored[] = {"out", "jobs", "quiet", "fast", "trace", "point_timeout",
                                          "trace_point", "shard", "merge", NULL};
    static const char *const files[] = {"topology", "ccl", NULL};
    int top = lua_gettop(L);
    uint64_t h = fnv_seg(FNV_OFFSET, "kbsim " KBSIM_VERSION,
                         strlen("kbsim " KBSIM_VERSION));
    struct lkb_blob *b = lkb_newblob(L);
    struct lkb_pack_how proto = *code;
    proto.strip = true;
    lkb_pack(L, fn, b, &proto);
    h = fnv_seg(h, b->p, b->n);

    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, options) != 0) {
        bool skip = false;
        for (int i = 0; ignored[i] && lua_type(L, -2) == LUA_TSTRING; i++)
            skip = skip || strcmp(lua_tostring(L, -2), ignored[i]) == 0;
        if (skip) {
            lua_pop(L, 1);
            continue;
        }
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
    struct lkb_pack_how plain = {.mode = LKB_PACK_PLAIN, .prefix = "kb.sweep: kb.options field",
                        .after = "", .suffix = "; kb.options must be plain data",
                        .path = "options"};
    b->n = 0;
    lkb_pack(L, -1, b, &plain);
    h = fnv_seg(h, b->p, b->n);
    lua_pop(L, 1);

    for (int i = 0; files[i]; i++) {
        if (lua_getfield(L, options, files[i]) == LUA_TSTRING)
            h = fnv_file(L, h, lua_tostring(L, -1));
        lua_pop(L, 1);
    }
#ifdef KBSIM_CONFIG_DIR
    h = fnv_file(L, h, KBSIM_CONFIG_DIR "/topology.yaml");
    h = fnv_file(L, h, KBSIM_CONFIG_DIR "/ccl.yaml");
#endif

    struct lkb_pack_how xp = {.mode = LKB_PACK_PLAIN, .prefix = "kb.sweep: key_extra field",
                     .after = "", .suffix = "; key_extra must be plain data",
                     .path = "key_extra"};
    b->n = 0;
    lkb_pack(L, extra, b, &xp);
    h = fnv_seg(h, b->p, b->n);
    lua_settop(L, top);
    return h;
}

/* ---- kb.sweep ---------------------------------------------------------- */

/* This state's record of sweeps: {reports = {...}, interrupted = signal}. */
static void lkb_sweep_push_record(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kb_sweeps_key) == LUA_TTABLE)
        return;
    lua_pop(L, 1);
    lua_createtable(L, 0, 2);
    lua_newtable(L);
    lua_setfield(L, -2, "reports");
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &kb_sweeps_key);
}

void lkb_sweep_record_report(lua_State *L, int signal)
{
    lkb_sweep_push_record(L);
    lua_getfield(L, -1, "reports");
    lua_pushvalue(L, -3);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    lua_pop(L, 1);
    if (signal) {
        lua_getfield(L, -1, "interrupted");
        bool first = lua_isnil(L, -1);
        lua_pop(L, 1);
        if (first) { /* the first signal decides the exit status */
            lua_pushinteger(L, signal);
            lua_setfield(L, -2, "interrupted");
        }
    }
    lua_pop(L, 2);
}

static void setint(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

/* The first line of a message, for summaries. */
static int first_line(const char *s)
{
    const char *nl = strchr(s, '\n');
    return nl ? (int)(nl - s) : (int)strlen(s);
}

/* What became of a point. */
enum { P_DONE, P_FAILED, P_TIMED_OUT, P_NOT_RUN };

enum { A_SPEC = 1, A_POINTS, A_RUN, A_NAME, A_EXTRA, A_JOBS, A_CACHE, A_TIMEOUT,
       A_OPTIONS, A_SWEEP, A_MODS, A_MEMBERS };

/* The point timeout in seconds (0: none): kb.sweep's `timeout`, else
 * kb.options.point_timeout (--point-timeout). */
static double point_timeout(lua_State *L, int spec_timeout, int options)
{
    int idx = spec_timeout;
    if (lua_isnil(L, spec_timeout)) {
        lua_getfield(L, options, "point_timeout");
        idx = lua_gettop(L);
    }
    double t = 0;
    if (!lua_isnil(L, idx)) {
        int isnum;
        t = (double)lua_tonumberx(L, idx, &isnum);
        if (!isnum || !(t > 0) || !isfinite(t))
            luaL_error(L, "kb.sweep: 'timeout' must be a positive number of seconds");
    }
    if (idx != spec_timeout)
        lua_pop(L, 1);
    return t;
}

/* Before the sweep: takes from the cache (with --fast) the points whose
 * entry is there, into the table at `cached`, and lists the others to
 * run. A corrupt entry is ignored with a warning: the point runs again. */
static void load_cached(lua_State *L, struct sweep *sw, const char *cachedir, bool fast,
                        int cached, bool stopped_before)
{
    for (size_t i = 0; i < sw->n; i++) {
        /* a cached point writes no trace: the traced one runs */
        enum lkb_cache_found found = LKB_CACHE_MISS;
        if (fast && cachedir && (long)i != sw->trace_index)
            found = lkb_cache_load(L, cachedir, sw->pts[i].key);
        if (found == LKB_CACHE_HIT) {
            lua_rawseti(L, cached, (lua_Integer)i + 1);
            sw->pts[i].reused = true;
            sw->nreused++;
            continue;
        }
        if (found == LKB_CACHE_CORRUPT) {
            char path[4200];
            lkb_cache_path(path, sizeof path, cachedir, sw->pts[i].key);
            fprintf(stderr, "kb.sweep '%s': warning: point %zu: ignoring the cache file "
                    "'%s', which is not a valid entry; the point runs again\n",
                    sw->name, i + 1, path);
        }
        if (!stopped_before)
            sw->pending_pts[sw->n_pending++] = i;
    }
}

/* After the sweep: one warning for the finished points whose cache file
 * could not be written (their rows are kept). */
static void warn_uncached(const struct sweep *sw, const unsigned char *state)
{
    size_t n = 0;
    const char *first = NULL;
    for (size_t i = 0; i < sw->n; i++) {
        if (state[i] == P_DONE && sw->pts[i].cache_err) {
            first = first ? first : sw->pts[i].cache_err;
            n++;
        }
    }
    if (n > 0)
        fprintf(stderr, "kb.sweep '%s': warning: %zu point%s not cached: %s\n", sw->name,
                n, n == 1 ? "" : "s", first);
}

/* Tells now what failed: the first failure in full (its traceback), the
 * others by their first line, as many points often fail the same way;
 * records the summary that the end of the script repeats
 * (lkb_sweep_status). plist: the summary's points. */
static void report_failures(lua_State *L, const struct sweep *sw, const unsigned char *state,
                            int plist, size_t ndone, size_t nfailed, int stop_signal)
{
    int told = 0;
    luaL_Buffer rep;
    luaL_buffinit(L, &rep);
    if (nfailed > 0)
        lua_pushfstring(L, "kb.sweep '%s': %d of %d point%s failed:", sw->name,
                        (int)nfailed, (int)sw->n, sw->n == 1 ? "" : "s");
    else
        lua_pushliteral(L, "");
    luaL_addvalue(&rep);
    for (size_t i = 0; i < sw->n; i++) {
        if (state[i] != P_FAILED && state[i] != P_TIMED_OUT)
            continue;
        const struct point *pt = &sw->pts[i];
        lua_rawgeti(L, plist, (lua_Integer)i + 1);
        lua_getfield(L, -1, "error");
        const char *msg = lua_tostring(L, -1);
        /* under MPI: where it ran */
        char where[128] = "";
        if (sw->mpi)
            snprintf(where, sizeof where, " on rank %d (%s)", sw->prank[i],
                     lkb_mpi_host(sw->prank[i]));
        if (told++ == 0)
            fprintf(stderr, "kb.sweep '%s': point %d failed%s: %s\n", sw->name,
                    (int)i + 1, where, state[i] == P_FAILED && pt->trace ? pt->trace : msg);
        else
            fprintf(stderr, "kb.sweep '%s': point %d failed%s: %.*s\n", sw->name,
                    (int)i + 1, where, first_line(msg), msg);
        lua_pop(L, 2);
        luaL_addstring(&rep, nfailed == 1 ? " " : "\n  ");
        lua_pushfstring(L, "point %d%s: ", (int)i + 1, where);
        luaL_addvalue(&rep);
        luaL_addlstring(&rep, msg, (size_t)first_line(msg));
    }
    if (stop_signal) {
        lua_pushfstring(L, "%skb.sweep '%s': stopped by %s: %d of %d points done, "
                        "%d not run", nfailed ? "\n" : "", sw->name,
                        stop_signal == SIGTERM ? "SIGTERM" : "Ctrl-C", (int)ndone,
                        (int)sw->n, (int)(sw->n - ndone - nfailed));
        luaL_addvalue(&rep);
    }
    luaL_pushresult(&rep);
    if (nfailed > 0 || stop_signal) {
        lua_pushvalue(L, -1);
        lkb_sweep_record_report(L, stop_signal);
    }
    lua_pop(L, 1);
}

/* ---- --shard and --merge (docs/cluster.md) ----------------------------- */

/* Points listed in a message at most; the rest are counted. */
#define KB_LIST_MAX 40

/* Pushes "1,4,7" for the points i (0-based) with want[i] set; after
 * KB_LIST_MAX of them, ", ... (N in all)". */
static void push_point_list(lua_State *L, const bool *want, size_t n)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    size_t listed = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!want[i])
            continue;
        if (++total > KB_LIST_MAX)
            continue;
        lua_pushfstring(L, listed++ ? ",%d" : "%d", (int)i + 1);
        luaL_addvalue(&b);
    }
    if (total > KB_LIST_MAX) {
        lua_pushfstring(L, ", ... (%d in all)", (int)total);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
}

/* Ends the script here with exit status `status` (lkb_sweep_end_status):
 * raises an error that kbsim does not print (having said why). A script that catches it
 * gets it again from its next kb.sweep. */
static int end_run(lua_State *L, int status)
{
    lua_pushinteger(L, status);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &kb_end_key);
    lua_pushlightuserdata(L, (void *)&kb_end_key);
    return lua_error(L);
}

/* --shard I/N: keeps of the points to simulate only those of share I,
 * point i (1-based) being in share (i - 1) mod N + 1, so that the shares
 * depend on nothing but the number of points and differ by at most one. */
static void keep_share(struct sweep *sw, lua_Integer shard, lua_Integer shards)
{
    size_t k = 0;
    for (size_t j = 0; j < sw->n_pending; j++)
        if ((lua_Integer)(sw->pending_pts[j] % (size_t)shards) == shard - 1)
            sw->pending_pts[k++] = sw->pending_pts[j];
    sw->n_pending = k;
}

/* --merge: a sweep whose points are not all in the cache ends the run
 * with status 1, listing them. */
static void refuse_missing(lua_State *L, const struct sweep *sw)
{
    bool *missing = lua_newuserdatauv(L, sw->n ? sw->n : 1, 0);
    for (size_t i = 0; i < sw->n; i++)
        missing[i] = !sw->pts[i].reused;
    push_point_list(L, missing, sw->n);
    fprintf(stderr, "kbsim --merge: sweep '%s': %d of %d points %s not in the cache: %s; run "
            "the shards that compute them (--shard I/N), or the same command with --fast "
            "instead of --merge to run them here\n", sw->name, (int)sw->n_pending,
            (int)sw->n, sw->n_pending == 1 ? "is" : "are", lua_tostring(L, -1));
    fflush(stderr);
    end_run(L, 1);
}

/* After a shard ran its share of a sweep whose points were not all in
 * the cache: says which points of the share are in the cache now, and
 * ends the run (status 0; failed points are reported by
 * lkb_sweep_status). */
static void end_shard(lua_State *L, const struct sweep *sw, const unsigned char *state,
                      lua_Integer shard, lua_Integer shards)
{
    bool *cached = lua_newuserdatauv(L, sw->n ? sw->n : 1, 0);
    size_t nshare = 0;
    for (size_t i = 0; i < sw->n; i++) {
        bool mine = (lua_Integer)(i % (size_t)shards) == shard - 1;
        nshare += mine;
        cached[i] = mine && state[i] == P_DONE && sw->cachedir && !sw->pts[i].cache_err;
    }
    push_point_list(L, cached, sw->n);
    const char *list = lua_tostring(L, -1);
    if (nshare == 0)
        fprintf(stderr, "shard %d/%d: sweep '%s': none of its %d points is in this share; ",
                (int)shard, (int)shards, sw->name, (int)sw->n);
    else if (*list == '\0')
        fprintf(stderr, "shard %d/%d: sweep '%s': no point of this share cached; ",
                (int)shard, (int)shards, sw->name);
    else
        fprintf(stderr, "shard %d/%d: sweep '%s': point%s %s cached; ", (int)shard,
                (int)shards, sw->name, strchr(list, ',') ? "s" : "", list);
    fprintf(stderr, "when every shard is done, run the same command with --merge (or --fast) "
            "instead of --shard to assemble the outputs\n");
    fflush(stderr);
    end_run(L, 0);
}

bool lkb_sweep_is_end(lua_State *L, int idx)
{
    return lua_touserdata(L, idx) == (void *)&kb_end_key;
}

int lkb_sweep_end_status(lua_State *L)
{
    int status = -1;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kb_end_key) == LUA_TNUMBER)
        status = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    return status;
}

/* ---- kb.sweep, step by step -------------------------------------------- */

/* What a kb.sweep call asks for: its spec and kb.options. */
struct sweep_spec {
    const char *name;    /* the string at A_NAME */
    bool use_cache;      /* spec.cache (default true) */
    double timeout;      /* per point, seconds (0: none) */
    bool fast, quiet, merge;
    lua_Integer jobs;    /* 1..1024 */
    bool want_trace;     /* --trace was given */
    lua_Integer trace_point;
    lua_Integer shard, shards; /* --shard I/N, or 0/0 */
};

/* Step 1: checks the spec at A_SPEC and leaves its fields and kb.options
 * in the stack slots A_POINTS .. A_OPTIONS; the rest goes into *sp. */
static void read_spec(lua_State *L, struct sweep_spec *sp)
{
    static const char *const fields[] = {"points", "run", "name", "jobs", "key_extra",
                                         "cache", "timeout", "cost", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    /* a misspelt field (timout =) would be ignored */
    lkb_check_keys_as(L, 1, &(struct lkb_keys_words){"kb.sweep", "field", "fields: "}, fields, 1);
    if (lua_getfield(L, A_SPEC, "points") != LUA_TTABLE)
        luaL_error(L, "kb.sweep: 'points' must be a table of point parameters");
    /* a list: a hole would end it early, silently dropping the points after */
    lua_Integer n_keys = 0, n_list = (lua_Integer)lua_rawlen(L, A_POINTS);
    for (lua_pushnil(L); lua_next(L, A_POINTS); lua_pop(L, 1))
        n_keys++;
    if (n_keys != n_list)
        luaL_error(L, "kb.sweep: 'points' must be a list (keys 1 to n, no holes): it has %I "
                      "entries, %I in sequence", n_keys, n_list);
    if (lua_getfield(L, A_SPEC, "run") != LUA_TFUNCTION || lua_iscfunction(L, A_RUN))
        luaL_error(L, "kb.sweep: 'run' must be a Lua function");
    if (lua_getfield(L, A_SPEC, "name") == LUA_TNIL) {
        lua_pop(L, 1);
        lua_pushliteral(L, "sweep");
    } else if (lua_type(L, A_NAME) != LUA_TSTRING) {
        luaL_error(L, "kb.sweep: 'name' must be a string");
    }
    sp->name = lua_tostring(L, A_NAME);
    lua_getfield(L, A_SPEC, "key_extra");
    lua_getfield(L, A_SPEC, "jobs");
    lua_getfield(L, A_SPEC, "cache");
    sp->use_cache = lua_isnil(L, A_CACHE) || lua_toboolean(L, A_CACHE);
    lua_getfield(L, A_SPEC, "timeout");
    if (lua_getfield(L, lua_upvalueindex(1), "options") != LUA_TTABLE)
        luaL_error(L, "kb.sweep: kb.options must be a table");
    sp->timeout = point_timeout(L, A_TIMEOUT, A_OPTIONS);
    lua_getfield(L, A_OPTIONS, "fast");
    sp->fast = lua_toboolean(L, -1);
    lua_getfield(L, A_OPTIONS, "quiet");
    sp->quiet = lua_toboolean(L, -1);
    lua_getfield(L, A_OPTIONS, "jobs");
    sp->jobs = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 1;
    lua_getfield(L, A_OPTIONS, "trace");
    sp->want_trace = lua_type(L, -1) == LUA_TSTRING;
    lua_getfield(L, A_OPTIONS, "trace_point");
    sp->trace_point = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 1;
    lua_getfield(L, A_OPTIONS, "merge");
    sp->merge = lua_toboolean(L, -1);
    sp->shard = sp->shards = 0;
    if (lua_getfield(L, A_OPTIONS, "shard") == LUA_TTABLE) {
        lua_getfield(L, -1, "index");
        lua_getfield(L, -2, "count");
        sp->shard = lua_tointeger(L, -2);
        sp->shards = lua_tointeger(L, -1);
        lua_pop(L, 2);
        if (sp->shards < 1 || sp->shard < 1 || sp->shard > sp->shards)
            luaL_error(L, "kb.sweep: kb.options.shard must be {index = I, count = N}, "
                          "1 <= I <= N");
    }
    lua_pop(L, 7);
    if (!lua_isnil(L, A_JOBS)) {
        int isint;
        sp->jobs = lua_tointegerx(L, A_JOBS, &isint);
        if (!isint || sp->jobs <= 0)
            luaL_error(L, "kb.sweep: 'jobs' must be a positive integer");
    }
    if (sp->jobs <= 0)
        sp->jobs = 1;
    if (sp->jobs > 1024)
        sp->jobs = 1024;
}

/* Step 2: the sweep and its points, held by a userdata pushed at A_SWEEP;
 * the traced point (--trace), and the package paths a point's state
 * gets. */
static struct sweep *new_sweep(lua_State *L, const struct sweep_spec *sp)
{
    struct sweep **box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = NULL;
    if (luaL_newmetatable(L, KB_SWEEP)) {
        lua_pushcfunction(L, sweep_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    struct sweep *sw = *box = calloc(1, sizeof *sw);
    if (sw == NULL)
        luaL_error(L, "kb.sweep: out of memory");
    atomic_init(&sw->refs, 1);
    sw->name = dupstr(sp->name, strlen(sp->name));
    sw->n = (size_t)lua_rawlen(L, A_POINTS);
    sw->trace_index = -1;
    if (sp->want_trace && lkb_trace_take(L)) {
        if (sp->trace_point < 1 || (lua_Unsigned)sp->trace_point > sw->n)
            luaL_error(L, "kb.sweep '%s': --trace-point %I but the sweep has %I "
                          "point%s", sp->name, sp->trace_point, (lua_Integer)sw->n,
                       sw->n == 1 ? "" : "s");
        sw->trace_index = (long)sp->trace_point - 1;
    }
    size_t nalloc = sw->n ? sw->n : 1;
    sw->pts = calloc(nalloc, sizeof *sw->pts);
    sw->pending_pts = calloc(nalloc, sizeof *sw->pending_pts);
    sw->status = calloc(nalloc, 1);
    if (!sw->name || !sw->pts || !sw->pending_pts || !sw->status)
        luaL_error(L, "kb.sweep: out of memory");
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_getfield(L, -2, "cpath");
    const char *p = lua_tostring(L, -2), *cp = lua_tostring(L, -1);
    sw->path = dupstr(p ? p : "", p ? strlen(p) : 0);
    sw->cpath = dupstr(cp ? cp : "", cp ? strlen(cp) : 0);
    lua_pop(L, 3);
    if (!sw->path || !sw->cpath)
        luaL_error(L, "kb.sweep: out of memory");
    return sw;
}

/* Step 3: what travels to every point's state (the point function,
 * kb.options, `arg`, each point's parameters), as bytes, and each point's
 * cache key. Leaves the module maps at A_MODS and A_MEMBERS. */
static void pack_inputs(lua_State *L, struct sweep *sw)
{
    lkb_push_module_maps(L);
    struct lkb_pack_how code = {.mode = LKB_PACK_CODE, .mods = A_MODS, .members = A_MEMBERS,
                                .prefix = "kb.sweep: upvalue",
                                .after = " of the point function",
                                .suffix = "; create it inside the function"};
    lkb_pack(L, A_RUN, &sw->fn, &code);
    struct lkb_pack_how plain = {.mode = LKB_PACK_PLAIN, .prefix = "kb.sweep: kb.options field",
                                 .after = "", .suffix = "; kb.options must be plain data",
                                 .path = "options"};
    lkb_pack(L, A_OPTIONS, &sw->options, &plain);
    lua_getglobal(L, "arg");
    plain.prefix = "kb.sweep: global";
    plain.suffix = "; arg must be plain data";
    strcpy(plain.path, "arg");
    lkb_pack(L, -1, &sw->arg, &plain);
    lua_pop(L, 1);

    uint64_t h = base_key(L, A_RUN, A_OPTIONS, A_EXTRA, &code);
    /* The script's arguments (arg[1..n]) may steer a point too; its
     * negative indices (kbsim's own options) may not. */
    lua_getglobal(L, "arg");
    lua_newtable(L);
    if (lua_istable(L, -2)) {
        for (lua_Integer i = 1; lua_rawgeti(L, -2, i) != LUA_TNIL; i++)
            lua_rawseti(L, -2, i);
        lua_pop(L, 1);
    }
    struct lkb_blob *ab = lkb_newblob(L);
    lkb_pack(L, -2, ab, &plain);
    h = fnv_seg(h, ab->p, ab->n);
    lua_pop(L, 3);
    plain.suffix = "; parameters must be plain data (numbers, strings, "
                   "booleans, tables of them)";
    strcpy(plain.path, "p");
    for (size_t i = 0; i < sw->n; i++) {
        plain.prefix = lua_pushfstring(L, "kb.sweep: point %d parameter", (int)i + 1);
        lua_rawgeti(L, A_POINTS, (lua_Integer)i + 1);
        lkb_pack(L, -1, &sw->pts[i].params, &plain);
        lua_pop(L, 2);
        sw->pts[i].key = fnv_seg(h, sw->pts[i].params.p, sw->pts[i].params.n);
    }
}

/* Step 4: what became of each point (pstatus) and, across MPI ranks,
 * the slots' points and the ranks that ran them. */
static void prepare_ranks(lua_State *L, struct sweep *sw, bool mpi)
{
    size_t nalloc = sw->n ? sw->n : 1;
    sw->mpi = mpi;
    atomic_init(&sw->exhausted, false);
    atomic_init(&sw->nfinished, 0);
    sw->pstatus = calloc(nalloc, 1); /* SIM_SWEEP_NOT_RUN */
    if (sw->pstatus == NULL)
        luaL_error(L, "kb.sweep: out of memory");
    if (mpi) {
        sw->slot_pt = malloc(nalloc * sizeof *sw->slot_pt);
        sw->prank = calloc(nalloc, sizeof *sw->prank);
        if (!sw->slot_pt || !sw->prank || uv_mutex_init(&sw->qlock) != 0)
            luaL_error(L, "kb.sweep: out of memory");
        sw->qlock_ok = true;
        for (size_t k = 0; k < nalloc; k++)
            sw->slot_pt[k] = KB_NO_POINT;
    }
}

/* What the plan of a sweep decided (step 5). */
struct sweep_plan {
    int cached;          /* stack index: point -> its cache entry */
    int stopped_before;  /* the signal that stopped an earlier sweep, else 0 */
    bool shard_ends;     /* --shard: the run ends after this sweep's share */
};

/* Step 5: which points run here. The cache folder is made (and probed)
 * before any point runs; with --fast the cached points are taken from it;
 * --merge ends the run if any is missing, --shard keeps its share. */
static void plan_points(lua_State *L, struct sweep *sw, const struct sweep_spec *sp, bool root,
                        struct sweep_plan *plan)
{
    const char *cachedir = NULL;
    if (sp->use_cache) {
        /* the real folder, not the scratch kb.outdir() of a shard */
        cachedir = open_cache(L, sw, lkb_push_outdir(L, A_OPTIONS));
    }
    plan->cached = lua_gettop(L) + 1;
    lua_newtable(L);

    lkb_sweep_push_record(L);
    lua_getfield(L, -1, "interrupted");
    plan->stopped_before = (int)lua_tointeger(L, -1);
    lua_pop(L, 2);
    /* under MPI, rank 0 alone decides what runs */
    if (root)
        load_cached(L, sw, cachedir, sp->fast, plan->cached, plan->stopped_before);
    /* A sweep without a cache (cache = false) runs whole, as in any run:
     * no other process can see its points. */
    if (sp->merge && sp->use_cache && sw->n_pending > 0)
        refuse_missing(L, sw);
    /* a shard goes past a sweep only when the cache holds all of it */
    plan->shard_ends = sp->shards > 0 && sp->use_cache && sw->n_pending > 0;
    if (plan->shard_ends)
        keep_share(sw, sp->shard, sp->shards);
    sw->bar = root && !sp->quiet && sw->n_pending > 0 && isatty(2);
}

/* Step 5b: the order in which the pending points are handed out. In
 * input order, unless the spec gives `cost`, a function of a point's
 * parameters returning a number: then the dearest first (ties in input
 * order), so that the longest points do not start last and leave the
 * other threads or ranks idle at the end of the sweep. Only when points
 * run changes: rows, the cache and every output stay as in input order. */
struct ranked {
    double cost;
    size_t index;
};

static int by_cost(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static void order_points(lua_State *L, struct sweep *sw, const struct sweep_spec *sp)
{
    int t = lua_getfield(L, A_SPEC, "cost");
    if (t == LUA_TNIL || sw->n_pending < 2) {
        if (t != LUA_TNIL && t != LUA_TFUNCTION)
            luaL_error(L, "kb.sweep '%s': 'cost' must be a function of a point", sp->name);
        lua_pop(L, 1);
        return;
    }
    if (t != LUA_TFUNCTION)
        luaL_error(L, "kb.sweep '%s': 'cost' must be a function of a point", sp->name);
    struct ranked *r = lua_newuserdatauv(L, sw->n_pending * sizeof *r, 0);
    for (size_t k = 0; k < sw->n_pending; k++) {
        size_t i = sw->pending_pts[k];
        lua_pushvalue(L, -2);
        lua_rawgeti(L, A_POINTS, (lua_Integer)i + 1);
        lua_call(L, 1, 1);
        int isnum;
        lua_Number c = lua_tonumberx(L, -1, &isnum);
        if (!isnum || c != c)
            luaL_error(L, "kb.sweep '%s': cost of point %d must be a number, got %s",
                       sp->name, (int)i + 1, isnum ? "nan" : luaL_typename(L, -1));
        lua_pop(L, 1);
        r[k] = (struct ranked){(double)c, i};
    }
    qsort(r, sw->n_pending, sizeof *r, by_cost);
    for (size_t k = 0; k < sw->n_pending; k++)
        sw->pending_pts[k] = r[k].index;
    lua_pop(L, 2);
}

/* Step 6: runs the pending points, here (one rank), or handing them out
 * (rank 0 of several), or taking them from rank 0 and sending the results
 * back (the other ranks). Returns sim_sweep_run's status. */
static int simulate(lua_State *L, struct sweep *sw, const struct sweep_spec *sp, bool root)
{
    int rc = 0;
    int jobs = (int)sp->jobs;
    if (sw->n_pending > 0 && !sw->mpi) {
        rc = run_points(sw, jobs, sp->timeout, point_run, sw->n_pending);
    } else if (sw->n_pending > 0 && root) {
        struct lkb_dispatch *d = lkb_dispatch_start(lkb_ranks_claim, lkb_ranks_ended, sw);
        if (d == NULL)
            luaL_error(L, "kb.sweep: cannot start the MPI dispatcher (out of memory)");
        rc = run_points(sw, jobs, sp->timeout, lkb_ranks_run_root, sw->n_pending);
        struct lkb_ranks_unpack u = {sw, NULL};
        lkb_dispatch_finish(d, lkb_ranks_unpack, &u);
        if (u.bad) {
            fprintf(stderr, "kbsim: rank 0: sweep '%s': bad results from a rank (%s)\n",
                    sp->name, u.bad);
            lkb_mpi_abort(2);
        }
    } else if (sw->n_pending > 0) {
        rc = run_points(sw, jobs, sp->timeout, lkb_ranks_run_worker, sw->n_pending);
        struct lkb_blob *b = lkb_newblob(L);
        if (!lkb_ranks_pack(sw, sw->n_pending, b))
            luaL_error(L, "kb.sweep: out of memory");
        lkb_mpi_send_results(b);
        lua_pop(L, 1);
    }
    if (rc == SIM_EINVAL || rc == SIM_ENOMEM)
        luaL_error(L, "kb.sweep: cannot start the sweep (out of memory)");
    return rc;
}

/* Step 7: what became of each point (P_*), run here or on another rank
 * (pstatus is filled by lkb_ranks_unpack then), in a userdata pushed on the
 * stack; warns of the points whose cache file could not be written. */
static unsigned char *point_states(lua_State *L, struct sweep *sw)
{
    for (size_t k = 0; k < sw->n_pending && !sw->mpi; k++)
        sw->pstatus[sw->pending_pts[k]] = sw->status[k];
    for (size_t k = 0; k < sw->n_pending && sw->mpi; k++)
        if (sw->slot_pt[k] != KB_NO_POINT)
            sw->pstatus[sw->slot_pt[k]] = sw->status[k];

    unsigned char *state = lua_newuserdatauv(L, sw->n ? sw->n : 1, 0);
    for (size_t i = 0; i < sw->n; i++) {
        struct point *pt = &sw->pts[i];
        unsigned char st = sw->pstatus[i];
        state[i] = pt->reused ? P_DONE : P_NOT_RUN;
        if (pt->reused)
            continue;
        /* an abandoned point's thread may still write *pt: not read */
        if (st == SIM_SWEEP_TIMED_OUT || st == SIM_SWEEP_TIMEOUT_ABANDONED)
            state[i] = P_TIMED_OUT;
        else if (st == SIM_SWEEP_DONE && pt->err == NULL && pt->checks_failed == 0)
            state[i] = P_DONE;
        else if (st == SIM_SWEEP_DONE || st == SIM_SWEEP_FAILED)
            state[i] = P_FAILED;
    }
    warn_uncached(sw, state);
    return state;
}

/* Step 8: pushes the rows of the done points, in input order, and the
 * summary's list of points ({status, reused, row, error}); counts the
 * done and the failed ones. */
static void push_points(lua_State *L, const struct sweep *sw, const unsigned char *state,
                        int cached, double timeout, size_t *ndone, size_t *nfailed)
{
    lua_newtable(L);
    int rows = lua_gettop(L);
    lua_createtable(L, (int)sw->n, 0);
    int plist = lua_gettop(L);
    size_t nrows = 0;
    *ndone = *nfailed = 0;
    for (size_t i = 0; i < sw->n; i++) {
        const struct point *pt = &sw->pts[i];
        static const char *const names[] = {"done", "failed", "failed", "not run"};
        lua_createtable(L, 0, 4);
        lua_pushstring(L, names[state[i]]);
        lua_setfield(L, -2, "status");
        lua_pushboolean(L, pt->reused);
        lua_setfield(L, -2, "reused");
        if (pt->reused) {
            lua_rawgeti(L, cached, (lua_Integer)i + 1);
            lua_getfield(L, -1, "row");
            lua_remove(L, -2);
        } else if (pt->has_result && (state[i] == P_DONE || state[i] == P_FAILED)) {
            lkb_unpack(L, &pt->result);
        } else {
            lua_pushnil(L);
        }
        if (state[i] == P_DONE && !lua_isnil(L, -1)) {
            lua_pushvalue(L, -1);
            lua_rawseti(L, rows, (lua_Integer)++nrows);
        }
        lua_setfield(L, -2, "row");
        if (state[i] == P_TIMED_OUT) {
            (*nfailed)++;
            lua_pushfstring(L, "timed out: still running after its timeout of %f s",
                            (lua_Number)timeout);
            lua_setfield(L, -2, "error");
        } else if (state[i] == P_FAILED) {
            (*nfailed)++;
            if (pt->err)
                lua_pushstring(L, pt->err);
            else
                lua_pushfstring(L, "%d check%s failed in the point",
                                (int)pt->checks_failed,
                                pt->checks_failed == 1 ? "" : "s");
            lua_setfield(L, -2, "error");
        }
        *ndone += state[i] == P_DONE;
        lua_rawseti(L, plist, (lua_Integer)i + 1);
    }
}

/* Step 9: pushes the summary table (the list of points at plist). */
static void push_summary(lua_State *L, const struct sweep *sw, size_t ndone, size_t nfailed,
                         int stop_signal, double elapsed, int plist)
{
    bool interrupted = stop_signal != 0;
    lua_createtable(L, 0, 9);
    lua_pushstring(L, sw->name);
    lua_setfield(L, -2, "name");
    setint(L, "total", (lua_Integer)sw->n);
    setint(L, "done", (lua_Integer)ndone);
    setint(L, "failed", (lua_Integer)nfailed);
    setint(L, "not_run", (lua_Integer)(sw->n - ndone - nfailed));
    setint(L, "reused", (lua_Integer)sw->nreused);
    lua_pushboolean(L, interrupted);
    lua_setfield(L, -2, "interrupted");
    /* what stopped it, as its message says ("Ctrl-C", "SIGTERM"), or nil */
    if (interrupted) {
        lua_pushstring(L, stop_signal == SIGTERM ? "SIGTERM" : "Ctrl-C");
        lua_setfield(L, -2, "stopped_by");
    }
    lua_pushnumber(L, elapsed);
    lua_setfield(L, -2, "elapsed");
    lua_pushvalue(L, plist);
    lua_setfield(L, -2, "points");
}

/* kb.sweep{points=, run=, name=, jobs=, key_extra=, cache=, timeout=, cost=}
 * -> rows, summary */
static int l_sweep(lua_State *L)
{
    lkb_nocolon(L, "kb.sweep");
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kb_point_key) != LUA_TNIL)
        return luaL_error(L, "kb.sweep: a sweep cannot run inside a sweep point");
    lua_pop(L, 1);
    int ended = lkb_sweep_end_status(L);
    if (ended >= 0)
        return end_run(L, ended);
    struct sweep_spec sp;
    read_spec(L, &sp);
    struct sweep *sw = new_sweep(L, &sp);
    pack_inputs(L, sw);
    bool mpi = lkb_mpi_size() > 1, root = lkb_mpi_rank() == 0;
    prepare_ranks(L, sw, mpi);
    struct sweep_plan plan;
    plan_points(L, sw, &sp, root, &plan);
    order_points(L, sw, &sp);
    if (mpi && !lkb_ranks_start(sw))
        return luaL_error(L, "kb.sweep: MPI failed");

    uint64_t t0 = uv_hrtime();
    int rc = simulate(L, sw, &sp, root);
    if (mpi && !root)
        return lkb_ranks_worker_result(L);
    /* a stop without a signal (a progress callback) counts as Ctrl-C */
    int stop_signal = plan.stopped_before ? plan.stopped_before
                      : rc == SIM_STOPPED ? (sw->stop_signal ? sw->stop_signal : SIGINT)
                                          : 0;
    double elapsed = (double)(uv_hrtime() - t0) * 1e-9;

    const unsigned char *state = point_states(L, sw);
    size_t ndone, nfailed;
    push_points(L, sw, state, plan.cached, sp.timeout, &ndone, &nfailed);
    int rows = lua_gettop(L) - 1, plist = lua_gettop(L);
    report_failures(L, sw, state, plist, ndone, nfailed, stop_signal);
    if (plan.shard_ends)
        end_shard(L, sw, state, sp.shard, sp.shards);
    if (sp.fast && !sp.quiet && root)
        fprintf(stderr, "kb.sweep '%s': reused %zu of %zu points from the cache\n",
                sp.name, sw->nreused, sw->n);
    fflush(stderr);

    push_summary(L, sw, ndone, nfailed, stop_signal, elapsed, plist);
    if (mpi && !lkb_ranks_bcast_summary(L, lua_gettop(L)))
        return luaL_error(L, "kb.sweep: MPI failed");
    lua_pushvalue(L, rows);
    lua_insert(L, -2);
    return 2;
}

int lkb_sweep_status(lua_State *L)
{
    int status = 0;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kb_sweeps_key) != LUA_TTABLE) {
        lua_pop(L, 1);
        return 0;
    }
    lua_getfield(L, -1, "reports");
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        if (lkb_mpi_rank() == 0) /* the other ranks' copy of rank 0's */
            fprintf(stderr, "%s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
        status = 1;
    }
    lua_getfield(L, -2, "interrupted");
    if (lua_tointeger(L, -1) == SIGTERM)
        status = 128 + SIGTERM;
    else if (lua_toboolean(L, -1))
        status = LKB_EXIT_INTERRUPTED;
    lua_pop(L, 3);
    fflush(stderr);
    return status;
}

void lkb_open_sweep(lua_State *L)
{
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, l_sweep, 1); /* upvalue: the module, for options */
    lua_setfield(L, -2, "sweep");
}
