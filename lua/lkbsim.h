/* lkbsim.h — Lua binding of the kbsim kernel: the `kbsim` module
 *
 * The binding is the single door between C and Lua. The CLI (kbsim.c) uses
 * only what is declared here plus the Lua API.
 */
#ifndef KBSIM_LKBSIM_H
#define KBSIM_LKBSIM_H

#include <stdbool.h>

#include <lua.h>

/* What the command line gives a script as kb.options. The strings must
 * outlive the call to kb_preload (they are copied into Lua). */
struct kb_options {
    const char *out;      /* output folder */
    int jobs;             /* parallel sweep points */
    const char **set;     /* "KEY=VALUE" strings */
    int nset;
    const char *topology; /* system description, or NULL */
    bool quiet;
};

/* Opens the module and leaves it on the stack (for package.preload or
 * luaL_requiref). kb.options is empty unless kb_preload set it first.
 * The host must zero the main thread's lua_getextraspace area after
 * creating the state: the module keeps its state pointer there. */
int luaopen_kbsim(lua_State *L);

/* Registers `kbsim` in package.preload with these options. */
void kb_preload(lua_State *L, const struct kb_options *opt);

/* Message handler for lua_pcall: the message plus a traceback. */
int kb_traceback(lua_State *L);

/* lua_pcall with kb_traceback as the message handler. */
int kb_pcall(lua_State *L, int nargs, int nresults);

/* Number of kb.check calls that failed so far in this Lua state. */
long kb_failed_checks(lua_State *L);

#endif
