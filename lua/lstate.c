/* lstate.c — the one place a kbsim Lua state is made (lkbsim.h)
 *
 * The command line runs its script in one (kbsim.c, and `kbsim serve`),
 * and every kb.sweep point runs in one of its own (lsweep.c): both get
 * the same libraries and modules from here.
 */
#include "lkb_internal.h"

#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

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
