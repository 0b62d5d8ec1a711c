/* ljson.h — Lua values to JSON text and back
 *
 * The --fast cache of kb.sweep keeps one JSON file per point
 * (lsweep_cache.h) so that a reader can look at it. Integers are written
 * without a decimal point and floats always with one (or an exponent),
 * so that a value reads back with the same number types.
 */
#ifndef KBSIM_LJSON_H
#define KBSIM_LJSON_H

#include <stdbool.h>
#include <stddef.h>

#include <lua.h>

#include "lblob.h"

/* Appends the string [s, s+n) as a JSON string; false if out of memory. */
bool lkb_json_str(struct lkb_blob *b, const char *s, size_t n);

/* Appends the value at idx as JSON; false if JSON cannot hold it exactly
 * (a table mixing key kinds or with holes, NaN, infinity, a function,
 * nesting deeper than LKB_MAX_DEPTH) or out of memory: the blob then holds
 * part of it. */
bool lkb_json_write(lua_State *L, int idx, struct lkb_blob *b);

/* Pushes the JSON document in [p, p+n) as a Lua value, or returns false
 * with the stack as it was. */
bool lkb_json_read(lua_State *L, const char *p, size_t n);

#endif
