/* lstate.c — the one place a kbsim Lua state is made (lkbsim.h)
 *
 * The command line runs its script in one (kbsim.c, and `kbsim serve`),
 * and every kb.sweep point runs in one of its own (lsweep.c): both get
 * the same libraries and modules from here.
 */
#include "lkb_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <lauxlib.h>
#include <lualib.h>

/* ---- small-object pool (decision 0033) -------------------------------- */

/* Lua objects of up to POOL_BIG bytes (tables, closures, userdata such as
 * kernel handles and futures, short strings) come from free lists by size
 * class, carved from one address range reserved at start (POOL_RESERVE,
 * MAP_NORESERVE: pages are used only as touched); larger blocks, and
 * everything once the range is used up, from malloc. A block is the
 * pool's when its address lies in the range, so blocks made before the
 * pool took over (luaL_newstate's own allocator made the state) are
 * realloc'd and freed by libc as before. The pool goes with the state: the
 * last block lua_close frees is the state's main block (its extra space
 * starts it). Not under ASan, which must see every block to find heap
 * errors: there the state keeps luaL_newstate's allocator. */
#if defined(__SANITIZE_ADDRESS__)
#define KB_LUA_POOL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KB_LUA_POOL 0
#endif
#endif
#ifndef KB_LUA_POOL
#define KB_LUA_POOL 1
#endif

#if KB_LUA_POOL
enum { POOL_GRAIN = 16, POOL_BIG = 256, POOL_CLASSES = POOL_BIG / POOL_GRAIN };
/* addresses, not memory: 64 GiB, or less where that cannot be had (under
 * valgrind, say), down to 256 MiB */
#define POOL_RESERVE_MAX ((size_t)1 << 36)
#define POOL_RESERVE_MIN ((size_t)1 << 28)

struct lua_pool {
    char *base, *next, *end;   /* the range, and where the untouched part starts */
    size_t reserved;           /* end - base */
    void *free[POOL_CLASSES];  /* freed blocks by class, linked through themselves */
    void *main_block;          /* the state's main block: its free is the last */
};

static int pool_class(size_t n) { return (int)((n + POOL_GRAIN - 1) / POOL_GRAIN) - 1; }

static bool pool_owns(const struct lua_pool *p, const void *b)
{
    return (const char *)b >= p->base && (const char *)b < p->end;
}

static void pool_put(struct lua_pool *p, void *b, size_t n);

static void *pool_get(struct lua_pool *p, size_t n)
{
    int k = pool_class(n);
    void *b = p->free[k];
    if (b) {
        memcpy(&p->free[k], b, sizeof(void *));
        return b;
    }
    size_t sz = (size_t)(k + 1) * POOL_GRAIN;
    /* a block of whole cache lines starts on one (a kernel handle is 64
     * bytes: one line to write when it is made and to read when it is
     * cold); the bytes skipped go to the free list of their own size */
    size_t gap = sz % 64 ? 0 : (size_t)(-(uintptr_t)p->next & 63);
    if ((size_t)(p->end - p->next) < gap + sz)
        return malloc(n); /* the range is used up */
    if (gap) {
        pool_put(p, p->next, gap);
        p->next += gap;
    }
    b = p->next;
    p->next += sz;
    return b;
}

/* b (a pool block whose size the caller knew as n) back to its class:
 * a block of class k holds at least n bytes. */
static void pool_put(struct lua_pool *p, void *b, size_t n)
{
    int k = pool_class(n ? n : 1);
    memcpy(b, &p->free[k], sizeof(void *));
    p->free[k] = b;
}

static void *pool_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct lua_pool *p = ud;
    if (ptr && !pool_owns(p, ptr)) { /* libc's block (the big ones, and the first) */
        if (nsize == 0) {
            free(ptr);
            if (ptr == p->main_block) { /* lua_close's last free */
                munmap(p->base, p->reserved);
                free(p);
            }
            return NULL;
        }
        if (nsize <= POOL_BIG && nsize <= osize)
            return ptr; /* shrinking must not fail: it stays libc's */
        return realloc(ptr, nsize);
    }
    if (nsize == 0) {
        if (ptr)
            pool_put(p, ptr, osize);
        return NULL;
    }
    if (ptr && nsize <= osize)
        return ptr; /* shrinks in place (its class is at least as large) */
    if (ptr && pool_class(nsize) == pool_class(osize))
        return ptr;
    void *b = nsize <= POOL_BIG ? pool_get(p, nsize) : malloc(nsize);
    if (b && ptr) {
        memcpy(b, ptr, osize < nsize ? osize : nsize);
        pool_put(p, ptr, osize);
    }
    return b;
}

/* Hands L's allocations to a new pool; L keeps its allocator when no
 * range can be reserved. */
static void use_pool(lua_State *L)
{
    struct lua_pool *p = calloc(1, sizeof *p);
    if (!p)
        return;
    void *m = MAP_FAILED;
    size_t size = POOL_RESERVE_MAX;
    for (; m == MAP_FAILED && size >= POOL_RESERVE_MIN; size /= 4)
        m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
    if (m == MAP_FAILED) {
        free(p);
        return;
    }
    p->reserved = size * 4; /* the loop divided once more */
    p->base = p->next = m;
    p->end = p->base + p->reserved;
    p->main_block = lua_getextraspace(L);
    lua_setallocf(L, pool_alloc, p);
}
#endif

/* Lets scripts require the Lua library (require "kbsim.x" finds
 * lua/kbsim/x.lua) from the source tree without installing it. */
static void add_lua_path(lua_State *L)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", KBSIM_LUA_DIR,
                    KBSIM_LUA_DIR, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
}

/* In a protected call: an allocation failing in luaL_openlibs or the
 * preload is an error returned, not a panic. */
static int setup(lua_State *L)
{
    const struct lkb_options *opt = lua_touserdata(L, 1);
    lua_pop(L, 1);
    luaL_openlibs(L);
    add_lua_path(L);
    lkb_preload(L, opt);
    return 0;
}

lua_State *lkb_new_state(const struct lkb_options *opt, char *err, size_t errsize)
{
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        snprintf(err, errsize, "cannot create a Lua state (out of memory)");
        return NULL;
    }
    /* Lua leaves the main thread's extra space uninitialised; the kbsim
     * module keeps its state pointer there (see getstate in lkbsim.c). */
    memset(lua_getextraspace(L), 0, LUA_EXTRASPACE);
#if KB_LUA_POOL
    use_pool(L);
#endif
    lua_pushcfunction(L, setup);
    lua_pushlightuserdata(L, (void *)opt);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        snprintf(err, errsize, "cannot create a Lua state: %s",
                 msg ? msg : "(error object is not a string)");
        lua_close(L);
        return NULL;
    }
    return L;
}
