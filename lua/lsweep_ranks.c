/* lsweep_ranks.c — kb.sweep across the ranks of an MPI job: rank 0 deals
 * the points (its own slots and the other ranks' take them from one
 * queue), the other ranks ask for them, and send their results back;
 * the collective steps before and after a sweep. Through lsweep_mpi.h,
 * the only door to MPI; the sweep itself is lsweep.c. See
 * docs/decisions/0019-mpi-sweeps.md and docs/cluster.md. */
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "lkb_internal.h"
#include "lsweep_internal.h"
#include "lsweep_mpi.h"
#include "ltransport.h"

/* ---- across MPI ranks (lsweep_mpi.h) ----------------------------------- */

/* Rank 0: the next point to run, for a slot of its own (local) or for
 * another rank; -1 when none is left. The traced point (--trace) runs
 * on rank 0, which alone writes outputs. */
static long claim(struct sweep *sw, bool local)
{
    long r = -1;
    uv_mutex_lock(&sw->qlock);
    bool trace_pending = false;
    for (size_t j = 0; sw->trace_index >= 0 && j < sw->n_pending; j++)
        trace_pending = trace_pending || (long)sw->pending_pts[j] == sw->trace_index;
    if (local && trace_pending && !sw->trace_taken) {
        sw->trace_taken = true;
        r = sw->trace_index;
    } else {
        while (sw->qnext < sw->n_pending && (long)sw->pending_pts[sw->qnext] == sw->trace_index)
            sw->qnext++;
        if (sw->qnext < sw->n_pending)
            r = (long)sw->pending_pts[sw->qnext++];
    }
    uv_mutex_unlock(&sw->qlock);
    return r;
}

long lkb_ranks_claim(void *ud)
{
    return claim(ud, false);
}

void lkb_ranks_ended(void *ud)
{
    struct sweep *sw = ud;
    atomic_fetch_add(&sw->nfinished, 1);
}

/* sim_sweep_run_fn on rank 0: a slot runs the next point of the queue,
 * if any is left. */
int lkb_ranks_run_root(struct sim_sweep_point *sp, size_t k, void *ud)
{
    struct sweep *sw = ud;
    long i = claim(sw, true);
    if (i < 0)
        return 0;
    sw->slot_pt[k] = (size_t)i;
    int rc = lkb_sweep_run_point(sp, sw, (size_t)i);
    atomic_fetch_add(&sw->nfinished, 1);
    return rc;
}

/* sim_sweep_run_fn on the other ranks: a slot runs the point rank 0
 * gives it, if any is left. */
int lkb_ranks_run_worker(struct sim_sweep_point *sp, size_t k, void *ud)
{
    struct sweep *sw = ud;
    if (atomic_load(&sw->exhausted) || sim_sweep_point_stopping(sp))
        return 0;
    long i = lkb_mpi_request(k);
    if (i < 0 || (size_t)i >= sw->n) {
        atomic_store(&sw->exhausted, true);
        return 0;
    }
    sw->slot_pt[k] = (size_t)i;
    int rc = lkb_sweep_run_point(sp, sw, (size_t)i);
    lkb_mpi_ended((size_t)i);
    return rc;
}

/* Results of the points a rank ran, sent to rank 0: u64 count, then per
 * point u64 index, u8 status, u8 has_result, i64 checks_failed, the
 * strings err, trace, cache_err and the row's bytes, each as u64 length
 * (UINT64_MAX: none) and bytes. */
static bool put_u64(struct lkb_blob *b, uint64_t v)
{
    unsigned char d[8];
    lkb_put_le64(d, v);
    return lkb_blob_add(b, d, 8);
}

static bool put_bytes(struct lkb_blob *b, const void *p, size_t n, bool none)
{
    return put_u64(b, none ? UINT64_MAX : n) && (none || lkb_blob_add(b, p, n));
}

static bool put_str(struct lkb_blob *b, const char *s)
{
    return put_bytes(b, s, s ? strlen(s) : 0, s == NULL);
}

bool lkb_ranks_pack(const struct sweep *sw, size_t nslots, struct lkb_blob *b)
{
    uint64_t count = 0;
    for (size_t k = 0; k < nslots; k++)
        count += sw->slot_pt[k] != KB_NO_POINT;
    bool ok = put_u64(b, count);
    for (size_t k = 0; ok && k < nslots; k++) {
        size_t i = sw->slot_pt[k];
        if (i == KB_NO_POINT)
            continue;
        const struct point *pt = &sw->pts[i];
        unsigned char st = sw->status[k];
        /* an abandoned point's thread may still write *pt: not read */
        bool gone = sim_sweep_abandoned(st);
        unsigned char head[2] = {st, !gone && pt->has_result};
        ok = put_u64(b, i) && lkb_blob_add(b, head, 2) &&
             put_u64(b, gone ? 0 : (uint64_t)pt->checks_failed) &&
             put_str(b, gone ? NULL : pt->err) && put_str(b, gone ? NULL : pt->trace) &&
             put_str(b, gone ? NULL : pt->cache_err) &&
             put_bytes(b, pt->result.p, pt->result.n, gone || !pt->has_result);
    }
    return ok;
}

static bool take(const unsigned char **p, const unsigned char *end, void *d, size_t n)
{
    if ((size_t)(end - *p) < n)
        return false;
    memcpy(d, *p, n);
    *p += n;
    return true;
}

static bool take_u64(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    unsigned char d[8];
    if (!take(p, end, d, 8))
        return false;
    *v = lkb_get_le64(d);
    return true;
}

/* A string or bytes: *out malloc'd (NUL-terminated), or NULL for none. */
static bool take_bytes(const unsigned char **p, const unsigned char *end, char **out,
                       size_t *len)
{
    uint64_t n;
    *out = NULL;
    if (!take_u64(p, end, &n))
        return false;
    if (n == UINT64_MAX)
        return true;
    if (n > (uint64_t)(end - *p) || (*out = malloc((size_t)n + 1)) == NULL)
        return false;
    memcpy(*out, *p, (size_t)n);
    (*out)[n] = '\0';
    *p += n;
    if (len)
        *len = (size_t)n;
    return true;
}

/* lkb_results_fn: a rank's results into the sweep's points. */
void lkb_ranks_unpack(void *ud, int rank, const unsigned char *p, size_t n)
{
    struct lkb_ranks_unpack *u = ud;
    struct sweep *sw = u->sw;
    const unsigned char *end = p + n;
    uint64_t count;
    if (!take_u64(&p, end, &count)) {
        u->bad = "truncated";
        return;
    }
    for (uint64_t c = 0; c < count; c++) {
        uint64_t index, checks;
        unsigned char head[2];
        char *err, *trace, *cache_err, *row;
        size_t rowlen = 0;
        if (!take_u64(&p, end, &index) || index >= sw->n || !take(&p, end, head, 2) ||
            !take_u64(&p, end, &checks)) {
            u->bad = "a bad point header";
            return;
        }
        struct point *pt = &sw->pts[index];
        bool ok = take_bytes(&p, end, &err, NULL);
        ok = take_bytes(&p, end, &trace, NULL) && ok;
        ok = take_bytes(&p, end, &cache_err, NULL) && ok;
        ok = take_bytes(&p, end, &row, &rowlen) && ok;
        if (!ok || pt->err || pt->trace || pt->cache_err || pt->has_result) {
            free(err), free(trace), free(cache_err), free(row);
            u->bad = "a bad or repeated point";
            return;
        }
        pt->err = err, pt->trace = trace, pt->cache_err = cache_err;
        pt->checks_failed = (long)checks;
        pt->has_result = head[1] && row != NULL;
        if (row) {
            lkb_blob_free(&pt->result);
            pt->result.p = (unsigned char *)row;
            pt->result.n = rowlen;
            pt->result.cap = rowlen + 1;
        }
        sw->pstatus[index] = head[0];
        sw->prank[index] = rank;
    }
}

/* ---- the collective parts of a sweep under MPI ------------------------- */

/* Every rank: rank 0 says how many points it will hand out, and every
 * other rank checks that its sweep is rank 0's (the script computed the
 * same points). A rank whose sweep differs ends the job. */
bool lkb_ranks_start(struct sweep *sw)
{
    uint64_t head[2] = {lkb_sweep_digest(sw), sw->n_pending};
    uint64_t mine = head[0];
    if (!lkb_mpi_bcast(head, sizeof head))
        return false;
    if (head[0] != mine) {
        fprintf(stderr, "kbsim: rank %d on %s: sweep '%s' has other points than on rank 0 (their "
                "parameters, the point function or the options differ): under MPI the script "
                "must build the same sweeps on every rank\n", lkb_mpi_rank(),
                lkb_mpi_host(lkb_mpi_rank()), sw->name);
        fflush(stderr);
        lkb_mpi_abort(2);
    }
    sw->n_pending = (size_t)head[1];
    return true;
}

/* Rank 0: the summary at index idx to every other rank. */
bool lkb_ranks_bcast_summary(lua_State *L, int idx)
{
    struct lkb_blob *b = lkb_newblob(L);
    struct lkb_pack_how plain = {.mode = LKB_PACK_PLAIN, .prefix = "kb.sweep: summary field", .after = "",
                        .suffix = "", .path = "summary"};
    lkb_pack(L, idx, b, &plain);
    bool ok = lkb_mpi_bcast_blob(b);
    lua_pop(L, 1);
    return ok;
}

/* The other ranks: rank 0's summary, and the rows from it as rank 0
 * made them (the done points' rows, in input order), so that the script
 * goes on as on rank 0; a failure or a stop is recorded for the exit
 * status (rank 0 reports it). Returns rows, summary. */
int lkb_ranks_worker_result(lua_State *L)
{
    struct lkb_blob *b = lkb_newblob(L);
    if (!lkb_mpi_bcast_blob(b))
        return luaL_error(L, "kb.sweep: MPI failed");
    lkb_unpack(L, b);
    int summary = lua_gettop(L);
    lua_newtable(L);
    int rows = lua_gettop(L);
    lua_getfield(L, summary, "points");
    lua_Integer nrows = 0;
    for (lua_Integer i = 1; lua_rawgeti(L, -1, i) == LUA_TTABLE; i++) {
        lua_getfield(L, -1, "status");
        lua_getfield(L, -2, "row");
        if (strcmp(lua_tostring(L, -2), "done") == 0 && !lua_isnil(L, -1))
            lua_rawseti(L, rows, ++nrows);
        else
            lua_pop(L, 1);
        lua_pop(L, 2);
    }
    lua_pop(L, 2);
    lua_getfield(L, summary, "failed");
    lua_getfield(L, summary, "interrupted");
    bool failed = lua_tointeger(L, -2) > 0, interrupted = lua_toboolean(L, -1);
    lua_pop(L, 2);
    if (failed || interrupted) {
        lua_pushliteral(L, "(reported by rank 0)");
        lkb_sweep_record_report(L, interrupted ? SIGINT : 0);
    }
    lua_pushvalue(L, rows);
    lua_pushvalue(L, summary);
    return 2;
}
