/* test_sim.c — scheduler semantics: delta cycles, notification kinds,
 * fifo blocking, determinism, deadlock report, run limits */
#include <math.h>
#include <sys/resource.h>
#include "coro.h"
#include "sim.h"
#include "test.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

/* A log of "who at what time/delta" lines shared by the processes. */
struct log {
    char buf[4096];
    size_t len;
};

static void logf_(struct log *l, struct sim *s, const char *what)
{
    l->len += (size_t)snprintf(l->buf + l->len, sizeof l->buf - l->len,
                               "%s@%llu/%llu ", what,
                               (unsigned long long)(sim_now(s) / SIM_NS),
                               (unsigned long long)sim_delta_count(s));
}

/* ---- delta cycles: a signal written in delta n is read in n+1 -------- */

struct sigctx {
    struct sim_signal *g;
    int seen_same_delta, seen_next_delta;
    uint64_t write_delta, change_delta;
};

static void sig_writer(struct sim *s, void *arg)
{
    struct sigctx *c = arg;
    int v = 42;
    c->write_delta = sim_delta_count(s);
    sim_signal_write(c->g, &v);
    sim_signal_read(c->g, &c->seen_same_delta);
    sim_wait(s, 0);
    sim_signal_read(c->g, &c->seen_next_delta);
}

static void sig_watcher(struct sim *s, void *arg)
{
    struct sigctx *c = arg;
    sim_wait_event(s, sim_signal_changed_event(c->g));
    c->change_delta = sim_delta_count(s);
}

TEST(signal_commits_in_update_phase)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct sigctx c = {0};
    c.g = sim_signal_new(s, "sig", sizeof(int));
    ASSERT_TRUE(c.g);
    ASSERT_TRUE(sim_thread(s, "watcher", sig_watcher, &c, 0));
    ASSERT_TRUE(sim_thread(s, "writer", sig_writer, &c, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(c.seen_same_delta, 0);
    ASSERT_EQ(c.seen_next_delta, 42);
    ASSERT_U64_EQ(c.change_delta, c.write_delta + 1);
    ASSERT_U64_EQ(sim_now(s), 0);
    T_FREE(sim_free, s);
}

TEST(signal_same_value_does_not_notify)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct sigctx c = {0};
    c.g = sim_signal_new(s, "sig", sizeof(int));
    ASSERT_TRUE(c.g);
    struct sim_proc *w = sim_thread(s, "watcher", sig_watcher, &c, 0);
    ASSERT_TRUE(w);
    sim_proc_set_daemon(w, true);
    int zero = 0;
    sim_signal_write(c.g, &zero);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_TRUE(!sim_proc_terminated(w));
    T_FREE(sim_free, s);
}

/* ---- immediate vs delta vs timed notification ------------------------ */

struct notctx {
    struct log log;
    struct sim_event *imm, *del, *tim;
};

static void waiter_imm(struct sim *s, void *arg)
{
    struct notctx *c = arg;
    sim_wait_event(s, c->imm);
    logf_(&c->log, s, "imm");
}
static void waiter_del(struct sim *s, void *arg)
{
    struct notctx *c = arg;
    sim_wait_event(s, c->del);
    logf_(&c->log, s, "del");
}
static void waiter_tim(struct sim *s, void *arg)
{
    struct notctx *c = arg;
    sim_wait_event(s, c->tim);
    logf_(&c->log, s, "tim");
}
static void notifier(struct sim *s, void *arg)
{
    struct notctx *c = arg;
    sim_notify_at(c->tim, 5 * SIM_NS);
    sim_notify_delta(c->del);
    sim_notify(c->imm);
    logf_(&c->log, s, "notifier");
}

TEST(notification_order)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct notctx c = {0};
    c.imm = sim_event_new(s, "imm");
    ASSERT_TRUE(c.imm);
    c.del = sim_event_new(s, "del");
    ASSERT_TRUE(c.del);
    c.tim = sim_event_new(s, "tim");
    ASSERT_TRUE(c.tim);
    ASSERT_TRUE(sim_thread(s, "w_tim", waiter_tim, &c, 0));
    ASSERT_TRUE(sim_thread(s, "w_del", waiter_del, &c, 0));
    ASSERT_TRUE(sim_thread(s, "w_imm", waiter_imm, &c, 0));
    ASSERT_TRUE(sim_thread(s, "notifier", notifier, &c, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    /* immediate: same delta (0); delta: next delta (1); timed: 5 ns */
    ASSERT_STREQ(c.log.buf, "notifier@0/0 imm@0/0 del@0/1 tim@5/2 ");
    T_FREE(sim_free, s);
}

static void renotifier(struct sim *s, void *arg)
{
    struct notctx *c = arg;
    sim_notify_at(c->tim, 10 * SIM_NS);
    sim_notify_at(c->tim, 3 * SIM_NS); /* earlier wins */
    sim_notify_at(c->tim, 7 * SIM_NS); /* later is ignored */
    sim_notify_at(c->del, 4 * SIM_NS);
    sim_cancel(c->del); /* cancelled: never fires */
}

TEST(earlier_notification_wins_and_cancel)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct notctx c = {0};
    c.tim = sim_event_new(s, "tim");
    ASSERT_TRUE(c.tim);
    c.del = sim_event_new(s, "del");
    ASSERT_TRUE(c.del);
    ASSERT_TRUE(sim_thread(s, "w_tim", waiter_tim, &c, 0));
    struct sim_proc *wd = sim_thread(s, "w_del", waiter_del, &c, 0);
    ASSERT_TRUE(wd);
    ASSERT_TRUE(sim_thread(s, "renotifier", renotifier, &c, 0));
    int rc = sim_run(s, SIM_FOREVER);
    ASSERT_EQ(rc, SIM_EDEADLOCK); /* w_del waits forever */
    ASSERT_CONTAINS(sim_errmsg(s), "'w_del' waits on event 'del'");
    ASSERT_STREQ(c.log.buf, "tim@3/1 ");
    ASSERT_TRUE(!sim_proc_terminated(wd));
    T_FREE(sim_free, s);
}

/* ---- fifo blocking both ways ----------------------------------------- */

struct fifoctx {
    struct sim_fifo *f;
    struct log log;
    int got[8];
};

static void fast_writer(struct sim *s, void *arg)
{
    struct fifoctx *c = arg;
    for (int i = 0; i < 6; i++) {
        sim_fifo_write(c->f, &i); /* capacity 2: blocks on the 3rd */
        logf_(&c->log, s, "w");
    }
}

static void slow_reader(struct sim *s, void *arg)
{
    struct fifoctx *c = arg;
    for (int i = 0; i < 6; i++) {
        sim_wait(s, 10 * SIM_NS);
        sim_fifo_read(c->f, &c->got[i]);
    }
}

TEST(fifo_write_blocks_when_full)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct fifoctx c = {0};
    c.f = sim_fifo_new(s, "f", sizeof(int), 2);
    ASSERT_TRUE(c.f);
    ASSERT_TRUE(sim_thread(s, "writer", fast_writer, &c, 0));
    ASSERT_TRUE(sim_thread(s, "reader", slow_reader, &c, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    for (int i = 0; i < 6; i++)
        ASSERT_EQ(c.got[i], i);
    /* two writes at once, then one per read (freed slot usable next delta) */
    ASSERT_CONTAINS(c.log.buf, "w@0/0 w@0/0 w@10/");
    ASSERT_U64_EQ(sim_now(s), 60 * SIM_NS);
    T_FREE(sim_free, s);
}

static void slow_writer(struct sim *s, void *arg)
{
    struct fifoctx *c = arg;
    for (int i = 0; i < 4; i++) {
        sim_wait(s, 7 * SIM_NS);
        sim_fifo_write(c->f, &i);
    }
}

static void fast_reader(struct sim *s, void *arg)
{
    struct fifoctx *c = arg;
    for (int i = 0; i < 4; i++) {
        sim_fifo_read(c->f, &c->got[i]); /* blocks: empty */
        logf_(&c->log, s, "r");
    }
}

TEST(fifo_read_blocks_when_empty)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct fifoctx c = {0};
    c.f = sim_fifo_new(s, "f", sizeof(int), 4);
    ASSERT_TRUE(c.f);
    ASSERT_TRUE(sim_thread(s, "reader", fast_reader, &c, 0));
    ASSERT_TRUE(sim_thread(s, "writer", slow_writer, &c, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(c.got[3], 3);
    /* each read completes one delta after the write, at the write's time */
    ASSERT_TRUE(strstr(c.log.buf, "r@7/") && strstr(c.log.buf, "r@14/") &&
                strstr(c.log.buf, "r@21/") && strstr(c.log.buf, "r@28/"));
    T_FREE(sim_free, s);
}

TEST(fifo_nonblocking)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct sim_fifo *f = sim_fifo_new(s, "f", sizeof(int), 1);
    ASSERT_TRUE(f);
    int v = 7, out = 0;
    ASSERT_TRUE(sim_fifo_nb_write(f, &v));
    ASSERT_TRUE(!sim_fifo_nb_write(f, &v)); /* full */
    ASSERT_TRUE(!sim_fifo_nb_read(f, &out)); /* not readable until update */
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(sim_fifo_num_available(f), 1);
    ASSERT_TRUE(sim_fifo_nb_read(f, &out));
    ASSERT_EQ(out, 7);
    ASSERT_TRUE(sim_fifo_new(s, "bad", 0, 1) == NULL);
    ASSERT_CONTAINS(sim_errmsg(s), "fifo 'bad'");
    ASSERT_TRUE(sim_fifo_new(s, "huge", 8, (size_t)UINT32_MAX) == NULL);
    ASSERT_CONTAINS(sim_errmsg(s), "fifo 'huge' is too large");
    ASSERT_TRUE(sim_fifo_new(s, "wide", (size_t)1 << 40, 1) == NULL);
    ASSERT_CONTAINS(sim_errmsg(s), "fifo 'wide' is too large");
    T_FREE(sim_free, s);
}

/* Three readers blocked on one fifo (the first waits in the fifo's own
 * slot, the others on its written event), a thread waiting on that event
 * through sim_fifo_written_event, and a method statically sensitive to
 * the read event: every one wakes in the delta after the write, readers
 * in the order they blocked; each update that wakes anyone counts one
 * notification. */
struct manyctx {
    struct sim_fifo *f;
    struct log log;
    int method_runs;
};

static void many_reader(struct sim *s, void *arg)
{
    struct manyctx *c = arg;
    int v;
    ASSERT_EQ(sim_fifo_read(c->f, &v), 0);
    char what[16];
    snprintf(what, sizeof what, "r%d", v);
    logf_(&c->log, s, what);
}

static void many_watcher(struct sim *s, void *arg)
{
    struct manyctx *c = arg;
    sim_wait_event(s, sim_fifo_written_event(c->f));
    logf_(&c->log, s, "w");
}

static void many_writer(struct sim *s, void *arg)
{
    struct manyctx *c = arg;
    sim_wait(s, 5 * SIM_NS);
    for (int i = 1; i <= 3; i++)
        ASSERT_EQ(sim_fifo_write(c->f, &i), 0);
    logf_(&c->log, s, "wrote");
}

static void many_method(struct sim *s, void *arg)
{
    struct manyctx *c = arg;
    (void)s;
    c->method_runs++;
}

TEST(fifo_several_waiters)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct manyctx c = {0};
    c.f = sim_fifo_new(s, "f", sizeof(int), 4);
    ASSERT_TRUE(c.f);
    for (int i = 0; i < 3; i++)
        ASSERT_TRUE(sim_thread(s, "reader", many_reader, &c, 0) != NULL);
    ASSERT_TRUE(sim_thread(s, "watcher", many_watcher, &c, 0) != NULL);
    ASSERT_TRUE(sim_thread(s, "writer", many_writer, &c, 0) != NULL);
    struct sim_proc *m = sim_method(s, "m", many_method, &c, false);
    ASSERT_TRUE(m);
    ASSERT_EQ(sim_sensitive(m, sim_fifo_read_event(c.f)), 0);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    /* delta 1 at 5 ns: the write; delta 2: all four wake, readers in the
     * order they blocked, each reading the next value */
    ASSERT_STREQ(c.log.buf, "wrote@5/1 r1@5/2 r2@5/2 r3@5/2 w@5/2 ");
    /* the method: its first run at t = 0, then once for the reads */
    ASSERT_EQ(c.method_runs, 2);
    struct sim_stats st;
    sim_get_stats(s, &st);
    /* written side after the write, read side after the reads */
    ASSERT_U64_EQ(st.notifications, 2);
    T_FREE(sim_free, s);
}

/* ---- methods: static sensitivity and next_trigger -------------------- */

struct methctx {
    struct sim_event *clk;
    int runs;
    struct log log;
};

static void clock_gen(struct sim *s, void *arg)
{
    struct methctx *c = arg;
    for (int i = 0; i < 3; i++) {
        sim_wait(s, 10 * SIM_NS);
        sim_notify(c->clk);
    }
}

static void on_clock(struct sim *s, void *arg)
{
    struct methctx *c = arg;
    c->runs++;
    logf_(&c->log, s, "m");
}

TEST(method_static_sensitivity)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct methctx c = {0};
    c.clk = sim_event_new(s, "clk");
    ASSERT_TRUE(c.clk);
    struct sim_proc *m = sim_method(s, "m", on_clock, &c, true);
    ASSERT_TRUE(m);
    ASSERT_EQ(sim_sensitive(m, c.clk), 0);
    ASSERT_TRUE(sim_thread(s, "clock", clock_gen, &c, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(c.runs, 3);
    ASSERT_STREQ(c.log.buf, "m@10/1 m@20/2 m@30/3 ");
    T_FREE(sim_free, s);
}

static void ticker(struct sim *s, void *arg)
{
    struct methctx *c = arg;
    c->runs++;
    if (c->runs < 5)
        sim_next_trigger(s, 3 * SIM_NS);
}

TEST(method_next_trigger)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct methctx c = {0};
    ASSERT_TRUE(sim_method(s, "ticker", ticker, &c, false));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(c.runs, 5);
    ASSERT_U64_EQ(sim_now(s), 12 * SIM_NS);
    T_FREE(sim_free, s);
}

/* sim_method_wake: a "link" method woken by a thread at 7 ns and 3 ns
 * runs once, at 3 ns (the earlier voids the later, as an event's earlier
 * notification would); it then asks for 7 ns itself; a 0 delay runs it in
 * the next delta. */
struct wakectx {
    struct sim_proc *m;
    int runs;
    int rc_thread, rc_far;
    struct log log;
};

static void woken(struct sim *s, void *arg)
{
    struct wakectx *c = arg;
    c->runs++;
    logf_(&c->log, s, "w");
    if (sim_now(s) == 3 * SIM_NS)
        ASSERT_EQ(sim_method_wake(c->m, 4 * SIM_NS), 0);
}

static void waker(struct sim *s, void *arg)
{
    struct wakectx *c = arg;
    ASSERT_EQ(sim_method_wake(c->m, 7 * SIM_NS), 0);
    ASSERT_EQ(sim_method_wake(c->m, 3 * SIM_NS), 0);
    c->rc_thread = sim_method_wake(sim_current(s), SIM_NS);
    sim_wait(s, 10 * SIM_NS);
    c->rc_far = sim_method_wake(c->m, SIM_TIME_MAX); /* past the end from 10 ns */
    ASSERT_EQ(sim_method_wake(c->m, 0), 0);
}

TEST(method_wake_earliest_wins)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct wakectx c = {0};
    c.m = sim_method(s, "m", woken, &c, true);
    ASSERT_TRUE(c.m);
    ASSERT_TRUE(sim_thread(s, "waker", waker, &c, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(c.rc_thread, SIM_EINVAL);
    ASSERT_EQ(c.rc_far, SIM_EINVAL);
    ASSERT_EQ(c.runs, 3);
    /* 3 ns, the 7 ns it asked for again (the thread's 7 ns entry was
     * voided by the 3 ns activation), then 10 ns one delta on */
    ASSERT_STREQ(c.log.buf, "w@3/1 w@7/2 w@10/4 ");
    struct sim_stats st;
    sim_get_stats(s, &st);
    ASSERT_U64_EQ(st.notifications, 4);
    T_FREE(sim_free, s);
}

/* sim_seq_reserve / sim_method_wake_reserved / sim_seq_passed: a wake-up
 * of M at 5 ns whose sequence number is reserved at 0 and whose entry is
 * made later (at 2 ns, or at 5 ns by X, which runs before M's place) runs
 * M where sim_method_wake at 0 would have: after X (seq before M's), before
 * Y (seq after). Y, after M's place, finds it passed. */
struct resctx {
    struct sim_proc *x, *y, *m;
    int mode; /* 0: plain wake-up; 1: made at 2 ns; 2: made by X at 5 ns */
    uint64_t seq;
    int rc_x, rc_y;
    bool passed_x, passed_y;
    struct log log;
};

static void res_x(struct sim *s, void *arg)
{
    struct resctx *c = arg;
    logf_(&c->log, s, "X");
    c->passed_x = sim_seq_passed(s, 5 * SIM_NS, c->seq);
    if (c->mode == 2)
        c->rc_x = sim_method_wake_reserved(c->m, 5 * SIM_NS, c->seq);
}

static void res_y(struct sim *s, void *arg)
{
    struct resctx *c = arg;
    logf_(&c->log, s, "Y");
    if (!c->mode)
        return;
    c->passed_y = sim_seq_passed(s, 5 * SIM_NS, c->seq);
    c->rc_y = sim_method_wake_reserved(c->m, 5 * SIM_NS, c->seq);
}

static void res_m(struct sim *s, void *arg)
{
    logf_(&((struct resctx *)arg)->log, s, "M");
}

static void res_setup(struct sim *s, void *arg)
{
    struct resctx *c = arg;
    ASSERT_EQ(sim_method_wake(c->x, 5 * SIM_NS), 0);
    if (c->mode == 0)
        ASSERT_EQ(sim_method_wake(c->m, 5 * SIM_NS), 0);
    else
        c->seq = sim_seq_reserve(s);
    ASSERT_EQ(sim_method_wake(c->y, 5 * SIM_NS), 0);
    sim_wait(s, 2 * SIM_NS);
    ASSERT_TRUE(!sim_seq_passed(s, 5 * SIM_NS, c->seq));
    if (c->mode == 1)
        ASSERT_EQ(sim_method_wake_reserved(c->m, 5 * SIM_NS, c->seq), 0);
}

TEST(reserved_wakeup_keeps_its_place)
{
    for (int mode = 0; mode < 3; mode++) {
        struct sim *s = T_OWN(sim_new(NULL), sim_free);
        ASSERT_TRUE(s);
        struct resctx c = {.mode = mode, .seq = UINT64_MAX};
        c.x = sim_method(s, "x", res_x, &c, true);
        c.y = sim_method(s, "y", res_y, &c, true);
        c.m = sim_method(s, "m", res_m, &c, true);
        ASSERT_TRUE(c.x && c.y && c.m);
        ASSERT_TRUE(sim_thread(s, "setup", res_setup, &c, 0));
        ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
        ASSERT_STREQ(c.log.buf, "X@5/2 M@5/2 Y@5/2 ");
        if (mode) {
            ASSERT_TRUE(!c.passed_x);
            ASSERT_TRUE(c.passed_y);
            ASSERT_EQ(c.rc_y, 1);
            ASSERT_EQ(c.rc_x, 0);
        }
        T_FREE(sim_free, s);
    }
}

static void bad_wait_in_method(struct sim *s, void *arg)
{
    int *rc = arg;
    *rc = sim_wait(s, SIM_NS);
}

TEST(wait_outside_thread_is_refused)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    int rc = 0;
    ASSERT_TRUE(sim_method(s, "m", bad_wait_in_method, &rc, false));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(rc, SIM_EPERM);
    ASSERT_CONTAINS(sim_errmsg(s), "outside a thread process");
    ASSERT_EQ(sim_wait(s, 1), SIM_EPERM);
    T_FREE(sim_free, s);
}

/* ---- wait_any with timeout ------------------------------------------- */

struct anyctx {
    struct sim_event *ev[2];
    int r1, r2;
    sim_time t1, t2;
};

static void any_waiter(struct sim *s, void *arg)
{
    struct anyctx *c = arg;
    c->r1 = sim_wait_any(s, c->ev, 2, 100 * SIM_NS);
    c->t1 = sim_now(s);
    c->r2 = sim_wait_any(s, c->ev, 2, 5 * SIM_NS);
    c->t2 = sim_now(s);
}

static void any_notifier(struct sim *s, void *arg)
{
    struct anyctx *c = arg;
    sim_wait(s, 20 * SIM_NS);
    sim_notify(c->ev[1]);
    sim_wait(s, 50 * SIM_NS);
    sim_notify(c->ev[0]); /* too late for the second wait */
}

TEST(wait_any_and_timeout)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct anyctx c = {0};
    c.ev[0] = sim_event_new(s, "a");
    ASSERT_TRUE(c.ev[0]);
    c.ev[1] = sim_event_new(s, "b");
    ASSERT_TRUE(c.ev[1]);
    ASSERT_TRUE(sim_thread(s, "waiter", any_waiter, &c, 0));
    ASSERT_TRUE(sim_thread(s, "notifier", any_notifier, &c, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(c.r1, 1);
    ASSERT_U64_EQ(c.t1, 20 * SIM_NS);
    ASSERT_EQ(c.r2, -1);
    ASSERT_U64_EQ(c.t2, 25 * SIM_NS);
    T_FREE(sim_free, s);
}

/* ---- determinism ----------------------------------------------------- */

struct trace {
    char buf[1 << 16];
    size_t len;
};

static void trace_fn(void *ud, sim_time t, uint64_t delta,
                     const struct sim_proc *p)
{
    struct trace *tr = ud;
    if (tr->len + 64 < sizeof tr->buf)
        tr->len += (size_t)snprintf(tr->buf + tr->len, sizeof tr->buf - tr->len,
                                    "%llu:%llu:%s\n", (unsigned long long)t,
                                    (unsigned long long)delta,
                                    sim_proc_name(p));
}

struct detctx {
    struct sim_fifo *f;
    struct sim_event *e;
    int id;
};

static void det_proc(struct sim *s, void *arg)
{
    struct detctx *c = arg;
    for (int i = 0; i < 5; i++) {
        sim_wait(s, (sim_time)((c->id * 7 + i * 3) % 5) * SIM_NS);
        if (c->id % 2)
            sim_fifo_write(c->f, &i);
        else {
            int v;
            sim_fifo_read(c->f, &v);
        }
        sim_notify_at(c->e, (sim_time)(c->id + 1) * SIM_NS);
    }
}

static void det_run(struct trace *tr)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct detctx c[8];
    struct sim_fifo *f = sim_fifo_new(s, "f", sizeof(int), 2);
    ASSERT_TRUE(f);
    struct sim_event *e = sim_event_new(s, "e");
    ASSERT_TRUE(e);
    for (int i = 0; i < 8; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        c[i] = (struct detctx){f, e, i};
        ASSERT_TRUE(sim_thread(s, name, det_proc, &c[i], 0));
    }
    sim_set_trace(s, trace_fn, tr);
    ASSERT_OK(sim_run(s, SIM_FOREVER));
    T_FREE(sim_free, s);
}

TEST(two_runs_identical_traces)
{
    static struct trace a, b;
    a.len = b.len = 0; /* (run again and again under --failalloc) */
    det_run(&a);
    det_run(&b);
    ASSERT_TRUE(a.len > 100);
    ASSERT_EQ(a.len, b.len);
    ASSERT_TRUE(memcmp(a.buf, b.buf, a.len) == 0);
}

/* ---- deadlock report ------------------------------------------------- */

static void reads_forever(struct sim *s, void *arg)
{
    int v;
    sim_fifo_read(arg, &v);
}

static void daemon_loop(struct sim *s, void *arg)
{
    for (;;)
        sim_wait_event(s, arg);
}

TEST(deadlock_report_lists_blocked_processes)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct sim_fifo *a = sim_fifo_new(s, "pair0.a2b", sizeof(int), 1);
    ASSERT_TRUE(a);
    struct sim_fifo *b = sim_fifo_new(s, "pair0.b2a", sizeof(int), 1);
    ASSERT_TRUE(b);
    struct sim_event *never = sim_event_new(s, "never");
    ASSERT_TRUE(never);
    ASSERT_TRUE(sim_thread(s, "pair0.A", reads_forever, b, 0));
    ASSERT_TRUE(sim_thread(s, "pair0.B", reads_forever, a, 0));
    struct sim_proc *d = sim_thread(s, "server", daemon_loop, never, 0);
    ASSERT_TRUE(d);
    sim_proc_set_daemon(d, true);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_EDEADLOCK);
    const char *m = sim_errmsg(s);
    ASSERT_CONTAINS(m, "deadlock at 0 ns: nothing is pending but 2 "
                       "processes are blocked:");
    ASSERT_CONTAINS(m, "'pair0.A' waits on read on fifo 'pair0.b2a'");
    ASSERT_CONTAINS(m, "'pair0.B' waits on read on fifo 'pair0.a2b'");
    ASSERT_TRUE(strstr(m, "server") == NULL);
    T_FREE(sim_free, s);
}

/* ---- restarting an ended thread ---------------------------------------- */

struct rs {
    struct log log;
    struct sim_proc *worker;
    int rc_running;
    struct sim_fifo *f;
};

static void rs_work(struct sim *s, void *arg)
{
    struct rs *c = arg;
    sim_wait(s, 5 * SIM_NS);
    logf_(&c->log, s, "work");
}

static void rs_driver(struct sim *s, void *arg)
{
    struct rs *c = arg;
    c->rc_running = sim_thread_restart(c->worker, rs_work, c, 0); /* still running */
    for (int i = 0; i < 3; i++) {
        sim_wait(s, 10 * SIM_NS);
        ASSERT_TRUE(sim_proc_terminated(c->worker));
        ASSERT_EQ(sim_thread_restart(c->worker, rs_work, c, 0), 0);
    }
    sim_wait(s, 10 * SIM_NS);
    /* the last run blocks for ever: listed after 'later', which was made
     * after the worker's record but started before its last restart */
    ASSERT_EQ(sim_thread_restart(c->worker, reads_forever, c->f, 0), 0);
}

TEST(ended_thread_restarts_and_deadlock_lists_by_start)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct rs c = {0};
    c.f = sim_fifo_new(s, "never", sizeof(int), 1);
    ASSERT_TRUE(c.f);
    c.worker = sim_thread(s, "worker", rs_work, &c, 0);
    ASSERT_TRUE(c.worker);
    ASSERT_TRUE(sim_thread(s, "driver", rs_driver, &c, 0));
    ASSERT_TRUE(sim_thread(s, "later", reads_forever, c.f, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_EDEADLOCK);
    ASSERT_EQ(c.rc_running, SIM_EPERM);
    ASSERT_STREQ(c.log.buf, "work@5/1 work@15/3 work@25/5 work@35/7 ");
    const char *m = sim_errmsg(s);
    ASSERT_CONTAINS(m, "2 processes are blocked:\n  'later' waits on read on fifo 'never'\n"
                       "  'worker' waits on read on fifo 'never'");
    struct sim_stats st;
    sim_get_stats(s, &st);
    ASSERT_U64_EQ(st.threads_alive, 2);
    T_FREE(sim_free, s);
}

/* A thread that ends waking another switches straight to it: the one woken
 * restarts the ended thread before the scheduler has had its stack back. */
struct rz {
    struct log log;
    struct sim_event *done;
    struct sim_proc *worker;
    int runs, rc[3];
};

static void rz_work(struct sim *s, void *arg)
{
    struct rz *c = arg;
    sim_wait(s, 5 * SIM_NS);
    logf_(&c->log, s, "work");
    sim_notify(c->done);
}

static void rz_driver(struct sim *s, void *arg)
{
    struct rz *c = arg;
    for (int i = 0; i < 3; i++) {
        sim_wait_event(s, c->done);
        c->rc[i] = sim_thread_restart(c->worker, rz_work, c, 0);
    }
}

TEST(thread_restarts_straight_after_it_ends)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct rz c = {0};
    c.done = sim_event_new(s, "done");
    ASSERT_TRUE(c.done);
    ASSERT_TRUE(sim_thread(s, "driver", rz_driver, &c, 0));
    c.worker = sim_thread(s, "worker", rz_work, &c, 0);
    ASSERT_TRUE(c.worker);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), 0);
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(c.rc[i], 0);
    ASSERT_STREQ(c.log.buf, "work@5/1 work@10/2 work@15/3 work@20/4 ");
    struct sim_stats st;
    sim_get_stats(s, &st);
    ASSERT_U64_EQ(st.threads_alive, 0);
    T_FREE(sim_free, s);
}

/* ---- run limits, stop, fail ------------------------------------------ */

static void periodic(struct sim *s, void *arg)
{
    int *n = arg;
    for (;;) {
        sim_wait(s, 10 * SIM_NS);
        ++*n;
    }
}

TEST(run_until_and_resume)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    int n = 0;
    struct sim_proc *p = sim_thread(s, "periodic", periodic, &n, 0);
    ASSERT_TRUE(p);
    sim_proc_set_daemon(p, true);
    ASSERT_EQ(sim_run(s, 35 * SIM_NS), SIM_UNTIL);
    ASSERT_EQ(n, 3);
    ASSERT_U64_EQ(sim_now(s), 35 * SIM_NS);
    ASSERT_EQ(sim_run(s, 40 * SIM_NS), SIM_UNTIL); /* activity at 40 done */
    ASSERT_EQ(n, 4);
    T_FREE(sim_free, s);
}

static void stopper(struct sim *s, void *arg)
{
    sim_wait(s, 5 * SIM_NS);
    sim_stop(s);
}

static void failer(struct sim *s, void *arg)
{
    sim_wait(s, 2 * SIM_NS);
    sim_fail(s, "component '%s' failed", "x");
}

TEST(stop_and_fail)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    int n = 0;
    ASSERT_TRUE(sim_thread(s, "periodic", periodic, &n, 0));
    ASSERT_TRUE(sim_thread(s, "stopper", stopper, NULL, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_STOPPED);
    ASSERT_U64_EQ(sim_now(s), 5 * SIM_NS);
    T_FREE(sim_free, s);

    s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_TRUE(sim_thread(s, "failer", failer, NULL, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_EPROC);
    ASSERT_STREQ(sim_errmsg(s), "component 'x' failed");
    T_FREE(sim_free, s);
}

TEST(step_in_batches_and_async_stop)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    int n = 0;
    struct sim_proc *p = sim_thread(s, "periodic", periodic, &n, 0);
    ASSERT_TRUE(p);
    sim_proc_set_daemon(p, true);
    int calls = 0, rc;
    do {
        rc = sim_step(s, 100 * SIM_NS, 2);
        calls++;
    } while (rc == SIM_MORE);
    ASSERT_EQ(rc, SIM_UNTIL);
    ASSERT_EQ(n, 10);
    ASSERT_TRUE(calls >= 5);
    sim_request_stop(s);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_STOPPED);
    T_FREE(sim_free, s);
}

/* ---- typed ports ----------------------------------------------------- */

TEST(port_binding_checks)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct sim_port *out = sim_port_new(s, "sip0.cube5.pe3.dma.out",
                                        SIM_PORT_OUT, "flit", 1, 1);
    ASSERT_TRUE(out);
    struct sim_port *in = sim_port_new(s, "sip0.cube5.router.in",
                                       SIM_PORT_IN, "flit", 1, 1);
    ASSERT_TRUE(in);
    struct sim_port *cin = sim_port_new(s, "sip0.cube5.pe3.credit_in",
                                        SIM_PORT_IN, "credit", 1, 1);
    ASSERT_TRUE(cin);
    struct sim_port *out2 = sim_port_new(s, "b.out", SIM_PORT_OUT, "flit",
                                         0, 1);
    ASSERT_TRUE(out2);
    int iface = 9;
    sim_port_set_iface(in, &iface);

    ASSERT_EQ(sim_port_bind(out, cin), SIM_EBIND);
    ASSERT_CONTAINS(sim_errmsg(s), "cannot bind 'sip0.cube5.pe3.dma.out' "
                                   "(type 'flit') to "
                                   "'sip0.cube5.pe3.credit_in' (type "
                                   "'credit')");
    ASSERT_EQ(sim_port_bind(out, out2), SIM_EBIND);
    ASSERT_CONTAINS(sim_errmsg(s), "(out) to 'b.out' (out): directions");
    ASSERT_EQ(sim_port_bind(out, in), 0);
    ASSERT_TRUE(sim_port_peer_iface(out, 0) == &iface);
    ASSERT_EQ(sim_port_bind(out2, in), SIM_EBIND);
    ASSERT_CONTAINS(sim_errmsg(s), "'sip0.cube5.router.in' accepts at most "
                                   "1 binding");

    /* the credit port is still unbound: elaboration names it */
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_EBIND);
    ASSERT_STREQ(sim_errmsg(s), "port 'sip0.cube5.pe3.credit_in' (in, type "
                                "'credit') is unbound");
    T_FREE(sim_free, s);
}

TEST(unbound_ports_all_listed)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_TRUE(sim_port_new(s, "a.in", SIM_PORT_IN, "flit", 1, 1));
    ASSERT_TRUE(sim_port_new(s, "b.io", SIM_PORT_INOUT, "x", 2, 4));
    ASSERT_EQ(sim_elaborate(s), SIM_EBIND);
    ASSERT_STREQ(sim_errmsg(s),
                 "port 'a.in' (in, type 'flit') is unbound\n"
                 "port 'b.io' (inout, type 'x') is unbound");
    ASSERT_TRUE(sim_port_new(s, "c", SIM_PORT_IN, "t", 2, 1) == NULL);
    T_FREE(sim_free, s);
}

/* the on-bind hook: counts the calls and caches the first peer's iface */
struct bind_note {
    int calls;
    struct sim_port *port;
    void *iface;
};

static void noted(void *ud, struct sim_port *p)
{
    struct bind_note *n = ud;
    n->calls++;
    n->port = p;
    n->iface = sim_port_peer_iface(p, 0);
}

/* A module's deferred ports (decision 0038, "Lazy records"): noted at
 * where they go, made when a listing asks, each where it was noted. */
struct lazy_mod {
    struct sim *s;
    struct sim_port *after[2];
    int n_noted, calls;
};

static int lazy_make(void *ud)
{
    struct lazy_mod *m = ud;
    m->calls++;
    static const char *const names[2][2] = {{"x.in", "x.out"}, {"y.in", "y.out"}};
    for (int i = 0; i < m->n_noted; i++) {
        sim_port_insert_after(m->s, true, m->after[i]);
        for (int k = 0; k < 2; k++)
            if (!sim_port_new(m->s, names[i][k], SIM_PORT_IN, "t", 0, 1)) {
                sim_port_insert_after(m->s, false, NULL);
                return SIM_ENOMEM;
            }
    }
    sim_port_insert_after(m->s, false, NULL);
    m->n_noted = 0;
    return 0;
}

TEST(deferred_ports_keep_their_place)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct lazy_mod *m = T_OWN(calloc(1, sizeof *m), free);
    ASSERT_TRUE(m);
    m->s = s;
    struct sim_port_defer *d = T_OWN(sim_port_defer(s, lazy_make, m), sim_port_defer_release);
    ASSERT_TRUE(d);
    m->after[m->n_noted++] = sim_port_last(s); /* NULL: first of all */
    ASSERT_TRUE(sim_port_new(s, "a.p", SIM_PORT_OUT, "t", 0, 1));
    m->after[m->n_noted++] = sim_port_last(s);
    ASSERT_TRUE(sim_port_new(s, "b.p", SIM_PORT_OUT, "t", 0, 1));
    ASSERT_EQ(m->calls, 0);
    const char *want[] = {"x.in", "x.out", "a.p", "y.in", "y.out", "b.p"};
    int n = 0;
    for (struct sim_port *p = sim_port_next(s, NULL); p; p = sim_port_next(s, p), n++) {
        ASSERT_TRUE(n < 6);
        ASSERT_STREQ(sim_port_name(p), want[n]);
    }
    ASSERT_EQ(n, 6);
    ASSERT_EQ(m->calls, 1);
    /* made: a port made now goes last, and nothing is made twice */
    ASSERT_TRUE(sim_port_new(s, "c.p", SIM_PORT_OUT, "t", 0, 1));
    ASSERT_STREQ(sim_port_name(sim_port_last(s)), "c.p");
    ASSERT_OK(sim_port_make_deferred(s));
    n = 0;
    for (struct sim_port *p = sim_port_next(s, NULL); p; p = sim_port_next(s, p))
        n++;
    ASSERT_EQ(n, 7);
    T_FREE(sim_port_defer_release, d);
    ASSERT_OK(sim_port_make_deferred(s));
    ASSERT_EQ(m->calls, 3);
    T_FREE(sim_free, s);
    /* released after the simulation is gone: what a system freed after
     * its simulation does */
    s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    d = T_OWN(sim_port_defer(s, lazy_make, m), sim_port_defer_release);
    ASSERT_TRUE(d);
    T_FREE(sim_free, s);
    T_FREE(sim_port_defer_release, d);
}

TEST(port_on_bind_and_listing)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_TRUE(sim_port_next(s, NULL) == NULL);
    struct sim_port *a = sim_port_new(s, "m.a", SIM_PORT_OUT, "t", 1, 1);
    struct sim_port *b = sim_port_new(s, "n.in", SIM_PORT_IN, "t", 0, 3);
    struct sim_port *c = sim_port_new(s, "k.io", SIM_PORT_INOUT, "u", 0, 1);
    ASSERT_TRUE(a && b && c);
    int iface = 5;
    sim_port_set_iface(b, &iface);
    struct bind_note na = {0}, nb = {0};
    sim_port_on_bind(a, noted, &na);
    sim_port_on_bind(b, noted, &nb);
    /* a failed bind calls nobody */
    ASSERT_EQ(sim_port_bind(a, c), SIM_EBIND);
    ASSERT_EQ(na.calls + nb.calls, 0);
    ASSERT_OK(sim_port_bind(a, b));
    ASSERT_EQ(na.calls, 1);
    ASSERT_TRUE(na.port == a && na.iface == &iface);
    ASSERT_EQ(nb.calls, 1);
    ASSERT_TRUE(nb.port == b && nb.iface == NULL); /* a exports nothing */
    /* creation order, with what a listing shows */
    struct sim_port *want[] = {a, b, c};
    struct sim_port *p = NULL;
    for (int i = 0; i < 3; i++) {
        p = sim_port_next(s, p);
        ASSERT_TRUE(p == want[i]);
    }
    ASSERT_TRUE(sim_port_next(s, p) == NULL);
    ASSERT_STREQ(sim_port_type(c), "u");
    ASSERT_EQ(sim_port_dir(b), SIM_PORT_IN);
    int mn, mx;
    sim_port_multiplicity(b, &mn, &mx);
    ASSERT_EQ(mn, 0);
    ASSERT_EQ(mx, 3);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    T_FREE(sim_free, s);
}

/* ---- scale ----------------------------------------------------------- */

static void short_life(struct sim *s, void *arg)
{
    int *n = arg;
    sim_wait(s, SIM_NS);
    ++*n;
    sim_wait(s, SIM_NS);
}

TEST(ten_thousand_threads)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    int n = 0;
    for (int i = 0; i < 10000; i++)
        ASSERT_TRUE(sim_thread(s, "t", short_life, &n, 0) != NULL);
    struct sim_stats st;
    sim_get_stats(s, &st);
    ASSERT_U64_EQ(st.threads_alive, 10000);
    ASSERT_TRUE(st.stack_bytes >= 10000ull * 64 * 1024);
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(n, 10000);
    sim_get_stats(s, &st);
    ASSERT_U64_EQ(st.threads_alive, 0);
    ASSERT_U64_EQ(st.activations, 30000);
    ASSERT_U64_EQ(st.timed_events, 20000);
    T_FREE(sim_free, s);
}

/* ---- ties at one time run in insertion order ------------------------- */

struct tiectx {
    int order[64];
    int n;
};

struct tiearg {
    struct tiectx *c;
    int id;
    sim_time delay;
};

static void tie_proc(struct sim *s, void *arg)
{
    struct tiearg *a = arg;
    sim_wait(s, a->delay);            /* random first delays: heap side */
    sim_wait(s, 100 * SIM_NS - sim_now(s)); /* all wake at 100 ns */
    a->c->order[a->c->n++] = a->id;
}

static void sentinel(struct sim *s, void *arg)
{
    sim_wait(s, 1000 * SIM_NS);
}

TEST(same_time_wakeups_in_insertion_order)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct tiectx c = {0};
    /* queued first and latest: every later wake-up lands in the heap,
     * where equal times come out in no particular order */
    ASSERT_TRUE(sim_thread(s, "sentinel", sentinel, NULL, 0));
    struct tiearg a[64];
    uint64_t x = 3;
    for (int i = 0; i < 64; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = (struct tiearg){&c, i, (1 + (x >> 33) % 50) * SIM_NS};
        ASSERT_TRUE(sim_thread(s, "tie", tie_proc, &a[i], 0));
    }
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(c.n, 64);
    /* the second waits were queued in order of the first wake-ups: by
     * first delay, then by process creation order among equal delays */
    for (int i = 1; i < 64; i++) {
        int p = c.order[i - 1], q = c.order[i];
        ASSERT_TRUE(a[p].delay < a[q].delay ||
                    (a[p].delay == a[q].delay && p < q));
    }
    T_FREE(sim_free, s);
}

/* ---- the end of simulated time: no wrap-around --------------------- */

struct endctx {
    struct sim_event *e;
    int rc_wait, rc_wait_any, rc_notify, rc_last;
    sim_time after;
};

static void end_waiter(struct sim *s, void *arg)
{
    struct endctx *c = arg;
    sim_wait(s, SIM_TIME_MAX - 5);
    c->rc_wait = sim_wait(s, 6);
    c->rc_wait_any = sim_wait_any(s, &c->e, 1, 6);
    c->rc_notify = sim_notify_at(c->e, 6);
    c->after = sim_now(s);
    c->rc_last = sim_wait(s, 5); /* exactly to the end */
}

TEST(time_past_the_end_is_refused)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    struct endctx c = {0};
    c.e = sim_event_new(s, "e");
    ASSERT_TRUE(c.e);
    ASSERT_TRUE(sim_thread(s, "sleeper", end_waiter, &c, 0));
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    ASSERT_EQ(c.rc_wait, SIM_EINVAL);
    ASSERT_EQ(c.rc_wait_any, SIM_EINVAL);
    ASSERT_EQ(c.rc_notify, SIM_EINVAL);
    ASSERT_CONTAINS(sim_errmsg(s), "process 'sleeper': a notification of "
                                   "0.006 ns at 9223372036854775.802 ns would "
                                   "pass the end of simulated time");
    ASSERT_U64_EQ(c.after, SIM_TIME_MAX - 5); /* time did not move */
    ASSERT_EQ(c.rc_last, 0);
    ASSERT_U64_EQ(sim_now(s), SIM_TIME_MAX);
    T_FREE(sim_free, s);
}

/* sim_round_ps is llround for every time x >= 0: below half a ps (0),
 * at and near the halves, across powers of two and up to 2^53 */
TEST(round_ps_is_llround)
{
    static const double fixed[] = {0.0, 1e-300, 0.016, 0.49999999999999994, 0.5,
                                   0.5000000000000001, 1.5, 2.5, 1e6 + 0.5,
                                   4503599627370495.5, 4503599627370496.0,
                                   9007199254740992.0};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        ASSERT_U64_EQ(sim_round_ps(fixed[i]), llround(fixed[i]));
    uint64_t r = 88172645463325252ull; /* xorshift64 */
    for (int i = 0; i < 200000; i++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        /* a mantissa in [1, 2) times 2^e, e from -60 to 52 */
        double x = ldexp(1.0 + (double)(r >> 11) * 0x1p-53, (int)(r % 113) - 60);
        ASSERT_U64_EQ(sim_round_ps(x), llround(x));
        ASSERT_U64_EQ(sim_round_ps(nextafter(x, 0.0)), llround(nextafter(x, 0.0)));
    }
}

/* ---- stacks kept from one simulation for the next ------------------- */

/* Each thread uses 32 KiB of its stack, then waits and ends. */
static void deep_stack_proc(struct sim *s, void *arg)
{
    volatile char buf[32 * 1024];
    for (size_t i = 0; i < sizeof buf; i += 512)
        buf[i] = (char)i;
    sim_wait(s, SIM_NS);
    *(long *)arg += buf[512];
}

#define REUSE_THREADS 64

/* Makes, runs and frees a simulation of REUSE_THREADS deep_stack_proc;
 * its stack bytes and the minor page faults it took. */
static void reuse_run(uint64_t *stack_bytes, long *faults)
{
    struct rusage r0, r1;
    *faults = -1; /* until it has run to the end */
    getrusage(RUSAGE_THREAD, &r0);
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    static long sum[REUSE_THREADS];
    for (int i = 0; i < REUSE_THREADS; i++) {
        sum[i] = 0;
        ASSERT_TRUE(sim_thread(s, "deep", deep_stack_proc, &sum[i], 0));
    }
    ASSERT_OK(sim_run(s, SIM_FOREVER));
    for (int i = 0; i < REUSE_THREADS; i++)
        ASSERT_EQ(sum[i], 0);
    struct sim_stats st;
    sim_get_stats(s, &st);
    *stack_bytes = st.stack_bytes;
    T_FREE(sim_free, s);
    getrusage(RUSAGE_THREAD, &r1);
    *faults = r1.ru_minflt - r0.ru_minflt;
}

/* A simulation freed leaves its stacks to the next one (coro.h, the
 * process's chunk cache): the second of two alike takes the same stacks,
 * counts the same stack bytes, and takes a fraction of the first's page
 * faults (its stacks' pages are in memory already). */
TEST(next_simulation_reuses_the_stacks)
{
    coro_cache_drop();
    struct coro_cache_stats c0, c1;
    coro_cache_stats(&c0);
    uint64_t bytes1, bytes2;
    long faults1, faults2;
    reuse_run(&bytes1, &faults1);
    ASSERT_TRUE(faults1 >= 0);
    reuse_run(&bytes2, &faults2);
    ASSERT_TRUE(faults2 >= 0);
    coro_cache_stats(&c1);
    ASSERT_U64_EQ(bytes2, bytes1);
    ASSERT_TRUE(bytes1 >= (uint64_t)REUSE_THREADS * 64 * 1024);
    ASSERT_EQ(c1.reused_stacks - c0.reused_stacks, REUSE_THREADS);
    ASSERT_EQ(c1.adopted_chunks - c0.adopted_chunks, 1);
    ASSERT_EQ(c1.chunks, 1); /* given back by the second */
    /* 64 threads x 8 pages: the first takes over 512 faults on them */
    if (!RUNNING_ON_VALGRIND) {
        ASSERT_TRUE(faults1 >= REUSE_THREADS * 8);
        ASSERT_TRUE(faults2 * 4 < faults1);
    }
    coro_cache_drop();
}

TEST_MAIN(signal_commits_in_update_phase, signal_same_value_does_not_notify,
          notification_order, earlier_notification_wins_and_cancel,
          fifo_write_blocks_when_full, fifo_read_blocks_when_empty,
          fifo_nonblocking, fifo_several_waiters, method_static_sensitivity, method_next_trigger,
          method_wake_earliest_wins, reserved_wakeup_keeps_its_place,
          wait_outside_thread_is_refused, wait_any_and_timeout,
          two_runs_identical_traces, deadlock_report_lists_blocked_processes,
          run_until_and_resume, stop_and_fail, step_in_batches_and_async_stop,
          port_binding_checks, unbound_ports_all_listed, port_on_bind_and_listing,
          deferred_ports_keep_their_place,
          ten_thousand_threads,
          same_time_wakeups_in_insertion_order, time_past_the_end_is_refused,
          ended_thread_restarts_and_deadlock_lists_by_start,
          thread_restarts_straight_after_it_ends, round_ps_is_llround,
          next_simulation_reuses_the_stacks)
