/* lblob.c — growable byte buffers for the binding (lblob.h) */
#include "lblob.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#define KB_BLOB "kbsim.sweep.blob"

bool lkb_blob_reserve(struct lkb_blob *b, size_t more)
{
    if (b->cap - b->n >= more)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < more) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    unsigned char *p = realloc(b->p, cap);
    if (p == NULL)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

bool lkb_blob_add(struct lkb_blob *b, const void *src, size_t n)
{
    if (!lkb_blob_reserve(b, n))
        return false;
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return true;
}

bool lkb_blob_str(struct lkb_blob *b, const char *s)
{
    return lkb_blob_add(b, s, strlen(s));
}

void lkb_blob_free(struct lkb_blob *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static int blob_gc(lua_State *L)
{
    lkb_blob_free(lua_touserdata(L, 1));
    return 0;
}

/* A buffer owned by a userdata on the stack, so that an error raised
 * while filling it does not leak it. */
struct lkb_blob *lkb_newblob(lua_State *L)
{
    struct lkb_blob *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    if (luaL_newmetatable(L, KB_BLOB)) {
        lua_pushcfunction(L, blob_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return b;
}

bool lkb_blob_read_file(const char *path, struct lkb_blob *b, size_t max)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    char buf[8192];
    size_t n;
    bool ok = true;
    size_t total = 0;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        total += n;
        if (total > max) {
            fclose(f);
            errno = EFBIG;
            return false;
        }
        ok = lkb_blob_add(b, buf, n);
    }
    if (ok && ferror(f)) {
        ok = false;
        errno = errno ? errno : EIO;
    }
    int e = errno;
    fclose(f);
    errno = e;
    return ok;
}
