/* sim.c — the simulation kernel: scheduler, processes, events, channels, ports */
#include "sim.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coro.h"
#include "evq.h"
#include "trace.h"

#define DEFAULT_STACK_SIZE ((size_t)64 * 1024)
#define DEADLOCK_LIST_MAX 64

enum { PROC_THREAD, PROC_METHOD };
enum { ST_READY, ST_RUNNING, ST_BLOCKED, ST_TERMINATED };
/* kinds of queue entries (timed queue and delta list) */
enum { Q_PROC, Q_EVENT };
enum { PEND_NONE, PEND_DELTA, PEND_TIMED };

struct waiter {
    struct sim_proc *p;
    uint32_t gen;
    int idx; /* index in the waited set, reported by sim_wait_any */
};

#define INLINE_WAITERS 2

/* What a notification of an event with one waiter reads (the counts, the
 * simulation, the first waiter) is in the first 64 bytes, and an event
 * starts a cache line (sim_event_new aligns it, a fifo's are aligned):
 * with thousands of cold events a notification misses once, not twice. */
struct sim_event {
    uint32_t gen;    /* bumped to void a pending delta/timed notification */
    uint32_t n_waiters, cap_waiters;
    uint32_t n_statics;
    uint8_t pending; /* PEND_* */
    bool embedded;   /* part of a channel's allocation, not freed alone */
    struct sim *sim;
    struct waiter *waiters; /* inl until more are needed */
    struct waiter inl[INLINE_WAITERS];
    sim_time when;   /* time of a pending timed notification */
    struct sim_proc **statics; /* statically sensitive methods */
    size_t cap_statics;
    char *name;
    struct sim_event *next_all;
};
_Static_assert(offsetof(struct sim_event, inl) + sizeof(struct waiter) <= 64,
               "an event's counts, simulation and first waiter share a line");

/* what a blocked thread waits on, for the deadlock report: set by every
 * wait, never cleared (a thread that runs is not reported) */
enum { W_TIMEOUT, W_EVENT, W_FIFO_READ, W_FIFO_WRITE, W_ANY, W_ANY_TIMED };

/* The fields an activation touches share the first cache line, up to the
 * coroutine's saved stack pointer; with thousands of processes every
 * descriptor is cold when its turn comes. */
struct sim_proc {
    uint32_t gen;  /* bumped on every wake: voids other pending wake-ups */
    uint8_t kind, state;
    bool queued;   /* in the runnable queue */
    bool dynamic;  /* method: next trigger overrides static sensitivity */
    struct sim *sim;
    int woken_idx;
    uint8_t wait_kind; /* W_* */
    bool daemon;
    int wait_n;        /* W_ANY*: number of events */
    const void *wait_obj; /* the event, fifo or event list waited on */
    sim_proc_fn fn;
    void *arg;
    struct coro co;    /* its first field, sp, ends the first line */
    char *name;
    void *ud;
    struct coro_stack *stack;
    struct sim_proc *next_zombie;
    struct sim_proc **zombie_pprev; /* what points at it in the zombie list */
    struct sim_proc *next_all;
    uint64_t serial; /* order of (re)starts: a deadlock lists processes by it */
};

/* What the update list holds: a fifo's own header, or the first field of
 * a user primitive channel (struct sim_prim). */
enum { UPD_PRIM, UPD_FIFO };
struct upd {
    bool requested;
    uint8_t kind; /* UPD_* */
};

struct sim_prim {
    struct upd h;
    void (*update)(void *ud);
    void *ud;
    struct sim *sim;
};

/* A primitive channel made by sim_prim_new, listed to be freed; one that
 * is part of a channel's allocation (a fifo's) is freed with it. */
struct prim_node {
    struct sim_prim c;
    struct prim_node *next_all;
};

/* One 64-byte aligned allocation holds a fifo, its two events and its
 * buffer. The counts, the update header and the threads blocked in
 * sim_fifo_read / sim_fifo_write share a cache line with the buffer's
 * first 8 bytes (all of it for one 8-byte element), so a read or write of
 * a small fifo, blocking or not, and its update touch that line only.
 *
 * The first thread to block reading (writing) waits in rd_wait (wr_wait)
 * rather than on written_ev (read_ev); a second one, and anything that
 * waits on an event taken with sim_fifo_written_event / _read_event, uses
 * the event, and ev_used then makes the update look at it too. A slot
 * needs no generation check: a thread in it waits on nothing else.
 * The elements visible this delta are derived: readable = count -
 * n_written, free = capacity - count - n_read. */
enum { EV_WRITTEN = 1, EV_READ = 2 };
struct sim_fifo {
    char *name;             /* cold */
    struct sim_fifo *next_all;
    struct sim_event written_ev __attribute__((aligned(64)));
    struct sim_event read_ev __attribute__((aligned(64)));
    struct sim *sim __attribute__((aligned(64)));
    struct sim_proc *rd_wait, *wr_wait;
    uint32_t head, count;   /* physical contents */
    uint32_t n_written, n_read; /* in this delta, committed by update */
    uint32_t elem_size, capacity;
    struct upd upd;
    uint8_t ev_used;        /* EV_* bits: the event may have waiters */
    unsigned char buf[] __attribute__((aligned(8)));
};
_Static_assert(offsetof(struct sim_fifo, buf) % 64 <= 56,
               "a fifo's hot fields and its first 8 buffer bytes share a line");

struct sim_signal {
    struct sim *sim;
    char *name;
    size_t size;
    unsigned char *cur, *next;
    struct sim_prim *prim;
    struct sim_event *changed;
    struct sim_signal *next_all;
};

struct sim_port {
    struct sim *sim;
    const char *name; /* follows the struct, in its chunk */
    const char *tag;  /* interned: one copy a type in the simulation */
    void *iface;
    struct sim_port **peers; /* &peer0 until a second binding */
    struct sim_port *peer0;
    struct sim_port *next_created; /* oldest first, for listings */
    sim_port_bound_fn on_bind;
    void *on_bind_ud;
    int min_bind, max_bind;
    int n_peers, cap_peers;
    enum sim_port_dir dir;
};

/* A module's deferred ports (sim_port_defer): shared by the simulation
 * and the module, freed by the last to let go; make NULL once released. */
struct sim_port_defer {
    struct sim_port_defer *next;
    sim_port_make_fn make;
    void *ud;
    int refs;
};

/* A port type tag, kept once (a system has a handful of types). */
struct port_tag {
    struct port_tag *next;
    char s[];
};

struct qent {
    void *obj;
    uint32_t kind;
    uint32_t gen;
};

struct sim {
    sim_time now;
    uint64_t seq;
    struct evq timed;
    /* runnable queue: ring buffer of processes */
    struct sim_proc **runq;
    /* runq_key[i]: the seq of the timed entry that queued runq[i] in the
     * first delta of a time (UINT64_MAX for any other wake-up); with
     * cur_key, the key of the process taken last, and first_delta, it
     * tells where in a time's first delta the run is (sim_seq_passed) */
    uint64_t *runq_key;
    size_t runq_head, runq_len, runq_cap;
    uint64_t fire_key, cur_key;
    bool first_delta;
    sim_time late_until; /* entries up to this time may have come in out
                            of seq order (sim_method_wake_reserved) */
    /* delta notifications of this delta cycle, in notification order */
    struct qent *delta;
    size_t n_delta, cap_delta;
    struct upd **updates;
    size_t n_updates, cap_updates;
    struct evq_entry *batch; /* the timed entries of one time */
    size_t cap_batch;
    struct evq_entry *batch_tmp; /* radix sort's other buffer */
    size_t cap_batch_tmp;
    struct sim_proc *current;
    struct sim_proc *zombies; /* terminated threads whose stack is unreleased */
    uint64_t budget;          /* activations left in this sim_step */
    struct coro main_co;
    struct coro_pool pool;
    struct sim_config cfg;
    struct sim_proc *procs, **procs_tail;
    size_t n_procs;   /* the runnable queue has room for all of them */
    uint64_t proc_serial; /* the last serial given */
    size_t n_updaters; /* fifos and primitive channels: the update list
                          has room for all of them */
    struct sim_event *events;
    struct prim_node *prims;
    struct sim_fifo *fifos;
    struct sim_signal *signals;
    struct port_tag *port_tags;
    /* ports live in chunks of their own (a chunk begins with the pointer
     * to the previous one), made by the thousand (four a fabric link) and
     * freed together, so they do not spread the links' state in memory */
    char *port_chunk, *port_next;
    size_t port_left;
    struct sim_port *ports_first, *ports_last; /* creation order */
    struct sim_port_defer *port_defers; /* sim_port_defer */
    bool port_insert;               /* sim_port_insert_after */
    struct sim_port *port_after;
    bool elaborated;
    bool stop_req;
    int failed;       /* 0, or what sim_run returns: SIM_EPROC, SIM_ENOMEM */
    atomic_bool async_stop;
    struct sim_stats stats;
    sim_trace_fn trace;
    void *trace_ud;
    struct sim_trace *tracer; /* trace.h; NULL when none is open */
    void *ud;
    char *errmsg;
    size_t errcap;
    bool errlost; /* the last message did not fit and could not grow */
};

/* ---- helpers --------------------------------------------------------- */

static char *xstrdup(const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Grows *arr (of *cap elements of size sz) to hold at least need. */
static bool grow(void *arr, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap : 8;
    while (n < need)
        n *= 2;
    void *p = realloc(*(void **)arr, n * sz);
    if (!p)
        return false;
    *(void **)arr = p;
    *cap = n;
    return true;
}

static void seterr_v(struct sim *s, bool append, const char *fmt, va_list ap)
{
    if (append && s->errlost)
        return; /* its start is lost already */
    size_t used = append && s->errmsg ? strlen(s->errmsg) : 0;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return;
    size_t need = used + (size_t)n + 1;
    if (need > s->errcap) {
        char *p = realloc(s->errmsg, need);
        if (p) {
            s->errmsg = p;
            s->errcap = need;
        }
    }
    /* out of memory: sim_errmsg says so, never shows a stale message */
    s->errlost = need > s->errcap;
    if (!s->errlost)
        vsnprintf(s->errmsg + used, (size_t)n + 1, fmt, ap);
}

static int seterr(struct sim *s, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    seterr_v(s, false, fmt, ap);
    va_end(ap);
    return code;
}

static void adderr(struct sim *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    seterr_v(s, true, fmt, ap);
    va_end(ap);
}

/* Formats a time as nanoseconds with the picosecond fraction when any. */
static const char *fmt_time(char *buf, size_t n, sim_time t)
{
    if (t % SIM_NS)
        snprintf(buf, n, "%" PRIu64 ".%03" PRIu64 " ns", t / SIM_NS,
                 t % SIM_NS);
    else
        snprintf(buf, n, "%" PRIu64 " ns", t / SIM_NS);
    return buf;
}

/* Fails the simulation (see sim.h, "Out of memory"): the first failure's
 * message is kept, and sim_run returns `code` at the end of the delta. */
static void fail_v(struct sim *s, int code, const char *fmt, va_list ap)
{
    if (!s->failed) {
        seterr_v(s, false, fmt, ap);
        s->failed = code;
    }
    s->stop_req = true;
}

static void fail_code(struct sim *s, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(s, code, fmt, ap);
    va_end(ap);
}

/* Memory ran out while the simulation ran, `what` says doing what. */
static __attribute__((noinline, cold)) void fail_nomem(struct sim *s,
                                                       const char *what)
{
    if (s->current)
        fail_code(s, SIM_ENOMEM, "out of memory %s (process '%s')", what,
                  s->current->name);
    else
        fail_code(s, SIM_ENOMEM, "out of memory %s", what);
}

/* ---- simulation ------------------------------------------------------ */

struct sim *sim_new(const struct sim_config *cfg)
{
    struct sim *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (cfg)
        s->cfg = *cfg;
    if (!s->cfg.stack_size)
        s->cfg.stack_size = DEFAULT_STACK_SIZE;
    evq_init(&s->timed);
    s->fire_key = UINT64_MAX;
    coro_pool_init(&s->pool);
    coro_init_main(&s->main_co);
    s->procs_tail = &s->procs;
    atomic_init(&s->async_stop, false);
    coro_overflow_guard_install();
    return s;
}

void sim_free(struct sim *s)
{
    if (!s)
        return;
    for (struct sim_proc *p = s->procs, *n; p; p = n) {
        n = p->next_all;
        if (p->stack)
            coro_stack_put(&s->pool, p->stack);
        free(p->name);
        free(p);
    }
    for (struct sim_event *e = s->events, *n; e; e = n) {
        n = e->next_all;
        free(e->name);
        if (e->waiters != e->inl)
            free(e->waiters);
        free(e->statics);
        if (!e->embedded)
            free(e);
    }
    for (struct sim_signal *g = s->signals, *n; g; g = n) {
        n = g->next_all;
        free(g->name);
        free(g->cur);
        free(g->next);
        free(g);
    }
    for (struct prim_node *c = s->prims, *n; c; c = n) {
        n = c->next_all;
        free(c);
    }
    /* last: a fifo's allocation holds events walked above */
    for (struct sim_fifo *f = s->fifos, *n; f; f = n) {
        n = f->next_all;
        free(f->name);
        free(f);
    }
    for (struct sim_port *p = s->ports_first; p; p = p->next_created)
        if (p->peers != &p->peer0)
            free(p->peers);
    for (struct port_tag *t = s->port_tags, *n; t; t = n) {
        n = t->next;
        free(t);
    }
    for (struct sim_port_defer *d = s->port_defers, *n; d; d = n) {
        n = d->next;
        if (--d->refs == 0)
            free(d);
    }
    for (char *c = s->port_chunk, *prev; c; c = prev) {
        memcpy(&prev, c, sizeof prev);
        free(c);
    }
    sim__trace_free(s->tracer);
    coro_pool_retire(&s->pool);
    evq_release(&s->timed);
    free(s->runq);
    free(s->runq_key);
    free(s->delta);
    free(s->updates);
    free(s->batch);
    free(s->batch_tmp);
    free(s->errmsg);
    free(s);
}

const char *sim_errmsg(const struct sim *s)
{
    if (s->errlost)
        return "out of memory (formatting an error message)";
    return s->errmsg ? s->errmsg : "";
}

sim_time sim_now(const struct sim *s) { return s->now; }
uint64_t sim_delta_count(const struct sim *s) { return s->stats.deltas; }
void sim_set_userdata(struct sim *s, void *ud) { s->ud = ud; }
void *sim_userdata(const struct sim *s) { return s->ud; }

void sim_get_stats(const struct sim *s, struct sim_stats *out)
{
    *out = s->stats;
    out->stack_bytes = s->pool.mapped_bytes;
}

void sim_set_trace(struct sim *s, sim_trace_fn fn, void *ud)
{
    s->trace = fn;
    s->trace_ud = ud;
}

struct sim_trace *sim_tracer(const struct sim *s) { return s->tracer; }
void sim__set_tracer(struct sim *s, struct sim_trace *t) { s->tracer = t; }

void sim_stop(struct sim *s) { s->stop_req = true; }

void sim_request_stop(struct sim *s)
{
    atomic_store_explicit(&s->async_stop, true, memory_order_relaxed);
}

void sim_fail(struct sim *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(s, SIM_EPROC, fmt, ap);
    va_end(ap);
}

/* ---- scheduling primitives ------------------------------------------- */

/* Room in the runnable queue for `need` processes. A process is queued
 * at most once, so with room for all of them a wake-up never allocates. */
static bool runq_reserve(struct sim *s, size_t need)
{
    if (need <= s->runq_cap)
        return true;
    size_t cap = s->runq_cap ? s->runq_cap * 2 : 64;
    while (cap < need)
        cap *= 2;
    struct sim_proc **n = malloc(cap * sizeof *n);
    uint64_t *k = malloc(cap * sizeof *k);
    if (!n || !k) {
        free(n);
        free(k);
        return false;
    }
    for (size_t i = 0; i < s->runq_len; i++) {
        n[i] = s->runq[(s->runq_head + i) & (s->runq_cap - 1)];
        k[i] = s->runq_key[(s->runq_head + i) & (s->runq_cap - 1)];
    }
    free(s->runq);
    free(s->runq_key);
    s->runq = n;
    s->runq_key = k;
    s->runq_cap = cap;
    s->runq_head = 0;
    return true;
}

static inline void runq_push(struct sim *s, struct sim_proc *p)
{
    if (p->queued || p->state == ST_TERMINATED)
        return;
    size_t i = (s->runq_head + s->runq_len) & (s->runq_cap - 1);
    s->runq[i] = p;
    s->runq_key[i] = s->fire_key;
    s->runq_len++;
    p->queued = true;
}

/* Wakes p: every other pending wake-up of p becomes stale. */
static inline void wake(struct sim *s, struct sim_proc *p, int idx)
{
    p->gen++;
    p->woken_idx = idx;
    runq_push(s, p);
}

/* Queue a delta or timed entry; false (the simulation failed) when memory
 * ran out. */
static bool delta_push(struct sim *s, void *obj, uint32_t kind, uint32_t gen)
{
    if (!grow(&s->delta, &s->cap_delta, s->n_delta + 1, sizeof *s->delta)) {
        fail_nomem(s, "queueing a delta notification");
        return false;
    }
    s->delta[s->n_delta++] = (struct qent){obj, kind, gen};
    return true;
}

static bool timed_push(struct sim *s, sim_time t, void *obj, uint32_t kind,
                       uint32_t gen)
{
    struct evq_entry e = {t, s->seq, obj, kind, gen};
    if (!evq_push(&s->timed, &e)) {
        fail_nomem(s, "queueing a timed notification");
        return false;
    }
    s->seq++;
    return true;
}

static void trigger_all(struct sim *s, struct sim_event *e)
{
    size_t n = e->n_waiters;
    e->n_waiters = 0;
    for (size_t i = 0; i < n; i++) {
        struct waiter w = e->waiters[i];
        if (w.p->gen == w.gen)
            wake(s, w.p, w.idx);
    }
    for (size_t i = 0; i < e->n_statics; i++) {
        struct sim_proc *p = e->statics[i];
        if (!p->dynamic)
            wake(s, p, 0);
    }
}

/* Wakes the event's waiters. The common case, one dynamic waiter and no
 * static sensitivity, inline. */
static inline void trigger(struct sim *s, struct sim_event *e)
{
    if (e->n_waiters == 1 && !e->n_statics) {
        struct waiter w = e->waiters[0];
        e->n_waiters = 0;
        if (w.p->gen == w.gen)
            wake(s, w.p, w.idx);
        return;
    }
    trigger_all(s, e);
}

/* false (the simulation failed) when memory ran out */
static bool add_waiter(struct sim_event *e, struct sim_proc *p, int idx)
{
    if (e->n_waiters == e->cap_waiters) {
        if (e->waiters == NULL) {
            e->waiters = e->inl;
            e->cap_waiters = INLINE_WAITERS;
        } else {
            uint32_t cap = e->cap_waiters * 2;
            struct waiter *w = cap > e->cap_waiters ? malloc(cap * sizeof *w) : NULL;
            if (!w) {
                fail_nomem(e->sim, "adding a waiter to an event");
                return false;
            }
            memcpy(w, e->waiters, e->n_waiters * sizeof *w);
            if (e->waiters != e->inl)
                free(e->waiters);
            e->waiters = w;
            e->cap_waiters = cap;
        }
    }
    e->waiters[e->n_waiters++] = (struct waiter){p, p->gen, idx};
    return true;
}

/* ---- events ---------------------------------------------------------- */

/* Links an event into the simulation; it takes `name` (malloc'd). */
static void event_link(struct sim *s, struct sim_event *e, char *name,
                       bool embedded)
{
    e->name = name;
    e->sim = s;
    e->embedded = embedded;
    e->next_all = s->events;
    s->events = e;
}

struct sim_event *sim_event_new(struct sim *s, const char *name)
{
    struct sim_event *e = aligned_alloc(64, (sizeof *e + 63) & ~(size_t)63);
    if (e)
        memset(e, 0, sizeof *e);
    char *n = xstrdup(name);
    if (!e || !n) {
        free(e);
        free(n);
        seterr(s, SIM_ENOMEM, "out of memory creating event '%s'", name);
        return NULL;
    }
    event_link(s, e, n, false);
    return e;
}

const char *sim_event_name(const struct sim_event *e) { return e->name; }

static void event_cancel(struct sim_event *e)
{
    if (e->pending != PEND_NONE) {
        e->gen++;
        e->pending = PEND_NONE;
    }
}

void sim_notify(struct sim_event *e)
{
    e->sim->stats.notifications++;
    event_cancel(e);
    trigger(e->sim, e);
}

void sim_notify_delta(struct sim_event *e)
{
    e->sim->stats.notifications++;
    if (e->pending == PEND_DELTA)
        return;
    event_cancel(e);
    if (delta_push(e->sim, e, Q_EVENT, e->gen))
        e->pending = PEND_DELTA;
}

/* 0 if `delay` from now is a time the simulation can reach, else an
 * error naming the process that asked and what it asked for. */
static int check_delay(struct sim *s, sim_time delay, const char *what)
{
    if (delay <= SIM_TIME_MAX - s->now)
        return 0;
    char d[48], n[48], m[48];
    return seterr(s, SIM_EINVAL,
                  "%s%s%s%s of %s at %s would pass the end of simulated time "
                  "(%s)", s->current ? "process '" : "",
                  s->current ? s->current->name : "",
                  s->current ? "': " : "", what, fmt_time(d, sizeof d, delay),
                  fmt_time(n, sizeof n, s->now),
                  fmt_time(m, sizeof m, SIM_TIME_MAX));
}

int sim_notify_at(struct sim_event *e, sim_time delay)
{
    struct sim *s = e->sim;
    if (delay == 0) {
        sim_notify_delta(e);
        return 0;
    }
    int rc = check_delay(s, delay, "a notification");
    if (rc < 0)
        return rc;
    s->stats.notifications++;
    sim_time t = s->now + delay;
    if (e->pending == PEND_DELTA ||
        (e->pending == PEND_TIMED && e->when <= t))
        return 0;
    event_cancel(e);
    if (!timed_push(s, t, e, Q_EVENT, e->gen))
        return SIM_ENOMEM;
    e->pending = PEND_TIMED;
    e->when = t;
    return 0;
}

void sim_cancel(struct sim_event *e) { event_cancel(e); }

/* ---- processes ------------------------------------------------------- */

static struct sim_proc *proc_new(struct sim *s, const char *name, int kind,
                                 sim_proc_fn fn, void *arg)
{
    struct sim_proc *p = NULL;
    if (runq_reserve(s, s->n_procs + 1))
        p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63);
    if (p)
        memset(p, 0, sizeof *p);
    if (!p || !(p->name = xstrdup(name))) {
        free(p);
        seterr(s, SIM_ENOMEM, "out of memory creating process '%s'", name);
        return NULL;
    }
    p->sim = s;
    p->kind = (uint8_t)kind;
    p->state = ST_READY;
    p->fn = fn;
    p->arg = arg;
    p->serial = ++s->proc_serial;
    s->n_procs++;
    *s->procs_tail = p;
    s->procs_tail = &p->next_all;
    return p;
}

static struct coro *next_context(struct sim *s);

static void thread_entry(void *arg)
{
    struct sim_proc *p = arg;
    struct sim *s = p->sim;
    p->fn(s, p->arg);
    p->state = ST_TERMINATED;
    s->stats.threads_alive--;
    p->next_zombie = s->zombies;
    if (s->zombies)
        s->zombies->zombie_pprev = &p->next_zombie;
    p->zombie_pprev = &s->zombies;
    s->zombies = p;
    s->stats.switches++;
    coro_exit(&p->co, next_context(s));
}

struct sim_proc *sim_thread(struct sim *s, const char *name, sim_proc_fn fn,
                            void *arg, size_t stack_size)
{
    if (!fn) {
        seterr(s, SIM_EINVAL, "thread process '%s' has no function",
               name ? name : "");
        return NULL;
    }
    struct coro_stack *st =
        coro_stack_get(&s->pool, stack_size ? stack_size : s->cfg.stack_size,
                       !s->cfg.no_stack_guard);
    if (!st) {
        char why[256];
        seterr(s, SIM_ENOMEM, "cannot map a stack for thread process '%s': %s",
               name ? name : "", coro_stack_error(why, sizeof why, errno));
        return NULL;
    }
    struct sim_proc *p = proc_new(s, name, PROC_THREAD, fn, arg);
    if (!p) {
        coro_stack_put(&s->pool, st);
        return NULL;
    }
    p->stack = st;
    coro_init(&p->co, st, p->name, thread_entry, p);
    s->stats.threads_alive++;
    runq_push(s, p);
    return p;
}

int sim_thread_restart(struct sim_proc *p, sim_proc_fn fn, void *arg, size_t stack_size)
{
    struct sim *s = p->sim;
    if (!fn)
        return seterr(s, SIM_EINVAL, "thread process '%s' has no function", p->name);
    if (p->kind != PROC_THREAD || p->state != ST_TERMINATED)
        return seterr(s, SIM_EPERM, "process '%s' cannot be restarted: not a thread that "
                      "has ended", p->name);
    if (p->stack) {
        /* A zombie: it ended and switched straight to another thread, and
         * the scheduler has not yet put its stack back. Nothing runs on
         * that stack any more (it is not the caller's: the caller runs),
         * so it goes back to the pool now, out of the zombie list. */
        *p->zombie_pprev = p->next_zombie;
        if (p->next_zombie)
            p->next_zombie->zombie_pprev = p->zombie_pprev;
        coro_stack_put(&s->pool, p->stack);
        p->stack = NULL;
    }
    struct coro_stack *st =
        coro_stack_get(&s->pool, stack_size ? stack_size : s->cfg.stack_size,
                       !s->cfg.no_stack_guard);
    if (!st) {
        char why[256];
        return seterr(s, SIM_ENOMEM, "cannot map a stack for thread process '%s': %s",
                      p->name, coro_stack_error(why, sizeof why, errno));
    }
    /* as proc_new leaves a new one, but gen keeps counting: a wake-up
     * still queued for the old run stays stale */
    p->state = ST_READY;
    p->queued = false;
    p->dynamic = false;
    p->woken_idx = 0;
    p->wait_kind = 0;
    p->wait_n = 0;
    p->wait_obj = NULL;
    p->fn = fn;
    p->arg = arg;
    p->next_zombie = NULL;
    p->serial = ++s->proc_serial;
    p->stack = st;
    coro_init(&p->co, st, p->name, thread_entry, p);
    s->stats.threads_alive++;
    runq_push(s, p);
    return 0;
}

struct sim_proc *sim_method(struct sim *s, const char *name, sim_proc_fn fn,
                            void *arg, bool dont_initialize)
{
    if (!fn) {
        seterr(s, SIM_EINVAL, "method process '%s' has no function",
               name ? name : "");
        return NULL;
    }
    struct sim_proc *p = proc_new(s, name, PROC_METHOD, fn, arg);
    if (p && !dont_initialize)
        runq_push(s, p);
    return p;
}

int sim_method_wake(struct sim_proc *p, sim_time delay)
{
    struct sim *s = p->sim;
    if (p->kind != PROC_METHOD)
        return seterr(s, SIM_EINVAL, "sim_method_wake: '%s' is a thread process",
                      p->name);
    if (delay == 0) {
        s->stats.notifications++;
        return delta_push(s, p, Q_PROC, p->gen) ? 0 : SIM_ENOMEM;
    }
    int rc = check_delay(s, delay, "a wake-up");
    if (rc < 0)
        return rc;
    s->stats.notifications++;
    return timed_push(s, s->now + delay, p, Q_PROC, p->gen) ? 0 : SIM_ENOMEM;
}

uint64_t sim_seq_reserve(struct sim *s) { return s->seq++; }

/* In the first delta of a time the runnable queue holds, from its head,
 * the processes queued by the time's entries in seq order (key = seq),
 * then any woken since (key UINT64_MAX); cur_key is the key of the one
 * taken last. An entry (t, seq) would have run already unless t is later
 * than now, or t is now, this is the first delta and seq comes after the
 * current process's key. */
bool sim_seq_passed(const struct sim *s, sim_time t, uint64_t seq)
{
    if (t != s->now)
        return t < s->now;
    return !(s->first_delta && seq > s->cur_key);
}

int sim_method_wake_reserved(struct sim_proc *p, sim_time t, uint64_t seq)
{
    struct sim *s = p->sim;
    if (p->kind != PROC_METHOD)
        return seterr(s, SIM_EINVAL,
                      "sim_method_wake_reserved: '%s' is a thread process", p->name);
    if (sim_seq_passed(s, t, seq))
        return 1;
    if (t > s->now) {
        struct evq_entry e = {t, seq, p, Q_PROC, p->gen};
        if (!evq_push(&s->timed, &e)) {
            fail_nomem(s, "queueing a timed notification");
            return SIM_ENOMEM;
        }
        if (t > s->late_until)
            s->late_until = t;
        return 0;
    }
    /* t is now, in its first delta, and the entry would run after the
     * current process: p takes its place among the processes still
     * queued, before the first with a later key */
    s->stats.timed_events++;
    p->gen++;
    p->woken_idx = -1;
    if (p->queued || p->state == ST_TERMINATED)
        return 0;
    size_t mask = s->runq_cap - 1, i = s->runq_len;
    while (i > 0 && s->runq_key[(s->runq_head + i - 1) & mask] > seq) {
        s->runq[(s->runq_head + i) & mask] = s->runq[(s->runq_head + i - 1) & mask];
        s->runq_key[(s->runq_head + i) & mask] = s->runq_key[(s->runq_head + i - 1) & mask];
        i--;
    }
    s->runq[(s->runq_head + i) & mask] = p;
    s->runq_key[(s->runq_head + i) & mask] = seq;
    s->runq_len++;
    p->queued = true;
    return 0;
}

int sim_sensitive(struct sim_proc *p, struct sim_event *e)
{
    if (p->kind != PROC_METHOD)
        return seterr(p->sim, SIM_EINVAL,
                      "static sensitivity is for method processes; '%s' is "
                      "a thread", p->name);
    if (!grow(&e->statics, &e->cap_statics, e->n_statics + 1,
              sizeof *e->statics))
        return seterr(p->sim, SIM_ENOMEM, "out of memory");
    e->statics[e->n_statics++] = p;
    return 0;
}

void sim_proc_set_daemon(struct sim_proc *p, bool daemon) { p->daemon = daemon; }
const char *sim_proc_name(const struct sim_proc *p) { return p->name; }
bool sim_proc_terminated(const struct sim_proc *p)
{
    return p->state == ST_TERMINATED;
}
struct sim_proc *sim_current(const struct sim *s) { return s->current; }
void sim_proc_set_userdata(struct sim_proc *p, void *ud) { p->ud = ud; }
void *sim_proc_userdata(const struct sim_proc *p) { return p->ud; }

static struct sim_proc *need_thread(struct sim *s, const char *what)
{
    struct sim_proc *p = s->current;
    if (!p || p->kind != PROC_THREAD) {
        seterr(s, SIM_EPERM, "%s called outside a thread process", what);
        return NULL;
    }
    return p;
}

static struct sim_proc *need_method(struct sim *s, const char *what)
{
    struct sim_proc *p = s->current;
    if (!p || p->kind != PROC_METHOD) {
        seterr(s, SIM_EPERM, "%s called outside a method process", what);
        return NULL;
    }
    return p;
}

/* With thousands of processes their descriptors and stacks are cold.
 * Called as a process is taken from the queue: warm the descriptor of the
 * one three places on and the stack of the one two places on (whose
 * descriptor was warmed one step ago), so that each miss has a whole
 * activation or two to be served in; the next one's stack was warmed a
 * step ago. */
static inline __attribute__((always_inline)) void prefetch_next(struct sim *s)
{
    size_t mask = s->runq_cap - 1, h = s->runq_head, n = s->runq_len;
    if (n > 2)
        __builtin_prefetch(s->runq[(h + 2) & mask]);
    if (n > 1) {
        struct sim_proc *q = s->runq[(h + 1) & mask];
        if (q->kind == PROC_THREAD)
            coro_prefetch(&q->co);
    }
}

static void activated(struct sim *s, struct sim_proc *p)
{
    p->queued = false;
    s->stats.activations++;
    if (s->trace)
        s->trace(s->trace_ud, s->now, s->stats.deltas, p);
    s->current = p;
}

/* The context to switch to from a thread that suspends or ends: the next
 * runnable thread when there is one, else the scheduler. Going straight
 * from thread to thread (as SystemC does) halves the switches, and a
 * switch costs more than the rest of an activation. */
static struct coro *next_context(struct sim *s)
{
    if (s->runq_len && s->budget && !s->failed) {
        struct sim_proc *q = s->runq[s->runq_head];
        if (q->kind == PROC_THREAD) {
            s->cur_key = s->runq_key[s->runq_head];
            s->runq_head = (s->runq_head + 1) & (s->runq_cap - 1);
            s->runq_len--;
            prefetch_next(s);
            s->budget--;
            activated(s, q);
            q->state = ST_RUNNING;
            return &q->co;
        }
    }
    return &s->main_co;
}

/* Suspends the running thread until something wakes it. */
static void block(struct sim *s, struct sim_proc *p)
{
    p->state = ST_BLOCKED;
    s->stats.switches++;
    coro_switch(&p->co, next_context(s));
    p->state = ST_RUNNING;
}

/* false (the simulation failed) when memory ran out */
static bool schedule_timeout(struct sim *s, struct sim_proc *p, sim_time d)
{
    if (d == 0)
        return delta_push(s, p, Q_PROC, p->gen);
    return timed_push(s, s->now + d, p, Q_PROC, p->gen);
}

/* A thread that could not get the memory to wait, in a simulation that
 * has failed for it: it blocks for good (its wake-ups voided), so that a
 * caller that ignores the result does not loop, and the run ends at the
 * end of this delta. Returns SIM_ENOMEM should it ever be resumed. */
static __attribute__((noinline, cold)) int park(struct sim *s,
                                                 struct sim_proc *p)
{
    p->gen++;
    block(s, p);
    return SIM_ENOMEM;
}

int sim_wait(struct sim *s, sim_time delay)
{
    struct sim_proc *p = need_thread(s, "sim_wait");
    if (!p)
        return SIM_EPERM;
    int rc = check_delay(s, delay, "a wait");
    if (rc < 0)
        return rc;
    p->wait_kind = W_TIMEOUT;
    if (!schedule_timeout(s, p, delay))
        return park(s, p);
    block(s, p);
    return 0;
}

/* Blocks the running thread on e; kind and obj say why, for a report. */
static inline int wait_event_why(struct sim *s, struct sim_event *e,
                                 uint8_t kind, const void *obj)
{
    struct sim_proc *p = need_thread(s, "sim_wait_event");
    if (!p)
        return SIM_EPERM;
    p->wait_kind = kind;
    p->wait_obj = obj;
    if (!add_waiter(e, p, 0))
        return park(s, p);
    block(s, p);
    return 0;
}

int sim_wait_event(struct sim *s, struct sim_event *e)
{
    /* NULL: say, an event whose sim_event_new failed, unchecked */
    if (!e)
        return seterr(s, SIM_EINVAL, "sim_wait_event: no event (NULL)");
    return wait_event_why(s, e, W_EVENT, e);
}

int sim_wait_any(struct sim *s, struct sim_event *const *evs, int n,
                 sim_time timeout)
{
    struct sim_proc *p = need_thread(s, "sim_wait_any");
    if (!p)
        return SIM_EPERM;
    if (n < 0 || (n > 0 && !evs))
        return seterr(s, SIM_EINVAL, "sim_wait_any: bad event list");
    for (int i = 0; i < n; i++)
        if (!evs[i])
            return seterr(s, SIM_EINVAL, "sim_wait_any: event %d is NULL", i);
    if (timeout != SIM_FOREVER) {
        int rc = check_delay(s, timeout, "a timeout");
        if (rc < 0)
            return rc;
    }
    p->wait_kind = timeout != SIM_FOREVER ? W_ANY_TIMED : W_ANY;
    p->wait_obj = evs;
    p->wait_n = n;
    for (int i = 0; i < n; i++)
        if (!add_waiter(evs[i], p, i))
            return park(s, p);
    if (timeout != SIM_FOREVER && !schedule_timeout(s, p, timeout))
        return park(s, p);
    p->woken_idx = -1;
    block(s, p);
    return p->woken_idx;
}

int sim_next_trigger(struct sim *s, sim_time delay)
{
    struct sim_proc *p = need_method(s, "sim_next_trigger");
    if (!p)
        return SIM_EPERM;
    int rc = check_delay(s, delay, "a next trigger");
    if (rc < 0)
        return rc;
    p->dynamic = true;
    p->gen++;
    return schedule_timeout(s, p, delay) ? 0 : SIM_ENOMEM;
}

int sim_next_trigger_event(struct sim *s, struct sim_event *e)
{
    struct sim_proc *p = need_method(s, "sim_next_trigger_event");
    if (!p)
        return SIM_EPERM;
    p->dynamic = true;
    p->gen++;
    return add_waiter(e, p, 0) ? 0 : SIM_ENOMEM;
}

/* ---- primitive channels ---------------------------------------------- */

static void prim_init(struct sim *s, struct sim_prim *c,
                      void (*update)(void *ud), void *ud)
{
    c->h.kind = UPD_PRIM;
    c->sim = s;
    c->update = update;
    c->ud = ud;
}

/* Room in the update list for one more channel: a channel is listed at
 * most once per delta, so with room for all of them a request never
 * allocates. The channel is counted (n_updaters) once it is made. */
static bool updates_reserve(struct sim *s)
{
    return grow(&s->updates, &s->cap_updates, s->n_updaters + 1,
                sizeof *s->updates);
}

struct sim_prim *sim_prim_new(struct sim *s, void (*update)(void *ud),
                              void *ud)
{
    struct prim_node *c = updates_reserve(s) ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        seterr(s, SIM_ENOMEM, "out of memory");
        return NULL;
    }
    s->n_updaters++;
    prim_init(s, &c->c, update, ud);
    c->next_all = s->prims;
    s->prims = c;
    return &c->c;
}

/* Only an update that requests another update once more in the same
 * update phase can get here (the list has room for every channel). */
static __attribute__((noinline, cold)) bool grow_updates(struct sim *s)
{
    if (grow(&s->updates, &s->cap_updates, s->n_updates + 1,
             sizeof *s->updates))
        return true;
    fail_nomem(s, "requesting an update");
    return false;
}

static inline void request_update(struct sim *s, struct upd *u)
{
    if (u->requested)
        return;
    if (s->n_updates == s->cap_updates && !grow_updates(s))
        return;
    s->updates[s->n_updates++] = u;
    u->requested = true;
}

void sim_request_update(struct sim_prim *c) { request_update(c->sim, &c->h); }

/* A channel's update phase wakes its waiters directly: nothing runs
 * between the update and delta-notification phases, so this is the same
 * as a delta notification, without queueing one for an event that nobody
 * waits on (the common case for the side of a fifo that is not blocked). */
static __attribute__((noinline)) void wake_from_update(struct sim *s,
                                                       struct sim_event *e)
{
    s->stats.notifications++;
    trigger(s, e);
}

/* The test inline, the waking out of line: an update that wakes nobody
 * (half of a fifo's updates) then saves and restores no registers. */
static inline void notify_from_update(struct sim *s, struct sim_event *e)
{
    if (e->n_waiters || e->n_statics)
        wake_from_update(s, e);
}

/* One side of a fifo's update: wakes the thread in its slot and, when the
 * side's event is in use, the event's waiters; counted as one
 * notification if it woke anyone. Inline in the update loop: called there
 * for every fifo that wakes a thread, it is the common case (-16
 * instructions per W2 read against a call, callgrind). */
static inline __attribute__((always_inline)) void fifo_wake(struct sim *s,
                                                struct sim_proc **slot,
                                                struct sim_event *e,
                                                bool ev_used)
{
    bool any = false;
    struct sim_proc *p = *slot;
    if (p) {
        *slot = NULL;
        wake(s, p, 0);
        any = true;
    }
    if (ev_used && (e->n_waiters || e->n_statics)) {
        trigger(s, e);
        any = true;
    }
    if (any)
        s->stats.notifications++;
}

static inline void fifo_update(struct sim *s, struct sim_fifo *f)
{
    if (f->n_written) {
        f->n_written = 0;
        if (f->rd_wait || (f->ev_used & EV_WRITTEN))
            fifo_wake(s, &f->rd_wait, &f->written_ev, f->ev_used & EV_WRITTEN);
    }
    if (f->n_read) {
        f->n_read = 0;
        if (f->wr_wait || (f->ev_used & EV_READ))
            fifo_wake(s, &f->wr_wait, &f->read_ev, f->ev_used & EV_READ);
    }
}

/* "<base><suffix>", malloc'd */
static char *join(const char *base, const char *suffix)
{
    size_t a = strlen(base), b = strlen(suffix);
    char *r = malloc(a + b + 1);
    if (r) {
        memcpy(r, base, a);
        memcpy(r + a, suffix, b + 1);
    }
    return r;
}

struct sim_fifo *sim_fifo_new(struct sim *s, const char *name,
                              size_t elem_size, size_t capacity)
{
    if (!name)
        name = "";
    if (elem_size == 0 || capacity == 0) {
        seterr(s, SIM_EINVAL,
               "fifo '%s' needs a non-zero element size and capacity",
               name);
        return NULL;
    }
    if (elem_size > UINT32_MAX / 2 || capacity > UINT32_MAX / 2 ||
        capacity > (SIZE_MAX / 2 - sizeof(struct sim_fifo)) / elem_size) {
        seterr(s, SIM_EINVAL, "fifo '%s' is too large", name);
        return NULL;
    }
    size_t bytes = (sizeof(struct sim_fifo) + elem_size * capacity + 63) &
                   ~(size_t)63;
    struct sim_fifo *f = updates_reserve(s) ? aligned_alloc(64, bytes) : NULL;
    if (f)
        memset(f, 0, bytes);
    char *n = xstrdup(name), *wn = join(name, ".written"),
         *rn = join(name, ".read");
    if (!f || !n || !wn || !rn) {
        free(f);
        free(n);
        free(wn);
        free(rn);
        seterr(s, SIM_ENOMEM, "out of memory creating fifo '%s'", name);
        return NULL;
    }
    s->n_updaters++;
    f->name = n;
    f->sim = s;
    f->upd.kind = UPD_FIFO;
    f->elem_size = (uint32_t)elem_size;
    f->capacity = (uint32_t)capacity;
    event_link(s, &f->written_ev, wn, true);
    event_link(s, &f->read_ev, rn, true);
    f->next_all = s->fifos;
    s->fifos = f;
    return f;
}

const char *sim_fifo_name(const struct sim_fifo *f) { return f->name; }
size_t sim_fifo_num_available(const struct sim_fifo *f)
{
    return f->count - f->n_written;
}
size_t sim_fifo_num_free(const struct sim_fifo *f)
{
    return f->capacity - f->count - f->n_read;
}
/* Whoever takes an event may wait on it: from then on the updates look
 * at its waiters too. */
struct sim_event *sim_fifo_written_event(struct sim_fifo *f)
{
    f->ev_used |= EV_WRITTEN;
    return &f->written_ev;
}
struct sim_event *sim_fifo_read_event(struct sim_fifo *f)
{
    f->ev_used |= EV_READ;
    return &f->read_ev;
}

/* Element copies of the common sizes as plain moves, not a libc call
 * (unaligned, alias-safe accesses; memcpy with a case per size would make
 * gcc warn, after inlining, about cases that cannot run for a fifo). */
typedef uint32_t __attribute__((may_alias, aligned(1))) u32_any;
typedef uint64_t __attribute__((may_alias, aligned(1))) u64_any;

static inline void elem_copy(void *dst, const void *src, size_t n)
{
    if (n == 4) {
        *(u32_any *)dst = *(const u32_any *)src;
    } else if (n == 8) {
        *(u64_any *)dst = *(const u64_any *)src;
    } else if (n == 16) {
        ((u64_any *)dst)[0] = ((const u64_any *)src)[0];
        ((u64_any *)dst)[1] = ((const u64_any *)src)[1];
    } else {
        memcpy(dst, src, n);
    }
}

bool sim_fifo_nb_read(struct sim_fifo *f, void *out)
{
    if (f->count == f->n_written)
        return false;
    elem_copy(out, f->buf + (size_t)f->head * f->elem_size, f->elem_size);
    f->head = f->head + 1 == f->capacity ? 0 : f->head + 1;
    f->count--;
    f->n_read++;
    request_update(f->sim, &f->upd);
    return true;
}

bool sim_fifo_nb_write(struct sim_fifo *f, const void *in)
{
    if (f->count + f->n_read == f->capacity)
        return false;
    uint32_t tail = f->head + f->count;
    if (tail >= f->capacity)
        tail -= f->capacity;
    elem_copy(f->buf + (size_t)tail * f->elem_size, in, f->elem_size);
    f->count++;
    f->n_written++;
    request_update(f->sim, &f->upd);
    return true;
}

/* Blocks the running thread until the update of the fifo's other side:
 * in the slot if it is free, else on the side's event. */
static inline int fifo_block(struct sim_fifo *f, struct sim_proc **slot,
                             struct sim_event *e, uint8_t ev_bit, uint8_t kind)
{
    struct sim *s = f->sim;
    struct sim_proc *p = need_thread(s, "sim_wait_event");
    if (!p)
        return SIM_EPERM;
    p->wait_kind = kind;
    p->wait_obj = f;
    if (*slot == NULL) {
        *slot = p;
    } else {
        if (!add_waiter(e, p, 0))
            return park(s, p);
        f->ev_used |= ev_bit;
    }
    block(s, p);
    return 0;
}

/* The blocking halves, out of line: a read or write that need not wait
 * then runs without the registers that waiting needs saved. */
static __attribute__((noinline)) int fifo_read_wait(struct sim_fifo *f,
                                                    void *out)
{
    do {
        int rc = fifo_block(f, &f->rd_wait, &f->written_ev, EV_WRITTEN, W_FIFO_READ);
        if (rc < 0)
            return rc;
    } while (!sim_fifo_nb_read(f, out));
    return 0;
}

static __attribute__((noinline)) int fifo_write_wait(struct sim_fifo *f,
                                                     const void *in)
{
    do {
        int rc = fifo_block(f, &f->wr_wait, &f->read_ev, EV_READ, W_FIFO_WRITE);
        if (rc < 0)
            return rc;
    } while (!sim_fifo_nb_write(f, in));
    return 0;
}

int sim_fifo_read(struct sim_fifo *f, void *out)
{
    return sim_fifo_nb_read(f, out) ? 0 : fifo_read_wait(f, out);
}

int sim_fifo_write(struct sim_fifo *f, const void *in)
{
    return sim_fifo_nb_write(f, in) ? 0 : fifo_write_wait(f, in);
}

static void signal_update(void *ud)
{
    struct sim_signal *g = ud;
    if (memcmp(g->cur, g->next, g->size) != 0) {
        memcpy(g->cur, g->next, g->size);
        notify_from_update(g->sim, g->changed);
    }
}

struct sim_signal *sim_signal_new(struct sim *s, const char *name,
                                  size_t size)
{
    if (size == 0) {
        seterr(s, SIM_EINVAL, "signal '%s' needs a non-zero size",
               name ? name : "");
        return NULL;
    }
    struct sim_signal *g = calloc(1, sizeof *g);
    char evname[512];
    if (!g)
        goto oom;
    g->sim = s;
    g->size = size;
    g->name = xstrdup(name);
    g->cur = calloc(1, size);
    g->next = calloc(1, size);
    if (!g->name || !g->cur || !g->next)
        goto oom;
    snprintf(evname, sizeof evname, "%s.changed", g->name);
    g->changed = sim_event_new(s, evname);
    g->prim = sim_prim_new(s, signal_update, g);
    if (!g->changed || !g->prim)
        goto oom;
    g->next_all = s->signals;
    s->signals = g;
    return g;
oom:
    if (g) {
        free(g->name);
        free(g->cur);
        free(g->next);
        free(g);
    }
    seterr(s, SIM_ENOMEM, "out of memory creating signal");
    return NULL;
}

void sim_signal_read(const struct sim_signal *g, void *out)
{
    memcpy(out, g->cur, g->size);
}

void sim_signal_write(struct sim_signal *g, const void *in)
{
    memcpy(g->next, in, g->size);
    request_update(g->sim, &g->prim->h);
}

struct sim_event *sim_signal_changed_event(struct sim_signal *g)
{
    return g->changed;
}

/* ---- typed ports ----------------------------------------------------- */

static const char *dir_name(enum sim_port_dir d)
{
    return d == SIM_PORT_IN ? "in" : d == SIM_PORT_OUT ? "out" : "inout";
}

struct sim_port *sim_port_new(struct sim *s, const char *name,
                              enum sim_port_dir dir, const char *type_tag,
                              int min_bind, int max_bind)
{
    if (dir != SIM_PORT_IN && dir != SIM_PORT_OUT && dir != SIM_PORT_INOUT) {
        seterr(s, SIM_EINVAL, "port '%s': bad direction", name ? name : "");
        return NULL;
    }
    if (min_bind < 0 || max_bind < 1 || min_bind > max_bind) {
        seterr(s, SIM_EINVAL,
               "port '%s': bad multiplicity %d..%d", name ? name : "",
               min_bind, max_bind);
        return NULL;
    }
    /* one allocation: the port, its name, its type tag (a system makes
     * ports by the thousand, four a link) */
    if (!name)
        name = "";
    if (!type_tag)
        type_tag = "";
    const struct port_tag *tag = s->port_tags;
    while (tag && strcmp(tag->s, type_tag) != 0)
        tag = tag->next;
    if (!tag) {
        size_t lt = strlen(type_tag) + 1;
        struct port_tag *t = malloc(sizeof *t + lt);
        if (!t) {
            seterr(s, SIM_ENOMEM, "out of memory creating port");
            return NULL;
        }
        memcpy(t->s, type_tag, lt);
        t->next = s->port_tags;
        s->port_tags = t;
        tag = t;
    }
    size_t ln = strlen(name) + 1;
    size_t need = (sizeof(struct sim_port) + ln + 7) & ~(size_t)7;
    if (need > s->port_left) {
        enum { PORT_CHUNK = 16384, HDR = 16 };
        size_t sz = need + HDR > PORT_CHUNK ? need + HDR : PORT_CHUNK;
        char *c = malloc(sz);
        if (!c) {
            seterr(s, SIM_ENOMEM, "out of memory creating port");
            return NULL;
        }
        memcpy(c, &s->port_chunk, sizeof s->port_chunk);
        s->port_chunk = c;
        s->port_next = c + HDR;
        s->port_left = sz - HDR;
    }
    struct sim_port *p = (struct sim_port *)(void *)s->port_next;
    s->port_next += need;
    s->port_left -= need;
    memset(p, 0, sizeof *p);
    p->name = memcpy((char *)(p + 1), name, ln);
    p->tag = tag->s;
    p->peers = &p->peer0;
    p->cap_peers = 1;
    p->sim = s;
    p->dir = dir;
    p->min_bind = min_bind;
    p->max_bind = max_bind;
    if (s->port_insert) {
        /* where a deferred port would have been made */
        struct sim_port **at = s->port_after ? &s->port_after->next_created : &s->ports_first;
        p->next_created = *at;
        *at = p;
        if (s->ports_last == s->port_after)
            s->ports_last = p;
        s->port_after = p;
    } else {
        if (s->ports_last)
            s->ports_last->next_created = p;
        else
            s->ports_first = p;
        s->ports_last = p;
    }
    return p;
}

struct sim_port_defer *sim_port_defer(struct sim *s, sim_port_make_fn make, void *ud)
{
    struct sim_port_defer *d = malloc(sizeof *d);
    if (!d) {
        seterr(s, SIM_ENOMEM, "out of memory deferring ports");
        return NULL;
    }
    *d = (struct sim_port_defer){s->port_defers, make, ud, 2};
    s->port_defers = d;
    return d;
}

void sim_port_defer_release(struct sim_port_defer *d)
{
    if (!d)
        return;
    d->make = NULL;
    if (--d->refs == 0)
        free(d);
}

int sim_port_make_deferred(struct sim *s)
{
    for (struct sim_port_defer *d = s->port_defers; d; d = d->next) {
        int rc = d->make ? d->make(d->ud) : 0;
        if (rc < 0)
            return seterr(s, rc, "out of memory making deferred ports");
    }
    return 0;
}

struct sim_port *sim_port_last(const struct sim *s) { return s->ports_last; }

void sim_port_insert_after(struct sim *s, bool on, struct sim_port *after)
{
    s->port_insert = on;
    s->port_after = on ? after : NULL;
}

void sim_port_on_bind(struct sim_port *p, sim_port_bound_fn fn, void *ud)
{
    p->on_bind = fn;
    p->on_bind_ud = ud;
}

const char *sim_port_type(const struct sim_port *p) { return p->tag; }
enum sim_port_dir sim_port_dir(const struct sim_port *p) { return p->dir; }

void sim_port_multiplicity(const struct sim_port *p, int *min_bind, int *max_bind)
{
    if (min_bind)
        *min_bind = p->min_bind;
    if (max_bind)
        *max_bind = p->max_bind;
}

struct sim_port *sim_port_next(const struct sim *s, const struct sim_port *p)
{
    if (!p) {
        /* a listing or a lookup starts here: the deferred ports first
         * (making them changes the simulation's port list, not what it
         * simulates, hence const) */
        (void)sim_port_make_deferred((struct sim *)(uintptr_t)s);
    }
    return p ? p->next_created : s->ports_first;
}

void sim_port_set_iface(struct sim_port *p, void *iface) { p->iface = iface; }
const char *sim_port_name(const struct sim_port *p) { return p->name; }
int sim_port_bound_count(const struct sim_port *p) { return p->n_peers; }

struct sim_port *sim_port_peer(const struct sim_port *p, int i)
{
    return i >= 0 && i < p->n_peers ? p->peers[i] : NULL;
}

void *sim_port_peer_iface(const struct sim_port *p, int i)
{
    struct sim_port *q = sim_port_peer(p, i);
    return q ? q->iface : NULL;
}

/* Room for one more peer of p: the first fits in the port (peer0). */
static bool reserve_peer(struct sim_port *p)
{
    if (p->n_peers < p->cap_peers)
        return true;
    if (p->peers == &p->peer0) {
        struct sim_port **a = malloc(4 * sizeof *a);
        if (!a)
            return false;
        a[0] = p->peer0;
        p->peers = a;
        p->cap_peers = 4;
        return true;
    }
    size_t cap = (size_t)p->cap_peers;
    if (!grow(&p->peers, &cap, (size_t)p->n_peers + 1, sizeof *p->peers))
        return false;
    p->cap_peers = (int)cap;
    return true;
}

int sim_port_bind(struct sim_port *a, struct sim_port *b)
{
    struct sim *s = a->sim;
    if (a->sim != b->sim)
        return seterr(s, SIM_EBIND,
                      "cannot bind '%s' to '%s': they belong to different "
                      "simulations", a->name, b->name);
    if (a == b)
        return seterr(s, SIM_EBIND, "cannot bind port '%s' to itself",
                      a->name);
    bool ok = (a->dir == SIM_PORT_OUT && b->dir == SIM_PORT_IN) ||
              (a->dir == SIM_PORT_IN && b->dir == SIM_PORT_OUT) ||
              (a->dir == SIM_PORT_INOUT && b->dir == SIM_PORT_INOUT);
    if (!ok)
        return seterr(s, SIM_EBIND,
                      "cannot bind '%s' (%s) to '%s' (%s): directions must "
                      "be out to in, or inout to inout",
                      a->name, dir_name(a->dir), b->name, dir_name(b->dir));
    if (a->tag != b->tag) /* interned: one copy a type */
        return seterr(s, SIM_EBIND,
                      "cannot bind '%s' (type '%s') to '%s' (type '%s'): "
                      "interface types differ",
                      a->name, a->tag, b->name, b->tag);
    for (int i = 0; i < a->n_peers; i++)
        if (a->peers[i] == b)
            return seterr(s, SIM_EBIND, "'%s' is already bound to '%s'",
                          a->name, b->name);
    const struct sim_port *full = a->n_peers >= a->max_bind   ? a
                                  : b->n_peers >= b->max_bind ? b
                                                              : NULL;
    if (full)
        return seterr(s, SIM_EBIND,
                      "cannot bind '%s' to '%s': '%s' accepts at most %d "
                      "binding%s and has %d",
                      a->name, b->name, full->name, full->max_bind,
                      full->max_bind == 1 ? "" : "s", full->n_peers);
    /* room on both sides first: a failure binds neither */
    if (!reserve_peer(a) || !reserve_peer(b))
        return seterr(s, SIM_ENOMEM, "out of memory binding ports");
    a->peers[a->n_peers++] = b;
    b->peers[b->n_peers++] = a;
    if (a->on_bind)
        a->on_bind(a->on_bind_ud, a);
    if (b->on_bind)
        b->on_bind(b->on_bind_ud, b);
    return 0;
}

int sim_elaborate(struct sim *s)
{
    int errors = 0;
    /* in creation order, without allocating */
    for (struct sim_port *p = s->ports_first; p; p = p->next_created) {
        if (p->n_peers >= p->min_bind)
            continue;
        if (errors == 0)
            seterr(s, 0, "");
        else
            adderr(s, "\n");
        if (p->n_peers == 0)
            adderr(s, "port '%s' (%s, type '%s') is unbound", p->name,
                   dir_name(p->dir), p->tag);
        else
            adderr(s, "port '%s' (%s, type '%s') has %d binding%s, needs "
                   "at least %d", p->name, dir_name(p->dir), p->tag,
                   p->n_peers, p->n_peers == 1 ? "" : "s", p->min_bind);
        errors++;
    }
    if (errors)
        return SIM_EBIND;
    s->elaborated = true;
    return 0;
}

/* ---- the scheduler --------------------------------------------------- */

static void release_zombies(struct sim *s)
{
    while (s->zombies) {
        struct sim_proc *z = s->zombies;
        s->zombies = z->next_zombie;
        if (s->zombies)
            s->zombies->zombie_pprev = &s->zombies;
        coro_stack_put(&s->pool, z->stack);
        z->stack = NULL;
    }
}

static void run_proc(struct sim *s, struct sim_proc *p)
{
    activated(s, p);
    if (p->kind == PROC_METHOD) {
        p->dynamic = false;
        p->fn(s, p->arg);
    } else {
        p->state = ST_RUNNING;
        s->stats.switches++;
        coro_switch(&s->main_co, &p->co);
        release_zombies(s);
    }
    s->current = NULL;
}

static void do_update(struct sim *s)
{
    /* an update may request none, but notify; the list is stable */
    for (size_t i = 0; i < s->n_updates; i++) {
        struct upd *u = s->updates[i];
        u->requested = false;
        if (u->kind == UPD_FIFO) {
            fifo_update(s, (struct sim_fifo *)((char *)u - offsetof(struct sim_fifo, upd)));
        } else {
            struct sim_prim *c = (struct sim_prim *)u;
            c->update(c->ud);
        }
    }
    s->n_updates = 0;
}

static void do_delta_notify(struct sim *s)
{
    /* notifications made while processing go to the next delta */
    size_t n = s->n_delta;
    for (size_t i = 0; i < n; i++) {
        struct qent q = s->delta[i];
        if (q.kind == Q_PROC) {
            struct sim_proc *p = q.obj;
            if (p->gen == q.gen)
                wake(s, p, -1);
        } else {
            struct sim_event *e = q.obj;
            if (e->gen == q.gen && e->pending == PEND_DELTA) {
                e->pending = PEND_NONE;
                trigger(s, e);
            }
        }
    }
    if (s->n_delta > n)
        memmove(s->delta, s->delta + n,
                (s->n_delta - n) * sizeof *s->delta);
    s->n_delta -= n;
}

static bool entry_live(const struct evq_entry *e)
{
    if (e->kind == Q_PROC)
        return ((struct sim_proc *)e->obj)->gen == e->gen;
    const struct sim_event *ev = e->obj;
    return ev->gen == e->gen && ev->pending == PEND_TIMED;
}

/* Drops stale entries from the head of the timed queue. */
static const struct evq_entry *timed_head(struct sim *s)
{
    const struct evq_entry *e;
    struct evq_entry dead;
    while ((e = evq_peek(&s->timed)) && !entry_live(e))
        evq_pop(&s->timed, &dead);
    return e;
}

/* How many timed entries ahead fire_time warms an entry's owner. */
#define FIRE_AHEAD 8

static inline void fire_timed(struct sim *s, const struct evq_entry *e)
{
    s->stats.timed_events++;
    s->fire_key = e->seq;
    if (e->kind == Q_PROC) {
        wake(s, e->obj, -1);
    } else {
        struct sim_event *ev = e->obj;
        ev->pending = PEND_NONE;
        trigger(s, ev);
    }
}

/* Sorts the n (> 1) entries of s->batch by seq, whose values lie in
 * [lo, hi]: an LSD radix sort on seq - lo, one 8-bit pass per byte of
 * hi - lo, through s->batch_tmp (kept between calls). Seqs are unique,
 * so stability does not matter for the result; the passes are stable
 * anyway. With a batch of ~1000 entries, two or three passes cost about a
 * fifth of qsort, which also allocated a buffer on every call. False when
 * the buffer cannot be had. */
static bool sort_batch(struct sim *s, size_t n, uint64_t lo, uint64_t hi)
{
    if (!grow(&s->batch_tmp, &s->cap_batch_tmp, n, sizeof *s->batch_tmp))
        return false;
    struct evq_entry *a = s->batch, *b = s->batch_tmp;
    uint64_t range = hi - lo;
    for (unsigned sh = 0; sh < 64 && (range >> sh) != 0; sh += 8) {
        size_t count[256] = {0};
        for (size_t i = 0; i < n; i++)
            count[((a[i].seq - lo) >> sh) & 0xff]++;
        size_t sum = 0;
        for (int d = 0; d < 256; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            b[count[((a[i].seq - lo) >> sh) & 0xff]++] = a[i];
        struct evq_entry *t = a;
        a = b;
        b = t;
    }
    if (a != s->batch) { /* an odd number of passes: the result is in tmp */
        s->batch_tmp = s->batch;
        s->batch = a;
        size_t c = s->cap_batch;
        s->cap_batch = s->cap_batch_tmp;
        s->cap_batch_tmp = c;
    }
    return true;
}

/* Fires every entry of time t in insertion order (the queue orders by time
 * only). Liveness is checked as each fires: an earlier one may wake a
 * process whose other wake-up at the same time is then stale. */
static void fire_time(struct sim *s, sim_time t)
{
    struct evq_entry one, two;
    size_t n;
    if (t <= s->late_until) {
        /* an entry may have come in after later seqs of its time: sort */
    } else if ((n = evq_fifo_run_at(&s->timed, t))) {
        /* the FIFO alone: its entries at t are at its head in insertion
         * order, and firing queues no timed entry, so fire them in place;
         * each one's owner is cold (thousands of processes), so warm the
         * owner a few entries ahead */
        size_t i = 0;
        for (; i < n; i++) {
            const struct evq_entry *e = evq_fifo_at(&s->timed, i);
            if (e->t != t)
                break;
            if (i + FIRE_AHEAD < n)
                __builtin_prefetch(evq_fifo_at(&s->timed, i + FIRE_AHEAD)->obj, 1);
            if (entry_live(e))
                fire_timed(s, e);
        }
        evq_fifo_drop(&s->timed, i, t);
        return;
    }
    if (t > s->late_until && evq_pop_wheel_at(&s->timed, t, &one)) {
        /* the wheel alone: as the FIFO, its entries at t come out in
         * insertion order */
        do {
            if (entry_live(&one))
                fire_timed(s, &one);
        } while (evq_pop_wheel_at(&s->timed, t, &one));
        return;
    }
    evq_pop(&s->timed, &one);
    if (!evq_pop_at(&s->timed, t, &two)) {
        /* the common case with scattered times: one entry */
        if (entry_live(&one))
            fire_timed(s, &one);
        return;
    }
    if (!grow(&s->batch, &s->cap_batch, 2, sizeof *s->batch)) {
        fail_nomem(s, "firing timed notifications");
        return;
    }
    s->batch[0] = one;
    s->batch[1] = two;
    n = 2;
    bool sorted = s->batch[1].seq > s->batch[0].seq;
    uint64_t lo = sorted ? one.seq : two.seq, hi = sorted ? two.seq : one.seq;
    for (;;) {
        if (!grow(&s->batch, &s->cap_batch, n + 1, sizeof *s->batch)) {
            fail_nomem(s, "firing timed notifications");
            return;
        }
        if (!evq_pop_at(&s->timed, t, &s->batch[n]))
            break;
        uint64_t q = s->batch[n].seq;
        if (q < s->batch[n - 1].seq)
            sorted = false;
        lo = q < lo ? q : lo;
        hi = q > hi ? q : hi;
        n++;
    }
    if (!sorted && n > 32) {
        if (!sort_batch(s, n, lo, hi)) {
            fail_nomem(s, "firing timed notifications");
            return;
        }
    } else if (!sorted) {
        for (size_t i = 1; i < n; i++) {
            struct evq_entry x = s->batch[i];
            size_t j = i;
            for (; j > 0 && s->batch[j - 1].seq > x.seq; j--)
                s->batch[j] = s->batch[j - 1];
            s->batch[j] = x;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (entry_live(&s->batch[i]))
            fire_timed(s, &s->batch[i]);
}

static void describe_wait(struct sim *s, const struct sim_proc *p)
{
    char tb[48];
    switch (p->wait_kind) {
    case W_FIFO_READ:
    case W_FIFO_WRITE:
        adderr(s, "%s on fifo '%s'",
               p->wait_kind == W_FIFO_READ ? "read" : "write",
               ((const struct sim_fifo *)p->wait_obj)->name);
        return;
    case W_EVENT:
        adderr(s, "event '%s'", ((const struct sim_event *)p->wait_obj)->name);
        return;
    case W_ANY:
    case W_ANY_TIMED:
        if (p->wait_n == 0 && p->wait_kind == W_ANY) {
            adderr(s, "nothing (an empty event list)");
            return;
        }
        if (p->wait_n > 0) {
            struct sim_event *const *evs = p->wait_obj;
            adderr(s, "any of events");
            for (int i = 0; i < p->wait_n; i++)
                adderr(s, "%s'%s'", i ? ", " : " ", evs[i]->name);
            if (p->wait_kind == W_ANY_TIMED)
                adderr(s, " (with a timeout)");
            return;
        }
        break;
    }
    adderr(s, "a timeout (now %s)", fmt_time(tb, sizeof tb, s->now));
}

static bool deadlocked(const struct sim_proc *p)
{
    return p->kind == PROC_THREAD && p->state == ST_BLOCKED && !p->daemon;
}

/* Nothing is pending: report blocked non-daemon threads, if any. */
static int finish(struct sim *s)
{
    size_t blocked = 0;
    for (struct sim_proc *p = s->procs; p; p = p->next_all)
        if (deadlocked(p))
            blocked++;
    if (!blocked)
        return SIM_DONE;
    char tb[48];
    seterr(s, 0, "deadlock at %s: nothing is pending but %zu process%s "
           "blocked:", fmt_time(tb, sizeof tb, s->now), blocked,
           blocked == 1 ? " is" : "es are");
    /* in the order they were (re)started: the next one is the smallest
     * serial above the last listed (a restarted record keeps its place in
     * the list, so list order is not start order); a scan per line, and
     * at most DEADLOCK_LIST_MAX lines, with no memory to fail */
    uint64_t last = 0;
    size_t listed = 0;
    for (; listed < blocked && listed < DEADLOCK_LIST_MAX; listed++) {
        struct sim_proc *next = NULL;
        for (struct sim_proc *p = s->procs; p; p = p->next_all)
            if (deadlocked(p) && p->serial > last && (!next || p->serial < next->serial))
                next = p;
        last = next->serial;
        adderr(s, "\n  '%s' waits on ", next->name);
        describe_wait(s, next);
    }
    if (listed < blocked)
        adderr(s, "\n  ... and %zu more", blocked - listed);
    return SIM_EDEADLOCK;
}

int sim_step(struct sim *s, sim_time until, uint64_t max_activations)
{
    if (!s->elaborated) {
        int rc = sim_elaborate(s);
        if (rc < 0)
            return rc;
    }
    if (s->current)
        return seterr(s, SIM_EPERM, "sim_run called from inside a process");
    s->budget = max_activations;
    for (;;) {
        if (atomic_load_explicit(&s->async_stop, memory_order_relaxed)) {
            atomic_store_explicit(&s->async_stop, false,
                                  memory_order_relaxed);
            return SIM_STOPPED;
        }
        /* evaluate */
        while (s->runq_len) {
            if (s->budget == 0)
                return SIM_MORE;
            s->budget--;
            struct sim_proc *p = s->runq[s->runq_head];
            s->cur_key = s->runq_key[s->runq_head];
            s->runq_head = (s->runq_head + 1) & (s->runq_cap - 1);
            s->runq_len--;
            prefetch_next(s);
            run_proc(s, p);
        }
        /* empty: the next delta's processes go to the queue's first
         * entries, which stay in cache, not on around a ring of thousands */
        s->runq_head = 0;
        s->first_delta = false;
        /* update, then delta notification */
        if (s->n_updates)
            do_update(s);
        if (s->n_delta)
            do_delta_notify(s);
        s->stats.deltas++;
        if (s->failed)
            return s->failed;
        if (s->stop_req) {
            s->stop_req = false;
            return SIM_STOPPED;
        }
        if (s->runq_len || s->n_delta)
            continue;
        /* advance time */
        const struct evq_entry *e = timed_head(s);
        if (!e && evq_nomem(&s->timed)) {
            fail_nomem(s, "ordering timed notifications");
            return s->failed;
        }
        if (!e)
            return finish(s);
        if (e->t > until) {
            if (until > s->now)
                s->now = until;
            return SIM_UNTIL;
        }
        s->now = e->t;
        fire_time(s, e->t);
        s->fire_key = UINT64_MAX;
        s->first_delta = true;
    }
}

int sim_run(struct sim *s, sim_time until)
{
    int rc;
    do
        rc = sim_step(s, until, UINT64_MAX);
    while (rc == SIM_MORE);
    return rc;
}
