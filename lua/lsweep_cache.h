/* lsweep_cache.h — the --fast cache files of kb.sweep
 *
 * One JSON file per sweep point, DIR/KEY.json (KEY: 16 hex digits of the
 * point's input hash), written atomically by the point as it ends. See
 * lsweep_cache.c and docs/results.md; the JSON itself is ljson.c's.
 */
#ifndef KBSIM_LSWEEP_CACHE_H
#define KBSIM_LSWEEP_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "lblob.h"

/* ---- cache files ------------------------------------------------------- */

/* A cache file larger than this is not an entry kbsim wrote (a device,
 * say): it is not read. */
#define LKB_CACHE_MAX_BYTES ((size_t)64 << 20)

/* What lkb_cache_load found. */
enum lkb_cache_found {
    LKB_CACHE_MISS,    /* no file for this key */
    LKB_CACHE_HIT,     /* a valid entry: its document is pushed */
    LKB_CACHE_CORRUPT, /* a file that is no valid entry for this key */
};

/* "DIR/KEY.json" into buf; false if it does not fit. */
bool lkb_cache_path(char *buf, size_t size, const char *dir, uint64_t key);

/* Looks up key in dir; on LKB_CACHE_HIT pushes the entry's document
 * ({kbsim=, sweep=, point=, key=, params=, row=}); pushes nothing
 * otherwise. */
enum lkb_cache_found lkb_cache_load(lua_State *L, const char *dir, uint64_t key);

/* Pushes the document of a cache entry held in [p, p+n) if it is valid
 * JSON of this kbsim version for this key (16 hex digits) and returns
 * true; otherwise pushes nothing and returns false. */
bool lkb_cache_parse(lua_State *L, const char *p, size_t n, const char *hex);

/* Writes point `index` (0-based) of sweep `name`: its parameters and its
 * row at stack indices params and row. Returns 0 when written, 1 when the
 * row is not cacheable (JSON cannot hold it exactly: nothing is written),
 * -1 when writing failed, with "cannot write 'PATH': REASON" in why. */
int lkb_cache_store(lua_State *L, const char *dir, const char *name, size_t index,
                   uint64_t key, int params, int row, char *why, size_t whysize);

/* Removes from dir the temporary files (open_unique's) of processes of
 * this host that no longer run: a writer killed mid-write (kill -9, a
 * rank of an MPI job that died) leaves one behind. Files of other hosts,
 * and of live processes, stay. */
void lkb_cache_clean(const char *dir);

/* Whether files can be written in dir: writes (not only creates) a
 * scratch file there and removes it. 0, or an errno value. */
int lkb_cache_probe(const char *dir);

#endif
