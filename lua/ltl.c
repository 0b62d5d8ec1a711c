/* ltl.c — the per-PE kernel language's C core (module kbsim.tlcore):
 * kernel contexts, TCM handles, and the calls that charge the PE's units
 *
 * lua/kbsim/tl.lua is the module kernels use (`tl`); it resolves tensors
 * to shards and calls in here. A kernel runs as a Lua thread process; at
 * its start tl.lua binds it to a PE (bind), which makes a context keyed by
 * the Lua thread in a registry table, and every call here finds the
 * context of the running thread. Handles live in the PE's TCM: each is a
 * kb_mem allocation that the context frees when the kernel ends, so
 * addresses (hence timing) never depend on the garbage collector.
 *
 * Every kernel call first charges PE_CPU dispatch, then the unit that does
 * the work (docs/kernel_api.md). Blocking calls go through
 * lkb_block_begin/lkb_block_end so the binding knows which Lua process runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "config.h"
#include "config_schema.h"
#include "dtype.h"
#include "kb_port.h"
#include "lkb_internal.h"
#include "lmodule.h"
#include "pe.h"
#include "pe_cpu.h"
#include "pe_dma.h"
#include "pe_gemm.h"
#include "pe_ipcq.h"
#include "pe_math.h"
#include "sim.h"
#include "system.h"

#define KB_CTX "kbsim.kernel"
#define KB_HANDLE "kbsim.handle"
#define KB_FUTURE "kbsim.future"
#define KB_SCRATCH "kbsim.scratch"
#define KB_STATE "kbsim.tl_state"
#define HANDLE_ALIGN 64

static const char ctx_table_key = 'k'; /* registry: thread -> context */
static const char scratch_table_key = 's'; /* registry: thread -> scratch */
static const char future_table_key = 'f'; /* registry: receives not yet waited for */
static const char ctx_anchor_key = 'a';
static const char state_key = 'p'; /* registry: the module's state (upvalue UV_STATE) */
static const char strings_key = 'n'; /* registry: its strings (upvalue UV_STRINGS) */
static const char future_tag = 'u';
/* a handle's first word (any other userdata of its size is refused) */
#define HANDLE_TAG 0x6b62684eu
/* a context's live handles, at most (a handle's slot is this many bits) */
#define HANDLE_SLOT_BITS 23
#define HANDLE_SLOTS_MAX ((1u << HANDLE_SLOT_BITS) - 1)

/* Upvalues of every function of the module and of the handle metatable:
 * the two metatables new objects get, an array holding each bound
 * context (its `anchor`), so that a call can push the running kernel's
 * context without a look-up keyed by its thread, the array anchoring
 * receives not yet waited for, the module's state (struct tl_state) and
 * the array of strings it compares by address (S_*), and the keys
 * "shard", "shard_place" and "shard_places", pushed by tl.load and
 * tl.store on every call (an upvalue is one copy; lua_getfield would look
 * its literal up in the string cache). */
enum { UV_HANDLE_MT = 1, UV_FUTURE_MT, UV_CTXS, UV_FUTURES, UV_STATE, UV_STRINGS,
       UV_K_SHARD, UV_K_SHARD_PLACE, UV_K_PLACES, N_UV = UV_K_PLACES };

/* lkb_tl_slots: what the running Lua thread process keeps for this module */
enum { SLOT_CTX, SLOT_SCRATCH };

/* Host-side buffers of one Lua thread: operand snapshots and results on
 * their way to and from the TCM. A call takes them by slot (the operand's
 * position, RESULT for a result) and frees them when it returns
 * (scratch_drop): a snapshot taken before a blocking point (the dispatch,
 * the unit's wait, a DMA or IPCQ transfer) is used after it, so a call
 * needs buffers of its own for its whole span, but an idle kernel, or one
 * blocked between calls, holds none (thousands of kernels would otherwise
 * keep ~3 payloads each for their life: decision 0017). They belong to a
 * thread, not a context: a kernel and its tl.spawn helpers interleave
 * inside calls, but one thread is in one call at a time. A call that
 * fails leaves its buffers to the thread's unbind or collection. */
enum { SCRATCH_SLOTS = 4, RESULT = 3 };

struct scratch {
    void *p[SCRATCH_SLOTS];
    size_t cap[SCRATCH_SLOTS];
    /* snapshots of TCM ranges by page reference (decision 0056): what a
     * send or a receive holds instead of a host copy, by slot likewise */
    struct kb_mem_snap snap[SCRATCH_SLOTS];
    struct buf_pool *bp; /* the state's pool, once a function that has it ran */
};

/* Buffers a call gave back (scratch_drop, a waited-for receive), kept for
 * the next call of any kernel of the Lua state, so that a call does not
 * malloc and free its payload-sized buffers each time (glibc serves
 * blocks above 1 KiB from its bins, not its per-thread cache: ~6 such
 * pairs a ring step were ~3 % of a flat ring's instructions). Bounded: at
 * most POOL_SLOTS buffers of at most POOL_MAX bytes a state, so an idle
 * kernel still holds nothing (decision 0017). One per state (an upvalue
 * of the module's functions); a function without it frees at once. */
enum { POOL_SLOTS = 16, POOL_MAX = 1 << 20 };

struct buf_pool {
    void *p[POOL_SLOTS];
    size_t cap[POOL_SLOTS];
    int n;
};

/* The smallest kept buffer of at least `bytes`, out of the pool, or NULL. */
static void *pool_take(struct buf_pool *bp, size_t bytes, size_t *cap)
{
    int best = -1;
    for (int i = 0; bp && i < bp->n; i++)
        if (bp->cap[i] >= bytes && (best < 0 || bp->cap[i] < bp->cap[best]))
            best = i;
    if (best < 0)
        return NULL;
    void *p = bp->p[best];
    *cap = bp->cap[best];
    bp->n--;
    bp->p[best] = bp->p[bp->n];
    bp->cap[best] = bp->cap[bp->n];
    return p;
}

/* Keeps p (of cap bytes) for a later pool_take, or frees it. */
static void pool_give(struct buf_pool *bp, void *p, size_t cap)
{
    if (!p)
        return;
    if (!bp || bp->n == POOL_SLOTS || cap > POOL_MAX || cap == 0) {
        free(p);
        return;
    }
    bp->p[bp->n] = p;
    bp->cap[bp->n] = cap;
    bp->n++;
}

/* What the module keeps for a Lua state, one per state (upvalue
 * UV_STATE): the buffer pool, and the strings the calls of every op
 * compare, found by address rather than by strcmp. Lua keeps one copy of
 * each short string, so a kernel's "f16" or "E" is the very string the
 * state anchored (in the array UV_STRINGS, for the state's life): an
 * address equal to an anchored string's is that string, and any other
 * (a long name, a number made a string) takes the comparison by content
 * as before. */
enum { KIND_COUNT = 3 };
enum { S_DTYPE = 1, S_KIND = S_DTYPE + KB_DTYPE_COUNT,
       S_DIR = S_KIND + KIND_COUNT };

struct tl_state {
    struct buf_pool pool;
    const char *dtype[KB_DTYPE_COUNT]; /* kb_dtype_name(d), anchored */
    const char *kind[KIND_COUNT];      /* "tcm", "sram", "hbm", anchored */
    /* the IPCQ direction names kernels used, each anchored at S_DIR + its
     * id: a context keeps its IPCQ's index of a direction by that id, and
     * a receive's record points at the name (a wired name: a PE has a
     * few, a state a few per wiring) */
    const char **dirs;
    size_t n_dirs, cap_dirs;
    struct ctx_ref *free_refs; /* context records to reuse (ctx_ref) */
};

/* What a handle knows of its kernel's context without keeping it alive:
 * a record the context takes at bind and gives back when it is collected
 * (ctx_gc), which then counts one more generation. A handle holds the
 * record and the generation it was made in: equal, the context is still
 * there (ended or not) and `c` is it; else it is gone, and so is the
 * kernel. A handle is then a userdata without a user value (the context
 * used to be one): no context to push and set on each new handle, and a
 * smaller object for the collector. The records live in blocks owned by
 * Lua userdata anchored by the state (its user value), so they outlast
 * every finalizer, the contexts' included, and Lua frees them last. */
struct ctx_ref {
    struct kctx *c;
    uint32_t gen; /* a record whose count would wrap is not reused (ctx_gc) */
    struct ctx_ref *next_free;
};
enum { REF_BLOCK = 32 };

static const char *const kind_names[KIND_COUNT] = {"tcm", "sram", "hbm"};
static const enum kb_mem_kind kind_kinds[KIND_COUNT] = {KB_MEM_TCM, KB_MEM_SRAM, KB_MEM_HBM};

static int state_gc(lua_State *L)
{
    struct tl_state *st = luaL_checkudata(L, 1, KB_STATE);
    while (st->pool.n > 0)
        free(st->pool.p[--st->pool.n]);
    free(st->dirs);
    st->dirs = NULL;
    st->n_dirs = st->cap_dirs = 0;
    return 0;
}

/* The running function's state: NULL where it has no such upvalue (a
 * function pushed without them, as a handle's to_table). */
static struct tl_state *fn_state(lua_State *L)
{
    return lua_touserdata(L, lua_upvalueindex(UV_STATE));
}

/* The running function's pool: NULL where it has none (it frees at once). */
static struct buf_pool *fn_pool(lua_State *L)
{
    struct tl_state *st = fn_state(L);
    return st ? &st->pool : NULL;
}

/* The dtype the string s names when s is the state's anchored name; -1
 * otherwise (not a string, another dtype name's copy, or no state). */
static int dtype_by_address(const struct tl_state *st, const char *s)
{
    for (int d = 0; st && s && d < KB_DTYPE_COUNT; d++)
        if (s == st->dtype[d])
            return d;
    return -1;
}

static int kind_by_address(const struct tl_state *st, const char *s)
{
    for (int k = 0; st && s && k < KIND_COUNT; k++)
        if (s == st->kind[k])
            return k;
    return -1;
}

/* The state's id of direction name s, or -1 when it has none yet. */
static int dir_find(const struct tl_state *st, const char *s)
{
    for (size_t i = 0; i < st->n_dirs; i++)
        if (st->dirs[i] == s)
            return (int)i;
    for (size_t i = 0; i < st->n_dirs; i++)
        if (strcmp(st->dirs[i], s) == 0)
            return (int)i;
    return -1;
}

/* dir_find, giving the string at stack index i an id (anchored) when it
 * has none; -1 when memory ran out. Only names the kernel's IPCQ has
 * wired come here, so the list stays as short as the wiring. */
static int dir_intern(lua_State *L, struct tl_state *st, int i)
{
    const char *s = lua_tostring(L, i);
    int id = dir_find(st, s);
    if (id >= 0)
        return id;
    if (st->n_dirs == st->cap_dirs) {
        size_t cap = st->cap_dirs ? 2 * st->cap_dirs : 8;
        const char **a = cap < INT32_MAX ? realloc(st->dirs, cap * sizeof *a) : NULL;
        if (!a)
            return -1;
        st->dirs = a;
        st->cap_dirs = cap;
    }
    lua_pushvalue(L, i);
    lua_rawseti(L, lua_upvalueindex(UV_STRINGS), S_DIR + (lua_Integer)st->n_dirs);
    st->dirs[st->n_dirs] = s; /* the anchored string's own bytes */
    return (int)st->n_dirs++;
}

struct kctx {
    /* What a ring step's calls read (current, tl.sendrecv, newhandle,
     * handle_release, the math ops) comes first, in about two cache lines:
     * at system scale a context is cold each time its kernel runs again. */
    struct kb_system *const *sys_open; /* the kbsim.system's: NULL once closed */
    bool ended;
    bool no_data; /* a timing-only system: handles carry no values */
    /* tl.sendrecv's last directions (state ids) and their IPCQ indexes,
     * when both were found wired by index (sr_ok) */
    bool sr_ok;
    /* TCM addresses of live handles, by slot (a handle knows its slot),
     * so that the table is as long as the most handles live at once and
     * tl.free finds its entry at once; a free slot's entry holds
     * SLOT_FREE. The free slots' numbers are a stack (the last freed is
     * taken first) in the same block, after cap_allocs entries
     * (free_slots()): a new handle reads its top, one line a step
     * touches anyway, not the entry of a slot freed steps ago. */
    uint32_t n_free;
    /* pe->cpu, which dispatches every op (the PE's own line is not read
     * by a ring step) */
    struct kb_cpu *cpu;
    struct sim *s;
    struct tl_state *st; /* the module's (the registry keeps it) */
    struct ctx_ref *ref; /* its record for its handles, of generation gen */
    uint32_t gen;
    uint32_t cap_allocs;
    struct alloc *allocs;
    /* What its ops go through (decision 0045): the interfaces bound to
     * the CPU's OUT ports dma, math, gemm and ipcq,
     * read once when the kernel is bound to the PE (a port is bound when
     * the PE's units are made, before, and never rebound). NULL: that port
     * is unbound, an error at the first op that needs it (need_*). The
     * stats counters and the closed-form queries (tl.gemm_time, ...) read
     * the PE's units directly: they observe, they issue nothing. */
    const struct kb_ipcq_if *ipcq;
    const struct kb_math_if *math;
    struct kb_mem *tcm; /* pe->tcm, where handles live (the PE's line is cold after a block) */
    /* its receive processes, with their events, each started again for
     * the next tl.recv_async or tl.sendrecv on its direction (same name)
     * once its receive has been waited for: a kernel of R rounds would
     * otherwise leave R of each in the sim */
    struct recv_proc *recvs;
    /* tl.sendrecv's receives: structs kept for the next call (free), and
     * those whose receive may still run (busy, until it is taken): a call
     * that fails leaves its receive here for good */
    struct future *free_futs, *busy_futs;
    int sr_rid, sr_sid, sr_rix, sr_six;
    uint32_t n_allocs;
    /* the rest is read at bind, at the end and by the rarer calls */
    struct kb_pe *pe;
    const struct kb_dma_if *dma;
    const struct kb_gemm_if *gemm;
    struct kb_system *sys;
    int anchor; /* its place in the bound-context array (upvalue CTXS) */
    int rank, world, program_id;
    sim_time gemm_free_ps; /* tl.gemm_tile: when the engine is free again */
    /* the bound IPCQ's index (ipcq_dir) of each direction name, by its
     * id in the state (dir_intern); -1: not known yet */
    int *dir_ix;
    size_t n_dir_ix;
};
/* A live handle's TCM block, owned (kb_mem_alloc_owned): the TCM does not
 * record it, the context does, to free it when the kernel ends. */
struct alloc {
    uint64_t addr, bytes;
};
/* a free entry of kctx.allocs, in its addr (TCM addresses are below 2^63) */
#define SLOT_FREE ((uint64_t)1 << 63)
#define SLOT_NONE UINT32_MAX

/* A context lives in its userdata at the first cache line boundary, so
 * that the fields a step reads first are two lines, not three. */
#define CTX_UD_BYTES (sizeof(struct kctx) + 63)
_Static_assert(offsetof(struct kctx, n_allocs) == 128, "a step's fields are the first two lines");
/* The stack of c's free slots: cap_allocs numbers after its entries. */
static uint32_t *free_slots(const struct kctx *c)
{
    return (uint32_t *)(c->allocs + c->cap_allocs);
}

static struct kctx *ctx_in(void *ud)
{
    return ud ? (struct kctx *)(((uintptr_t)ud + 63) & ~(uintptr_t)63) : NULL;
}


/* 32 bytes, so that with Lua's userdata header a handle is 64: one cache
 * line when the block is aligned to one. At system scale a handle is cold
 * each time its kernel runs again, and every new one is written whole. */
struct handle {
    uint32_t tag; /* HANDLE_TAG: what tohandle checks */
    uint32_t n;
    struct ctx_ref *ref; /* its context's record, of generation gen */
    uint64_t addr;
    uint32_t gen;
    uint32_t slot : HANDLE_SLOT_BITS; /* its entry in its context's allocs */
    uint32_t freed : 1;
    uint32_t dt : 8; /* an enum kb_dtype */
};
_Static_assert(sizeof(struct handle) == 32 && KB_DTYPE_COUNT <= 256, "a handle is 32 bytes");
/* The context of handle h while the context lives (its kernel may have
 * ended), else NULL. */
static struct kctx *hctx(const struct handle *h)
{
    return h->ref->gen == h->gen ? h->ref->c : NULL;
}

/* Whether h is a handle of context c, which lives. */
static bool handle_of(const struct handle *h, const struct kctx *c)
{
    return h->ref == c->ref && h->gen == c->gen;
}

/* A receive process of a context's direction (kctx.recvs). */
struct recv_proc {
    struct recv_proc *next;
    const char *dir; /* one of the context's dirs */
    struct sim_proc *proc;
    struct sim_event *done_ev;
    /* a method process (the IPCQ's kb_ipcq_recv_step): notified to start
     * it; NULL for a thread (an IPCQ export without it) */
    struct sim_event *start_ev;
    const struct kb_ipcq_if *q; /* its context's IPCQ */
    struct future *f; /* the receive a method serves, NULL between two */
    struct kb_ipcq_recv_op op;
    bool held;   /* its last receive has not been waited for */
    bool longer; /* the receive was started again for a longer message */
};

/* A receive running beside its kernel: a process (recv_proc) fills buf. */
struct future {
    const char *tag; /* &future_tag */
    struct kctx *ctx;
    struct sim_event *done_ev;
    struct recv_proc *rec; /* its process, until it is waited for */
    const char *dir; /* one of its context's dirs */
    int dir_ix;      /* its index in the IPCQ (kb_ipcq_dir) */
    uint32_t n;
    enum kb_dtype dt;
    void *buf;
    size_t buf_cap; /* buf's size, for the pool */
    /* the bytes by page reference instead, when the IPCQ takes snapshots
     * (use_snap; buf stays NULL): the rx slots' pages (decision 0056) */
    struct kb_mem_snap snap;
    bool use_snap;
    int64_t got;
    struct kb_ipcq_meta meta;
    bool done, waited;
    int anchor; /* its luaL_ref in the future table while anchored; 0: none */
    struct future *prev, *next; /* tl.sendrecv's: its context's free or busy list */
};

/* ---- helpers --------------------------------------------------------- */

/* The dtype named at i; st (may be NULL) finds the state's own names by
 * address. */
static enum kb_dtype checkdtype_st(lua_State *L, const struct tl_state *st, int i)
{
    int d = dtype_by_address(st, lua_tostring(L, i));
    if (d >= 0)
        return (enum kb_dtype)d;
    enum kb_dtype dt;
    const char *name = luaL_checkstring(L, i);
    if (kb_dtype_parse(name, &dt) != 0)
        luaL_argerror(L, i, lua_pushfstring(L, "unknown dtype '%s' (f16, bf16, f32)", name));
    return dt;
}

static enum kb_dtype checkdtype(lua_State *L, int i)
{
    return checkdtype_st(L, fn_state(L), i);
}

static enum kb_mem_kind checkkind(lua_State *L, int i)
{
    static const char *const names[] = {"tcm", "sram", "hbm", NULL};
    int k = kind_by_address(fn_state(L), lua_tostring(L, i));
    return kind_kinds[k >= 0 ? k : luaL_checkoption(L, i, NULL, names)];
}

static uint32_t checkcount(lua_State *L, int i)
{
    int whole;
    lua_Integer n = lua_tointegerx(L, i, &whole); /* (the usual case, in one call) */
    if (!whole)
        n = luaL_checkinteger(L, i); /* the error */
    luaL_argcheck(L, n > 0 && n <= INT32_MAX, i, "element count must be from 1 to 2147483647");
    return (uint32_t)n;
}

static struct kb_pe *checkpe(lua_State *L, struct kb_system *sys, int i)
{
    lua_Integer r = luaL_checkinteger(L, i);
    struct kb_system_counts c;
    kb_system_get_counts(sys, &c);
    if (r < 0 || r >= c.pes)
        luaL_argerror(L, i, lua_pushfstring(L, "no PE of rank %I (ranks 0..%d)", r, c.pes - 1));
    struct kb_pe *pe = kb_system_pe_units(sys, (int)r);
    if (!pe)
        luaL_error(L, "PE %d: %s", (int)r, kb_system_errmsg(sys));
    return pe;
}

/* The PE of the optional rank at i (the last argument; default rank 0), for
 * the closed-form queries (gemm_time, math_time, copy_time) */
static struct kb_pe *optrank_pe(lua_State *L, struct kb_system *sys, int i)
{
    lua_settop(L, i);
    if (lua_isnil(L, i)) {
        lua_pushinteger(L, 0);
        lua_replace(L, i);
    }
    return checkpe(L, sys, i);
}

/* The memory of `kind` at a PE, or an error naming both. */
static struct kb_mem *pe_mem(lua_State *L, struct kb_pe *pe, enum kb_mem_kind kind, int *node)
{
    struct kb_mem *m = kb_pe_mem(pe, kind, node);
    if (!m)
        luaL_error(L, "PE '%s' has no %s", pe->name, kb_mem_kind_name(kind));
    return m;
}

/* The optional memory kind at i: default HBM, or TCM where there is none. */
static enum kb_mem_kind optkind(lua_State *L, int i, struct kb_pe *pe)
{
    if (!lua_isnoneornil(L, i))
        return checkkind(L, i);
    return pe->hbm ? KB_MEM_HBM : KB_MEM_TCM;
}

/* Host access (no simulated time) to a PE's memory: the system at sysidx,
 * the rank at rankidx, the kind at kindidx (default HBM, or TCM where there
 * is none). It makes none of the PE's units: those fix the IPCQ settings,
 * which init_process_group may still choose. */
struct kb_mem *lkb_check_pe_mem(lua_State *L, int sysidx, int rankidx, int kindidx)
{
    struct kb_system *sys = lkb_checksystem(L, sysidx);
    lua_Integer r = luaL_checkinteger(L, rankidx);
    struct kb_system_counts c;
    kb_system_get_counts(sys, &c);
    if (r < 0 || r >= c.pes)
        luaL_argerror(L, rankidx,
                      lua_pushfstring(L, "no PE of rank %I (ranks 0..%d)", r, c.pes - 1));
    struct kb_pe *pe = kb_system_pe(sys, (int)r);
    return pe_mem(L, pe, optkind(L, kindidx, pe), NULL);
}

/* ---- scratch --------------------------------------------------------- */

static void push_weak_table(lua_State *L, const void *key)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "k"); /* a finished thread takes its buffers along */
        lua_setfield(L, -2, "__mode");
        lua_setmetatable(L, -2);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, key);
    }
}

static void scratch_release(struct scratch *sc, struct buf_pool *bp)
{
    for (int i = 0; i < SCRATCH_SLOTS; i++) {
        pool_give(bp, sc->p[i], sc->cap[i]);
        sc->p[i] = NULL;
        sc->cap[i] = 0;
        kb_mem_snap_clear(&sc->snap[i]); /* (its piece array kept) */
    }
}

static int scratch_gc(lua_State *L)
{
    struct scratch *sc = luaL_checkudata(L, 1, KB_SCRATCH);
    scratch_release(sc, NULL);
    for (int i = 0; i < SCRATCH_SLOTS; i++)
        kb_mem_snap_free(&sc->snap[i]);
    return 0;
}

/* The running thread's scratch, made on first use. */
static struct scratch *scratch_of(lua_State *L)
{
    /* the running thread process keeps its scratch's address (the weak
     * table keeps the scratch while the thread lives) */
    void **slots = lkb_tl_slots(L);
    struct scratch *sc = slots ? slots[SLOT_SCRATCH] : NULL;
    if (!sc) {
        push_weak_table(L, &scratch_table_key);
        lua_pushthread(L);
        lua_rawget(L, -2);
        sc = lua_touserdata(L, -1);
        if (!sc) {
            lua_pop(L, 1);
            sc = lua_newuserdatauv(L, sizeof *sc, 0);
            memset(sc, 0, sizeof *sc);
            luaL_setmetatable(L, KB_SCRATCH);
            lua_pushthread(L);
            lua_pushvalue(L, -2);
            lua_rawset(L, -4);
        }
        lua_pop(L, 2);
        if (slots)
            slots[SLOT_SCRATCH] = sc;
    }
    return sc;
}

/* Slot `slot` of the running thread's scratch, at least `bytes` long; its
 * contents are not kept when it grows. */
static void *scratch(lua_State *L, int slot, size_t bytes)
{
    struct scratch *sc = scratch_of(L);
    if (bytes > sc->cap[slot] || !sc->p[slot]) {
        struct buf_pool *bp = sc->bp ? sc->bp : (sc->bp = fn_pool(L));
        size_t cap = bytes > 2 * sc->cap[slot] ? bytes : 2 * sc->cap[slot];
        pool_give(bp, sc->p[slot], sc->cap[slot]);
        sc->p[slot] = NULL;
        sc->cap[slot] = 0;
        size_t got;
        void *p = pool_take(bp, bytes ? bytes : 1, &got);
        if (p) {
            sc->p[slot] = p;
            sc->cap[slot] = got;
        } else {
            if (!(sc->p[slot] = malloc(cap ? cap : 1)))
                luaL_error(L, "out of memory");
            sc->cap[slot] = cap ? cap : 1;
        }
    }
    return sc->p[slot];
}

/* Snapshot slot `slot` of the running thread's scratch, empty; it lets
 * go of its pages when the call is over (scratch_drop) or the thread goes. */
static struct kb_mem_snap *scratch_snap(lua_State *L, int slot)
{
    struct kb_mem_snap *sn = &scratch_of(L)->snap[slot];
    kb_mem_snap_clear(sn);
    return sn;
}

/* The running thread's call is over (or its kernel work): its buffers go
 * now rather than when the collector finds the thread. */
static void scratch_drop(lua_State *L)
{
    void **slots = lkb_tl_slots(L);
    if (slots) { /* a thread process records its scratch when it makes it */
        struct scratch *sc = slots[SLOT_SCRATCH];
        if (sc)
            scratch_release(sc, sc->bp ? sc->bp : fn_pool(L));
        return;
    }
    push_weak_table(L, &scratch_table_key);
    lua_pushthread(L);
    lua_rawget(L, -2);
    struct scratch *sc = lua_touserdata(L, -1);
    if (sc)
        scratch_release(sc, fn_pool(L));
    lua_pop(L, 2);
}

/* ---- host side: no simulated time ------------------------------------ */

/* alloc(sys, rank, kind, bytes) -> address */
static int l_alloc(lua_State *L)
{
    checkkind(L, 3);
    struct kb_mem *m = lkb_check_pe_mem(L, 1, 2, 3);
    lua_Integer bytes = luaL_checkinteger(L, 4);
    luaL_argcheck(L, bytes > 0, 4, "byte count must be positive");
    uint64_t addr;
    if (kb_mem_alloc(m, (uint64_t)bytes, HANDLE_ALIGN, &addr) != 0)
        return luaL_error(L, "%s", kb_mem_errmsg(m));
    lua_pushinteger(L, (lua_Integer)addr);
    return 1;
}

/* host_write(sys, rank, addr, dtype, values [, kind]) */
static int l_host_write(lua_State *L)
{
    struct kb_mem *m = lkb_check_pe_mem(L, 1, 2, 6);
    lua_Integer addr = luaL_checkinteger(L, 3);
    enum kb_dtype dt = checkdtype(L, 4);
    luaL_checktype(L, 5, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 5); /* a __len may say anything */
    luaL_argcheck(L, n >= 0 && n <= INT32_MAX, 5, "too many values");
    size_t es = kb_dtype_size(dt);
    unsigned char *buf = scratch(L, 0, (size_t)(n > 0 ? n : 1) * es);
    for (lua_Integer j = 0; j < n; j++) {
        lua_geti(L, 5, j + 1);
        int ok;
        lua_Number v = lua_tonumberx(L, -1, &ok);
        if (!ok)
            return luaL_error(L, "host_write: value %I is not a number", j + 1);
        kb_dtype_store(buf, (size_t)j, dt, v);
        lua_pop(L, 1);
    }
    if (n > 0 && kb_mem_write(m, (uint64_t)addr, buf, (uint64_t)n * es) != 0)
        return luaL_error(L, "%s", kb_mem_errmsg(m));
    scratch_drop(L);
    return 0;
}

/* host_read(sys, rank, addr, dtype, n [, kind]) -> values */
static int l_host_read(lua_State *L)
{
    struct kb_mem *m = lkb_check_pe_mem(L, 1, 2, 6);
    lua_Integer addr = luaL_checkinteger(L, 3);
    enum kb_dtype dt = checkdtype(L, 4);
    uint32_t n = checkcount(L, 5);
    size_t es = kb_dtype_size(dt);
    unsigned char *buf = scratch(L, 0, (size_t)n * es);
    if (kb_mem_read(m, (uint64_t)addr, buf, (uint64_t)n * es) != 0)
        return luaL_error(L, "%s", kb_mem_errmsg(m));
    lua_createtable(L, (int)n, 0);
    for (uint32_t j = 0; j < n; j++) {
        lua_pushnumber(L, kb_dtype_load(buf, j, dt));
        lua_rawseti(L, -2, (lua_Integer)j + 1);
    }
    scratch_drop(L);
    return 1;
}

/* wire(sys, a, dir_a, b, dir_b): a's tx dir_a into b's rx dir_b. Host
 * side, as the system is built: the PE's own IPCQs, not through a port
 * (wiring is not an op a kernel issues; nor is l_wired's query). */
static int l_wire(lua_State *L)
{
    struct kb_system *sys = lkb_checksystem(L, 1);
    struct kb_pe *a = checkpe(L, sys, 2);
    const char *da = luaL_checkstring(L, 3);
    struct kb_pe *b = checkpe(L, sys, 4);
    const char *db = luaL_checkstring(L, 5);
    if (kb_ipcq_wire(a->ipcq, da, b->ipcq, db) != 0)
        return luaL_error(L, "%s", kb_ipcq_errmsg(a->ipcq));
    return 0;
}

/* bind_port(sys, rank, port, target): before PE rank's units are made (its
 * first kernel, sys:dma, ...), binds its CPU's OUT port `port` ("dma",
 * "math", "gemm" or "ipcq") to the C export named target (a kb.unit's
 * "x.math.in", another PE's "b.dma.in", ...), or with target false leaves
 * it unbound; the PE's own unit is then made but not bound there, and the
 * PE's kernels issue that port's ops to the target (decision 0045). A Lua
 * module's export is refused: the kernel calls a C interface struct. */
static int l_bind_port(lua_State *L)
{
    static const char *const names[] = {"dma", "math", "gemm", "ipcq", NULL};
    static const enum kb_cpu_out outs[] = {KB_CPU_DMA, KB_CPU_MATH, KB_CPU_GEMM, KB_CPU_IPCQ};
    struct kb_system *sys = lkb_checksystem(L, 1);
    lua_Integer r = luaL_checkinteger(L, 2);
    enum kb_cpu_out which = outs[luaL_checkoption(L, 3, NULL, names)];
    bool unbound = lua_type(L, 4) == LUA_TBOOLEAN && !lua_toboolean(L, 4);
    const char *target = unbound ? NULL : luaL_checkstring(L, 4);
    struct kb_pe *pe = kb_system_pe(sys, (int)r);
    if (!pe) {
        struct kb_system_counts n;
        kb_system_get_counts(sys, &n);
        return luaL_argerror(L, 2, lua_pushfstring(L, "no PE of rank %I (ranks 0..%d)", r,
                                                   n.pes - 1));
    }
    if (pe->bound)
        return luaL_error(L, "tl.bind_port: PE '%s' has its units bound already (bind its CPU's "
                             "ports before its first kernel or transfer)", pe->name);
    struct sim *s = kb_system_sim(sys);
    char err[320];
    if (!pe->cpu) {
        struct kb_pe_params p;
        kb_pe_params_from_cfg(&p, kb_system_config(sys));
        if (!(pe->cpu = kb_cpu_new(s, pe->name, &p.cpu, err, sizeof err)))
            return luaL_error(L, "tl.bind_port: %s", err);
    }
    struct sim_port *from = kb_cpu_out_port(pe->cpu, which);
    if (sim_port_bound_count(from) > 0)
        return luaL_error(L, "tl.bind_port: '%s' is bound already", sim_port_name(from));
    if (unbound) {
        pe->cpu_unbound |= 1u << which;
        return 0;
    }
    if (lkb_is_module_port(L, 1, target))
        return luaL_error(L, "tl.bind_port: '%s' is a Lua module's export; a kernel's CPU "
                             "calls C interfaces only (bind '%s' to a C unit: kb.unit)",
                          target, sim_port_name(from));
    struct sim_port *to = lkb_find_port(s, target);
    if (!to) {
        lkb_make_ports_for(L, sys, target);
        to = lkb_find_port(s, target);
    }
    if (!to)
        return luaL_error(L, "tl.bind_port: the system has no port '%s'", target);
    if (kb_port_bind(s, from, to, err, sizeof err) < 0)
        return luaL_error(L, "tl.bind_port: %s", err);
    pe->cpu_unbound &= ~(1u << which);
    return 0;
}

/* wired(sys, rank, dir, tx) -> boolean */
static int l_wired(lua_State *L)
{
    struct kb_system *sys = lkb_checksystem(L, 1);
    struct kb_pe *pe = checkpe(L, sys, 2);
    lua_pushboolean(L, kb_ipcq_wired(pe->ipcq, luaL_checkstring(L, 3), lua_toboolean(L, 4)));
    return 1;
}

/* sim_of(sys) -> the kbsim.sim the system belongs to */
static int l_sim_of(lua_State *L)
{
    lkb_checksystem(L, 1);
    lua_getiuservalue(L, 1, 1);
    return 1;
}

/* ---- contexts -------------------------------------------------------- */

/* Pushes the registry table at `key`, made on first use. */
static void push_registry_table(lua_State *L, const void *key)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, key);
    }
}

static void push_ctx_table(lua_State *L) { push_registry_table(L, &ctx_table_key); }

/* Pushes the context userdata of the running Lua thread, or nil. */
static void push_current_ctx(lua_State *L)
{
    push_ctx_table(L);
    lua_pushthread(L);
    lua_rawget(L, -2);
    lua_remove(L, -2);
}

/* The system of the context at index i must still be open: the context's
 * PE lives in it, and a script can close a system (sys:close) whose
 * kernels never ended. */
static void check_ctx_system(lua_State *L, int i)
{
    lua_getiuservalue(L, i, 1); /* l_bind stored a kbsim.system there */
    lkb_checksystem_known(L, -1);
    lua_pop(L, 1);
}

/* Pushes context c of the running Lua thread: from the array of bound
 * contexts while c is bound, else as push_current_ctx does. */
static void push_ctx(lua_State *L, const struct kctx *c)
{
    if (c->anchor) {
        lua_rawgeti(L, lua_upvalueindex(UV_CTXS), c->anchor);
        if (ctx_in(lua_touserdata(L, -1)) == c)
            return;
        lua_pop(L, 1);
    }
    push_current_ctx(L);
}

/* The context the running thread process recorded at bind (lkb_tl_slots),
 * if its kernel runs and its system is open: what current() would
 * return without an error; else NULL. */
static struct kctx *fast_ctx(lua_State *L)
{
    void **slots = lkb_tl_slots(L);
    struct kctx *c = slots ? slots[SLOT_CTX] : NULL;
    return c && !c->ended && *c->sys_open ? c : NULL;
}

/* The context of the running Lua thread, or an error naming `what`. A
 * thread process finds it in its slot (its simulation runs, so only the
 * system can have been closed); anything else looks it up by thread. */
static struct kctx *current(lua_State *L, const char *what)
{
    void **slots = lkb_tl_slots(L);
    struct kctx *fc = slots ? slots[SLOT_CTX] : NULL;
    if (fc) {
        if (!*fc->sys_open)
            luaL_error(L, "attempt to use a closed system");
        if (fc->ended)
            luaL_error(L, "%s on PE '%s': the kernel this process helps has ended", what,
                       fc->pe->name);
        return fc;
    }
    push_current_ctx(L);
    struct kctx *c = ctx_in(lua_touserdata(L, -1));
    if (!c)
        luaL_error(L, "%s called outside a kernel (start kernels with tl.launch)", what);
    check_ctx_system(L, -1); /* before c->pe is read */
    if (c->ended) /* only a tl.spawn helper can outlive its kernel */
        luaL_error(L, "%s on PE '%s': the kernel this process helps has ended", what,
                   c->pe->name);
    lua_pop(L, 1);
    return c;
}

/* The order does not matter: the TCM joins free neighbours, so what is
 * free afterwards is the same whatever the order. */
static void release_allocs(struct kctx *c)
{
    for (size_t i = 0; i < c->n_allocs; i++)
        if (!(c->allocs[i].addr & SLOT_FREE))
            kb_mem_dealloc_owned(c->tcm, c->allocs[i].addr, c->allocs[i].bytes);
    free(c->allocs);
    c->allocs = NULL;
    c->n_allocs = c->cap_allocs = c->n_free = 0;
}

static int ctx_gc(lua_State *L)
{
    struct kctx *c = ctx_in(luaL_checkudata(L, 1, KB_CTX));
    if (c->ref) { /* its handles see a newer generation: ended */
        c->ref->c = NULL;
        if (++c->ref->gen != UINT32_MAX) { /* (else retired: the count would wrap) */
            c->ref->next_free = c->st->free_refs;
            c->st->free_refs = c->ref;
        }
        c->ref = NULL;
    }
    free(c->allocs);
    c->allocs = NULL;
    free(c->dir_ix);
    c->dir_ix = NULL;
    c->n_dir_ix = 0;
    /* (the processes and events are the sim's) */
    for (struct recv_proc *r = c->recvs, *nx; r; r = nx) {
        nx = r->next;
        free(r);
    }
    c->recvs = NULL;
    for (struct future *f = c->free_futs, *nx; f; f = nx) {
        nx = f->next;
        kb_mem_snap_free(&f->snap);
        free(f);
    }
    c->free_futs = NULL;
    /* receives a failed tl.sendrecv left: it anchored the context for
     * good (fail_busy), so this runs only as the state closes */
    for (struct future *f = c->busy_futs, *nx; f; f = nx) {
        nx = f->next;
        free(f->buf);
        kb_mem_snap_free(&f->snap);
        free(f);
    }
    c->busy_futs = NULL;
    return 0;
}

/* A context record for a new context, from the state's spare ones or a
 * new block of them (a userdata the state's user value anchors). */
static struct ctx_ref *ref_take(lua_State *L, struct tl_state *st)
{
    if (!st->free_refs) {
        struct ctx_ref *b = lua_newuserdatauv(L, REF_BLOCK * sizeof *b, 0);
        memset(b, 0, REF_BLOCK * sizeof *b);
        lua_getiuservalue(L, lua_upvalueindex(UV_STATE), 1);
        lua_pushvalue(L, -2);
        lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
        lua_pop(L, 2);
        for (int i = REF_BLOCK; i-- > 0;) {
            b[i].next_free = st->free_refs;
            st->free_refs = &b[i];
        }
    }
    struct ctx_ref *r = st->free_refs;
    st->free_refs = r->next_free;
    r->next_free = NULL;
    return r;
}

/* bind(sys, program_id, rank, world): binds the running thread to a PE */
static int l_bind(lua_State *L)
{
    struct kb_system *sys = lkb_checksystem(L, 1);
    struct kb_pe *pe = checkpe(L, sys, 2);
    lua_getiuservalue(L, 1, 1);
    struct sim *s = lkb_checksim(L, -1);
    lua_pop(L, 1);
    lkb_block_end(lkb_block_begin(L, s, "tl.launch")); /* must be a thread process */
    if (!pe->tcm)
        return luaL_error(L, "PE '%s' has no TCM for kernel handles", pe->name);
    struct tl_state *st = fn_state(L);
    struct ctx_ref *ref = ref_take(L, st);
    struct kctx *c = ctx_in(lua_newuserdatauv(L, CTX_UD_BYTES, 1));
    memset(c, 0, sizeof *c);
    c->st = st;
    c->ref = ref; /* (before its finalizer can run: it gives the record back) */
    c->gen = ref->gen;
    ref->c = c;
    luaL_setmetatable(L, KB_CTX);
    c->sys = sys;
    c->s = s;
    c->pe = pe;
    c->cpu = pe->cpu;
    c->tcm = pe->tcm;
    c->dma = kb_cpu_dma(pe->cpu);
    c->math = kb_cpu_math(pe->cpu);
    c->gemm = kb_cpu_gemm(pe->cpu);
    c->ipcq = kb_cpu_ipcq(pe->cpu);
    c->program_id = pe->rank;
    c->no_data = kb_system_timing_only(sys);
    c->rank = (int)luaL_checkinteger(L, 3);
    c->world = (int)luaL_checkinteger(L, 4);
    c->sys_open = lkb_system_open_slot(L, 1);
    lua_pushvalue(L, 1); /* the system outlives its kernels */
    lua_setiuservalue(L, -2, 1);
    push_ctx_table(L);
    lua_pushthread(L);
    lua_pushvalue(L, -3);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    c->anchor = luaL_ref(L, lua_upvalueindex(UV_CTXS));
    void **slots = lkb_tl_slots(L);
    if (slots)
        slots[SLOT_CTX] = c;
    return 1;
}

/* unbind(): the kernel of the running thread has ended */
static int l_unbind(lua_State *L)
{
    struct kctx *c = current(L, "tl.unbind");
    c->ended = true;
    release_allocs(c);
    scratch_drop(L);
    if (c->anchor > 0)
        luaL_unref(L, lua_upvalueindex(UV_CTXS), c->anchor);
    c->anchor = 0;
    void **slots = lkb_tl_slots(L);
    if (slots && slots[SLOT_CTX] == c)
        slots[SLOT_CTX] = NULL;
    push_ctx_table(L);
    lua_pushthread(L);
    lua_pushnil(L);
    lua_rawset(L, -3);
    return 0;
}

/* context() -> ctx, sim: the running kernel's context and simulation, for
 * tl.spawn (helper processes of a kernel act for its PE and share its
 * handles, as the stages of a tile pipeline do) */
static int l_context(lua_State *L)
{
    current(L, "tl.spawn");
    push_ctx_table(L);
    lua_pushthread(L);
    lua_rawget(L, -2);           /* the context */
    lua_getiuservalue(L, -1, 1); /* its system */
    lua_getiuservalue(L, -1, 1); /* the system's simulation */
    lua_remove(L, -2);
    return 2;
}

/* adopt(ctx, where) -> bound: binds the running thread process to ctx's
 * PE and handles and returns true; returns false, binding nothing, when
 * ctx's kernel has ended (a helper that starts too late: tl.spawn says so,
 * the flag needing no error to be caught and read). `where` ("file:line: "
 * of the tl.spawn call) begins the message of a closed system, which the
 * helper's own stack could not place. */
static int l_adopt(lua_State *L)
{
    struct kctx *c = ctx_in(luaL_checkudata(L, 1, KB_CTX));
    if (!*c->sys_open) {
        lua_pushfstring(L, "%sattempt to use a closed system", luaL_optstring(L, 2, ""));
        return lua_error(L);
    }
    check_ctx_system(L, 1);
    if (c->ended) {
        lua_pushboolean(L, 0);
        return 1;
    }
    lkb_block_end(lkb_block_begin(L, c->s, "tl.spawn")); /* must be a thread process */
    push_ctx_table(L);
    lua_pushthread(L);
    lua_pushvalue(L, 1);
    lua_rawset(L, -3);
    void **slots = lkb_tl_slots(L);
    if (slots)
        slots[SLOT_CTX] = c;
    lua_pushboolean(L, 1);
    return 1;
}

/* unadopt(): the running helper is done; its kernel's handles stay */
static int l_unadopt(lua_State *L)
{
    scratch_drop(L);
    void **slots = lkb_tl_slots(L);
    if (slots)
        slots[SLOT_CTX] = NULL;
    push_ctx_table(L);
    lua_pushthread(L);
    lua_pushnil(L);
    lua_rawset(L, -3);
    return 0;
}

/* The interface bound to the CPU's OUT port `which`, or an error naming
 * the op, the PE and the port. */
static const void *need_port(lua_State *L, const struct kctx *c, const void *iface,
                             enum kb_cpu_out which, const char *what)
{
    if (!iface)
        luaL_error(L, "%s on PE '%s': port '%s' is unbound (the CPU issues this op through it)",
                   what, c->pe->name, sim_port_name(kb_cpu_out_port(c->pe->cpu, which)));
    return iface;
}
static const struct kb_dma_if *need_dma(lua_State *L, const struct kctx *c, const char *what)
{
    return c->dma ? c->dma : need_port(L, c, c->dma, KB_CPU_DMA, what);
}
static const struct kb_math_if *need_math(lua_State *L, const struct kctx *c, const char *what)
{
    return c->math ? c->math : need_port(L, c, c->math, KB_CPU_MATH, what);
}
static const struct kb_gemm_if *need_gemm(lua_State *L, const struct kctx *c, const char *what)
{
    return c->gemm ? c->gemm : need_port(L, c, c->gemm, KB_CPU_GEMM, what);
}
static const struct kb_ipcq_if *need_ipcq(lua_State *L, const struct kctx *c, const char *what)
{
    return c->ipcq ? c->ipcq : need_port(L, c, c->ipcq, KB_CPU_IPCQ, what);
}

/* Runs the PE_CPU dispatch of one kernel op. The kernel runs on this CPU:
 * its dispatch is the CPU's own, a direct call, not through a port (its
 * export kb_cpu_if is for other modules; decision 0045). */
static void dispatch(lua_State *L, struct kctx *c, const char *what)
{
    void *bp = lkb_block_begin(L, c->s, what);
    int rc = kb_cpu_dispatch(c->cpu);
    lkb_block_end(bp);
    if (rc < 0)
        luaL_error(L, "%s on PE '%s': dispatch failed (%d)", what, c->pe->name, rc);
}

static int l_rank(lua_State *L)
{
    lua_pushinteger(L, current(L, "tl.rank")->rank);
    return 1;
}

static int l_world_size(lua_State *L)
{
    lua_pushinteger(L, current(L, "tl.world_size")->world);
    return 1;
}

static int l_program_id(lua_State *L)
{
    lua_pushinteger(L, current(L, "tl.program_id")->program_id);
    return 1;
}

static int l_pe(lua_State *L)
{
    struct kctx *c = current(L, "tl.pe");
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, c->pe->rank);
    lua_setfield(L, -2, "rank");
    lua_pushinteger(L, c->pe->sip);
    lua_setfield(L, -2, "sip");
    lua_pushinteger(L, c->pe->cube);
    lua_setfield(L, -2, "cube");
    lua_pushinteger(L, c->pe->local_pe);
    lua_setfield(L, -2, "local_pe");
    lua_pushstring(L, c->pe->name);
    lua_setfield(L, -2, "name");
    return 1;
}

/* ---- handles --------------------------------------------------------- */

/* A new handle of n elements in the context's TCM, left on the stack. */
static struct handle *newhandle(lua_State *L, struct kctx *c, uint32_t n, enum kb_dtype dt)
{
    uint64_t bytes = (uint64_t)n * kb_dtype_size(dt), addr;
    if (kb_mem_alloc_owned(c->tcm, bytes, HANDLE_ALIGN, &addr) != 0)
        luaL_error(L, "PE '%s': TCM scratch is full (%s); free handles with tl.free or "
                      "use smaller tiles", c->pe->name, kb_mem_errmsg(c->tcm));
    uint32_t slot;
    if (c->n_free) {
        slot = free_slots(c)[--c->n_free];
    } else {
        if (c->n_allocs == c->cap_allocs) {
            /* (no slot is free: the stack moves with nothing on it) */
            size_t cap = c->cap_allocs ? 2 * (size_t)c->cap_allocs : 16;
            struct alloc *a = cap < SLOT_NONE ? realloc(c->allocs, cap * (sizeof *a +
                                                                    sizeof(uint32_t)))
                                              : NULL;
            if (!a) {
                kb_mem_dealloc_owned(c->tcm, addr, bytes);
                luaL_error(L, "out of memory");
            }
            c->allocs = a;
            c->cap_allocs = (uint32_t)cap;
        }
        if (c->n_allocs == HANDLE_SLOTS_MAX) {
            kb_mem_dealloc_owned(c->tcm, addr, bytes);
            luaL_error(L, "PE '%s': more than %u handles live at once; free handles with "
                          "tl.free", c->pe->name, HANDLE_SLOTS_MAX);
        }
        slot = c->n_allocs++;
    }
    c->allocs[slot] = (struct alloc){addr, bytes};
    /* no user value: the handle knows its context by record (ctx_ref) */
    struct handle *h = lua_newuserdatauv(L, sizeof *h, 0);
    *h = (struct handle){HANDLE_TAG, n, c->ref, addr, c->gen, slot, false, (uint32_t)dt};
    lua_pushvalue(L, lua_upvalueindex(UV_HANDLE_MT));
    lua_setmetatable(L, -2);
    return h;
}

/* The handle at i, or NULL: every handle carries HANDLE_TAG first (a
 * check cheaper than luaL_checkudata's metatable look-up by name). */
static struct handle *tohandle(lua_State *L, int i)
{
    struct handle *h = lua_touserdata(L, i);
    return h && lua_rawlen(L, i) == sizeof *h && h->tag == HANDLE_TAG ? h : NULL;
}

/* Handle i, of a kernel still running (its TCM allocation stands and its
 * PE's system is open), freed or not: what a handle's n, dtype and name
 * need. A context that is collected has ended first, so a handle whose
 * record moved on (hctx NULL) is one of an ended kernel too. A metamethod
 * (`meta` names it) has no argument to blame. */
static struct handle *checklive(lua_State *L, int i, const char *meta)
{
    struct handle *h = tohandle(L, i);
    if (!h)
        h = luaL_checkudata(L, i, KB_HANDLE); /* the usual error */
    const struct kctx *fc = fast_ctx(L);
    if (fc && handle_of(h, fc)) /* the running kernel's */
        return h;
    const struct kctx *c = hctx(h);
    if ((!c || c->ended) && meta)
        luaL_error(L, "%s: handle of a kernel that has ended (a handle lives until its "
                      "kernel returns)", meta);
    if (!c || c->ended)
        luaL_argerror(L, i, "handle of a kernel that has ended");
    /* a kernel that has not ended is bound: its context is in the array
     * of bound contexts (from the registry: a handle's to_table has no
     * upvalues) */
    push_registry_table(L, &ctx_anchor_key);
    lua_rawgeti(L, -1, c->anchor);
    if (ctx_in(lua_touserdata(L, -1)) == c)
        check_ctx_system(L, -1);
    else if (!*c->sys_open)
        luaL_error(L, "attempt to use a closed system");
    lua_pop(L, 2);
    return h;
}

/* Handle i, live and not freed: what an op on its values needs. */
static struct handle *checkhandle(lua_State *L, int i)
{
    struct handle *h = checklive(L, i, NULL);
    if (h->freed)
        luaL_argerror(L, i, "handle was freed");
    return h;
}

/* checkhandle, where c is a context current() or fast_ctx() gave (its
 * kernel runs, its system is open): a handle of c passes at once. */
static struct handle *checkhandle_in(lua_State *L, int i, const struct kctx *c)
{
    struct handle *h = tohandle(L, i);
    if (h && c && handle_of(h, c) && !h->freed)
        return h;
    return checkhandle(L, i);
}

static size_t hbytes(const struct handle *h)
{
    return (size_t)h->n * kb_dtype_size(h->dt);
}

/* A snapshot of the handle's bytes in scratch slot `slot`. */
static void *hread(lua_State *L, const struct handle *h, int slot)
{
    void *buf = scratch(L, slot, hbytes(h));
    struct kb_mem *tcm = hctx(h)->tcm; /* (h was checked: its context lives) */
    if (kb_mem_read(tcm, h->addr, buf, hbytes(h)) != 0)
        luaL_error(L, "%s", kb_mem_errmsg(tcm));
    return buf;
}

/* The IPCQ export takes snapshots (kb_ipcq_if's optional snapshot calls). */
static bool ipcq_snaps(const struct kb_ipcq_if *q) { return q && q->send_snap; }

/* The handle's bytes as they are now, by page reference, in snapshot
 * slot `slot` (what hread copies). */
static struct kb_mem_snap *hsnap(lua_State *L, const struct handle *h, int slot)
{
    struct kb_mem_snap *sn = scratch_snap(L, slot);
    struct kb_mem *tcm = hctx(h)->tcm; /* (h was checked: its context lives) */
    if (kb_mem_snap_take(tcm, h->addr, hbytes(h), sn) != 0)
        luaL_error(L, "%s", kb_mem_errmsg(tcm));
    return sn;
}

/* hwrite from a snapshot: the handle's tile written from it, pages shared
 * where the tile is page-aligned. */
static void hwrite_snap(lua_State *L, const struct handle *h, const struct kb_mem_snap *sn)
{
    const struct kctx *c = hctx(h); /* (h was checked or just made) */
    if (c->no_data)
        return;
    if (kb_mem_snap_write(c->tcm, h->addr, sn, 0, hbytes(h)) != 0)
        luaL_error(L, "%s", kb_mem_errmsg(c->tcm));
}

static void hwrite(lua_State *L, const struct handle *h, const void *buf)
{
    const struct kctx *c = hctx(h); /* (h was checked or just made) */
    if (c->no_data)
        return; /* a timing-only run: no values, no memory touched */
    if (kb_mem_write(c->tcm, h->addr, buf, hbytes(h)) != 0)
        luaL_error(L, "%s", kb_mem_errmsg(c->tcm));
}

static int h_len(lua_State *L)
{
    lua_pushinteger(L, checklive(L, 1, "#handle")->n);
    return 1;
}

static int h_to_table(lua_State *L)
{
    struct handle *h = checkhandle(L, 1);
    unsigned char *buf = hread(L, h, 0);
    lua_createtable(L, (int)h->n, 0);
    for (uint32_t j = 0; j < h->n; j++) {
        lua_pushnumber(L, kb_dtype_load(buf, j, h->dt));
        lua_rawseti(L, -2, (lua_Integer)j + 1);
    }
    scratch_drop(L);
    return 1;
}

static int h_tostring(lua_State *L)
{
    struct handle *h = checklive(L, 1, "tostring");
    char addr[24]; /* the TCM address in hex; %p would print 0 as "(nil)" */
    snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)h->addr);
    lua_pushfstring(L, "handle(%d %s at tcm %s of '%s')", (int)h->n, kb_dtype_name(h->dt), addr,
                    hctx(h)->pe->name);
    return 1;
}

static int h_index(lua_State *L)
{
    struct handle *h = checklive(L, 1, "handle field");
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "dtype") == 0)
        lua_pushstring(L, kb_dtype_name(h->dt));
    else if (strcmp(k, "n") == 0)
        lua_pushinteger(L, h->n);
    else if (strcmp(k, "to_table") == 0)
        lua_pushcfunction(L, h_to_table);
    else
        lua_pushnil(L);
    return 1;
}

/* Returns h's TCM (h is c's, live): 0, or what kb_mem_dealloc_owned gave (the
 * block is freed all the same; kb_mem_errmsg says what failed). */
static int handle_release(struct kctx *c, struct handle *h)
{
    int rc = kb_mem_dealloc_owned(c->tcm, h->addr, hbytes(h));
    c->allocs[h->slot].addr = SLOT_FREE;
    free_slots(c)[c->n_free++] = h->slot;
    h->freed = true;
    return rc;
}

/* free(h, ...): returns each handle's TCM early */
static int l_free(lua_State *L)
{
    int n = lua_gettop(L);
    if (n == 0)
        checkhandle(L, 1); /* the usual "handle expected" error */
    struct kctx *fc = fast_ctx(L);
    for (int a = 1; a <= n; a++) {
        struct handle *h = checkhandle_in(L, a, fc);
        struct kctx *c = fc && handle_of(h, fc) ? fc : hctx(h); /* (no record read) */
        if (handle_release(c, h) < 0)
            return luaL_error(L, "tl.free on PE '%s': %s", c->pe->name,
                              kb_mem_errmsg(c->tcm));
    }
    return 0;
}

/* ---- data movement: PE_DMA ------------------------------------------- */

/* n elements at addr of this PE's memory `kind` into a new TCM handle
 * (pushed) */
static int load_at(lua_State *L, struct kctx *c, enum kb_mem_kind kind, lua_Integer addr,
                   uint32_t n, enum kb_dtype dt)
{
    int node;
    struct kb_mem *m = pe_mem(L, c->pe, kind, &node);
    const struct kb_dma_if *d = need_dma(L, c, "tl.load");
    dispatch(L, c, "tl.load");
    struct handle *h = newhandle(L, c, n, dt);
    struct kb_dma_end src = {m, (uint64_t)addr, node}, dst = {c->tcm, h->addr, c->pe->node};
    void *bp = lkb_block_begin(L, c->s, "tl.load");
    int rc = d->copy(d->ctx, KB_DMA_READ, src, dst, hbytes(h));
    lkb_block_end(bp);
    if (rc < 0)
        return luaL_error(L, "tl.load on PE '%s': %s", c->pe->name, d->errmsg(d->ctx));
    return 1;
}

/* load(kind, addr, n, dtype) -> handle: n elements at addr of this PE's
 * memory `kind` into TCM */
static int l_load(lua_State *L)
{
    struct kctx *c = current(L, "tl.load");
    enum kb_mem_kind kind = checkkind(L, 1);
    lua_Integer addr = luaL_checkinteger(L, 2);
    uint32_t n = checkcount(L, 3);
    enum kb_dtype dt = checkdtype(L, 4);
    return load_at(L, c, kind, addr, n, dt);
}

/* handle h into this PE's memory `kind` at addr */
static int store_at(lua_State *L, struct kctx *c, enum kb_mem_kind kind, lua_Integer addr,
                    const struct handle *h)
{
    int node;
    struct kb_mem *m = pe_mem(L, c->pe, kind, &node);
    const struct kb_dma_if *d = need_dma(L, c, "tl.store");
    dispatch(L, c, "tl.store");
    struct kb_dma_end src = {c->tcm, h->addr, c->pe->node}, dst = {m, (uint64_t)addr, node};
    void *bp = lkb_block_begin(L, c->s, "tl.store");
    int rc = d->copy(d->ctx, KB_DMA_WRITE, src, dst, hbytes(h));
    lkb_block_end(bp);
    if (rc < 0)
        return luaL_error(L, "tl.store on PE '%s': %s", c->pe->name, d->errmsg(d->ctx));
    return 0;
}

/* store(kind, addr, h): the handle into this PE's memory `kind` at addr */
static int l_store(lua_State *L)
{
    struct kctx *c = current(L, "tl.store");
    enum kb_mem_kind kind = checkkind(L, 1);
    lua_Integer addr = luaL_checkinteger(L, 2);
    struct handle *h = checkhandle_in(L, 3, c);
    return store_at(L, c, kind, addr, h);
}

/* ---- tensors: tl.load and tl.store ----------------------------------- */

/* A places record: where each rank's shard of a tensor is, for a tensor
 * whose shards never move (kbsim.torch's: allocated once by torch.zeros).
 * The (rank, address) pairs sorted by rank, the shard's element count,
 * and its memory kind and dtype names as user values 1 and 2 (the same
 * strings t:shard_place returns). tl.load and tl.store find a rank in it
 * with no Lua call; a rank it lacks goes to t:shard_place for the error. */
struct place { lua_Integer rank, addr; };
struct places {
    const void *tag;
    lua_Integer sn;
    /* the kind and dtype names, checked when the record was made: what
     * tl.load and tl.store read on every call (kind_kinds[kind], dt), and
     * whether the dtype name is kb_dtype_name(dt) (tl.store compares it
     * with its handle's by name) */
    int kind;
    enum kb_dtype dt;
    bool dt_canonical;
    size_t n;
    struct place e[];
};
static const char places_tag = 0;

static const struct places *toplaces(lua_State *L, int i)
{
    const struct places *p = lua_touserdata(L, i);
    return p && lua_rawlen(L, i) >= sizeof *p && p->tag == &places_tag ? p : NULL;
}

static bool places_find(const struct places *p, lua_Integer rank, lua_Integer *addr)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->e[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == p->n || p->e[lo].rank != rank)
        return false;
    *addr = p->e[lo].addr;
    return true;
}

static int place_cmp(const void *a, const void *b)
{
    lua_Integer x = ((const struct place *)a)->rank, y = ((const struct place *)b)->rank;
    return (x > y) - (x < y);
}

/* shard_places(ranks, addrs, n, kind, dtype) -> record: ranks[k] holds its
 * shard at addrs[k] (k = 1 .. #ranks), n elements of dtype in memory kind */
static int l_places(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer sn = luaL_checkinteger(L, 3);
    /* (checked here, so that a bad name is said where the record is made,
     * not at every tl.load of the tensor) */
    const char *kind = luaL_checkstring(L, 4), *dtype = luaL_checkstring(L, 5);
    enum kb_dtype dt;
    int ki = 0;
    while (ki < KIND_COUNT && strcmp(kind, kind_names[ki]) != 0)
        ki++;
    if (ki == KIND_COUNT)
        return luaL_error(L, "tl.shard_places: unknown memory '%s' (tcm, sram, hbm)", kind);
    if (kb_dtype_parse(dtype, &dt) != 0)
        return luaL_error(L, "tl.shard_places: unknown dtype '%s' (f16, bf16, f32)", dtype);
    lua_Integer n = luaL_len(L, 1);
    if (n < 0 || (size_t)n > (SIZE_MAX - sizeof(struct places)) / sizeof(struct place))
        return luaL_error(L, "tl.shard_places: %I ranks", (LUAI_UACINT)n);
    struct places *p = lua_newuserdatauv(L, sizeof *p + (size_t)n * sizeof(struct place), 2);
    p->tag = &places_tag;
    p->sn = sn;
    p->kind = ki;
    p->dt = dt;
    p->dt_canonical = strcmp(kb_dtype_name(dt), dtype) == 0;
    p->n = (size_t)n;
    for (lua_Integer k = 1; k <= n; k++) {
        int isnum_r, isnum_a;
        lua_geti(L, 1, k);
        lua_geti(L, 2, k);
        p->e[k - 1].rank = lua_tointegerx(L, -2, &isnum_r);
        p->e[k - 1].addr = lua_tointegerx(L, -1, &isnum_a);
        lua_pop(L, 2);
        if (!isnum_r || !isnum_a)
            return luaL_error(L, "tl.shard_places: rank or address %I is not an integer",
                              (LUAI_UACINT)k);
    }
    qsort(p->e, p->n, sizeof p->e[0], place_cmp);
    for (size_t k = 1; k < p->n; k++)
        if (p->e[k].rank == p->e[k - 1].rank)
            return luaL_error(L, "tl.shard_places: rank %I listed twice", (LUAI_UACINT)p->e[k].rank);
    lua_pushvalue(L, 4);
    lua_setiuservalue(L, -2, 1);
    lua_pushvalue(L, 5);
    lua_setiuservalue(L, -2, 2);
    return 1;
}

/* A tensor is anything with t:shard(rank) -> {addr=, n=, kind=, dtype=};
 * one that also has t:shard_place(rank) (kbsim.torch's) gives the four
 * values without making a table on every call. Pushes the shard of the
 * tensor at index 1 on this PE (its program id): addr, n, kind, dtype.
 * Errors blame the kernel's line (the caller of tl.load / tl.store). */
static struct kctx *push_shard(lua_State *L, const char *what)
{
    /* the keys pushed from upvalues: lua_getfield would look its literal
     * up in the string cache on every call */
    if (lua_type(L, 1) == LUA_TTABLE) {
        /* a tensor whose shards are fixed (kbsim.torch's) names them in a
         * places record, t.shard_places: no Lua call a chunk */
        lua_pushvalue(L, lua_upvalueindex(UV_K_PLACES));
        if (lua_rawget(L, 1) == LUA_TUSERDATA) {
            const struct places *p = toplaces(L, 4);
            struct kctx *c = p ? current(L, what) : NULL;
            lua_Integer addr;
            if (c && places_find(p, c->program_id, &addr)) {
                lua_pushinteger(L, p->sn);       /* 5 */
                lua_getiuservalue(L, 4, 1);      /* 6 kind */
                lua_getiuservalue(L, 4, 2);      /* 7 dtype */
                lua_pushinteger(L, addr);
                lua_replace(L, 4);               /* 4 addr, over the record */
                return c;
            }
        }
        lua_pop(L, 1); /* (a rank without a shard: t:shard_place's error) */
        lua_pushvalue(L, lua_upvalueindex(UV_K_SHARD));
        if (lua_gettable(L, 1) == LUA_TFUNCTION)
            goto tensor;
    }
    luaL_error(L, "%s: a tensor is expected, got %s", what, luaL_typename(L, 1));
tensor:;
    struct kctx *c = current(L, what);
    lua_Integer pid = c->program_id;
    lua_pushvalue(L, lua_upvalueindex(UV_K_SHARD_PLACE));
    lua_gettable(L, 1);
    if (lua_toboolean(L, -1)) {
        lua_replace(L, -2); /* over t.shard */
        lua_pushvalue(L, 1);
        lua_pushinteger(L, pid);
        lua_call(L, 2, 4);
        return c;
    }
    lua_pop(L, 1); /* t.shard is on top */
    lua_pushvalue(L, 1);
    lua_pushinteger(L, pid);
    lua_call(L, 2, 1);
    int sh = lua_gettop(L);
    lua_getfield(L, sh, "addr");
    lua_getfield(L, sh, "n");
    lua_getfield(L, sh, "kind");
    lua_getfield(L, sh, "dtype");
    lua_remove(L, sh);
    return c;
}

/* The context c that push_shard gave, still running with its system open
 * after the tensor's Lua code ran, or the error current() gives. */
static struct kctx *still_current(lua_State *L, struct kctx *c, const char *what)
{
    return !c->ended && *c->sys_open ? c : current(L, what);
}

/* The error of elements [off, off + n) (the values at oi and ni) outside a
 * shard of sn elements. */
static int shard_range_error(lua_State *L, const char *what, int oi, int ni, lua_Integer sn)
{
    const char *o = luaL_tolstring(L, oi, NULL);
    const char *n = luaL_tolstring(L, ni, NULL);
    return luaL_error(L, "%s: elements [%s, %s+%s) are outside the shard of %I", what, o, o, n,
                      (LUAI_UACINT)sn);
}

/* The dtype and the memory kind of a shard (at indices i and k). */
static enum kb_dtype shard_dtype(lua_State *L, const struct tl_state *st, int i)
{
    enum kb_dtype dt;
    const char *name = lua_tostring(L, i);
    int d = dtype_by_address(st, name);
    if (d >= 0)
        return (enum kb_dtype)d;
    if (!name || kb_dtype_parse(name, &dt) != 0)
        luaL_error(L, "tensor shard of unknown dtype '%s'", name ? name : "?");
    return dt;
}

static enum kb_mem_kind shard_kind(lua_State *L, const struct tl_state *st, int k)
{
    const char *name = lua_tostring(L, k);
    int by_address = kind_by_address(st, name);
    if (by_address >= 0)
        return kind_kinds[by_address];
    for (int i = 0; name && i < KIND_COUNT; i++)
        if (strcmp(name, kind_names[i]) == 0)
            return kind_kinds[i];
    return luaL_error(L, "tensor shard in unknown memory '%s' (tcm, sram, hbm)",
                      name ? name : "?");
}

/* The places record of the tensor at index 1, a table (its raw field
 * shard_places), or NULL; pushes that field either way. */
static const struct places *tensor_places(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(UV_K_PLACES));
    return lua_rawget(L, 1) == LUA_TUSERDATA ? toplaces(L, -1) : NULL;
}

/* tl.load(t, off, n) -> handle: n elements (default: to the end) of this
 * PE's shard of t from element off (default 0), through load() */
static int l_tload(lua_State *L)
{
    lua_settop(L, 3);
    /* the usual call, a tensor with places and integer off and n within
     * the shard: what the general path below does, with the kind and
     * dtype the record keeps as numbers (no strings read or compared) */
    if (lua_type(L, 1) == LUA_TTABLE) {
        const struct places *p = tensor_places(L);
        struct kctx *c = p ? current(L, "tl.load") : NULL;
        lua_Integer addr;
        if (c && lua_isinteger(L, 2) && lua_isinteger(L, 3) &&
            places_find(p, c->program_id, &addr)) {
            lua_Integer sn = p->sn, off = lua_tointeger(L, 2), n = lua_tointeger(L, 3);
            if (off >= 0 && n >= 1 && off <= sn && n <= sn - off && n <= INT32_MAX)
                return load_at(L, c, kind_kinds[p->kind],
                               addr + off * (lua_Integer)kb_dtype_size(p->dt), (uint32_t)n,
                               p->dt);
        }
        lua_settop(L, 3); /* anything else: as before, with its errors */
    }
    struct kctx *c = push_shard(L, "tl.load"); /* 4 addr, 5 sn, 6 kind, 7 dtype */
    lua_Integer sn = lua_tointeger(L, 5);
    /* off and n given as integers, the usual call: no default to fill */
    bool off_int = lua_isinteger(L, 2), n_int = lua_isinteger(L, 3);
    bool n_default = lua_isnil(L, 3);
    if (!off_int && lua_isnil(L, 2)) {
        lua_pushinteger(L, 0);
        lua_replace(L, 2);
        off_int = true;
    }
    if (!n_int && lua_isnil(L, 3) && off_int) {
        lua_pushinteger(L, sn - lua_tointeger(L, 2));
        lua_replace(L, 3);
        n_int = true;
    }
    lua_Integer off = off_int ? lua_tointeger(L, 2) : 0, n = n_int ? lua_tointeger(L, 3) : 0;
    if (!off_int || off < 0 || !n_int || n < 1 || off > sn ||
        n > sn - off) { /* (off + n could wrap) */
        /* no element to load: "elements [0, 0+0) are outside the shard"
         * said an empty range was out of it */
        if (off_int && n_int && n == 0 && off >= 0 && off <= sn) {
            if (sn == 0)
                return luaL_error(L, "tl.load: this PE's shard of the tensor has 0 elements: "
                                     "nothing to load");
            if (n_default)
                return luaL_error(L, "tl.load: offset %I is the end of the shard of %I "
                                     "elements: no element is left to load (offsets 0 to %I)",
                                  (LUAI_UACINT)off, (LUAI_UACINT)sn, (LUAI_UACINT)(sn - 1));
            return luaL_error(L, "tl.load: a count of 0 elements (a load takes 1 to %I "
                                 "elements from offset %I of the shard of %I)",
                              (LUAI_UACINT)(sn - off), (LUAI_UACINT)off, (LUAI_UACINT)sn);
        }
        return shard_range_error(L, "tl.load", 2, 3, sn);
    }
    enum kb_dtype dt = shard_dtype(L, c->st, 7);
    lua_Integer at = lua_tointeger(L, 4) + off * (lua_Integer)kb_dtype_size(dt);
    enum kb_mem_kind kind = shard_kind(L, c->st, 6);
    c = still_current(L, c, "tl.load");
    /* n is a positive integer: checkcount raises only above INT32_MAX */
    return load_at(L, c, kind, at, n <= INT32_MAX ? (uint32_t)n : checkcount(L, 3), dt);
}

/* tl.store(t, off, h): handle h into this PE's shard of t at element off,
 * through store() */
static int l_tstore(lua_State *L)
{
    lua_settop(L, 3);
    /* the usual call (as in tl.load): the running kernel's own live handle
     * of the tensor's dtype, within the shard */
    if (lua_type(L, 1) == LUA_TTABLE) {
        const struct places *p = tensor_places(L);
        struct kctx *c = p ? current(L, "tl.store") : NULL;
        struct handle *h = c ? tohandle(L, 3) : NULL;
        lua_Integer addr;
        if (h && handle_of(h, c) && !h->freed && p->dt_canonical && h->dt == p->dt &&
            lua_isinteger(L, 2) && places_find(p, c->program_id, &addr)) {
            lua_Integer sn = p->sn, off = lua_tointeger(L, 2);
            if (off >= 0 && off <= sn && (lua_Integer)h->n <= sn - off)
                return store_at(L, c, kind_kinds[p->kind],
                                addr + off * (lua_Integer)kb_dtype_size(h->dt), h);
        }
        lua_settop(L, 3);
    }
    struct kctx *c = push_shard(L, "tl.store"); /* 4 addr, 5 sn, 6 kind, 7 dtype */
    lua_Integer sn = lua_tointeger(L, 5);
    struct handle *h = tohandle(L, 3);
    if (!h)
        return luaL_error(L, "tl.store: a handle is expected as the value, got %s",
                          luaL_typename(L, 3));
    if (!handle_of(h, c) || c->ended || !*c->sys_open) /* (the running kernel's own is live) */
        checklive(L, 3, "#handle");
    lua_Integer off = lua_tointeger(L, 2), hn = h->n;
    if (!lua_isinteger(L, 2) || off < 0 || off > sn || hn > sn - off) {
        lua_pushinteger(L, h->n); /* (at 8: push_shard left 7) */
        return shard_range_error(L, "tl.store", 2, 8, sn);
    }
    const char *tdt = lua_tostring(L, 7);
    bool own_name = tdt == c->st->dtype[h->dt]; /* the state's name of h's dtype */
    if (!tdt || (!own_name && strcmp(kb_dtype_name(h->dt), tdt) != 0))
        return luaL_error(L, "tl.store: a %s handle into a %s tensor", kb_dtype_name(h->dt),
                          tdt ? tdt : "?");
    enum kb_dtype sdt = own_name ? h->dt : shard_dtype(L, c->st, 7);
    lua_Integer at = lua_tointeger(L, 4) + off * (lua_Integer)kb_dtype_size(sdt);
    enum kb_mem_kind kind = shard_kind(L, c->st, 6);
    c = still_current(L, c, "tl.store");
    /* the running kernel's own live handle: nothing to check again */
    return store_at(L, c, kind, at, handle_of(h, c) && !h->freed ? h : checkhandle_in(L, 3, c));
}

/* ---- math: PE_MATH --------------------------------------------------- */

/* A math operand at index i, in scratch slot i - 1: a handle, or a number
 * broadcast to n elements of dt (materialised host-side: a scalar
 * register, no time). A handle's bytes as they are now: by page reference
 * when the unit reads snapshots (snaps: decision 0056), else copied. */
static struct kb_math_arg operand(lua_State *L, int i, struct kctx *c, uint32_t n,
                                  enum kb_dtype dt, bool snaps, const char *what)
{
    struct kb_math_arg none = {NULL, NULL, NULL};
    if (lua_type(L, i) == LUA_TNUMBER) {
        if (c->no_data)
            return none;
        lua_Number v = lua_tonumber(L, i);
        unsigned char *buf = scratch(L, i - 1, (size_t)n * kb_dtype_size(dt));
        for (uint32_t j = 0; j < n; j++)
            kb_dtype_store(buf, j, dt, v);
        return (struct kb_math_arg){buf, NULL, NULL};
    }
    struct handle *h = checkhandle_in(L, i, c);
    if (!handle_of(h, c) && hctx(h) != c) /* (h was checked: its context lives) */
        luaL_error(L, "%s: a handle of PE '%s' used on PE '%s'", what, hctx(h)->pe->name,
                   c->pe->name);
    if (h->n != n || h->dt != dt)
        luaL_error(L, "%s on PE '%s': operands differ (%d %s and %d %s)", what, c->pe->name,
                   (int)n, kb_dtype_name(dt), (int)h->n, kb_dtype_name(h->dt));
    if (c->no_data)
        return none;
    if (!snaps)
        return (struct kb_math_arg){hread(L, h, i - 1), NULL, NULL};
    struct kb_mem_snap *sn = hsnap(L, h, i - 1); /* the scratch's: the unit may drop it */
    return (struct kb_math_arg){NULL, sn, sn};
}

/* The first handle among the first `arity` arguments fixes n and dtype. */
static struct handle *shape_of(lua_State *L, int arity, const char *what)
{
    struct kctx *fc = fast_ctx(L);
    for (int i = 1; i <= arity; i++) {
        struct handle *h = tohandle(L, i);
        if (h)
            return checkhandle_in(L, i, fc);
    }
    luaL_error(L, "%s: at least one operand must be a handle", what);
    return NULL;
}

/* The first handle among the first `arity` arguments when every one is
 * a number or a handle of c of that handle's n and dtype, not freed: what
 * shape_of, current and operand would accept without a word; else NULL. */
static struct handle *operands_of(lua_State *L, int arity, const struct kctx *c)
{
    struct handle *first = NULL;
    for (int i = 1; i <= arity; i++) {
        struct handle *h = tohandle(L, i); /* (a handle first: the usual operand) */
        if (!h && lua_type(L, i) == LUA_TNUMBER)
            continue;
        if (!h || !handle_of(h, c) || h->freed)
            return NULL;
        if (!first)
            first = h;
        else if (h->n != first->n || h->dt != first->dt)
            return NULL;
    }
    return first;
}

static int math_op(lua_State *L, enum kb_math_op op, int arity, const char *what)
{
    /* the running kernel's own operands: nothing to check again */
    struct kctx *c = fast_ctx(L);
    struct handle *first = c ? operands_of(L, arity, c) : NULL;
    bool checked = first != NULL;
    if (!checked) {
        first = shape_of(L, arity, what);
        c = current(L, what);
    }
    uint32_t n = first->n;
    enum kb_dtype dt = first->dt;
    struct kb_math_arg ops[3] = {{NULL, NULL, NULL}, {NULL, NULL, NULL}, {NULL, NULL, NULL}};
    /* the unit reads snapshots (a timing-only run has no values: run) */
    bool snaps = !c->no_data && c->math && c->math->run_args;
    for (int i = 1; !(checked && c->no_data) && i <= arity; i++)
        ops[i - 1] = operand(L, i, c, n, dt, snaps, what);
    const struct kb_math_if *m = need_math(L, c, what);
    dispatch(L, c, what);
    bool reduce = op == KB_MATH_SUM;
    struct handle *out = newhandle(L, c, reduce ? 1 : n, dt);
    /* a unit reading snapshots writes the result into the new handle's
     * TCM itself when the op ends (no buffer while it runs), else into a
     * buffer that is written there then */
    void *obuf = c->no_data || snaps ? NULL : scratch(L, RESULT, (size_t)n * kb_dtype_size(dt));
    struct kb_math_dst dst = {NULL, c->tcm, out->addr};
    void *bp = lkb_block_begin(L, c->s, what);
    int rc = snaps ? m->run_args(m->ctx, op, &ops[0], &ops[1], &ops[2], &dst, n, dt)
                   : m->run(m->ctx, op, ops[0].p, ops[1].p, ops[2].p, obuf, n, dt);
    lkb_block_end(bp);
    if (rc < 0)
        return luaL_error(L, "%s on PE '%s': %s", what, c->pe->name, m->errmsg(m->ctx));
    if (!snaps)
        hwrite(L, out, obuf);
    if (!c->no_data) /* (a timing-only run took no buffer) */
        scratch_drop(L);
    return 1;
}

static int l_add(lua_State *L) { return math_op(L, KB_MATH_ADD, 2, "tl.add"); }
static int l_sub(lua_State *L) { return math_op(L, KB_MATH_SUB, 2, "tl.sub"); }
static int l_mul(lua_State *L) { return math_op(L, KB_MATH_MUL, 2, "tl.mul"); }
static int l_div(lua_State *L) { return math_op(L, KB_MATH_DIV, 2, "tl.div"); }
static int l_maximum(lua_State *L) { return math_op(L, KB_MATH_MAXIMUM, 2, "tl.maximum"); }
static int l_minimum(lua_State *L) { return math_op(L, KB_MATH_MINIMUM, 2, "tl.minimum"); }
static int l_fma(lua_State *L) { return math_op(L, KB_MATH_FMA, 3, "tl.fma"); }
static int l_clamp(lua_State *L) { return math_op(L, KB_MATH_CLAMP, 3, "tl.clamp"); }
static int l_exp(lua_State *L) { return math_op(L, KB_MATH_EXP, 1, "tl.exp"); }
static int l_log(lua_State *L) { return math_op(L, KB_MATH_LOG, 1, "tl.log"); }
static int l_softmax(lua_State *L) { return math_op(L, KB_MATH_SOFTMAX, 1, "tl.softmax"); }
static int l_cdiv(lua_State *L) { return math_op(L, KB_MATH_CDIV, 2, "tl.cdiv"); }
static int l_sum(lua_State *L) { return math_op(L, KB_MATH_SUM, 1, "tl.sum"); }

/* A new handle of n elements of value v: one vector pass writes it. */
static int fill(lua_State *L, struct kctx *c, uint32_t n, lua_Number v, enum kb_dtype dt,
                const char *what)
{
    const struct kb_math_if *m = need_math(L, c, what);
    dispatch(L, c, what);
    const struct kb_math_params *mp = m->params(m->ctx);
    void *bp = lkb_block_begin(L, c->s, what);
    int rc = sim_wait(c->s, kb_math_time(mp, KB_MATH_ADD, n, dt));
    lkb_block_end(bp);
    if (rc < 0)
        return luaL_error(L, "%s: %s", what, sim_errmsg(c->s));
    struct handle *h = newhandle(L, c, n, dt);
    if (c->no_data)
        return 1;
    unsigned char *buf = scratch(L, RESULT, hbytes(h));
    for (uint32_t j = 0; j < n; j++)
        kb_dtype_store(buf, j, dt, v);
    hwrite(L, h, buf);
    scratch_drop(L);
    return 1;
}

/* full(n, value, dtype) -> handle */
static int l_full(lua_State *L)
{
    struct kctx *c = current(L, "tl.full");
    uint32_t n = checkcount(L, 1);
    lua_Number v = luaL_checknumber(L, 2);
    return fill(L, c, n, v, checkdtype(L, 3), "tl.full");
}

/* zeros(n, dtype) -> handle: its own function, so that its errors name it */
static int l_zeros(lua_State *L)
{
    struct kctx *c = current(L, "tl.zeros");
    uint32_t n = checkcount(L, 1);
    return fill(L, c, n, 0, checkdtype(L, 2), "tl.zeros");
}

/* ---- GEMM: PE_GEMM --------------------------------------------------- */

/* a * b for a, b >= 0, or -1 where the product would pass LUA_MAXINTEGER:
 * sizes from a script are multiplied only through this. */
static lua_Integer checked_mul(lua_Integer a, lua_Integer b)
{
    return b != 0 && a > LUA_MAXINTEGER / b ? -1 : a * b;
}

/* dot(a, b, m, n, k [, out_dtype]) -> handle of m×n: row-major a (m×k)
 * times b (k×n), accumulated in f32 */
static int l_dot(lua_State *L)
{
    struct kctx *c = current(L, "tl.dot");
    struct handle *a = checkhandle(L, 1), *b = checkhandle(L, 2);
    lua_Integer m = luaL_checkinteger(L, 3), n = luaL_checkinteger(L, 4),
                k = luaL_checkinteger(L, 5);
    enum kb_dtype odt = lua_isnoneornil(L, 6) ? a->dt : checkdtype(L, 6);
    if (m < 1 || n < 1 || k < 1 || checked_mul(m, k) != (lua_Integer)a->n ||
        checked_mul(k, n) != (lua_Integer)b->n || a->dt != b->dt)
        return luaL_error(L, "tl.dot on PE '%s': shapes do not fit (a: %d %s, b: %d %s, "
                             "m=%I n=%I k=%I)", c->pe->name, (int)a->n, kb_dtype_name(a->dt),
                          (int)b->n, kb_dtype_name(b->dt), m, n, k);
    lua_Integer mn = checked_mul(m, n);
    if (mn < 0 || mn > INT32_MAX)
        return luaL_error(L, "tl.dot on PE '%s': a result of %I x %I elements is too large",
                          c->pe->name, m, n);
    const void *ab = c->no_data ? NULL : hread(L, a, 0);
    const void *bb = c->no_data ? NULL : hread(L, b, 1);
    const struct kb_gemm_if *g = need_gemm(L, c, "tl.dot");
    dispatch(L, c, "tl.dot");
    struct handle *out = newhandle(L, c, (uint32_t)mn, odt);
    void *cb = c->no_data ? NULL : scratch(L, RESULT, hbytes(out));
    void *bp = lkb_block_begin(L, c->s, "tl.dot");
    int rc = g->run(g->ctx, (size_t)m, (size_t)n, (size_t)k, ab, (size_t)k, bb, (size_t)n, cb,
                    (size_t)n, a->dt, odt, false);
    lkb_block_end(bp);
    if (rc < 0)
        return luaL_error(L, "tl.dot on PE '%s': gemm failed (%d)", c->pe->name, rc);
    hwrite(L, out, cb);
    scratch_drop(L);
    return 1;
}

/* Handle i, checked to be this kernel's and to hold elements [off, off + n). */
static struct handle *checkrange(lua_State *L, int i, struct kctx *c, lua_Integer off,
                                 lua_Integer n, const char *what)
{
    struct handle *h = checkhandle_in(L, i, c);
    if (!handle_of(h, c) && hctx(h) != c) /* (h was checked: its context lives) */
        luaL_error(L, "%s: a handle of PE '%s' used on PE '%s'", what, hctx(h)->pe->name,
                   c->pe->name);
    if (off < 0 || n < 1 || off > (lua_Integer)h->n || n > (lua_Integer)h->n - off)
        luaL_error(L, "%s on PE '%s': %I elements from element %I are outside a handle of %d",
                   what, c->pe->name, n, off, (int)h->n);
    return h;
}

/* A snapshot of the bytes of elements [off, off + n) of h in scratch slot
 * `slot`. */
static void *hread_range(lua_State *L, const struct handle *h, lua_Integer off, lua_Integer n,
                         int slot)
{
    size_t es = kb_dtype_size(h->dt);
    void *buf = scratch(L, slot, (size_t)n * es);
    struct kb_mem *tcm = hctx(h)->tcm; /* (h was checked: its context lives) */
    if (kb_mem_read(tcm, h->addr + (uint64_t)off * es, buf, (size_t)n * es) != 0)
        luaL_error(L, "%s", kb_mem_errmsg(tcm));
    return buf;
}

/* gemm_tile(c, a, a_off, b, b_off, tm, tn, tk [, accumulate]) -> c: one tile
 * on PE_GEMM, C (f32, tm×tn) = (accumulate ? C : 0) + A·B, where A is the
 * tm×tk row-major elements of a from a_off and B the tk×tn ones of b from
 * b_off (a tile pipeline keeps its operands tile by tile, contiguous). c nil
 * makes a new f32 handle. A pipeline needs this rather than tl.dot: its
 * operands are slices of handles loaded whole, and it owns the schedule.
 * The engine does one tile at a time for this kernel and its tl.spawn
 * helpers; the tile holds it for kb_gemm_tile_cycles. */
static int l_gemm_tile(lua_State *L)
{
    struct kctx *c = current(L, "tl.gemm_tile");
    const struct kb_gemm_if *g = need_gemm(L, c, "tl.gemm_tile");
    const struct kb_gemm_params *p = g->params(g->ctx);
    lua_Integer tm = luaL_checkinteger(L, 6), tn = luaL_checkinteger(L, 7),
                tk = luaL_checkinteger(L, 8);
    if (tm < 1 || tn < 1 || tk < 1 || tm > p->tile.m || tn > p->tile.n || tk > p->tile.k)
        return luaL_error(L, "tl.gemm_tile on PE '%s': tile %Ix%Ix%I is not within 1x1x1 .. "
                             "%dx%dx%d (m x n x k)", c->pe->name, tm, tn, tk, (int)p->tile.m,
                          (int)p->tile.n, (int)p->tile.k);
    /* -1 where a product overflows: checkrange refuses it */
    lua_Integer a_n = checked_mul(tm, tk), b_n = checked_mul(tk, tn), c_n = checked_mul(tm, tn);
    struct handle *a = checkrange(L, 2, c, luaL_checkinteger(L, 3), a_n, "tl.gemm_tile");
    struct handle *b = checkrange(L, 4, c, luaL_checkinteger(L, 5), b_n, "tl.gemm_tile");
    if (a->dt != b->dt)
        return luaL_error(L, "tl.gemm_tile on PE '%s': operands of %s and %s", c->pe->name,
                          kb_dtype_name(a->dt), kb_dtype_name(b->dt));
    bool acc = lua_toboolean(L, 9);
    if (!lua_isnil(L, 1)) {
        struct handle *out = checkrange(L, 1, c, 0, c_n, "tl.gemm_tile");
        if (out->dt != KB_DTYPE_F32)
            return luaL_error(L, "tl.gemm_tile on PE '%s': the accumulator is %s, not f32",
                              c->pe->name, kb_dtype_name(out->dt));
    } else if (acc) {
        return luaL_error(L, "tl.gemm_tile: accumulate needs an accumulator handle");
    }
    const void *ab = c->no_data ? NULL : hread_range(L, a, luaL_checkinteger(L, 3), a_n, 0);
    const void *bb = c->no_data ? NULL : hread_range(L, b, luaL_checkinteger(L, 5), b_n, 1);
    dispatch(L, c, "tl.gemm_tile");
    if (lua_isnil(L, 1) && c_n > INT32_MAX)
        return luaL_error(L, "tl.gemm_tile on PE '%s': a tile of %I x %I is too large",
                          c->pe->name, tm, tn);
    if (lua_isnil(L, 1))
        newhandle(L, c, (uint32_t)c_n, KB_DTYPE_F32);
    else
        lua_pushvalue(L, 1);
    int outi = lua_gettop(L);
    struct handle *out = lua_touserdata(L, outi);
    float *cb = c->no_data ? NULL
                : acc      ? hread_range(L, out, 0, c_n, RESULT)
                           : scratch(L, RESULT, (size_t)c_n * sizeof(float));
    int64_t cycles = g->tile(g->ctx, ab, (size_t)tk, bb, (size_t)tn, cb, (size_t)tn, (size_t)tm,
                             (size_t)tn, (size_t)tk, a->dt, acc);
    if (cycles < 0)
        return luaL_error(L, "tl.gemm_tile on PE '%s': %s", c->pe->name, g->errmsg(g->ctx));
    sim_time now = sim_now(c->s), start = c->gemm_free_ps > now ? c->gemm_free_ps : now;
    c->gemm_free_ps = start + kb_gemm_cycles_to_ps(p, (uint64_t)cycles);
    void *bp = lkb_block_begin(L, c->s, "tl.gemm_tile");
    int rc = sim_wait(c->s, c->gemm_free_ps - now);
    lkb_block_end(bp);
    if (rc < 0)
        return luaL_error(L, "tl.gemm_tile: %s", sim_errmsg(c->s));
    if (cb && kb_mem_write(c->tcm, out->addr, cb, (size_t)c_n * sizeof(float)) != 0)
        return luaL_error(L, "%s", kb_mem_errmsg(c->tcm));
    scratch_drop(L);
    lua_pushvalue(L, outi);
    return 1;
}

/* fetch(h [, off, n]): the TCM read of elements [off, off + n) of h into an
 * engine's operand buffers. Time only (the TCM's channels, bandwidth and
 * setup): the engine reads the values when it computes. */
static int l_fetch(lua_State *L)
{
    struct kctx *c = current(L, "tl.fetch");
    struct handle *h0 = checkhandle(L, 1);
    lua_Integer off = luaL_optinteger(L, 2, 0);
    lua_Integer rest = off >= 0 && off <= (lua_Integer)h0->n ? (lua_Integer)h0->n - off : 0;
    lua_Integer n = luaL_optinteger(L, 3, rest);
    struct handle *h = checkrange(L, 1, c, off, n, "tl.fetch");
    size_t es = kb_dtype_size(h->dt);
    dispatch(L, c, "tl.fetch");
    void *bp = lkb_block_begin(L, c->s, "tl.fetch");
    int rc = kb_mem_access(c->tcm, h->addr + (uint64_t)off * es, (uint64_t)n * es, false);
    lkb_block_end(bp);
    if (rc < 0)
        return luaL_error(L, "tl.fetch on PE '%s': %s", c->pe->name, kb_mem_errmsg(c->tcm));
    return 0;
}

/* accumulate(acc, x) -> acc: acc += x in place on PE_MATH (an add's time),
 * so a running sum needs no new handle per step */
static int l_accumulate(lua_State *L)
{
    struct kctx *c = current(L, "tl.accumulate");
    struct handle *acc = checkrange(L, 1, c, 0, 1, "tl.accumulate");
    struct handle *x = checkrange(L, 2, c, 0, 1, "tl.accumulate");
    if (x->n != acc->n || x->dt != acc->dt)
        return luaL_error(L, "tl.accumulate on PE '%s': operands differ (%d %s and %d %s)",
                          c->pe->name, (int)acc->n, kb_dtype_name(acc->dt), (int)x->n,
                          kb_dtype_name(x->dt));
    void *ab = c->no_data ? NULL : hread(L, acc, 0);
    const void *xb = c->no_data ? NULL : hread(L, x, 1);
    const struct kb_math_if *m = need_math(L, c, "tl.accumulate");
    dispatch(L, c, "tl.accumulate");
    void *bp = lkb_block_begin(L, c->s, "tl.accumulate");
    int rc = m->run(m->ctx, KB_MATH_ADD, ab, xb, NULL, ab, acc->n, acc->dt);
    lkb_block_end(bp);
    if (rc < 0)
        return luaL_error(L, "tl.accumulate on PE '%s': %s", c->pe->name, m->errmsg(m->ctx));
    hwrite(L, acc, ab);
    scratch_drop(L);
    lua_pushvalue(L, 1);
    return 1;
}

/* cast(h, dtype) -> a new handle of h's values rounded to dtype (to
 * nearest even): one pass of h through PE_MATH, charged and counted as
 * maximum(h, h), which returns h unchanged, so the unit's counters hold
 * the pass */
static int l_cast(lua_State *L)
{
    struct kctx *c = current(L, "tl.cast");
    struct handle *h = checkrange(L, 1, c, 0, 1, "tl.cast");
    enum kb_dtype dt = checkdtype(L, 2);
    void *buf = c->no_data ? NULL : hread(L, h, 0);
    const struct kb_math_if *m = need_math(L, c, "tl.cast");
    dispatch(L, c, "tl.cast");
    struct handle *out = newhandle(L, c, h->n, dt);
    void *bp = lkb_block_begin(L, c->s, "tl.cast");
    int rc = m->run(m->ctx, KB_MATH_MAXIMUM, buf, buf, NULL, buf, h->n, h->dt);
    lkb_block_end(bp);
    if (rc < 0)
        return luaL_error(L, "tl.cast on PE '%s': %s", c->pe->name, m->errmsg(m->ctx));
    if (c->no_data)
        return 1;
    unsigned char *obuf = scratch(L, RESULT, hbytes(out));
    for (uint32_t j = 0; j < h->n; j++)
        kb_dtype_store(obuf, j, dt, kb_dtype_load(buf, j, h->dt));
    hwrite(L, out, obuf);
    scratch_drop(L);
    return 1;
}

/* ---- host side: closed forms and unit counters ------------------------ */

/* gemm_time(sys, m, n, k [, rank]) -> ps, cycles, tiles: kb_gemm's closed
 * form for an M×N×K GEMM on the PE's engine (rank 0 by default) */
static int l_gemm_time(lua_State *L)
{
    struct kb_system *sys = lkb_checksystem(L, 1);
    lua_Integer m = luaL_checkinteger(L, 2), n = luaL_checkinteger(L, 3),
                k = luaL_checkinteger(L, 4);
    luaL_argcheck(L, m > 0 && n > 0 && k > 0, 2, "m, n and k must be positive");
    struct kb_pe *pe = optrank_pe(L, sys, 5);
    /* a closed-form query on the PE's own unit's params: observation, direct */
    const struct kb_gemm_params *p = kb_gemm_params(pe->gemm);
    if (!kb_gemm_time_fits(p, (uint64_t)m, (uint64_t)n, (uint64_t)k))
        return luaL_error(L, "tl.gemm_time: %I x %I x %I is past what a simulation can time "
                             "(M*N*K <= 2^48)", m, n, k);
    lua_pushinteger(L, (lua_Integer)kb_gemm_time(p, (uint64_t)m, (uint64_t)n, (uint64_t)k));
    lua_pushinteger(L, (lua_Integer)kb_gemm_cycles(p, (uint64_t)m, (uint64_t)n, (uint64_t)k));
    lua_pushinteger(L, (lua_Integer)kb_gemm_tiles(p, (uint64_t)m, (uint64_t)n, (uint64_t)k));
    return 3;
}

/* copy_time(sys, bytes [, src_kind [, dst_kind [, rank]]]) -> ps: PE_DMA's
 * closed form (kb_dma_time) for one copy of `bytes` between the PE's own
 * memories (default: HBM, or TCM where there is none; the destination
 * defaults to the source) on an idle system (rank 0 by default) */
static int l_copy_time(lua_State *L)
{
    struct kb_system *sys = lkb_checksystem(L, 1);
    lua_Integer bytes = luaL_checkinteger(L, 2);
    luaL_argcheck(L, bytes > 0, 2, "bytes must be positive");
    struct kb_pe *pe = optrank_pe(L, sys, 5);
    enum kb_mem_kind sk = optkind(L, 3, pe);
    enum kb_mem_kind dk = lua_isnil(L, 4) ? sk : checkkind(L, 4);
    struct kb_dma_end src = {0}, dst = {0};
    src.mem = pe_mem(L, pe, sk, &src.node);
    dst.mem = pe_mem(L, pe, dk, &dst.node);
    uint64_t n = (uint64_t)bytes;
    if (n > kb_mem_params(src.mem)->capacity || n > kb_mem_params(dst.mem)->capacity)
        return luaL_error(L, "tl.copy_time: %I bytes are more than %s's %s (%I bytes) or %s "
                             "(%I bytes) holds", bytes, pe->name, kb_mem_kind_name(sk),
                          (lua_Integer)kb_mem_params(src.mem)->capacity, kb_mem_kind_name(dk),
                          (lua_Integer)kb_mem_params(dst.mem)->capacity);
    /* a closed-form query on the PE's own DMA: observation, direct */
    sim_time t = kb_dma_time(pe->dma, src, dst, n);
    if (t == SIM_FOREVER)
        return luaL_error(L, "tl.copy_time: no copy from %s to %s at PE '%s'",
                          kb_mem_kind_name(sk), kb_mem_kind_name(dk), pe->name);
    lua_pushinteger(L, (lua_Integer)t);
    return 1;
}

/* math_time(sys, op, n, dtype [, rank]) -> ps, cycles: kb_math's closed
 * form for one op ("add", "exp", ..., kb_math_op_parse's names) over n
 * elements on the PE's PE_MATH (rank 0 by default) */
static int l_math_time(lua_State *L)
{
    struct kb_system *sys = lkb_checksystem(L, 1);
    const char *name = luaL_checkstring(L, 2);
    lua_Integer n = luaL_checkinteger(L, 3);
    enum kb_dtype dt = checkdtype(L, 4);
    enum kb_math_op op;
    if (kb_math_op_parse(name, &op) != 0)
        return luaL_argerror(L, 2, lua_pushfstring(L, "unknown math op '%s'", name));
    luaL_argcheck(L, n > 0, 3, "n must be positive");
    struct kb_pe *pe = optrank_pe(L, sys, 5);
    /* a closed-form query on the PE's own unit's params: observation, direct */
    const struct kb_math_params *p = kb_math_params(pe->math);
    if (!kb_math_time_fits(p, op, (uint64_t)n, dt))
        return luaL_error(L, "tl.math_time: %s over %I elements is past what a simulation can "
                             "time (n <= 2^40)", name, n);
    lua_pushinteger(L, (lua_Integer)kb_math_time(p, op, (size_t)n, dt));
    lua_pushinteger(L, (lua_Integer)kb_math_cycles(p, op, (size_t)n, dt));
    return 2;
}

static void setint(lua_State *L, const char *k, uint64_t v)
{
    lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, k);
}

/* pe_stats(sys, rank) -> the counters of the PE's units: busy times in
 * integer ps, plus what a reader needs to turn them into occupancies */
static int l_pe_stats(lua_State *L)
{
    struct kb_system *sys = lkb_checksystem(L, 1);
    struct kb_pe *pe = checkpe(L, sys, 2);
    /* observation only: the PE's own units' counters, read directly */
    const struct kb_gemm_params *gp = kb_gemm_params(pe->gemm);
    struct kb_cpu_stats cs;
    struct kb_dma_stats rd, wr;
    struct kb_gemm_stats gs;
    struct kb_math_stats ms;
    kb_cpu_get_stats(pe->cpu, &cs);
    kb_dma_get_stats(pe->dma, KB_DMA_READ, &rd);
    kb_dma_get_stats(pe->dma, KB_DMA_WRITE, &wr);
    kb_gemm_get_stats(pe->gemm, &gs);
    kb_math_get_stats(pe->math, &ms);
    lua_createtable(L, 0, 24);
    setint(L, "cpu_ops", cs.ops);
    setint(L, "cpu_busy_ps", cs.busy_ps);
    setint(L, "cpu_dispatch_ps", kb_cpu_dispatch_time(pe->cpu));
    setint(L, "dma_read_transfers", rd.transfers);
    setint(L, "dma_read_bytes", rd.bytes);
    setint(L, "dma_read_busy_ps", rd.busy_ps);
    setint(L, "dma_write_transfers", wr.transfers);
    setint(L, "dma_write_bytes", wr.bytes);
    setint(L, "dma_write_busy_ps", wr.busy_ps);
    setint(L, "gemm_tiles", gs.tiles);
    setint(L, "gemm_macs", gs.macs);
    setint(L, "gemm_cycles", gs.cycles);
    setint(L, "gemm_busy_ps", gs.busy_ps);
    setint(L, "gemm_tile_m", gp->tile.m);
    setint(L, "gemm_tile_n", gp->tile.n);
    setint(L, "gemm_tile_k", gp->tile.k);
    lua_pushnumber(L, kb_gemm_peak_flops(gp));
    lua_setfield(L, -2, "gemm_peak_flops");
    setint(L, "math_ops", ms.ops);
    setint(L, "math_cycles", ms.cycles);
    setint(L, "math_busy_ps", ms.busy_ps);
    struct {
        const char *name;
        struct kb_mem *m;
    } mems[] = {{"tcm", pe->tcm}, {"hbm", pe->hbm}, {"sram", pe->sram}};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++) {
        if (!mems[i].m)
            continue;
        struct kb_mem_stats st;
        kb_mem_get_stats(mems[i].m, &st);
        const struct kb_mem_params *mp = kb_mem_params(mems[i].m);
        char key[32];
        snprintf(key, sizeof key, "%s_busy_ps", mems[i].name);
        setint(L, key, st.busy_ps);
        snprintf(key, sizeof key, "%s_channels", mems[i].name);
        setint(L, key, mp->n_channels ? mp->n_channels : 1);
        snprintf(key, sizeof key, "%s_bytes_read", mems[i].name);
        setint(L, key, st.bytes_read);
        snprintf(key, sizeof key, "%s_bytes_written", mems[i].name);
        setint(L, key, st.bytes_written);
        snprintf(key, sizeof key, "%s_peak_bytes", mems[i].name);
        setint(L, key, st.peak_alloc_bytes);
    }
    return 1;
}

/* ---- IPCQ ------------------------------------------------------------ */

/* The IPCQ through the CPU's port: by direction index when the export has
 * the optional index operations (kb_ipcq_if) and ix >= 0, by name
 * otherwise. ipcq_dir is -1 for an export without them. */
static int ipcq_dir(const struct kb_ipcq_if *q, const char *dir)
{
    return q->dir ? q->dir(q->ctx, dir) : -1;
}
static bool ipcq_wired(const struct kb_ipcq_if *q, int ix, const char *dir, bool tx)
{
    return ix >= 0 ? q->wired_at(q->ctx, ix, tx) : q->wired(q->ctx, dir, tx);
}
static int ipcq_send(const struct kb_ipcq_if *q, int ix, const char *dir, const void *data,
                     uint64_t bytes, const struct kb_ipcq_meta *meta)
{
    return ix >= 0 ? q->send_at(q->ctx, ix, data, bytes, meta)
                   : q->send(q->ctx, dir, data, bytes, meta);
}

static void checkwired(lua_State *L, struct kctx *c, const char *dir, bool tx, const char *what)
{
    const struct kb_ipcq_if *q = need_ipcq(L, c, what);
    if (!q->wired(q->ctx, dir, tx))
        luaL_error(L, "%s on PE '%s': direction '%s' is not wired for %s", what, c->pe->name,
                   dir, tx ? "sending" : "receiving");
}

/* send(dir, h) */
static int l_send(lua_State *L)
{
    struct kctx *c = current(L, "tl.send");
    const char *dir = luaL_checkstring(L, 1);
    struct handle *h = checkhandle_in(L, 2, c);
    checkwired(L, c, dir, true, "tl.send");
    /* the bytes as they are now, by page reference where the IPCQ takes
     * snapshots (decision 0056), else copied */
    bool snaps = ipcq_snaps(c->ipcq);
    const struct kb_mem_snap *sn = c->no_data || !snaps ? NULL : hsnap(L, h, 0);
    const void *buf = c->no_data || snaps ? NULL : hread(L, h, 0);
    dispatch(L, c, "tl.send");
    struct kb_ipcq_meta meta = {0, (uint32_t)h->dt, h->n};
    void *bp = lkb_block_begin(L, c->s, "tl.send");
    int rc = snaps ? c->ipcq->send_snap(c->ipcq->ctx, dir, sn, hbytes(h), &meta)
                   : c->ipcq->send(c->ipcq->ctx, dir, buf, hbytes(h), &meta);
    lkb_block_end(bp);
    if (rc < 0)
        return luaL_error(L, "tl.send: %s", c->ipcq->errmsg(c->ipcq->ctx));
    scratch_drop(L);
    return 0;
}

/* A receive sizes its buffer to the message it expects. A longer message
 * is still taken whole, up to recv_room bytes, so that check_meta reports
 * the mismatch (and kb_ipcq_recv the bytes beyond): recv_sized fails on it
 * before reading anything or spending time past its arrival, and the
 * caller repeats the receive with the larger buffer. */
#define RECV_LONGER INT64_MIN

static uint64_t recv_room(size_t bytes) { return (uint64_t)bytes * 4 + 64; }

/* A receive of `bytes` that ended with got failed because the message
 * waiting on dir is longer. */
static bool longer_waits(const struct kb_ipcq_if *q, const char *dir, int64_t got, size_t bytes)
{
    uint64_t msg;
    return got == SIM_EINVAL && q->probe(q->ctx, dir, &msg, NULL) == 1 && msg > bytes;
}

/* A receive of at most bytes_max into buf, or into sn when sn is not NULL
 * (the IPCQ takes snapshots), by index when ix >= 0. */
static int64_t recv_into(const struct kb_ipcq_if *q, int ix, const char *dir, void *buf,
                         struct kb_mem_snap *sn, uint64_t bytes_max, struct kb_ipcq_meta *meta)
{
    if (sn)
        return ix >= 0 ? q->recv_snap_at(q->ctx, ix, sn, bytes_max, meta)
                       : q->recv_snap(q->ctx, dir, sn, bytes_max, meta);
    return ix >= 0 ? q->recv_at(q->ctx, ix, buf, bytes_max, meta)
                   : q->recv(q->ctx, dir, buf, bytes_max, meta);
}

static int64_t recv_sized(const struct kb_ipcq_if *q, int ix, const char *dir, void *buf,
                          struct kb_mem_snap *sn, size_t bytes, struct kb_ipcq_meta *meta)
{
    int64_t got = recv_into(q, ix, dir, buf, sn, bytes, meta);
    return longer_waits(q, dir, got, bytes) ? RECV_LONGER : got;
}

static void check_meta(lua_State *L, struct kctx *c, const char *dir, uint32_t n,
                       enum kb_dtype dt, int64_t got, const struct kb_ipcq_meta *meta)
{
    if (meta->count != n || meta->dtype != (uint32_t)dt ||
        (uint64_t)got != (uint64_t)n * kb_dtype_size(dt))
        luaL_error(L, "tl.recv on PE '%s' direction '%s': expected %d %s, got %d %s", c->pe->name,
                   dir, (int)n, kb_dtype_name(dt), (int)meta->count,
                   meta->dtype < KB_DTYPE_COUNT ? kb_dtype_name((enum kb_dtype)meta->dtype) : "?");
}

/* recv(dir, n, dtype) -> handle */
static int l_recv(lua_State *L)
{
    struct kctx *c = current(L, "tl.recv");
    const char *dir = luaL_checkstring(L, 1);
    uint32_t n = checkcount(L, 2);
    enum kb_dtype dt = checkdtype(L, 3);
    checkwired(L, c, dir, false, "tl.recv");
    dispatch(L, c, "tl.recv");
    size_t bytes = (size_t)n * kb_dtype_size(dt);
    struct kb_ipcq_meta meta;
    /* a timing-only run receives no bytes: no buffer; an IPCQ that takes
     * snapshots gives the rx slots' pages (decision 0056) */
    bool snaps = ipcq_snaps(c->ipcq);
    struct kb_mem_snap *sn = c->no_data || !snaps ? NULL : scratch_snap(L, 0);
    void *buf = c->no_data || snaps ? NULL : scratch(L, 0, bytes);
    void *bp = lkb_block_begin(L, c->s, "tl.recv");
    int64_t got = recv_sized(c->ipcq, -1, dir, buf, sn, bytes, &meta);
    lkb_block_end(bp);
    if (got == RECV_LONGER) {
        buf = c->no_data || snaps ? NULL : scratch(L, 0, recv_room(bytes));
        bp = lkb_block_begin(L, c->s, "tl.recv");
        got = recv_into(c->ipcq, -1, dir, buf, sn, recv_room(bytes), &meta);
        lkb_block_end(bp);
    }
    if (got < 0)
        return luaL_error(L, "tl.recv: %s", c->ipcq->errmsg(c->ipcq->ctx));
    check_meta(L, c, dir, n, dt, got, &meta);
    struct handle *h = newhandle(L, c, n, dt);
    if (sn)
        hwrite_snap(L, h, sn);
    else
        hwrite(L, h, buf);
    scratch_drop(L);
    return 1;
}

/* f's buffer made recv_room(bytes) long, for a longer message taken whole
 * (none in a timing-only run: f->buf stays NULL); 0 or SIM_ENOMEM. */
static int future_grow(struct future *f, size_t bytes)
{
    if (f->ctx->no_data || f->use_snap)
        return 0;
    void *room = realloc(f->buf, recv_room(bytes));
    if (!room)
        return SIM_ENOMEM;
    f->buf = room;
    f->buf_cap = recv_room(bytes);
    return 0;
}

static void future_proc(struct sim *s, void *arg)
{
    struct future *f = arg;
    size_t bytes = (size_t)f->n * kb_dtype_size(f->dt);
    const struct kb_ipcq_if *q = f->ctx->ipcq; /* not NULL: checkwired passed */
    struct kb_mem_snap *sn = f->use_snap ? &f->snap : NULL;
    f->got = recv_sized(q, f->dir_ix, f->dir, f->buf, sn, bytes, &f->meta);
    if (f->got == RECV_LONGER)
        f->got = future_grow(f, bytes) < 0
                     ? SIM_ENOMEM
                     : recv_into(q, -1, f->dir, f->buf, sn, recv_room(bytes), &f->meta);
    f->done = true;
    sim_notify(f->done_ev);
}

/* op set up for f's receive of at most bytes_max: into its snapshot or
 * its buffer. */
static void future_begin(struct kb_ipcq_recv_op *op, struct future *f, uint64_t bytes_max)
{
    if (f->use_snap)
        kb_ipcq_recv_begin_snap(op, f->dir_ix, &f->snap, bytes_max, &f->meta);
    else
        kb_ipcq_recv_begin(op, f->dir_ix, f->buf, bytes_max, &f->meta);
}

/* A receive process as a method: what future_proc does, each of its
 * waits an activation of its own (kb_ipcq_recv_step), at the same times,
 * deltas and places in them as the thread's; no stack, no switch. Between
 * two receives it waits for its start event. */
static void recv_method(struct sim *s, void *arg)
{
    struct recv_proc *r = arg;
    struct future *f = r->f;
    if (!f) {
        (void)sim_next_trigger_event(s, r->start_ev);
        return;
    }
    const struct kb_ipcq_if *q = r->q;
    int64_t got;
    for (;;) {
        if (!q->recv_step(q->ctx, &r->op, &got))
            return; /* it waits */
        size_t bytes = (size_t)f->n * kb_dtype_size(f->dt);
        if (r->longer || !longer_waits(q, f->dir, got, bytes))
            break;
        /* a longer message: taken whole (recv_room) for check_meta to
         * report, as recv_sized's caller does */
        r->longer = true;
        if (future_grow(f, bytes) < 0) {
            got = SIM_ENOMEM;
            break;
        }
        future_begin(&r->op, f, recv_room(bytes));
    }
    f->got = got;
    f->done = true;
    r->f = NULL;
    (void)sim_next_trigger_event(s, r->start_ev);
    sim_notify(f->done_ev);
}

static int fut_gc(lua_State *L)
{
    struct future *f = lua_touserdata(L, 1);
    /* A receive not yet waited for is anchored (anchor_future): collected,
     * it was waited for, or the state is closing and no process runs. */
    free(f->buf);
    f->buf = NULL;
    kb_mem_snap_free(&f->snap);
    return 0;
}

/* A receive still running writes into its future: the future (and through
 * it the context and system the process reads) stays anchored in the
 * registry until tl.wait takes it, whether or not the script keeps it.
 * The future (on top of the stack when anchoring) is held by a luaL_ref
 * of an array: its free list reuses slots, where a table keyed by the
 * futures' addresses was rehashed over and over as fresh keys came and
 * went (a quarter of the CPU of a 256-PE ring). */
static void anchor_future(lua_State *L, struct future *f, bool on)
{
    lua_pushvalue(L, lua_upvalueindex(UV_FUTURES));
    if (on && !f->anchor) {
        lua_pushvalue(L, -2);
        f->anchor = luaL_ref(L, -2);
    } else if (!on && f->anchor) {
        luaL_unref(L, -1, f->anchor);
        f->anchor = 0;
    }
    lua_pop(L, 1);
}

/* The index in c's IPCQ of the direction of state id `id` (name dir), or
 * -1: not known (an export without direction indexes, or no memory to
 * keep it), so the calls go by name. An IPCQ's direction indexes are
 * stable: asked once, while unknown (a direction wired later gets one
 * then). */
static int ctx_dir_ix(struct kctx *c, int id, const char *dir)
{
    if ((size_t)id >= c->n_dir_ix) {
        size_t n = (size_t)id + 4;
        int *x = realloc(c->dir_ix, n * sizeof *x);
        if (!x)
            return -1;
        for (size_t i = c->n_dir_ix; i < n; i++)
            x[i] = -1;
        c->dir_ix = x;
        c->n_dir_ix = n;
    }
    if (c->dir_ix[id] < 0)
        c->dir_ix[id] = ipcq_dir(c->ipcq, dir);
    return c->dir_ix[id];
}

/* Starts f's receive (f->ctx, dir, dir_ix, n, dt and buf set) in a
 * receive process of its direction that is free (its last receive was
 * waited for), else in a new one of the same name, so that the run is
 * the same as with a new process each time. A method process is queued
 * now by its start event, where a thread started again or made now is
 * queued, and its first activation is where the thread's would be. NULL,
 * or what failed. */
static const char *start_recv(struct kctx *c, struct future *f)
{
    const struct kb_ipcq_if *q = c->ipcq;
    bool method = q->recv_step && f->dir_ix >= 0;
    uint64_t bytes = (uint64_t)f->n * kb_dtype_size(f->dt);
    struct recv_proc *r;
    for (r = c->recvs; r; r = r->next) {
        if (r->dir != f->dir || r->held || (r->start_ev != NULL) != method)
            continue;
        if (method) {
            r->f = f;
            r->longer = false;
            future_begin(&r->op, f, bytes);
            sim_notify(r->start_ev);
            break;
        }
        if (!sim_proc_terminated(r->proc))
            continue;
        if (sim_thread_restart(r->proc, future_proc, f, 0) == 0)
            break;
        r = NULL; /* not restartable: a new one */
        break;
    }
    if (!r) {
        if (!(r = calloc(1, sizeof *r)))
            return "out of memory";
        char name[256];
        snprintf(name, sizeof name, "%s.recv.%s", c->pe->name, f->dir);
        r->dir = f->dir;
        r->q = q;
        if (!(r->done_ev = sim_event_new(c->s, name))) {
            free(r);
            return sim_errmsg(c->s);
        }
        if (method) {
            char start[300];
            snprintf(start, sizeof start, "%s.start", name);
            r->f = f;
            future_begin(&r->op, f, bytes);
            if (!(r->start_ev = sim_event_new(c->s, start)) ||
                !(r->proc = sim_method(c->s, name, recv_method, r, false))) {
                free(r);
                return sim_errmsg(c->s);
            }
        } else if (!(r->proc = sim_thread(c->s, name, future_proc, f, 0))) {
            free(r);
            return sim_errmsg(c->s);
        }
        r->next = c->recvs;
        c->recvs = r;
    }
    r->held = true;
    f->rec = r;
    f->done_ev = r->done_ev;
    return NULL;
}

/* recv_async(dir, n, dtype) -> future: the receive runs beside the kernel */
static int l_recv_async(lua_State *L)
{
    struct kctx *c = current(L, "tl.recv_async");
    const char *dir = luaL_checkstring(L, 1);
    uint32_t n = checkcount(L, 2);
    enum kb_dtype dt = checkdtype(L, 3);
    checkwired(L, c, dir, false, "tl.recv_async");
    dispatch(L, c, "tl.recv_async");
    struct future *f = lua_newuserdatauv(L, sizeof *f, 1);
    memset(f, 0, sizeof *f);
    f->tag = &future_tag;
    lua_pushvalue(L, lua_upvalueindex(UV_FUTURE_MT));
    lua_setmetatable(L, -2);
    push_ctx(L, c);
    lua_setiuservalue(L, -2, 1); /* the future keeps its context's memory */
    f->ctx = c;
    f->n = n;
    f->dt = dt;
    struct tl_state *st = c->st;
    int id = dir_intern(L, st, 1);
    f->dir = id >= 0 ? st->dirs[id] : NULL;
    f->dir_ix = id >= 0 ? ctx_dir_ix(c, id, f->dir) : -1;
    /* the bytes land here until tl.wait copies them into TCM (by page
     * reference in f->snap where the IPCQ takes snapshots); a
     * timing-only run receives none */
    f->use_snap = !c->no_data && ipcq_snaps(c->ipcq);
    if (!c->no_data && !f->use_snap) {
        size_t bytes = (size_t)n * kb_dtype_size(dt);
        f->buf = pool_take(&c->st->pool, bytes, &f->buf_cap);
        if (!f->buf && (f->buf = malloc(bytes)))
            f->buf_cap = bytes;
    }
    if (!f->dir || (!f->buf && !c->no_data && !f->use_snap))
        return luaL_error(L, "out of memory");
    const char *why = start_recv(c, f);
    if (why)
        return luaL_error(L, "tl.recv_async: %s", why);
    anchor_future(L, f, true);
    return 1;
}

/* f's receive has ended and been waited for: its process and event are
 * free for the next receive of its direction (nothing refers to them
 * now: the future errs on a second wait before touching its event). */
static void spare_recv(struct future *f)
{
    if (f->rec)
        f->rec->held = false;
    f->rec = NULL;
}

/* wait(future) -> handle */
static int l_wait(lua_State *L)
{
    struct kctx *c = current(L, "tl.wait");
    struct future *f = lua_touserdata(L, 1);
    if (!f || lua_rawlen(L, 1) != sizeof *f || f->tag != &future_tag)
        f = luaL_checkudata(L, 1, KB_FUTURE); /* the usual error */
    if (f->waited)
        return luaL_error(L, "tl.wait: this receive was already waited for");
    if (f->ctx != c) { /* c's kernel runs and its system is open */
        if (f->ctx->ended)
            return luaL_error(L, "tl.wait: a receive of a kernel that has ended");
        lua_getiuservalue(L, 1, 1);
        check_ctx_system(L, -1);
        lua_pop(L, 1);
        return luaL_error(L, "tl.wait: a receive of PE '%s' waited on PE '%s'",
                          f->ctx->pe->name, c->pe->name);
    }
    while (!f->done) {
        void *bp = lkb_block_begin(L, c->s, "tl.wait");
        int rc = sim_wait_event(c->s, f->done_ev);
        lkb_block_end(bp);
        if (rc < 0)
            return luaL_error(L, "tl.wait: %s", sim_errmsg(c->s));
    }
    f->waited = true;
    anchor_future(L, f, false);
    spare_recv(f);
    if (f->got < 0)
        return luaL_error(L, "tl.recv_async: %s", c->ipcq->errmsg(c->ipcq->ctx));
    check_meta(L, c, f->dir, f->n, f->dt, f->got, &f->meta);
    struct handle *h = newhandle(L, c, f->n, f->dt);
    if (f->use_snap)
        hwrite_snap(L, h, &f->snap);
    else
        hwrite(L, h, f->buf);
    /* the bytes are in TCM now: the buffer goes at once, not when the
     * future is collected (a long ring would hold one per step) */
    pool_give(&c->st->pool, f->buf, f->buf_cap);
    f->buf = NULL;
    kb_mem_snap_free(&f->snap);
    return 1;
}

/* A tl.sendrecv receive that has started and has not been taken: on its
 * context's busy list until it is. */
static void busy_link(struct kctx *c, struct future *f)
{
    f->prev = NULL;
    f->next = c->busy_futs;
    if (c->busy_futs)
        c->busy_futs->prev = f;
    c->busy_futs = f;
}

static void busy_unlink(struct kctx *c, struct future *f)
{
    if (f->prev)
        f->prev->next = f->next;
    else
        c->busy_futs = f->next;
    if (f->next)
        f->next->prev = f->prev;
}

/* The send or the wait of a tl.sendrecv failed after its receive started:
 * the receive stays on the busy list and its process may still write into
 * it, so the context (which frees the list) is anchored for good. Raises
 * the error. */
static int fail_busy(lua_State *L, struct kctx *c, const char *msg)
{
    push_ctx(L, c);
    luaL_ref(L, lua_upvalueindex(UV_FUTURES));
    return luaL_error(L, "%s", msg);
}

/* sendrecv(send_dir, h, recv_dir, n, dtype[, release]) -> handle: in one
 * call what
 *     local f = tl.recv_async(recv_dir, n, dtype)
 *     tl.send(send_dir, h)
 *     if release then tl.free(h) end
 *     return tl.wait(f)
 * does, in the same order (the same dispatches, receive process, send,
 * TCM allocations and times), without a future object: the step of a ring
 * (decision 0039). The receive's record lives on the context. */
static int l_sendrecv(lua_State *L)
{
    struct kctx *c = current(L, "tl.sendrecv");
    struct tl_state *st = c->st;
    const char *sdir = lua_tostring(L, 1);
    if (!sdir)
        sdir = luaL_checkstring(L, 1); /* the error */
    struct handle *h = checkhandle_in(L, 2, c);
    if (!handle_of(h, c)) /* another running kernel's: its context stays while this blocks */
        push_ctx(L, hctx(h));
    const char *rdir = lua_tostring(L, 3);
    if (!rdir)
        rdir = luaL_checkstring(L, 3);
    uint32_t n = checkcount(L, 4);
    enum kb_dtype dt = checkdtype_st(L, st, 5);
    bool release = lua_toboolean(L, 6);
    /* the directions by index: named once a call, not on every slot */
    const struct kb_ipcq_if *q = need_ipcq(L, c, "tl.sendrecv");
    int rid = dir_find(st, rdir), sid = dir_find(st, sdir);
    if (rid < 0 || sid < 0) { /* a name new to the state: wired ones only */
        if (!q->wired(q->ctx, rdir, false))
            checkwired(L, c, rdir, false, "tl.sendrecv"); /* the error */
        if (!q->wired(q->ctx, sdir, true))
            checkwired(L, c, sdir, true, "tl.sendrecv");
        rid = dir_intern(L, st, 3);
        sid = dir_intern(L, st, 1);
        if (rid < 0 || sid < 0)
            return luaL_error(L, "out of memory");
    }
    const char *dir = st->dirs[rid];
    int rix, six;
    if (c->sr_ok && c->sr_rid == rid && c->sr_sid == sid) {
        rix = c->sr_rix; /* the last call's directions, found wired then */
        six = c->sr_six;
    } else {
        rix = ctx_dir_ix(c, rid, rdir);
        six = ctx_dir_ix(c, sid, sdir);
        if (!ipcq_wired(q, rix, rdir, false))
            checkwired(L, c, rdir, false, "tl.sendrecv"); /* the error */
        if (!ipcq_wired(q, six, sdir, true))
            checkwired(L, c, sdir, true, "tl.sendrecv");
        /* a wired direction stays wired: by index, kept for the next call */
        c->sr_ok = rix >= 0 && six >= 0;
        c->sr_rid = rid;
        c->sr_sid = sid;
        c->sr_rix = rix;
        c->sr_six = six;
    }
    /* everything that can fail before the receive starts does so now: the
     * send's snapshot buffer and the receive's record */
    bool snaps = ipcq_snaps(q);
    void *sbuf = c->no_data || snaps ? NULL : scratch(L, 0, hbytes(h));
    struct kb_mem_snap *ssn = c->no_data || !snaps ? NULL : scratch_snap(L, 0);
    struct future *f = c->free_futs;
    struct kb_mem_snap keep = {0}; /* a reused record's snapshot: empty, its array kept */
    if (f) {
        c->free_futs = f->next;
        keep = f->snap;
    } else if (!(f = malloc(sizeof *f))) {
        return luaL_error(L, "out of memory");
    }
    memset(f, 0, sizeof *f);
    f->snap = keep;
    f->use_snap = !c->no_data && snaps;
    f->tag = &future_tag;
    f->ctx = c;
    f->n = n;
    f->dt = dt;
    f->dir = dir;
    f->dir_ix = rix;
    if (!c->no_data && !f->use_snap) {
        size_t bytes = (size_t)n * kb_dtype_size(dt);
        f->buf = pool_take(&c->st->pool, bytes, &f->buf_cap);
        if (!f->buf && (f->buf = malloc(bytes)))
            f->buf_cap = bytes;
    }
    if (!f->buf && !c->no_data && !f->use_snap) {
        kb_mem_snap_free(&f->snap);
        free(f);
        return luaL_error(L, "out of memory");
    }
    /* tl.recv_async */
    void *bp = lkb_block_begin(L, c->s, "tl.sendrecv");
    int rc = kb_cpu_dispatch(c->cpu);
    lkb_block_end(bp);
    const char *why = rc < 0 ? NULL : start_recv(c, f);
    if (rc < 0 || why) {
        pool_give(&c->st->pool, f->buf, f->buf_cap);
        kb_mem_snap_free(&f->snap);
        free(f);
        if (rc < 0)
            return luaL_error(L, "tl.sendrecv on PE '%s': dispatch failed (%d)", c->pe->name, rc);
        return luaL_error(L, "tl.sendrecv: %s", why);
    }
    busy_link(c, f);
    /* tl.send */
    struct kctx *hc = handle_of(h, c) ? c : hctx(h); /* (checked: c's, or another live kernel's) */
    if (sbuf && kb_mem_read(hc->tcm, h->addr, sbuf, hbytes(h)) != 0)
        return fail_busy(L, c, kb_mem_errmsg(hc->tcm));
    if (ssn && kb_mem_snap_take(hc->tcm, h->addr, hbytes(h), ssn) != 0)
        return fail_busy(L, c, kb_mem_errmsg(hc->tcm));
    bp = lkb_block_begin(L, c->s, "tl.sendrecv");
    rc = kb_cpu_dispatch(c->cpu);
    if (rc < 0) {
        lkb_block_end(bp);
        lua_pushfstring(L, "tl.sendrecv on PE '%s': dispatch failed (%d)", c->pe->name, rc);
        return fail_busy(L, c, lua_tostring(L, -1));
    }
    struct kb_ipcq_meta meta = {0, (uint32_t)h->dt, h->n};
    rc = ssn ? (six >= 0 ? q->send_snap_at(q->ctx, six, ssn, hbytes(h), &meta)
                         : q->send_snap(q->ctx, sdir, ssn, hbytes(h), &meta))
             : ipcq_send(q, six, sdir, sbuf, hbytes(h), &meta);
    lkb_block_end(bp);
    if (rc < 0) {
        lua_pushfstring(L, "tl.sendrecv: %s", q->errmsg(q->ctx));
        return fail_busy(L, c, lua_tostring(L, -1));
    }
    if (sbuf || ssn) /* (a timing-only run took no buffer) */
        scratch_drop(L);
    /* tl.free */
    if (release && handle_release(hc, h) < 0)
        return fail_busy(L, c, kb_mem_errmsg(hc->tcm));
    /* tl.wait */
    while (!f->done) {
        bp = lkb_block_begin(L, c->s, "tl.sendrecv");
        rc = sim_wait_event(c->s, f->done_ev);
        lkb_block_end(bp);
        if (rc < 0) {
            lua_pushfstring(L, "tl.sendrecv: %s", sim_errmsg(c->s));
            return fail_busy(L, c, lua_tostring(L, -1));
        }
    }
    spare_recv(f);
    if (f->got < 0 || f->meta.count != n || f->meta.dtype != (uint32_t)dt ||
        (uint64_t)f->got != (uint64_t)n * kb_dtype_size(dt)) {
        struct future got = *f;
        busy_unlink(c, f);
        pool_give(&c->st->pool, f->buf, f->buf_cap);
        kb_mem_snap_clear(&f->snap);
        f->next = c->free_futs;
        c->free_futs = f;
        if (got.got < 0)
            return luaL_error(L, "tl.sendrecv: %s", q->errmsg(q->ctx));
        check_meta(L, c, got.dir, n, dt, got.got, &got.meta);
    }
    /* a full TCM raises here: f stays busy, and ctx_gc frees it and its
     * buffer (its process has ended) */
    struct handle *out = newhandle(L, c, n, dt);
    busy_unlink(c, f);
    void *buf = f->buf;
    size_t cap = f->buf_cap;
    f->next = c->free_futs;
    c->free_futs = f;
    int wrc = c->no_data    ? 0
              : f->use_snap ? kb_mem_snap_write(c->tcm, out->addr, &f->snap, 0, hbytes(out))
                            : kb_mem_write(c->tcm, out->addr, buf, hbytes(out));
    kb_mem_snap_clear(&f->snap); /* (the record is free: nothing runs into it) */
    pool_give(&c->st->pool, buf, cap);
    if (wrc != 0)
        return luaL_error(L, "%s", kb_mem_errmsg(c->tcm));
    return 1;
}

/* ---- registration ---------------------------------------------------- */

static const luaL_Reg funcs[] = {
    {"alloc", l_alloc},         {"host_write", l_host_write}, {"host_read", l_host_read},
    {"wire", l_wire},           {"wired", l_wired},           {"sim_of", l_sim_of},
    {"bind_port", l_bind_port},
    {"bind", l_bind},           {"unbind", l_unbind},         {"rank", l_rank},
    {"world_size", l_world_size}, {"program_id", l_program_id}, {"pe", l_pe},
    {"load", l_load},           {"store", l_store},           {"full", l_full},
    {"zeros", l_zeros},
    {"add", l_add},             {"sub", l_sub},               {"mul", l_mul},
    {"div", l_div},             {"maximum", l_maximum},       {"minimum", l_minimum},
    {"fma", l_fma},             {"clamp", l_clamp},           {"exp", l_exp},
    {"log", l_log},             {"softmax", l_softmax},       {"cdiv", l_cdiv},
    {"sum", l_sum},             {"dot", l_dot},               {"send", l_send},
    {"recv", l_recv},           {"recv_async", l_recv_async}, {"wait", l_wait},
    {"free", l_free},           {"sendrecv", l_sendrecv},
    {"tload", l_tload},         {"tstore", l_tstore},         {"shard_places", l_places},
    /* tile pipelines: helper processes, tiles in place, unit counters */
    {"context", l_context},     {"adopt", l_adopt},           {"unadopt", l_unadopt},
    {"gemm_tile", l_gemm_tile}, {"fetch", l_fetch},           {"accumulate", l_accumulate},
    {"cast", l_cast},           {"gemm_time", l_gemm_time},   {"math_time", l_math_time},
    {"copy_time", l_copy_time},   {"pe_stats", l_pe_stats},
    {NULL, NULL}};

static const luaL_Reg handle_meta[] = {
    {"__add", l_add},   {"__sub", l_sub},           {"__mul", l_mul},     {"__div", l_div},
    {"__len", h_len},   {"__index", h_index},       {"__tostring", h_tostring},
    {NULL, NULL}};

/* Pushes UV_K_SHARD, UV_K_SHARD_PLACE and UV_K_PLACES (the upvalues
 * anchor them). */
static void push_shard_keys(lua_State *L)
{
    lua_pushliteral(L, "shard");
    lua_pushliteral(L, "shard_place");
    lua_pushliteral(L, "shard_places");
}

/* Pushes the N_UV upvalues (in UV_* order). */
static void push_upvalues(lua_State *L)
{
    luaL_getmetatable(L, KB_HANDLE);
    luaL_getmetatable(L, KB_FUTURE);
    push_registry_table(L, &ctx_anchor_key);
    push_registry_table(L, &future_table_key);
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &state_key) == LUA_TUSERDATA) {
        lua_rawgetp(L, LUA_REGISTRYINDEX, &strings_key);
        push_shard_keys(L);
        return;
    }
    lua_pop(L, 1);
    struct tl_state *st = lua_newuserdatauv(L, sizeof *st, 1);
    memset(st, 0, sizeof *st);
    lua_newtable(L); /* the blocks of context records (ref_take) */
    lua_setiuservalue(L, -2, 1);
    luaL_setmetatable(L, KB_STATE);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &state_key);
    lua_createtable(L, S_DIR + 8, 0);
    for (int d = 0; d < KB_DTYPE_COUNT; d++) {
        st->dtype[d] = lua_pushstring(L, kb_dtype_name((enum kb_dtype)d));
        lua_rawseti(L, -2, S_DTYPE + d);
    }
    for (int k = 0; k < KIND_COUNT; k++) {
        st->kind[k] = lua_pushstring(L, kind_names[k]);
        lua_rawseti(L, -2, S_KIND + k);
    }
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &strings_key);
    push_shard_keys(L);
}

/* a metatable whose only field is __gc */
static void gc_metatable(lua_State *L, const char *name, lua_CFunction gc)
{
    lkb_newmetatable(L, name);
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
}

static int luaopen_tlcore(lua_State *L)
{
    gc_metatable(L, KB_STATE, state_gc);
    lkb_newmetatable(L, KB_HANDLE);
    push_upvalues(L);
    luaL_setfuncs(L, handle_meta, N_UV);
    lua_pop(L, 1);
    gc_metatable(L, KB_CTX, ctx_gc);
    gc_metatable(L, KB_SCRATCH, scratch_gc);
    gc_metatable(L, KB_FUTURE, fut_gc);
    luaL_newlibtable(L, funcs);
    push_upvalues(L);
    luaL_setfuncs(L, funcs, N_UV);
    lkb_open_vec(L);
    return 1;
}

void lkb_open_tl(lua_State *L)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_tlcore);
    lua_setfield(L, -2, "kbsim.tlcore");
    lua_pop(L, 1);
}
