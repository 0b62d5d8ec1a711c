/* sim_uv.c — libuv driver of the kernel: batched runs and parallel sweeps */
#include "sim_uv.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
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

struct sweep;

struct sim_sweep_point {
    uv_work_t work;
    struct sweep *sw;
    size_t index;
    struct sim *sim; /* attached simulation, under sw->lock */
    int rc;
    bool active;     /* queued and not yet finished */
};

struct sweep {
    uv_loop_t *loop;
    uv_signal_t sigint;
    bool sig_open;
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
    bool finished;
};

void sim_sweep_point_attach(struct sim_sweep_point *pt, struct sim *s)
{
    struct sweep *sw = pt->sw;
    uv_mutex_lock(&sw->lock);
    pt->sim = s;
    if (s && atomic_load(&sw->stopping))
        sim_request_stop(s);
    uv_mutex_unlock(&sw->lock);
}

bool sim_sweep_point_stopping(const struct sim_sweep_point *pt)
{
    return atomic_load(&pt->sw->stopping);
}

static void sweep_set_status(struct sweep *sw, size_t i, unsigned char st)
{
    if (sw->status)
        sw->status[i] = st;
}

/* Loop thread: queue no more points, cancel queued ones that no pool
 * thread picked up yet, and ask the running ones to stop. */
static void sweep_stop(struct sweep *sw)
{
    if (atomic_load(&sw->stopping))
        return;
    uv_mutex_lock(&sw->lock);
    atomic_store(&sw->stopping, true);
    for (size_t i = 0; i < sw->next; i++) {
        struct sim_sweep_point *pt = &sw->pts[i];
        if (pt->active && pt->sim)
            sim_request_stop(pt->sim);
    }
    uv_mutex_unlock(&sw->lock);
    for (size_t i = 0; i < sw->next; i++)
        if (sw->pts[i].active)
            uv_cancel((uv_req_t *)&sw->pts[i].work);
}

static void sweep_sig_close_cb(uv_handle_t *h)
{
    struct sweep *sw = h->data;
    sw->sig_open = false;
}

static void sweep_sigint_cb(uv_signal_t *h, int signum)
{
    sweep_stop(h->data);
}

static void sweep_work_cb(uv_work_t *req)
{
    struct sim_sweep_point *pt = req->data;
    struct sweep *sw = pt->sw;
    pt->rc = sw->run(pt, pt->index, sw->ud);
    /* A point that forgot to detach must not be stopped after it ended. */
    uv_mutex_lock(&sw->lock);
    pt->sim = NULL;
    uv_mutex_unlock(&sw->lock);
}

static void sweep_after_work_cb(uv_work_t *req, int status);

static void sweep_fill(struct sweep *sw)
{
    while (!atomic_load(&sw->stopping) && sw->running < (size_t)sw->jobs &&
           sw->next < sw->n) {
        struct sim_sweep_point *pt = &sw->pts[sw->next++];
        pt->active = true;
        sw->running++;
        if (uv_queue_work(sw->loop, &pt->work, sweep_work_cb,
                          sweep_after_work_cb) < 0) {
            pt->active = false;
            sw->running--;
            sw->ended++;
            sw->n_failed++;
            sweep_set_status(sw, pt->index, SIM_SWEEP_FAILED);
        }
    }
    if (sw->running == 0 && !sw->finished &&
        (atomic_load(&sw->stopping) || sw->next == sw->n)) {
        sw->finished = true;
        if (sw->sig_open)
            uv_close((uv_handle_t *)&sw->sigint, sweep_sig_close_cb);
        uv_stop(sw->loop);
    }
}

static void sweep_after_work_cb(uv_work_t *req, int status)
{
    struct sim_sweep_point *pt = req->data;
    struct sweep *sw = pt->sw;

    pt->active = false;
    sw->running--;
    if (status == UV_ECANCELED) {
        sweep_set_status(sw, pt->index, SIM_SWEEP_NOT_RUN);
    } else {
        unsigned char st = SIM_SWEEP_DONE;
        if (pt->rc != 0 && atomic_load(&sw->stopping)) {
            st = SIM_SWEEP_STOPPED;
            sw->n_interrupted++;
        } else if (pt->rc != 0) {
            st = SIM_SWEEP_FAILED;
            sw->n_failed++;
        }
        sweep_set_status(sw, pt->index, st);
        sw->ended++;
        if (sw->progress && sw->progress(sw->ended, sw->n, sw->ud))
            sweep_stop(sw);
    }
    sweep_fill(sw);
}

/* libuv sizes its pool once, from the environment, at the first queued
 * work of the process; more jobs than threads would just wait in its
 * queue. */
static void sweep_size_pool(int jobs)
{
    char buf[16];
    if (jobs <= 4 || getenv("UV_THREADPOOL_SIZE"))
        return;
    snprintf(buf, sizeof buf, "%d", jobs > 1024 ? 1024 : jobs);
    setenv("UV_THREADPOOL_SIZE", buf, 0);
}

int sim_sweep_run(size_t n_points, sim_sweep_run_fn run, void *ud,
                  const struct sim_sweep_opts *opts, unsigned char *status)
{
    static const struct sim_sweep_opts defaults = {.jobs = 1};
    struct sweep sw = {.run = run, .ud = ud, .status = status,
                       .n = n_points};
    uv_loop_t own;
    int r, rc;

    if (!run)
        return SIM_EINVAL;
    if (!opts)
        opts = &defaults;
    for (size_t i = 0; i < n_points && status; i++)
        status[i] = SIM_SWEEP_NOT_RUN;
    if (n_points == 0)
        return 0;
    sw.jobs = opts->jobs > 0 ? opts->jobs : 1;
    sw.progress = opts->progress;
    atomic_init(&sw.stopping, false);
    sw.pts = calloc(n_points, sizeof *sw.pts);
    if (!sw.pts)
        return SIM_ENOMEM;
    for (size_t i = 0; i < n_points; i++) {
        sw.pts[i].sw = &sw;
        sw.pts[i].index = i;
        sw.pts[i].work.data = &sw.pts[i];
    }
    if ((r = uv_mutex_init(&sw.lock)) < 0) {
        free(sw.pts);
        return sim_uv__err(r);
    }
    sw.loop = opts->loop;
    if (!sw.loop) {
        if ((r = uv_loop_init(&own)) < 0) {
            uv_mutex_destroy(&sw.lock);
            free(sw.pts);
            return sim_uv__err(r);
        }
        sw.loop = &own;
    }
    rc = 0;
    if (opts->catch_sigint) {
        if ((r = uv_signal_init(sw.loop, &sw.sigint)) < 0) {
            rc = sim_uv__err(r);
            goto out;
        }
        sw.sigint.data = &sw;
        sw.sig_open = true;
        if ((r = uv_signal_start(&sw.sigint, sweep_sigint_cb, SIGINT)) < 0) {
            rc = sim_uv__err(r);
            uv_close((uv_handle_t *)&sw.sigint, sweep_sig_close_cb);
            goto out;
        }
    }
    sweep_size_pool(sw.jobs);
    sweep_fill(&sw);
    /* Always entered, even if sweep_fill already finished: uv_run also
     * clears the stop flag that finishing set. */
    uv_run(sw.loop, UV_RUN_DEFAULT);
    assert(sw.running == 0);
    if (sw.n_interrupted || sw.ended < sw.n)
        rc = SIM_STOPPED;
    else if (sw.n_failed)
        rc = SIM_EPROC;
out:
    while (sw.sig_open)
        uv_run(sw.loop, UV_RUN_NOWAIT);
    if (sw.loop == &own) {
        r = uv_loop_close(&own);
        assert(r == 0 && "sim_sweep_run: private loop still busy");
        (void)r;
    }
    uv_mutex_destroy(&sw.lock);
    free(sw.pts);
    return rc;
}
