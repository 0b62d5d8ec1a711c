/* trace.c — the trace recorder: tracks, events, JSON through a fixed buffer */
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Bytes buffered before a write: bounds memory, keeps writes few. */
#define TRACE_BUF 65536

struct tproc {
    char *name;
};

struct ttrack {
    uint32_t pid, tid;
    char *name;
};

struct sim_trace {
    FILE *f;
    bool own;     /* f was opened here: close it */
    bool closed;  /* footer written; records are ignored */
    bool paused;  /* sim_trace_pause: records are ignored until resumed */
    bool failed;  /* a write failed: err_no says why */
    int err_no;
    bool nomem; /* a track could not be made: its records were dropped */
    char *label;  /* the file, for messages */
    uint64_t events;
    struct tproc *procs;
    size_t n_procs, cap_procs;
    struct ttrack *tracks;
    size_t n_tracks, cap_tracks;
    size_t len;
    char buf[TRACE_BUF];
};

static void errf(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- output ---------------------------------------------------------- */

static void flush(struct sim_trace *t)
{
    if (t->len && !t->failed && fwrite(t->buf, 1, t->len, t->f) != t->len) {
        t->failed = true;
        t->err_no = errno ? errno : EIO;
    }
    t->len = 0;
}

static void put(struct sim_trace *t, const char *p, size_t n)
{
    while (n) {
        if (t->len == TRACE_BUF)
            flush(t);
        size_t k = TRACE_BUF - t->len < n ? TRACE_BUF - t->len : n;
        memcpy(t->buf + t->len, p, k);
        t->len += k;
        p += k;
        n -= k;
    }
}

static void puts_(struct sim_trace *t, const char *s) { put(t, s, strlen(s)); }

static void putu(struct sim_trace *t, uint64_t v)
{
    char b[24];
    int n = snprintf(b, sizeof b, "%" PRIu64, v);
    put(t, b, (size_t)n);
}

/* Picoseconds as microseconds with six decimals: exact, no rounding. */
static void putus(struct sim_trace *t, sim_time ps)
{
    char b[32];
    int n = snprintf(b, sizeof b, "%" PRIu64 ".%06" PRIu64, ps / SIM_US,
                     ps % SIM_US);
    put(t, b, (size_t)n);
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if none:
 * invalid bytes would make the file unreadable to strict JSON parsers. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t need;
    uint32_t min;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        need = 2, min = 0x80;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        need = 3, min = 0x800;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        need = 4, min = 0x10000;
    else
        return 0;
    if (n < need)
        return 0;
    uint32_t cp = p[0] & (0x7f >> need);
    for (size_t i = 1; i < need; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return need;
}

/* A JSON string: quotes, backslashes and control characters escaped,
 * bytes that are not UTF-8 written as U+FFFD. */
static void putstr(struct sim_trace *t, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p);
    put(t, "\"", 1);
    while (n) {
        size_t run = 0;
        while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' &&
               p[run] != '\\')
            run++;
        put(t, (const char *)p, run);
        p += run;
        n -= run;
        if (!n)
            break;
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            put(t, e, 2);
            p++, n--;
        } else if (*p < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
            put(t, e, 6);
            p++, n--;
        } else {
            size_t k = utf8_len(p, n);
            if (k) {
                put(t, (const char *)p, k);
            } else {
                puts_(t, "\\ufffd");
                k = 1;
            }
            p += k;
            n -= k;
        }
    }
    put(t, "\"", 1);
}

/* The start of an event: the separator, phase, and track ids. */
static void begin(struct sim_trace *t, char ph, uint32_t pid, uint32_t tid)
{
    char b[48];
    int n = snprintf(b, sizeof b, "%s{\"ph\":\"%c\",\"pid\":%" PRIu32
                     ",\"tid\":%" PRIu32, t->events ? ",\n" : "", ph, pid,
                     tid);
    put(t, b, (size_t)n);
    t->events++;
}

static void putargs(struct sim_trace *t, const struct sim_trace_arg *args,
                    int nargs)
{
    puts_(t, ",\"args\":{");
    for (int i = 0; i < nargs; i++) {
        if (i)
            put(t, ",", 1);
        putstr(t, args[i].key);
        put(t, ":", 1);
        if (args[i].str)
            putstr(t, args[i].str);
        else
            putu(t, args[i].num);
    }
    put(t, "}", 1);
}

/* A metadata event: "process_name", "thread_name" or a sort index. */
static void meta(struct sim_trace *t, const char *what, uint32_t pid,
                 uint32_t tid, const char *name, uint64_t index)
{
    begin(t, 'M', pid, tid);
    puts_(t, ",\"name\":");
    putstr(t, what);
    puts_(t, ",\"args\":{");
    if (name) {
        puts_(t, "\"name\":");
        putstr(t, name);
    } else {
        puts_(t, "\"sort_index\":");
        putu(t, index);
    }
    puts_(t, "}}");
}

/* ---- life cycle ------------------------------------------------------ */

static int attach(struct sim *s, FILE *f, bool own, const char *label,
                  char *err, size_t errlen)
{
    if (sim_tracer(s)) {
        errf(err, errlen, "trace '%s': the simulation already has a trace",
             label);
        return SIM_EINVAL;
    }
    struct sim_trace *t = calloc(1, sizeof *t);
    if (!t || !(t->label = strdup(label))) {
        free(t);
        errf(err, errlen, "trace '%s': out of memory", label);
        return SIM_ENOMEM;
    }
    t->f = f;
    t->own = own;
    puts_(t, "{\"traceEvents\":[\n");
    sim__set_tracer(s, t);
    return 0;
}

int sim_trace_open(struct sim *s, const char *path, char *err, size_t errlen)
{
    if (sim_tracer(s)) {
        errf(err, errlen, "trace '%s': the simulation already has a trace",
             path);
        return SIM_EINVAL;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        errf(err, errlen, "cannot open trace '%s': %s", path, strerror(errno));
        return SIM_EINVAL;
    }
    int rc = attach(s, f, true, path, err, errlen);
    if (rc < 0)
        fclose(f);
    return rc;
}

int sim_trace_open_file(struct sim *s, FILE *f, const char *label, char *err,
                        size_t errlen)
{
    return attach(s, f, false, label ? label : "(stream)", err, errlen);
}

/* Writes the footer and lets go of the file; true if every write worked. */
static bool finish(struct sim_trace *t)
{
    if (t->closed)
        return true;
    t->closed = true;
    puts_(t, "\n],\"displayTimeUnit\":\"ns\"}\n");
    flush(t);
    if (!t->failed && fflush(t->f) != 0) {
        t->failed = true;
        t->err_no = errno ? errno : EIO;
    }
    if (t->own && fclose(t->f) != 0 && !t->failed) {
        t->failed = true;
        t->err_no = errno ? errno : EIO;
    }
    t->f = NULL;
    return !t->failed;
}

int sim_trace_close(struct sim *s, char *err, size_t errlen)
{
    struct sim_trace *t = sim_tracer(s);
    if (!t || t->closed)
        return 0;
    if (finish(t) && !t->nomem)
        return 0;
    if (!t->err_no) {
        errf(err, errlen, "trace '%s' is incomplete: out of memory", t->label);
        return SIM_ENOMEM;
    }
    errf(err, errlen, "cannot write trace '%s': %s", t->label,
         strerror(t->err_no));
    return SIM_EINVAL;
}

void sim__trace_free(struct sim_trace *t)
{
    if (!t)
        return;
    finish(t);
    for (size_t i = 0; i < t->n_procs; i++)
        free(t->procs[i].name);
    for (size_t i = 0; i < t->n_tracks; i++)
        free(t->tracks[i].name);
    free(t->procs);
    free(t->tracks);
    free(t->label);
    free(t);
}

int sim_trace_move(struct sim *from, struct sim *to)
{
    struct sim_trace *t = sim_tracer(from);
    if (!t || t->closed || sim_tracer(to))
        return SIM_EINVAL;
    sim__set_tracer(from, NULL);
    sim__set_tracer(to, t);
    return 0;
}

uint64_t sim_trace_events(const struct sim_trace *t) { return t->events; }

void sim_trace_pause(struct sim_trace *t, bool paused) { t->paused = paused; }

bool sim_trace_paused(const struct sim_trace *t) { return t->paused; }

/* ---- tracks ---------------------------------------------------------- */

static bool grow(void *arr, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? 2 * *cap : 16;
    void *p = realloc(*(void **)arr, n * sz);
    if (!p)
        return false;
    *(void **)arr = p;
    *cap = n;
    return true;
}

/* pid of a process name (1-based: some viewers treat pid 0 specially). */
static uint32_t proc_id(struct sim_trace *t, const char *name)
{
    for (size_t i = 0; i < t->n_procs; i++)
        if (strcmp(t->procs[i].name, name) == 0)
            return (uint32_t)i + 1;
    char *d = strdup(name);
    if (!d || !grow(&t->procs, &t->cap_procs, t->n_procs + 1, sizeof *t->procs)) {
        free(d);
        return 0;
    }
    t->procs[t->n_procs++].name = d;
    uint32_t pid = (uint32_t)t->n_procs;
    if (!t->closed) {
        meta(t, "process_name", pid, 0, name, 0);
        meta(t, "process_sort_index", pid, 0, NULL, pid);
    }
    return pid;
}

int sim_trace_track(struct sim_trace *t, const char *process,
                    const char *thread)
{
    uint32_t pid = proc_id(t, process ? process : "system");
    if (!pid) {
        t->nomem = true;
        return -1;
    }
    if (!thread)
        thread = "";
    for (size_t i = 0; i < t->n_tracks; i++)
        if (t->tracks[i].pid == pid && strcmp(t->tracks[i].name, thread) == 0)
            return (int)i;
    char *d = strdup(thread);
    if (!d || t->n_tracks >= INT32_MAX ||
        !grow(&t->tracks, &t->cap_tracks, t->n_tracks + 1, sizeof *t->tracks)) {
        free(d);
        t->nomem = true;
        return -1;
    }
    /* tids are unique over the whole trace, as in a real system */
    uint32_t tid = (uint32_t)t->n_tracks + 1;
    t->tracks[t->n_tracks] = (struct ttrack){pid, tid, d};
    if (!t->closed) {
        meta(t, "thread_name", pid, tid, thread, 0);
        meta(t, "thread_sort_index", pid, tid, NULL, tid);
    }
    return (int)t->n_tracks++;
}

int sim_trace_track_path(struct sim_trace *t, const char *name)
{
    const char *dot = name ? strchr(name, '.') : NULL;
    if (!dot)
        return sim_trace_track(t, "system", name);
    size_t n = (size_t)(dot - name);
    char stackbuf[64];
    char *proc = n < sizeof stackbuf ? stackbuf : malloc(n + 1);
    if (!proc) {
        t->nomem = true;
        return -1;
    }
    memcpy(proc, name, n);
    proc[n] = '\0';
    int id = sim_trace_track(t, proc, dot + 1);
    if (proc != stackbuf)
        free(proc);
    return id;
}

/* ---- events ---------------------------------------------------------- */

static const struct ttrack *live(const struct sim_trace *t, int track)
{
    if (t->closed || t->paused || track < 0 || (size_t)track >= t->n_tracks)
        return NULL;
    return &t->tracks[track];
}

/* The fields every span and instant event ends with, and its close. */
static void end_event(struct sim_trace *t, const char *cat, const char *name,
                      const struct sim_trace_arg *args, int nargs)
{
    puts_(t, ",\"cat\":");
    putstr(t, cat);
    puts_(t, ",\"name\":");
    putstr(t, name);
    if (nargs > 0)
        putargs(t, args, nargs);
    put(t, "}", 1);
}

void sim_trace_span(struct sim_trace *t, int track, const char *cat,
                    const char *name, sim_time start, sim_time end,
                    const struct sim_trace_arg *args, int nargs)
{
    const struct ttrack *k = live(t, track);
    if (!k)
        return;
    begin(t, 'X', k->pid, k->tid);
    puts_(t, ",\"ts\":");
    putus(t, start);
    puts_(t, ",\"dur\":");
    putus(t, end > start ? end - start : 0);
    end_event(t, cat, name, args, nargs);
}

void sim_trace_instant(struct sim_trace *t, int track, const char *cat,
                       const char *name, sim_time at,
                       const struct sim_trace_arg *args, int nargs)
{
    const struct ttrack *k = live(t, track);
    if (!k)
        return;
    begin(t, 'i', k->pid, k->tid);
    puts_(t, ",\"s\":\"t\",\"ts\":");
    putus(t, at);
    end_event(t, cat, name, args, nargs);
}

void sim_trace_counter(struct sim_trace *t, int track, const char *name,
                       sim_time at, double value)
{
    const struct ttrack *k = live(t, track);
    if (!k || !isfinite(value))
        return;
    begin(t, 'C', k->pid, k->tid);
    puts_(t, ",\"ts\":");
    putus(t, at);
    puts_(t, ",\"name\":");
    putstr(t, name);
    char b[40];
    /* %.17g round-trips a double; JSON has no leading '+' or "inf" */
    int n = snprintf(b, sizeof b, ",\"args\":{\"value\":%.17g}}", value);
    put(t, b, (size_t)n);
}
