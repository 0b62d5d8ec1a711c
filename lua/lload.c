/* lload.c — Lua source only: scripts, modules and load/loadfile/dofile
 *
 * Lua's loaders also take precompiled chunks, and Lua does not verify
 * bytecode: a damaged or hostile .luac file crashes the process. kbsim
 * runs Lua source only (docs/decisions/0010-lua-source-only.md): the main
 * script, modules found on package.path, and the base library's load,
 * loadfile and dofile all load in mode "t", and a binary chunk gets an
 * error naming the file. C modules (package.cpath) are native code and
 * stay as they are. kb.sweep moves functions between its Lua states as
 * bytecode, but only bytecode it dumped itself (lua/ltransport.c).
 */
#include <stdbool.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lkb_internal.h"

/* Replaces Lua's message about a binary chunk (which names no file) with
 * one that names `what`; other messages stay as they are. */
static void explain_binary(lua_State *L, const char *what)
{
    const char *msg = lua_tostring(L, -1);
    if (msg && strstr(msg, "attempt to load a binary chunk")) {
        lua_pop(L, 1);
        lua_pushfstring(L, "%s: a precompiled (binary) chunk; kbsim loads Lua source only",
                        what);
    }
}

int lkb_loadfile(lua_State *L, const char *path)
{
    int rc = luaL_loadfilex(L, path, "t");
    if (rc == LUA_ERRSYNTAX)
        explain_binary(L, path ? path : "stdin");
    return rc;
}

/* package.searchers[2]: a module on package.path, as Lua's own searcher
 * finds it, loaded as source. */
static int search_lua_source(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    lua_getfield(L, lua_upvalueindex(1), "searchpath");
    lua_pushvalue(L, 1);
    if (lua_getfield(L, lua_upvalueindex(1), "path") != LUA_TSTRING)
        return luaL_error(L, "'package.path' must be a string");
    lua_call(L, 2, 2);
    if (lua_isnil(L, -2))
        return 1; /* not found: the list of files tried */
    const char *file = lua_tostring(L, -2);
    if (lkb_loadfile(L, file) != LUA_OK)
        return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, file,
                          lua_tostring(L, -1));
    lua_pushstring(L, file); /* the second argument of the module's chunk */
    return 2;
}

/* The base library's loadfile([filename [, mode [, env]]]) (the original
 * as upvalue 1), with
 * the argument at `mode` forced to "t"; an absent env stays absent. A
 * binary chunk's message names `what` (the file). */
static int call_in_text_mode(lua_State *L, int mode, const char *what)
{
    if (lua_gettop(L) < mode)
        lua_settop(L, mode);
    lua_pushliteral(L, "t");
    lua_replace(L, mode);
    int n = lua_gettop(L);
    lua_pushstring(L, what); /* kept below the call: the message needs it */
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_rotate(L, 1, 2);
    lua_call(L, n, LUA_MULTRET);
    int results = lua_gettop(L) - 1;
    if (results == 2 && lua_isnil(L, 2)) /* nil, message */
        explain_binary(L, lua_tostring(L, 1));
    return results;
}

/* Stack slot where the piece a reader function returned is kept while
 * lua_load reads it (load's arguments are slots 1 to 4). */
#define READER_PIECE 5

/* lua_Reader for load(function): the next piece of the chunk from the
 * function in slot 1; nil or "" ends it. */
static const char *function_reader(lua_State *L, void *ud, size_t *size)
{
    (void)ud;
    luaL_checkstack(L, 2, "too many nested functions");
    lua_pushvalue(L, 1);
    lua_call(L, 0, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        *size = 0;
        return NULL;
    }
    if (!lua_isstring(L, -1))
        luaL_error(L, "reader function must return a string");
    lua_replace(L, READER_PIECE);
    return lua_tolstring(L, READER_PIECE, size);
}

/* load(chunk [, chunkname [, mode [, env]]]): the base library's, in mode
 * "t" whatever mode says. Loaded here rather than by calling the original,
 * so that a nested load costs one C level, as Lua's own does. */
static int load_text(lua_State *L)
{
    size_t len;
    const char *text = lua_tolstring(L, 1, &len);
    bool has_env = !lua_isnone(L, 4);
    int status;
    if (text) {
        const char *name = luaL_optstring(L, 2, text);
        status = luaL_loadbufferx(L, text, len, name, "t");
    } else {
        const char *name = luaL_optstring(L, 2, "=(load)");
        luaL_checktype(L, 1, LUA_TFUNCTION);
        lua_settop(L, READER_PIECE);
        status = lua_load(L, function_reader, NULL, name, "t");
    }
    if (status != LUA_OK) {
        explain_binary(L, "load");
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    if (has_env) { /* the env becomes the chunk's first upvalue, _ENV */
        lua_pushvalue(L, 4);
        if (!lua_setupvalue(L, -2, 1))
            lua_pop(L, 1);
    }
    return 1;
}

static int loadfile_text(lua_State *L)
{
    return call_in_text_mode(L, 2, luaL_optstring(L, 1, "stdin"));
}

static int dofile_done(lua_State *L, int status, lua_KContext k)
{
    (void)status;
    (void)k;
    return lua_gettop(L) - 1;
}

/* dofile([filename]): as the base library's, source only */
static int dofile_text(lua_State *L)
{
    const char *file = luaL_optstring(L, 1, NULL);
    lua_settop(L, 1);
    if (lkb_loadfile(L, file) != LUA_OK)
        return lua_error(L);
    lua_callk(L, 0, LUA_MULTRET, 0, dofile_done);
    return dofile_done(L, LUA_OK, 0);
}

/* Wraps the global `name` in fn, the original as fn's upvalue. */
static void wrap_global(lua_State *L, const char *name, lua_CFunction fn)
{
    lua_getglobal(L, name);
    lua_pushcclosure(L, fn, 1);
    lua_setglobal(L, name);
}

void lkb_open_source_only(lua_State *L)
{
    lua_pushcfunction(L, load_text);
    lua_setglobal(L, "load");
    wrap_global(L, "loadfile", loadfile_text);
    lua_pushcfunction(L, dofile_text);
    lua_setglobal(L, "dofile");
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    if (lua_getfield(L, -1, "package") == LUA_TTABLE &&
        lua_getfield(L, -1, "searchers") == LUA_TTABLE) {
        lua_pushvalue(L, -2);
        lua_pushcclosure(L, search_lua_source, 1);
        lua_rawseti(L, -2, 2);
    }
    lua_settop(L, lua_gettop(L) - 3);
}
