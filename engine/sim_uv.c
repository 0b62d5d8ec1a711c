/* sim_uv.c — libuv driver of the kernel: batched runs and parallel sweeps */
#include "sim_uv.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>

static int sim_uv__err(int uverr)
{
    return uverr == UV_ENOMEM ? SIM_ENOMEM : SIM_EINVAL;
}

/* ---- batched run ----------------------------------------------------- */

struct uv_run_state {
    uv_idle_t idle;
    uv_signal_t sigint;
    struct sim *s;
    sim_time until;
    uint64_t batch;
    int rc;
    int open;        /* handles not yet closed */
    bool has_sigint;
};

static void run_close_cb(uv_handle_t *h)
{
    struct uv_run_state *st = h->data;
    st->open--;
}

static void run_sigint_cb(uv_signal_t *h, int signum)
{
    struct uv_run_state *st = h->data;
    sim_request_stop(st->s);
}

static void run_idle_cb(uv_idle_t *h)
{
    struct uv_run_state *st = h->data;
    int rc = sim_step(st->s, st->until, st->batch);
    if (rc == SIM_MORE)
        return;
    st->rc = rc;
    uv_close((uv_handle_t *)&st->idle, run_close_cb);
    if (st->has_sigint)
        uv_close((uv_handle_t *)&st->sigint, run_close_cb);
    /* Other handles of a shared loop (a progress timer) must not keep us
     * inside uv_run once the simulation is over. The close callbacks still
     * run in this loop iteration. */
    uv_stop(h->loop);
}

int sim_run_uv(struct sim *s, uv_loop_t *loop, sim_time until,
               uint64_t batch, unsigned flags)
{
    uv_loop_t own;
    struct uv_run_state st = {
        .s = s,
        .until = until,
        .batch = batch ? batch : SIM_UV_DEFAULT_BATCH,
        .rc = SIM_EINVAL,
    };
    int r;

    if (!s)
        return SIM_EINVAL;
    if (!loop) {
        if ((r = uv_loop_init(&own)) < 0)
            return sim_uv__err(r);
        loop = &own;
    }
    uv_idle_init(loop, &st.idle);
    st.idle.data = &st;
    st.open = 1;
    if (flags & SIM_UV_SIGINT) {
        if ((r = uv_signal_init(loop, &st.sigint)) < 0) {
            st.rc = sim_uv__err(r);
            goto close;
        }
        st.sigint.data = &st;
        st.has_sigint = true;
        st.open++;
        if ((r = uv_signal_start(&st.sigint, run_sigint_cb, SIGINT)) < 0) {
            st.rc = sim_uv__err(r);
            goto close;
        }
    }
    if ((r = uv_idle_start(&st.idle, run_idle_cb)) < 0) {
        st.rc = sim_uv__err(r);
        goto close;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    goto drain;

close:
    uv_close((uv_handle_t *)&st.idle, run_close_cb);
    if (st.has_sigint)
        uv_close((uv_handle_t *)&st.sigint, run_close_cb);
drain:
    /* Close callbacks normally ran already; NOWAIT never blocks on the
     * caller's other handles. */
    while (st.open > 0)
        uv_run(loop, UV_RUN_NOWAIT);
    if (loop == &own) {
        r = uv_loop_close(&own);
        assert(r == 0 && "sim_run_uv: private loop still busy");
        (void)r;
    }
    return st.rc;
}

/* ---- sweeps ---------------------------------------------------------- */

/* Every point runs on a thread of its own, made when the point starts and
 * detached, so that a point stuck in a long C call can be left behind
 * (abandoned) without holding up the sweep or a pool thread. A point that
 * ends tells the loop through an async handle, under the lock, unless it
 * was abandoned. Everything a thread may touch (its record, the lock)
 * lives in one heap block, freed by sim_sweep_run if no thread was
 * abandoned, else by the last abandoned thread as it ends (with the
 * caller's release callback). */

struct sweep;

struct sim_sweep_point {
    struct sweep *sw;
    size_t index;
    struct sim *sim;  /* attached simulation, under sw->lock */
    int rc;
    uint64_t t_start; /* uv_hrtime at start, loop thread only */
    atomic_bool stop; /* stop requested: Ctrl-C or the timeout */
    bool timed_out;   /* the timeout passed (loop thread) */
    /* under sw->lock: */
    bool running;     /* started and not yet collected */
    bool finished;    /* run returned */
    bool abandoned;   /* the sweep no longer waits for it */
};

struct sweep {
    uv_loop_t *loop;
    uv_signal_t sigint, sigterm;
    uv_async_t wake;
    uv_timer_t timer;
    bool has_wake, has_timer, has_sigint, has_sigterm; /* handles opened */
    int *stopped_by;  /* opts->stopped_by: the first stopping signal */
    int open;         /* handles not yet closed */
    uv_mutex_t lock;
    atomic_bool stopping;
    sim_sweep_run_fn run;
    void *ud;
    sim_sweep_progress_fn progress;
    struct sim_sweep_point *pts;
    unsigned char *status;
    size_t n, next, ended, running;
    size_t n_failed, n_interrupted;
    int jobs;
    uint64_t timeout_ns; /* 0: none */
    bool finished;
    void (*release)(void *ud);
    /* under lock: */
    size_t live_abandoned; /* abandoned threads still running */
    bool returned;         /* sim_sweep_run returned */
};

static void sweep_free(struct sweep *sw);

void sim_sweep_point_attach(struct sim_sweep_point *pt, struct sim *s)
{
    struct sweep *sw = pt->sw;
    uv_mutex_lock(&sw->lock);
    pt->sim = s;
    if (s && atomic_load(&pt->stop))
        sim_request_stop(s);
    uv_mutex_unlock(&sw->lock);
}

bool sim_sweep_point_stopping(const struct sim_sweep_point *pt)
{
    return atomic_load(&pt->stop);
}

static void sweep_set_status(struct sweep *sw, size_t i, unsigned char st)
{
    if (sw->status)
        sw->status[i] = st;
}

/* Under sw->lock: ask point pt to stop (its hook or its simulation). */
static void point_request_stop(struct sim_sweep_point *pt)
{
    atomic_store(&pt->stop, true);
    if (pt->sim)
        sim_request_stop(pt->sim);
}

/* Loop thread: start no more points and ask the running ones to stop. */
static void sweep_stop(struct sweep *sw)
{
    if (atomic_load(&sw->stopping))
        return;
    uv_mutex_lock(&sw->lock);
    atomic_store(&sw->stopping, true);
    for (size_t i = 0; i < sw->next; i++)
        if (sw->pts[i].running)
            point_request_stop(&sw->pts[i]);
    uv_mutex_unlock(&sw->lock);
}

static void sweep_fill(struct sweep *sw);

/* Loop thread, under sw->lock: stop waiting for a running point. */
static void point_abandon(struct sweep *sw, struct sim_sweep_point *pt,
                          unsigned char st)
{
    point_request_stop(pt);
    pt->abandoned = true;
    sw->live_abandoned++;
    pt->running = false;
    sw->running--;
    sw->ended++;
    if (st == SIM_SWEEP_STOP_ABANDONED)
        sw->n_interrupted++;
    else
        sw->n_failed++;
    sweep_set_status(sw, pt->index, st);
}

static void sweep_close_cb(uv_handle_t *h)
{
    struct sweep *sw = h->data;
    sw->open--;
}

static void sweep_close(struct sweep *sw, uv_handle_t *h)
{
    sw->open++;
    h->data = sw;
    uv_close(h, sweep_close_cb);
}

/* SIGINT (or SIGTERM with catch_sigterm) stops the sweep; a second one
 * (either) leaves the points that did not stop behind. */
static void sweep_signal_cb(uv_signal_t *h, int signum)
{
    struct sweep *sw = h->data;
    if (!atomic_load(&sw->stopping)) {
        if (sw->stopped_by && *sw->stopped_by == 0)
            *sw->stopped_by = signum;
        sweep_stop(sw);
        return;
    }
    uv_mutex_lock(&sw->lock);
    for (size_t i = 0; i < sw->next; i++)
        if (sw->pts[i].running && !sw->pts[i].finished)
            point_abandon(sw, &sw->pts[i], SIM_SWEEP_STOP_ABANDONED);
    uv_mutex_unlock(&sw->lock);
    sweep_fill(sw);
}

/* Signal signum on handle h (has: it is open, to be closed) stops sw's
 * sweep (sweep_signal_cb); 0 or a libuv error. */
static int sweep_signal_open(struct sweep *sw, uv_signal_t *h, bool *has, int signum)
{
    int r = uv_signal_init(sw->loop, h);
    if (r < 0)
        return r;
    *has = true;
    h->data = sw;
    return uv_signal_start(h, sweep_signal_cb, signum);
}

static void point_thread(void *arg)
{
    struct sim_sweep_point *pt = arg;
    struct sweep *sw = pt->sw;
    int rc = sw->run(pt, pt->index, sw->ud);
    bool last = false;
    uv_mutex_lock(&sw->lock);
    /* A point that forgot to detach must not be stopped after it ended. */
    pt->sim = NULL;
    pt->rc = rc;
    if (!pt->abandoned) {
        pt->finished = true;
        uv_async_send(&sw->wake);
    } else {
        last = --sw->live_abandoned == 0 && sw->returned;
    }
    uv_mutex_unlock(&sw->lock);
    /* From here on, sw may be gone, unless this thread frees it. */
    if (last)
        sweep_free(sw);
}

/* Loop thread: a point that returned gets its status. */
static void point_collect(struct sweep *sw, struct sim_sweep_point *pt)
{
    unsigned char st = SIM_SWEEP_DONE;
    pt->running = false;
    sw->running--;
    if (pt->rc != 0 && pt->timed_out) {
        st = SIM_SWEEP_TIMED_OUT;
        sw->n_failed++;
    } else if (pt->rc != 0 && atomic_load(&sw->stopping)) {
        st = SIM_SWEEP_STOPPED;
        sw->n_interrupted++;
    } else if (pt->rc != 0) {
        st = SIM_SWEEP_FAILED;
        sw->n_failed++;
    }
    sweep_set_status(sw, pt->index, st);
    sw->ended++;
}

/* Points that returned, in index order; each frees its slot for the next
 * point before the following one is looked at, as if they had ended one
 * at a time. */
static void sweep_wake_cb(uv_async_t *h)
{
    struct sweep *sw = h->data;
    for (size_t i = 0; i < sw->next; i++) {
        struct sim_sweep_point *pt = &sw->pts[i];
        uv_mutex_lock(&sw->lock);
        bool ended = pt->running && pt->finished;
        uv_mutex_unlock(&sw->lock);
        if (!ended)
            continue;
        point_collect(sw, pt);
        if (sw->progress && sw->progress(sw->ended, sw->n, sw->ud))
            sweep_stop(sw);
        sweep_fill(sw);
    }
}

/* The timeout: a point past it is asked to stop; one still running
 * SIM_SWEEP_GRACE_MS later is abandoned. */
static void sweep_timer_cb(uv_timer_t *h)
{
    struct sweep *sw = h->data;
    uint64_t now = uv_hrtime();
    bool changed = false;
    uv_mutex_lock(&sw->lock);
    for (size_t i = 0; i < sw->next; i++) {
        struct sim_sweep_point *pt = &sw->pts[i];
        if (!pt->running || pt->finished)
            continue;
        uint64_t ran = now - pt->t_start;
        if (ran >= sw->timeout_ns && !pt->timed_out) {
            pt->timed_out = true;
            point_request_stop(pt);
        }
        if (ran >= sw->timeout_ns + SIM_SWEEP_GRACE_MS * 1000000u) {
            point_abandon(sw, pt, SIM_SWEEP_TIMEOUT_ABANDONED);
            changed = true;
        }
    }
    uv_mutex_unlock(&sw->lock);
    if (changed) {
        if (sw->progress && sw->progress(sw->ended, sw->n, sw->ud))
            sweep_stop(sw);
        sweep_fill(sw);
    }
}

static void sweep_fill(struct sweep *sw)
{
    while (!atomic_load(&sw->stopping) && sw->running < (size_t)sw->jobs &&
           sw->next < sw->n) {
        struct sim_sweep_point *pt = &sw->pts[sw->next++];
        uv_thread_t tid;
        pt->t_start = uv_hrtime();
        uv_mutex_lock(&sw->lock);
        pt->running = true;
        uv_mutex_unlock(&sw->lock);
        sw->running++;
        /* the stack libuv gives its pool threads, where points ran
         * before: Lua and the point's C code recurse on it */
        uv_thread_options_t topt = {.flags = UV_THREAD_HAS_STACK_SIZE,
                                    .stack_size = 8u << 20};
        if (uv_thread_create_ex(&tid, &topt, point_thread, pt) != 0) {
            pt->running = false;
            sw->running--;
            sw->ended++;
            sw->n_failed++;
            sweep_set_status(sw, pt->index, SIM_SWEEP_FAILED);
            continue;
        }
        pthread_detach(tid);
    }
    if (sw->running == 0 && !sw->finished &&
        (atomic_load(&sw->stopping) || sw->next == sw->n)) {
        sw->finished = true;
        uv_stop(sw->loop);
    }
}

/* Opens the handles of sw on its loop (each closed at the end if it was
 * opened); 0 or a libuv error. */
static int sweep_open_handles(struct sweep *sw, bool catch_sigint, bool catch_sigterm)
{
    int r;
    if ((r = uv_async_init(sw->loop, &sw->wake, sweep_wake_cb)) < 0)
        return r;
    sw->wake.data = sw;
    sw->has_wake = true;
    if (sw->timeout_ns) {
        if ((r = uv_timer_init(sw->loop, &sw->timer)) < 0)
            return r;
        sw->has_timer = true;
        sw->timer.data = sw;
        uv_timer_start(&sw->timer, sweep_timer_cb, 50, 50);
    }
    if (catch_sigint && (r = sweep_signal_open(sw, &sw->sigint, &sw->has_sigint, SIGINT)) < 0)
        return r;
    if (catch_sigterm &&
        (r = sweep_signal_open(sw, &sw->sigterm, &sw->has_sigterm, SIGTERM)) < 0)
        return r;
    return 0;
}

/* Frees sw once no thread uses it, and lets the caller free ud. */
static void sweep_free(struct sweep *sw)
{
    if (sw->release)
        sw->release(sw->ud);
    uv_mutex_destroy(&sw->lock);
    free(sw->pts);
    free(sw);
}

int sim_sweep_run(size_t n_points, sim_sweep_run_fn run, void *ud,
                  const struct sim_sweep_opts *opts, unsigned char *status)
{
    static const struct sim_sweep_opts defaults = {.jobs = 1};
    uv_loop_t own;
    int r, rc = 0;

    if (!run)
        return SIM_EINVAL;
    if (!opts)
        opts = &defaults;
    for (size_t i = 0; i < n_points && status; i++)
        status[i] = SIM_SWEEP_NOT_RUN;
    struct sweep *sw = n_points ? calloc(1, sizeof *sw) : NULL;
    if (!sw) {
        if (opts->release)
            opts->release(ud);
        return n_points ? SIM_ENOMEM : 0;
    }
    *sw = (struct sweep){.run = run, .ud = ud, .status = status, .n = n_points,
                         .jobs = opts->jobs > 0 ? opts->jobs : 1,
                         .progress = opts->progress, .release = opts->release};
    if (opts->timeout > 0)
        sw->timeout_ns = opts->timeout >= 1e9 ? UINT64_MAX / 2
                                              : (uint64_t)(opts->timeout * 1e9);
    atomic_init(&sw->stopping, false);
    sw->pts = calloc(n_points, sizeof *sw->pts);
    if (!sw->pts) {
        free(sw);
        if (opts->release)
            opts->release(ud);
        return SIM_ENOMEM;
    }
    for (size_t i = 0; i < n_points; i++) {
        sw->pts[i].sw = sw;
        sw->pts[i].index = i;
        atomic_init(&sw->pts[i].stop, false);
    }
    if ((r = uv_mutex_init(&sw->lock)) < 0) {
        free(sw->pts);
        free(sw);
        if (opts->release)
            opts->release(ud);
        return sim_uv__err(r);
    }
    sw->loop = opts->loop;
    if (!sw->loop) {
        if ((r = uv_loop_init(&own)) < 0) {
            sweep_free(sw);
            return sim_uv__err(r);
        }
        sw->loop = &own;
    }
    sw->stopped_by = opts->stopped_by;
    if (sw->stopped_by)
        *sw->stopped_by = 0;
    if ((r = sweep_open_handles(sw, opts->catch_sigint, opts->catch_sigterm)) < 0) {
        rc = sim_uv__err(r);
        goto out;
    }
    sweep_fill(sw);
    /* Always entered, even if sweep_fill already finished: uv_run also
     * clears the stop flag that finishing set. */
    uv_run(sw->loop, UV_RUN_DEFAULT);
    assert(sw->running == 0);
    if (sw->n_interrupted || sw->ended < sw->n)
        rc = SIM_STOPPED;
    else if (sw->n_failed)
        rc = SIM_EPROC;
out:
    if (sw->has_wake)
        sweep_close(sw, (uv_handle_t *)&sw->wake);
    if (sw->has_timer)
        sweep_close(sw, (uv_handle_t *)&sw->timer);
    if (sw->has_sigint)
        sweep_close(sw, (uv_handle_t *)&sw->sigint);
    if (sw->has_sigterm)
        sweep_close(sw, (uv_handle_t *)&sw->sigterm);
    while (sw->open > 0)
        uv_run(sw->loop, UV_RUN_NOWAIT);
    if (sw->loop == &own) {
        r = uv_loop_close(&own);
        assert(r == 0 && "sim_sweep_run: private loop still busy");
        (void)r;
    }
    uv_mutex_lock(&sw->lock);
    sw->returned = true;
    bool last = sw->live_abandoned == 0;
    uv_mutex_unlock(&sw->lock);
    if (last)
        sweep_free(sw);
    return rc;
}
