/* sim.h — kbsim simulation kernel: public API
 *
 * One `struct sim` holds all state of one simulation; nothing is global, so
 * independent simulations may run in parallel threads. Time is an unsigned
 * 64-bit count of picoseconds. Scheduling follows SystemC: evaluate (run
 * every runnable process), update (primitive channels commit), delta
 * notification, then advance to the next timed event. Ties are broken by
 * insertion order, so a run is deterministic.
 *
 * Errors: functions returning int give 0 (or a non-negative status) on
 * success and a negative SIM_E* code on failure; functions returning a
 * pointer give NULL. In both cases sim_errmsg() says what went wrong.
 *
 * Out of memory: the kernel never aborts, and every allocation failure
 * follows one of two rules.
 *  - Building: a call that creates something (sim_new, sim_thread,
 *    sim_method, sim_event_new, sim_fifo_new, sim_signal_new, sim_prim_new,
 *    sim_port_new, sim_sensitive, sim_port_bind, sim_elaborate) returns
 *    NULL or SIM_ENOMEM and leaves the simulation as it was; it may be
 *    retried or the simulation run without it. Everything a run needs to
 *    wake processes (the runnable queue, the update list) is reserved
 *    here, so a wake-up or a fifo access never allocates.
 *  - Running: when a notification, a wait or the scheduler cannot get
 *    memory, the simulation fails as with sim_fail: the message says
 *    "out of memory ..." and names the process, and sim_run returns
 *    SIM_ENOMEM at the end of the delta cycle. A thread process that could
 *    not wait stays blocked for good (the call does not return), so a
 *    caller that ignores results cannot loop. Such a simulation can only
 *    be freed.
 *
 * The same policy holds for all of kbsim, and this is the one place that
 * states it: an allocation that fails is an error returned to the caller,
 * whose message says "out of memory", never an abort, a crash, a leak or
 * a silently wrong result.
 *  - Components (kb_*, components/): a constructor returns NULL and a
 *    call returns its error code, the message in the caller's error
 *    buffer (kb_errf) or error list; what was built is freed.
 *  - The Lua binding (lkb_*, lua/): raises a Lua error "WHAT: out of
 *    memory" that the script may catch (pcall); Lua's own allocations give
 *    Lua's "not enough memory" error the same way. A kb.sweep point that
 *    runs out fails alone: the other points and their rows are kept.
 *  - The command line (lua/kbsim.c): prints "kbsim: ..." and exits with
 *    status 2.
 *  - The configuration readers (components/config.c, config_schema.c,
 *    graph_topology.c, the Lua-table reader of lua/lsystem.c) add one
 *    "out of memory (reading a configuration)" error and return NULL/-1.
 * tests/failalloc/ fails every allocation
 * of a unit test in turn to hold the engine and components to this
 * (docs/decisions/0024-allocation-failure-testing.md).
 */
#ifndef KBSIM_SIM_H
#define KBSIM_SIM_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- time ------------------------------------------------------------ */

typedef uint64_t sim_time; /* picoseconds */

#define SIM_PS ((sim_time)1)
#define SIM_NS ((sim_time)1000)
#define SIM_US ((sim_time)1000000)
#define SIM_MS ((sim_time)1000000000)
#define SIM_FOREVER UINT64_MAX /* "no limit"; never a time of the simulation */
/* The last time a simulation can reach, 2^63 - 1 ps (106 days): every
 * time is also a signed 64-bit integer (a Lua integer, say). A wait,
 * timeout or notification whose time (now + delay) would pass it is
 * refused with SIM_EINVAL, and the message names the process that asked. */
#define SIM_TIME_MAX ((sim_time)INT64_MAX)

/* llround(x) for a time x >= 0 in ps, exactly (halves away from zero), in
 * a few instructions on the hot paths that turn bytes / bandwidth into
 * ps. For 0.5 <= x < 2^52, x + 0.5 needs no rounding but, at most, at the
 * power of two it may cross, which does not move its floor; 0 <= x < 0.5
 * is 0; other x go to llround. */
static inline sim_time sim_round_ps(double x)
{
    if (x >= 0.5 && x < 4503599627370496.0) /* 2^52 */
        return (sim_time)(x + 0.5);
    if (x >= 0.0 && x < 0.5) /* a time that rounds to nothing (a free bus) */
        return 0;
    return (sim_time)llround(x);
}

/* ---- status and error codes ------------------------------------------ */

enum {
    SIM_DONE = 0,     /* sim_run: no event left, no process blocked */
    SIM_UNTIL = 1,    /* sim_run: the time limit was reached */
    SIM_STOPPED = 2,  /* sim_run: sim_stop() or sim_request_stop() */
    SIM_MORE = 3,     /* sim_step: the batch ended, call again */
    SIM_EINVAL = -22,
    SIM_ENOMEM = -12,
    SIM_EPERM = -1,     /* a call not allowed from this context */
    SIM_EBIND = -100,   /* port binding / elaboration error */
    SIM_EDEADLOCK = -101, /* nothing pending but processes blocked */
    SIM_EPROC = -102,   /* a process failed (see sim_fail) */
    /* sim_run also returns SIM_ENOMEM: see "Out of memory" above */
};

struct sim;
struct sim_proc;
struct sim_event;
struct sim_fifo;
struct sim_signal;
struct sim_port;

/* ---- simulation ------------------------------------------------------ */

struct sim_config {
    size_t stack_size;  /* default stack of thread processes, bytes (0: 64 KiB) */
    bool no_stack_guard; /* true: no guard page below each stack (huge models) */
};

/* A new simulation at time 0. `cfg` may be NULL for the defaults. */
struct sim *sim_new(const struct sim_config *cfg);

/* Frees every process, event, channel and port of the simulation. */
void sim_free(struct sim *s);

/* The message of the last error, or "" if none. Valid until the next call
 * that fails. */
const char *sim_errmsg(const struct sim *s);

/* Current simulated time. */
sim_time sim_now(const struct sim *s);

/* Number of completed delta cycles so far. */
uint64_t sim_delta_count(const struct sim *s);

/* Opaque user pointer carried by the simulation (e.g. the Lua state). */
void sim_set_userdata(struct sim *s, void *ud);
void *sim_userdata(const struct sim *s);

/* Runs until no event is left, until simulated time would pass `until`
 * (SIM_FOREVER: no limit), or a stop. Every activity at a time <= until is
 * done. Returns SIM_DONE, SIM_UNTIL, SIM_STOPPED, SIM_EDEADLOCK (the message
 * lists every blocked process and what it waits on), SIM_EPROC, SIM_ENOMEM
 * or SIM_EBIND (elaboration failed; done on the first run). */
int sim_run(struct sim *s, sim_time until);

/* Like sim_run but returns SIM_MORE after about `max_activations` process
 * activations, so that a caller (the libuv driver) can interleave other
 * work. The same limit `until` must be passed on each call. */
int sim_step(struct sim *s, sim_time until, uint64_t max_activations);

/* From inside a process: end sim_run after the current evaluate phase. */
void sim_stop(struct sim *s);

/* From any thread or a signal handler: end sim_run/sim_step at the next
 * batch boundary (SIM_STOPPED). Async-signal-safe. */
void sim_request_stop(struct sim *s);

/* From inside a process: record an error (formatted) and stop the run;
 * sim_run then returns SIM_EPROC and sim_errmsg() gives the message. */
void sim_fail(struct sim *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- counters -------------------------------------------------------- */

struct sim_stats {
    uint64_t activations;   /* process activations (methods run + thread resumes) */
    uint64_t timed_events;  /* timed queue entries fired */
    uint64_t deltas;        /* delta cycles */
    uint64_t switches;      /* coroutine context switches */
    uint64_t notifications; /* event notifications of any kind */
    uint64_t threads_alive; /* thread processes not yet terminated */
    uint64_t stack_bytes;   /* bytes of stack mapped for thread processes */
};
void sim_get_stats(const struct sim *s, struct sim_stats *out);

/* Optional hook called at every process activation with the time, the
 * delta count and the process; for determinism checks and tracing. */
typedef void (*sim_trace_fn)(void *ud, sim_time t, uint64_t delta,
                             const struct sim_proc *p);
void sim_set_trace(struct sim *s, sim_trace_fn fn, void *ud);

/* The simulation's trace-event recorder (trace.h), NULL when no trace is
 * open: call sites record only when it is set. */
struct sim_trace;
struct sim_trace *sim_tracer(const struct sim *s);

/* ---- processes ------------------------------------------------------- */

typedef void (*sim_proc_fn)(struct sim *s, void *arg);

/* A thread process: a stackful coroutine that runs `fn(s, arg)` from the
 * first evaluate phase on, may block (sim_wait*, fifo read/write) and ends
 * when `fn` returns. stack_size 0 takes the simulation's default. The name
 * is copied; it should be hierarchical ("sip0.cube5.pe3.dma"). */
struct sim_proc *sim_thread(struct sim *s, const char *name, sim_proc_fn fn,
                            void *arg, size_t stack_size);

/* Starts thread process p, which has ended, again with fn(arg): it keeps
 * its record and name and runs as a new sim_thread of that name would,
 * ready from now on. For a component that makes many short threads of
 * one name (a receive beside a kernel), so that the simulation does not
 * keep a record for each. p may have ended just now (another thread it
 * woke is the caller). SIM_EPERM if p has not ended, SIM_ENOMEM. */
int sim_thread_restart(struct sim_proc *p, sim_proc_fn fn, void *arg, size_t stack_size);

/* A method process: `fn(s, arg)` runs to completion each time it is
 * triggered, by its static sensitivity or by sim_next_trigger*. It runs
 * once in the first evaluate phase unless dont_initialize is set. */
struct sim_proc *sim_method(struct sim *s, const char *name, sim_proc_fn fn,
                            void *arg, bool dont_initialize);

/* A timed activation of method process p, asked from any process or
 * from outside the run: p runs `delay` from now (0: in the next delta
 * cycle), as it would if it were the one process statically sensitive to
 * an event notified with sim_notify_at(e, delay), and it counts as a
 * notification. No event is made or kept. Every activation of p voids
 * every other one pending, so of several requests the earliest is served
 * and p, when it runs, asks again for the next time it needs: a component
 * with one method process and a time of its own to keep (a link) uses
 * this instead of an event, and calls it only for a time earlier than the
 * one it asked for last. SIM_EINVAL if p is a thread or now + delay passes
 * SIM_TIME_MAX, SIM_ENOMEM (see "Out of memory"). */
int sim_method_wake(struct sim_proc *p, sim_time delay);

/* Exact removal of a wake-up that may carry no work (decision 0032).
 * sim_seq_reserve takes the sequence number a timed entry made now would
 * take, without making it: equal-time entries made later order after it.
 * sim_seq_passed says whether an entry (t, seq) for a method process,
 * had it been made, would have been served by now: t is past, or t is now
 * and the run is past its place in t's first delta (or in a later delta).
 * sim_method_wake_reserved makes the entry after all: queued as it would
 * have been, or, when t is now and its place in the first delta is still
 * ahead, p is put at that place in the runnable queue. It returns 1 and
 * does nothing when the entry would already have been served (the caller
 * then does what that activation would have done), 0 when made, and
 * SIM_EINVAL (a thread) or SIM_ENOMEM. No notification is counted. It
 * reads p's descriptor first, often cold: a caller holding s asks
 * sim_seq_passed first and calls this only when that is false. */
uint64_t sim_seq_reserve(struct sim *s);
bool sim_seq_passed(const struct sim *s, sim_time t, uint64_t seq);
int sim_method_wake_reserved(struct sim_proc *p, sim_time t, uint64_t seq);

/* Static sensitivity of a method process (any number of events). */
int sim_sensitive(struct sim_proc *p, struct sim_event *e);

/* A daemon thread (a hardware server that loops forever) is not reported
 * as deadlocked when it is blocked at the end of a run. */
void sim_proc_set_daemon(struct sim_proc *p, bool daemon);

const char *sim_proc_name(const struct sim_proc *p);
bool sim_proc_terminated(const struct sim_proc *p);

/* The running process, or NULL outside the evaluate phase. */
struct sim_proc *sim_current(const struct sim *s);

/* Per-process user pointer. */
void sim_proc_set_userdata(struct sim_proc *p, void *ud);
void *sim_proc_userdata(const struct sim_proc *p);

/* Thread processes only (SIM_EPERM otherwise). Block the calling thread:
 * for a time (0: one delta cycle), until an event is notified, or until
 * any of n events or a timeout (SIM_FOREVER: none). sim_wait_any returns
 * the index of the event that woke it, or -1 on timeout. A delay or
 * timeout past SIM_TIME_MAX is SIM_EINVAL, returned without blocking, as
 * is a NULL event. */
int sim_wait(struct sim *s, sim_time delay);
int sim_wait_event(struct sim *s, struct sim_event *e);
int sim_wait_any(struct sim *s, struct sim_event *const *evs, int n,
                 sim_time timeout);

/* Method processes only: the next activation replaces static sensitivity
 * once, after a delay or at an event's notification. */
int sim_next_trigger(struct sim *s, sim_time delay);
int sim_next_trigger_event(struct sim *s, struct sim_event *e);

/* ---- events ---------------------------------------------------------- */

/* Events belong to the simulation and are freed with it. The name is
 * copied and shown in deadlock reports. */
struct sim_event *sim_event_new(struct sim *s, const char *name);
const char *sim_event_name(const struct sim_event *e);

/* Immediate: waiting processes run in the current evaluate phase. */
void sim_notify(struct sim_event *e);
/* Delta: they run in the next delta cycle. */
void sim_notify_delta(struct sim_event *e);
/* Timed: after `delay` (0 is a delta notification). As in SystemC an event
 * holds at most one pending notification; the earlier one wins. SIM_EINVAL
 * if now + delay passes SIM_TIME_MAX, SIM_ENOMEM (see "Out of memory"). */
int sim_notify_at(struct sim_event *e, sim_time delay);
/* Cancels a pending delta or timed notification. */
void sim_cancel(struct sim_event *e);

/* ---- primitive channels ---------------------------------------------- */

/* Bounded FIFO of `capacity` elements of `elem_size` bytes. As sc_fifo:
 * what is written in delta n is readable from delta n+1 on, and a slot
 * freed by a read is writable from delta n+1 on. */
struct sim_fifo *sim_fifo_new(struct sim *s, const char *name,
                              size_t elem_size, size_t capacity);
const char *sim_fifo_name(const struct sim_fifo *f);
/* Blocking, thread processes only. */
int sim_fifo_read(struct sim_fifo *f, void *out);
int sim_fifo_write(struct sim_fifo *f, const void *in);
/* Non-blocking, any process: true on success. */
bool sim_fifo_nb_read(struct sim_fifo *f, void *out);
bool sim_fifo_nb_write(struct sim_fifo *f, const void *in);
size_t sim_fifo_num_available(const struct sim_fifo *f); /* readable now */
size_t sim_fifo_num_free(const struct sim_fifo *f);      /* writable now */
/* Notified in the update phase of a delta in which elements were written
 * (read). Take them only to wait on them: a fifo nobody has asked for its
 * events wakes its blocked reader and writer without touching them. */
struct sim_event *sim_fifo_written_event(struct sim_fifo *f);
struct sim_event *sim_fifo_read_event(struct sim_fifo *f);

/* A signal of `size` bytes: a write becomes the value in the update phase
 * of the same delta; if the value changed, value_changed is notified for
 * the next delta. Initial value: zero bytes. */
struct sim_signal *sim_signal_new(struct sim *s, const char *name,
                                  size_t size);
void sim_signal_read(const struct sim_signal *g, void *out);
void sim_signal_write(struct sim_signal *g, const void *in);
struct sim_event *sim_signal_changed_event(struct sim_signal *g);

/* A user primitive channel: `update(ud)` runs in the update phase of the
 * delta in which sim_request_update was called (once per delta). */
struct sim_prim;
struct sim_prim *sim_prim_new(struct sim *s, void (*update)(void *ud),
                              void *ud);
void sim_request_update(struct sim_prim *c);

/* ---- typed ports ----------------------------------------------------- */

enum sim_port_dir { SIM_PORT_IN = 1, SIM_PORT_OUT = 2, SIM_PORT_INOUT = 3 };

/* A port has a hierarchical name, a direction, an interface type tag
 * ("flit", "dma_req", "credit") and a multiplicity: the number of
 * bindings it accepts, between min_bind (0 makes it optional) and
 * max_bind. An IN or INOUT port exports an interface pointer (set by its
 * owner, e.g. a fifo or a struct of callbacks) that the bound peer uses. */
struct sim_port *sim_port_new(struct sim *s, const char *name,
                              enum sim_port_dir dir, const char *type_tag,
                              int min_bind, int max_bind);
void sim_port_set_iface(struct sim_port *p, void *iface);

/* Binds OUT to IN, or INOUT to INOUT. Checks direction, type tag and
 * multiplicity; an error names both ports. */
int sim_port_bind(struct sim_port *a, struct sim_port *b);

/* Checks every port for min_bind (unbound ports are an error naming the
 * port); called by the first sim_run. All errors are listed, one a line. */
int sim_elaborate(struct sim *s);

const char *sim_port_name(const struct sim_port *p);
int sim_port_bound_count(const struct sim_port *p);
struct sim_port *sim_port_peer(const struct sim_port *p, int i);
/* The interface exported by the i-th peer. */
void *sim_port_peer_iface(const struct sim_port *p, int i);

/* Called after each successful sim_port_bind that involves p, with the
 * port: the owner caches what it needs (typically
 * sim_port_peer_iface(p, 0) in a typed pointer), so that a call through
 * the port is one pointer load on the hot path, as an sc_port's
 * operator-> is. An exporter should set its iface before it is bound. */
typedef void (*sim_port_bound_fn)(void *ud, struct sim_port *p);
void sim_port_on_bind(struct sim_port *p, sim_port_bound_fn fn, void *ud);

/* What a port is, for listings (sys:describe{ports = true}). */
const char *sim_port_type(const struct sim_port *p);
enum sim_port_dir sim_port_dir(const struct sim_port *p);
void sim_port_multiplicity(const struct sim_port *p, int *min_bind, int *max_bind);

/* Every port of s in creation order: sim_port_next(s, NULL) is the first,
 * NULL after the last. O(1) per step. */
struct sim_port *sim_port_next(const struct sim *s, const struct sim_port *p);

/* ---- deferred ports (decision 0038, "Lazy records") ------------------
 * A module with many ports that nothing but a listing looks at (the
 * fabric: four a link) may note where its ports go and make them only
 * when asked. sim_port_defer registers make(ud); sim_port_make_deferred
 * calls every registered make (0, or the first error: SIM_ENOMEM, with
 * sim_errmsg set; a make returns at once when it has nothing to make,
 * and may be called again after an error), and so does
 * sim_port_next(s, NULL), so a listing or a lookup by name sees them.
 * sim_port_defer returns a handle the module gives back with
 * sim_port_defer_release before ud is freed, whether or not s is still
 * alive (the handle is shared and freed by the last of the two). make
 * places its ports where they would have been made: sim_port_last(s)
 * noted then is `after`; sim_port_insert_after(s, true, after) puts the
 * next ports made after `after` (NULL: first), each after the one before, and
 * sim_port_insert_after(s, false, NULL) goes back to appending. */
typedef int (*sim_port_make_fn)(void *ud);
int sim_port_make_deferred(struct sim *s);
struct sim_port_defer;
struct sim_port_defer *sim_port_defer(struct sim *s, sim_port_make_fn make, void *ud);
void sim_port_defer_release(struct sim_port_defer *d);
struct sim_port *sim_port_last(const struct sim *s);
void sim_port_insert_after(struct sim *s, bool on, struct sim_port *after);

#ifdef __cplusplus
}
#endif
#endif
