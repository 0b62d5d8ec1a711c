/* lsweep_cache.c — the --fast cache of kb.sweep: one JSON file per point
 *
 * Every point's file is OUT/cache/SWEEP/KEY.json, KEY being the point's
 * input hash (lsweep.c). A point's file is written by the point itself as
 * soon as it ends, under a temporary name no other writer uses (host,
 * process, a counter; created exclusively) and then renamed into place,
 * so that any number of threads and processes, on one machine or sharing
 * a file system, may fill one cache: a reader sees a whole file or none,
 * and two writers of one key write the same bytes. See docs/results.md.
 */
#include "lsweep_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>

#include "ljson.h"

/* ---- cache files ------------------------------------------------------- */

bool lkb_cache_path(char *buf, size_t size, const char *dir, uint64_t key)
{
    int n = snprintf(buf, size, "%s/%016llx.json", dir, (unsigned long long)key);
    return n >= 0 && (size_t)n < size;
}

/* This host's name as open_unique writes it into a temporary name. */
static void host_name(char *host, size_t size)
{
    if (gethostname(host, size) != 0)
        snprintf(host, size, "host");
    host[size - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
}

/* A fresh file next to path, opened for writing, whose name no other
 * thread or process uses: host name, process id and a counter, created
 * with O_EXCL (retried with the next counter if it exists). */
static int open_unique(const char *path, char *tmp, size_t size)
{
    static atomic_ulong counter;
    char host[64];
    host_name(host, sizeof host);
    for (int tries = 0; tries < 100; tries++) {
        unsigned long k = atomic_fetch_add(&counter, 1);
        int n = snprintf(tmp, size, "%s.%s.%ld.%lu.tmp", path, host, (long)getpid(), k);
        if (n < 0 || (size_t)n >= size) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

static bool write_all(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Writes [p, p+n) to path through a temporary file and a rename, so that
 * a reader never sees half a file. */
static bool write_atomic(const char *path, const void *p, size_t n)
{
    char tmp[4200];
    int fd = open_unique(path, tmp, sizeof tmp);
    if (fd < 0)
        return false;
    bool ok = write_all(fd, p, n);
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, path) == 0)
        return true;
    if (ok)
        e = errno;
    remove(tmp);
    errno = e;
    return false;
}

int lkb_cache_probe(const char *dir)
{
    char path[4200], tmp[4200];
    if (snprintf(path, sizeof path, "%s/.probe", dir) >= (int)sizeof path)
        return ENAMETOOLONG;
    int fd = open_unique(path, tmp, sizeof tmp);
    if (fd < 0)
        return errno;
    /* a few blocks, not an empty file: a full disk accepts those */
    static const char block[4096];
    bool ok = write_all(fd, block, sizeof block);
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    remove(tmp);
    return ok ? 0 : e;
}

/* The process id of temporary file `name` (NAME.HOST.PID.K.tmp) when HOST
 * is `host`; 0 for any other name. */
static long tmp_pid(const char *name, const char *host)
{
    size_t n = strlen(name), h = strlen(host);
    if (n < 5 || strcmp(name + n - 4, ".tmp") != 0)
        return 0;
    size_t e = n - 4, i = e; /* K */
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    if (i == e || i == 0 || name[i - 1] != '.')
        return 0;
    size_t pe = i - 1, p = pe; /* PID */
    while (p > 0 && name[p - 1] >= '0' && name[p - 1] <= '9')
        p--;
    if (p == pe || pe - p > 9 || p < h + 2 || name[p - 1] != '.' ||
        strncmp(name + p - 1 - h, host, h) != 0 || name[p - 2 - h] != '.')
        return 0;
    return strtol(name + p, NULL, 10);
}

void lkb_cache_clean(const char *dir)
{
    char host[64];
    host_name(host, sizeof host);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        long pid = tmp_pid(de->d_name, host);
        if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) /* alive, or not ours to ask */
            continue;
        char path[4200];
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) < (int)sizeof path)
            (void)unlink(path); /* (another cleaner may have been first) */
    }
    closedir(d);
}

/* The document at the top has only the keys lkb_cache_store writes, the
 * sweep's name a string and the point a positive integer. A null row (a
 * point that returned nothing) reads as no "row": a key renamed or added
 * is what tells a damaged "row" apart. */
static bool entry_keys_ok(lua_State *L)
{
    static const char *const keys[] = {"kbsim", "sweep", "point", "key", "params", "row", NULL};
    bool ok = true;
    lua_pushnil(L);
    while (ok && lua_next(L, -2) != 0) {
        ok = false;
        for (int i = 0; keys[i] && lua_type(L, -2) == LUA_TSTRING; i++)
            ok = ok || strcmp(lua_tostring(L, -2), keys[i]) == 0;
        lua_pop(L, 1);
    }
    if (!ok) {
        lua_pop(L, 1); /* the key lua_next left */
        return false;
    }
    lua_getfield(L, -1, "sweep");
    lua_getfield(L, -2, "point");
    ok = lua_type(L, -2) == LUA_TSTRING && lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1;
    lua_pop(L, 2);
    return ok;
}

bool lkb_cache_parse(lua_State *L, const char *p, size_t n, const char *hex)
{
    if (!lkb_json_read(L, p, n))
        return false;
    bool ok = lua_istable(L, -1);
    if (ok) {
        lua_getfield(L, -1, "kbsim");
        lua_getfield(L, -2, "key");
        const char *v = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        ok = v && k && strcmp(v, KBSIM_VERSION) == 0 && strcmp(k, hex) == 0;
        lua_pop(L, 2);
    }
    ok = ok && entry_keys_ok(L);
    if (!ok)
        lua_pop(L, 1);
    return ok;
}

enum lkb_cache_found lkb_cache_load(lua_State *L, const char *dir, uint64_t key)
{
    char path[4200], hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)key);
    if (!lkb_cache_path(path, sizeof path, dir, key))
        return LKB_CACHE_MISS;
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOENT || errno == ENOTDIR ? LKB_CACHE_MISS : LKB_CACHE_CORRUPT;
    if (!S_ISREG(st.st_mode))
        return LKB_CACHE_CORRUPT; /* a folder, a device: not kbsim's */
    struct lkb_blob *b = lkb_newblob(L);
    if (!lkb_blob_read_file(path, b, LKB_CACHE_MAX_BYTES)) {
        bool missing = errno == ENOENT || errno == ENOTDIR;
        lua_pop(L, 1);
        return missing ? LKB_CACHE_MISS : LKB_CACHE_CORRUPT;
    }
    bool ok = lkb_cache_parse(L, (const char *)b->p, b->n, hex);
    lua_remove(L, ok ? -2 : -1);
    return ok ? LKB_CACHE_HIT : LKB_CACHE_CORRUPT;
}

/* strerror for a point's thread: several write their cache at once, and
 * strerror's buffer is shared (the build defines _GNU_SOURCE: GNU's
 * strerror_r returns the text) */
static const char *error_text(int e, char *buf, size_t n)
{
    return strerror_r(e, buf, n);
}

int lkb_cache_store(lua_State *L, const char *dir, const char *name, size_t index,
                   uint64_t key, int params, int row, char *why, size_t whysize)
{
    char etext[128];
    char path[4200], hex[17], num[32];
    params = lua_absindex(L, params);
    row = lua_absindex(L, row);
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)key);
    if (!lkb_cache_path(path, sizeof path, dir, key)) {
        snprintf(why, whysize, "cannot write in '%s': %s", dir, error_text(ENAMETOOLONG, etext, sizeof etext));
        return -1;
    }
    snprintf(num, sizeof num, "%zu", index + 1);
    struct lkb_blob *b = lkb_newblob(L);
    size_t mark;
    bool ok = lkb_blob_str(b, "{\"kbsim\": ") && lkb_json_str(b, KBSIM_VERSION, strlen(KBSIM_VERSION)) &&
              lkb_blob_str(b, ", \"sweep\": ") && lkb_json_str(b, name, strlen(name)) &&
              lkb_blob_str(b, ", \"point\": ") && lkb_blob_str(b, num) &&
              lkb_blob_str(b, ", \"key\": ") && lkb_json_str(b, hex, 16);
    mark = b->n;
    if (ok && !(lkb_blob_str(b, ", \"params\": ") && lkb_json_write(L, params, b)))
        b->n = mark; /* the parameters are only there for a human reader */
    ok = ok && lkb_blob_str(b, ", \"row\": ") && lkb_json_write(L, row, b) &&
         lkb_blob_str(b, "}\n");
    int rc = 1;
    if (ok) {
        rc = 0;
        if (!write_atomic(path, b->p, b->n)) {
            snprintf(why, whysize, "cannot write '%s': %s", path,
                     error_text(errno, etext, sizeof etext));
            rc = -1;
        }
    }
    lua_pop(L, 1);
    return rc;
}
