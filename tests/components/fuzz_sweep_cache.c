/* fuzz_sweep_cache.c — libFuzzer target for the reader of kb.sweep's cache
 * entries (lua/lsweep_cache.c over lua/ljson.c): the input is a cache file. Any crash,
 * leak or sanitizer report is a bug; "not a valid entry" is the expected
 * outcome. An entry that reads back must write back (lkb_cache_store) and
 * read again as the same bytes. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "lsweep_cache.h"

#define HEX "0123456789abcdef"
#define KEY 0x0123456789abcdefULL

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static char dir[64];

/* The entry's file as lkb_cache_store writes it, in a blob; false if its
 * row is not cacheable. */
static int store_and_read(lua_State *L, struct lkb_blob *out)
{
    char why[512], path[128];
    lua_getfield(L, -1, "params");
    lua_getfield(L, -2, "row");
    int rc = lkb_cache_store(L, dir, "fuzz", 0, KEY, -2, -1, why, sizeof why);
    lua_pop(L, 2);
    if (rc != 0)
        return rc;
    lkb_cache_path(path, sizeof path, dir, KEY);
    if (!lkb_blob_read_file(path, out, LKB_CACHE_MAX_BYTES))
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (dir[0] == '\0') {
        strcpy(dir, "/tmp/fuzz_sweep_cache.XXXXXX");
        if (mkdtemp(dir) == NULL)
            abort();
    }
    lua_State *L = luaL_newstate();
    if (lkb_cache_parse(L, (const char *)data, size, HEX)) {
        /* round trip: what was read writes, reads back, and writes the
         * same bytes again */
        struct lkb_blob a = {0}, b = {0};
        if (store_and_read(L, &a) == 0) {
            lua_settop(L, 0);
            if (!lkb_cache_parse(L, (const char *)a.p, a.n, HEX))
                abort();
            if (store_and_read(L, &b) != 0 || a.n != b.n || memcmp(a.p, b.p, a.n) != 0)
                abort();
        }
        lkb_blob_free(&a);
        lkb_blob_free(&b);
    }
    lua_close(L);
    return 0;
}
