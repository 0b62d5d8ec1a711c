/* lserve.h — `kbsim serve`: the co-simulation server (docs/cosim.md)
 *
 * The command line (kbsim.c) collects the server's options here and hands
 * them to lkb_serve, which runs lua/kbsim/serve.lua over the sockets of
 * lua/lserve.c (module kbsim.serve_io).
 */
#ifndef KBSIM_LSERVE_H
#define KBSIM_LSERVE_H

#include <stdbool.h>

#include <lua.h>

struct lkb_serve_options {
    const char *listen;       /* Unix socket path or HOST:PORT; NULL: OUT/kbsim.sock */
    const char *token;        /* a client's hello must carry it, or NULL */
    bool allow_remote;        /* TCP on a non-loopback address (needs a token) */
    const char *max_payload;  /* bytes per frame, as given, or NULL */
    const char *timeout;      /* seconds a collective waits for its members, or NULL */
    const char *kernels;      /* a Lua file of kernels clients launch by name, or NULL */
};

/* Runs the server in L (the kbsim module preloaded, kb.options set) until
 * Ctrl-C or SIGTERM. Returns the exit status: 0, or 2 after a message on
 * stderr (a bad option, an address in use, a configuration error). */
int lkb_serve(lua_State *L, const struct lkb_serve_options *opt);

#endif
