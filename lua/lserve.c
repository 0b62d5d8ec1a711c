/* lserve.c — `kbsim serve`: sockets, frames and the loop of the
 * co-simulation server (module kbsim.serve_io; protocol in docs/cosim.md)
 *
 * C owns the libuv loop, the listener, the connections and the framing:
 * a frame's 24-byte header is checked here, so a payload over the limit is
 * refused before a byte of it is stored, and only whole frames reach Lua.
 * lua/kbsim/serve.lua owns everything a frame means. Simulations run in
 * batches from sim_run_uv on the same loop (lkb_sim_run_uv), so clients are
 * served while a collective is simulated.
 */
#include "lserve.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <lauxlib.h>
#include <uv.h>

#include "lkb_internal.h"
#include "memory.h"
#include "trace.h"

#define KB_SERVER "kbsim.server"
#define FRAME_HEADER 24
#define META_LIMIT (1u << 16)
#define READ_CHUNK (1u << 16)
#define TICK_MS 100

/* Status codes C sends itself (the rest: serve.lua, docs/cosim.md). */
enum { ST_MALFORMED = 1, ST_TOO_LARGE = 4 };

union stream {
    uv_handle_t h;
    uv_stream_t s;
    uv_pipe_t pipe;
    uv_tcp_t tcp;
};

struct server;

struct conn {
    union stream h;
    struct server *srv;
    uint32_t id;
    unsigned char head[FRAME_HEADER];
    size_t head_got;
    char *body;                /* meta then data of the frame being read; kept and
                                  reused: fresh pages of a large buffer cost a fault each */
    size_t body_cap, body_len, body_got;
    bool in_body;
    struct wreq *spare;        /* a large frame buffer, written and free again */
    uint64_t skip;             /* bytes of a refused frame still to drop */
    char buf[READ_CHUNK];
    struct conn *next;
};

struct server {
    lua_State *L;
    uv_loop_t loop;
    bool loop_open;
    union stream listener;
    bool listening;
    uv_signal_t sigint, sigterm;
    uv_timer_t tick;
    bool handles_open;
    struct sim *sim;
    int handlers;              /* registry ref of serve.lua's callbacks */
    char *unix_path;           /* to remove at the end */
    uint64_t max_payload;
    uint32_t next_id;
    struct conn *conns;
    bool stopping;
    const char *stop_reason;
    bool interrupting;         /* srv:interrupt() asked the running simulation to stop */
};

/* ---- little-endian fields -------------------------------------------- */

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t get_u16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

/* ---- calls into serve.lua -------------------------------------------- */

/* Pushes handler `name`; false (nothing pushed) if there is none. */
static bool push_handler(struct server *srv, const char *name)
{
    lua_State *L = srv->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, srv->handlers);
    if (lua_getfield(L, -1, name) != LUA_TFUNCTION) {
        lua_pop(L, 2);
        return false;
    }
    lua_remove(L, -2);
    return true;
}

/* Calls the handler pushed with its nargs arguments. A handler's own
 * error is a bug of the server, not of a client: it is reported and the
 * server goes on. */
static bool call_handler(struct server *srv, int nargs, int nresults)
{
    if (lkb_pcall(srv->L, nargs, nresults) == LUA_OK)
        return true;
    fprintf(stderr, "kbsim serve: internal error: %s\n", lua_tostring(srv->L, -1));
    lua_pop(srv->L, 1);
    return false;
}

/* ---- writing frames --------------------------------------------------- */

struct wreq {
    uv_write_t req;
    bool close_after;
    size_t cap;
    unsigned char bytes[];
};

/* Frame buffers at least this large are kept for the next reply. */
#define SPARE_MIN (1u << 20)

static void conn_close(struct conn *c);

static void write_cb(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct conn *c = req->data;
    (void)status;
    if (w->close_after && c)
        conn_close(c);
    if (c && !uv_is_closing(&c->h.h) && w->cap >= SPARE_MIN && !c->spare)
        c->spare = w;
    else
        free(w);
}

static struct conn *find_conn(struct server *srv, uint32_t id)
{
    for (struct conn *c = srv->conns; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

/* A frame's data part: bytes, or `len` bytes of a PE memory at addr,
 * copied straight into the frame (a tensor read needs no Lua string). */
struct frame_data {
    const char *bytes;
    size_t len;
    struct kb_mem *mem;
    uint64_t addr;
};

/* Queues one frame; false if the connection is gone, memory is short or
 * the memory read fails. */
static bool send_frame_data(struct conn *c, uint16_t version, uint16_t op, uint32_t id,
                            uint32_t status, const char *meta, size_t mlen,
                            const struct frame_data *fd, bool close_after)
{
    size_t dlen = fd ? fd->len : 0;
    if (uv_is_closing(&c->h.h) || mlen > UINT32_MAX || dlen > UINT32_MAX)
        return false;
    size_t need = FRAME_HEADER + mlen + dlen;
    struct wreq *w;
    if (c->spare && c->spare->cap >= need) {
        w = c->spare;
        c->spare = NULL;
    } else {
        w = malloc(sizeof *w + need);
        if (!w)
            return false;
        w->cap = need;
    }
    unsigned char *p = w->bytes;
    memcpy(p, "KBSM", 4);
    put_u16(p + 4, version);
    put_u16(p + 6, op);
    put_u32(p + 8, id);
    put_u32(p + 12, status);
    put_u32(p + 16, (uint32_t)mlen);
    put_u32(p + 20, (uint32_t)dlen);
    if (mlen)
        memcpy(p + FRAME_HEADER, meta, mlen);
    if (dlen && fd->mem) {
        if (kb_mem_read(fd->mem, fd->addr, p + FRAME_HEADER + mlen, dlen) != 0) {
            if (!c->spare && w->cap >= SPARE_MIN)
                c->spare = w;
            else
                free(w);
            return false;
        }
    } else if (dlen) {
        memcpy(p + FRAME_HEADER + mlen, fd->bytes, dlen);
    }
    w->close_after = close_after;
    w->req.data = c;
    uv_buf_t b = uv_buf_init((char *)p, (unsigned)(FRAME_HEADER + mlen + dlen));
    if (uv_write(&w->req, &c->h.s, &b, 1, write_cb) < 0) {
        if (!c->spare && w->cap >= SPARE_MIN)
            c->spare = w;
        else
            free(w);
        return false;
    }
    return true;
}

static bool send_frame(struct conn *c, uint16_t version, uint16_t op, uint32_t id,
                       uint32_t status, const char *meta, size_t mlen, const char *data,
                       size_t dlen, bool close_after)
{
    struct frame_data fd = {.bytes = data, .len = dlen};
    return send_frame_data(c, version, op, id, status, meta, mlen, &fd, close_after);
}

/* An error reply from C: meta is the message as a u16-prefixed string. */
static void send_error(struct conn *c, const unsigned char *head, uint32_t status,
                       const char *msg, bool close_after)
{
    size_t n = strlen(msg);
    unsigned char meta[2 + 256];
    if (n > 256)
        n = 256;
    put_u16(meta, (uint16_t)n);
    memcpy(meta + 2, msg, n);
    if (!send_frame(c, get_u16(head + 4), get_u16(head + 6), get_u32(head + 8), status,
                    (const char *)meta, 2 + n, NULL, 0, close_after) && close_after)
        conn_close(c);
}

/* ---- reading frames --------------------------------------------------- */

static void conn_closed_cb(uv_handle_t *h)
{
    struct conn *c = h->data;
    free(c->body);
    free(c->spare);
    free(c);
}

/* Unlinks c, tells serve.lua and closes the handle. */
static void conn_close(struct conn *c)
{
    struct server *srv = c->srv;
    if (uv_is_closing(&c->h.h))
        return;
    for (struct conn **pp = &srv->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    /* pending writes end with ECANCELED and must not touch c again */
    if (push_handler(srv, "closed")) {
        lua_pushinteger(srv->L, c->id);
        call_handler(srv, 1, 0);
    }
    uv_close(&c->h.h, conn_closed_cb);
}

static void deliver(struct conn *c)
{
    struct server *srv = c->srv;
    lua_State *L = srv->L;
    uint32_t mlen = get_u32(c->head + 16);
    if (push_handler(srv, "frame")) {
        lua_pushinteger(L, c->id);
        lua_pushinteger(L, get_u16(c->head + 4));
        lua_pushinteger(L, get_u16(c->head + 6));
        lua_pushinteger(L, get_u32(c->head + 8));
        lua_pushlstring(L, c->body_len ? c->body : "", mlen);
        /* the data as a pointer and a length, valid during the call only:
         * mem_write copies it into the PE memory without a Lua string */
        lua_pushlightuserdata(L, c->body_len ? c->body + mlen : NULL);
        lua_pushinteger(L, (lua_Integer)(c->body_len - mlen));
        call_handler(srv, 7, 0);
    }
    c->in_body = false;
    c->body_len = c->body_got = 0;
    c->head_got = 0;
}

/* A whole header: refuse it (bad magic closes: the stream cannot be
 * resynchronised; too large drops the body unread) or make room. */
static bool header_done(struct conn *c)
{
    struct server *srv = c->srv;
    if (memcmp(c->head, "KBSM", 4) != 0) {
        send_error(c, c->head, ST_MALFORMED,
                   "malformed frame: no 'KBSM' magic (the connection is closed: "
                   "its stream cannot be resynchronised)", true);
        return false;
    }
    uint32_t mlen = get_u32(c->head + 16), dlen = get_u32(c->head + 20);
    if (mlen > META_LIMIT || dlen > srv->max_payload) {
        char msg[200];
        if (mlen > META_LIMIT)
            snprintf(msg, sizeof msg, "frame refused: %u bytes of arguments, the limit is %u",
                     mlen, META_LIMIT);
        else
            snprintf(msg, sizeof msg,
                     "payload refused: %u bytes, the limit is %llu (--max-payload)", dlen,
                     (unsigned long long)srv->max_payload);
        send_error(c, c->head, ST_TOO_LARGE, msg, false);
        c->skip = (uint64_t)mlen + dlen;
        c->head_got = 0;
        return true;
    }
    c->body_len = (size_t)mlen + dlen;
    c->body_got = 0;
    if (c->body_len == 0) {
        deliver(c);
        return true;
    }
    if (c->body_len > c->body_cap) {
        free(c->body);
        c->body_cap = 0;
        c->body = malloc(c->body_len);
        if (!c->body) {
            send_error(c, c->head, ST_TOO_LARGE, "frame refused: out of memory", true);
            return false;
        }
        c->body_cap = c->body_len;
    }
    c->in_body = true;
    return true;
}

/* Consumes n bytes; false once the connection is closing. */
static bool consume(struct conn *c, const char *p, size_t n)
{
    while (n > 0) {
        size_t k;
        if (c->skip) {
            k = c->skip < n ? (size_t)c->skip : n;
            c->skip -= k;
        } else if (c->head_got < FRAME_HEADER) {
            k = FRAME_HEADER - c->head_got;
            if (k > n)
                k = n;
            memcpy(c->head + c->head_got, p, k);
            c->head_got += k;
            if (c->head_got == FRAME_HEADER) {
                p += k;
                n -= k;
                if (!header_done(c))
                    return false;
                continue;
            }
        } else {
            k = c->body_len - c->body_got;
            if (k > n)
                k = n;
            memcpy(c->body + c->body_got, p, k);
            c->body_got += k;
            if (c->body_got == c->body_len) {
                p += k;
                n -= k;
                deliver(c);
                if (uv_is_closing(&c->h.h))
                    return false;
                continue;
            }
        }
        p += k;
        n -= k;
    }
    return true;
}

/* Inside a large body the socket reads straight into it; otherwise into
 * the connection's chunk, so that small frames come in few reads. */
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = h->data;
    (void)suggested;
    size_t left = c->in_body ? c->body_len - c->body_got : 0;
    if (left >= sizeof c->buf)
        *buf = uv_buf_init(c->body + c->body_got, (unsigned)(left > (1u << 30) ? 1u << 30 : left));
    else
        *buf = uv_buf_init(c->buf, sizeof c->buf);
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct conn *c = s->data;
    if (n < 0) {
        conn_close(c);
        return;
    }
    if (n > 0 && buf->base != c->buf) { /* already in place */
        c->body_got += (size_t)n;
        if (c->body_got == c->body_len)
            deliver(c);
        return;
    }
    consume(c, c->buf, (size_t)n);
}

static void accept_cb(uv_stream_t *server, int status)
{
    struct server *srv = server->data;
    if (status < 0)
        return;
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->srv = srv;
    int r = srv->listener.h.type == UV_NAMED_PIPE ? uv_pipe_init(&srv->loop, &c->h.pipe, 0)
                                                   : uv_tcp_init(&srv->loop, &c->h.tcp);
    if (r < 0) {
        free(c);
        return;
    }
    c->h.h.data = c;
    if (uv_accept(server, &c->h.s) < 0) {
        uv_close(&c->h.h, conn_closed_cb);
        return;
    }
    if (c->h.h.type == UV_TCP)
        uv_tcp_nodelay(&c->h.tcp, 1);
    c->id = ++srv->next_id;
    c->next = srv->conns;
    srv->conns = c;
    if (push_handler(srv, "opened")) {
        lua_pushinteger(srv->L, c->id);
        call_handler(srv, 1, 0);
    }
    uv_read_start(&c->h.s, alloc_cb, read_cb);
}

/* ---- signals and the tick --------------------------------------------- */

static void request_stop(struct server *srv, const char *why)
{
    if (!srv->stopping) {
        srv->stopping = true;
        srv->stop_reason = why;
    }
    if (srv->sim)
        sim_request_stop(srv->sim);
    uv_stop(&srv->loop);
}

static void signal_cb(uv_signal_t *h, int signum)
{
    request_stop(h->data, signum == SIGINT ? "interrupted (Ctrl-C)" : "terminated (SIGTERM)");
}

static void tick_cb(uv_timer_t *t)
{
    struct server *srv = t->data;
    if (push_handler(srv, "tick")) {
        lua_pushinteger(srv->L, (lua_Integer)uv_now(&srv->loop));
        call_handler(srv, 1, 0);
    }
}

/* ---- listening -------------------------------------------------------- */

/* "HOST:PORT" (HOST an IPv4 address, or an IPv6 one in brackets) into
 * addr: 1. A spec with a '/' or without a ':' is a socket path: 0. Any
 * other is meant as HOST:PORT: -1 if it is not a valid one, *why saying
 * what is wrong (it used to become a socket file named like the address
 * in the current folder, listening where no client looks). */
static int parse_tcp(const char *spec, struct sockaddr_storage *addr, bool *loopback,
                     const char **why)
{
    const char *colon = strrchr(spec, ':');
    if (!colon || strchr(spec, '/'))
        return 0;
    *why = "the port must be a number from 0 to 65535";
    if (colon[1] == '\0' || colon[1] == '-' || strlen(colon + 1) > 5)
        return -1;
    for (const char *q = colon + 1; *q; q++)
        if (*q < '0' || *q > '9')
            return -1;
    long port = strtol(colon + 1, NULL, 10);
    if (port > 65535)
        return -1;
    *why = "HOST must be an IP address, such as 127.0.0.1 or [::1] (a socket path in "
           "the current folder: ./NAME)";
    char host[64];
    size_t n = (size_t)(colon - spec);
    if (spec[0] == '[' && n >= 2 && spec[n - 1] == ']') {
        spec++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof host)
        return -1;
    memcpy(host, spec, n);
    host[n] = '\0';
    struct sockaddr_in *a4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)addr;
    memset(addr, 0, sizeof *addr);
    if (uv_ip4_addr(host, (int)port, a4) == 0) {
        *loopback = (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
        return 1;
    }
    if (uv_ip6_addr(host, (int)port, a6) == 0) {
        static const unsigned char one[16] = {[15] = 1};
        *loopback = memcmp(&a6->sin6_addr, one, 16) == 0;
        return 1;
    }
    return -1;
}

/* A socket file left by a server that is gone is removed; one that still
 * answers, or a file that is not a socket, is an error. */
static int clear_stale_socket(lua_State *L, const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    if (!S_ISSOCK(st.st_mode))
        return luaL_error(L, "--listen '%s': the file exists and is not a socket", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, path);
    int live = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    if (live)
        return luaL_error(L, "--listen '%s': another server listens there", path);
    unlink(path);
    return 0;
}

static int listen_unix(lua_State *L, struct server *srv, const char *path)
{
    if (strlen(path) >= sizeof ((struct sockaddr_un *)0)->sun_path)
        return luaL_error(L, "--listen '%s': a socket path has at most %d bytes", path,
                          (int)sizeof ((struct sockaddr_un *)0)->sun_path - 1);
    clear_stale_socket(L, path);
    uv_pipe_init(&srv->loop, &srv->listener.pipe, 0);
    srv->listening = true;
    srv->listener.h.data = srv;
    /* created 0600: no moment where another user could connect */
    mode_t old = umask(0177);
    int r = uv_pipe_bind(&srv->listener.pipe, path);
    umask(old);
    if (r < 0) {
        /* libuv reports a missing folder as "permission denied": say what
         * is wrong with the folder, if anything */
        char dir[sizeof ((struct sockaddr_un *)0)->sun_path];
        const char *slash = strrchr(path, '/');
        size_t n = slash ? (size_t)(slash - path) : 0;
        memcpy(dir, path, n);
        strcpy(dir + n, slash ? (n ? "" : "/") : ".");
        struct stat st;
        if (stat(dir, &st) != 0)
            return luaL_error(L, "--listen '%s': folder '%s': %s", path, dir, strerror(errno));
        if (!S_ISDIR(st.st_mode))
            return luaL_error(L, "--listen '%s': '%s' is not a folder", path, dir);
        return luaL_error(L, "--listen '%s': %s", path, uv_strerror(r));
    }
    srv->unix_path = strdup(path);
    chmod(path, 0600);
    return 0;
}

static int listen_tcp(lua_State *L, struct server *srv, const char *spec,
                      const struct sockaddr_storage *addr)
{
    uv_tcp_init(&srv->loop, &srv->listener.tcp);
    srv->listening = true;
    srv->listener.h.data = srv;
    int r = uv_tcp_bind(&srv->listener.tcp, (const struct sockaddr *)addr, 0);
    if (r < 0)
        return luaL_error(L, "--listen '%s': %s", spec, uv_strerror(r));
    return 0;
}

/* The address clients use: the path, or HOST:PORT with the port bound
 * (port 0 asks the system for a free one). */
static void push_address(lua_State *L, struct server *srv, const char *spec)
{
    if (srv->unix_path) {
        lua_pushstring(L, srv->unix_path);
        return;
    }
    struct sockaddr_storage a;
    int len = sizeof a;
    char host[64] = "?";
    int port = 0;
    uv_tcp_getsockname(&srv->listener.tcp, (struct sockaddr *)&a, &len);
    if (a.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&a, host, sizeof host);
        port = ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
        lua_pushfstring(L, "[%s]:%d", host, port);
    } else {
        uv_ip4_name((struct sockaddr_in *)&a, host, sizeof host);
        port = ntohs(((struct sockaddr_in *)&a)->sin_port);
        lua_pushfstring(L, "%s:%d", host, port);
    }
    (void)spec;
}

/* ---- the server object ------------------------------------------------ */

static struct server *checkserver(lua_State *L)
{
    struct server *srv = luaL_checkudata(L, 1, KB_SERVER);
    if (!srv->loop_open)
        luaL_error(L, "the server is closed");
    return srv;
}

static void count_closed_cb(uv_handle_t *h)
{
    (void)h;
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    struct conn *c = req->data;
    (void)status;
    free(req);
    if (!uv_is_closing(&c->h.h))
        uv_close(&c->h.h, conn_closed_cb);
}

/* Closes c once the replies queued on it are written (uv_close alone
 * would cancel them). */
static void conn_flush_close(struct conn *c)
{
    uv_shutdown_t *req = malloc(sizeof *req);
    if (req) {
        req->data = c;
        if (uv_shutdown(req, &c->h.s, shutdown_cb) == 0)
            return;
        free(req);
    }
    if (!uv_is_closing(&c->h.h))
        uv_close(&c->h.h, conn_closed_cb);
}

/* Closes every handle and the loop; removes the socket file. */
static void server_close(struct server *srv)
{
    if (!srv->loop_open)
        return;
    while (srv->conns) {
        struct conn *c = srv->conns;
        srv->conns = c->next;
        if (push_handler(srv, "closed")) {
            lua_pushinteger(srv->L, c->id);
            call_handler(srv, 1, 0);
        }
        uv_read_stop(&c->h.s);
        conn_flush_close(c);
    }
    if (srv->listening)
        uv_close(&srv->listener.h, count_closed_cb);
    if (srv->handles_open) {
        uv_close((uv_handle_t *)&srv->sigint, count_closed_cb);
        uv_close((uv_handle_t *)&srv->sigterm, count_closed_cb);
        uv_close((uv_handle_t *)&srv->tick, count_closed_cb);
    }
    uv_run(&srv->loop, UV_RUN_DEFAULT);
    uv_loop_close(&srv->loop);
    srv->loop_open = false;
    if (srv->unix_path) {
        unlink(srv->unix_path);
        free(srv->unix_path);
        srv->unix_path = NULL;
    }
    if (srv->handlers != LUA_NOREF) {
        luaL_unref(srv->L, LUA_REGISTRYINDEX, srv->handlers);
        srv->handlers = LUA_NOREF;
    }
}

static int server_gc(lua_State *L)
{
    server_close(luaL_checkudata(L, 1, KB_SERVER));
    return 0;
}

/* io.open{listen=, allow_remote=, token=, max_payload=, sim=, handlers=}
 * -> server, address */
static int l_open(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getfield(L, 1, "listen");
    const char *spec = luaL_checkstring(L, -1);
    lua_getfield(L, 1, "allow_remote");
    bool allow_remote = lua_toboolean(L, -1);
    lua_getfield(L, 1, "token");
    bool token = lua_isstring(L, -1) && lua_rawlen(L, -1) > 0;
    lua_getfield(L, 1, "max_payload");
    lua_Integer maxp = luaL_checkinteger(L, -1);
    lua_getfield(L, 1, "sim");
    struct sim *s = lkb_checksim(L, lua_gettop(L));
    lua_getfield(L, 1, "handlers");
    luaL_checktype(L, -1, LUA_TTABLE);

    struct server *srv = lua_newuserdatauv(L, sizeof *srv, 1);
    memset(srv, 0, sizeof *srv);
    srv->handlers = LUA_NOREF;
    luaL_setmetatable(L, KB_SERVER);
    lua_pushvalue(L, 6);
    lua_setiuservalue(L, -2, 1); /* the simulation lives as long as the server */
    srv->L = L;
    srv->sim = s;
    srv->max_payload = (uint64_t)maxp;
    lua_pushvalue(L, 7);
    srv->handlers = luaL_ref(L, LUA_REGISTRYINDEX);
    if (uv_loop_init(&srv->loop) < 0)
        return luaL_error(L, "cannot create the event loop");
    srv->loop_open = true;

    struct sockaddr_storage addr;
    bool loopback = false;
    const char *why = NULL;
    int tcp = parse_tcp(spec, &addr, &loopback, &why);
    if (tcp < 0)
        return luaL_error(L, "--listen '%s': expected a socket path or HOST:PORT: %s", spec, why);
    if (tcp > 0) {
        if (!loopback && !(allow_remote && token))
            return luaL_error(L, "--listen '%s': refused: not a loopback address; a listener "
                                 "other hosts can reach needs --allow-remote and --token",
                              spec);
        listen_tcp(L, srv, spec, &addr);
    } else {
        listen_unix(L, srv, spec);
    }
    int r = uv_listen(&srv->listener.s, 16, accept_cb);
    if (r < 0)
        return luaL_error(L, "--listen '%s': %s", spec, uv_strerror(r));
    uv_signal_init(&srv->loop, &srv->sigint);
    uv_signal_init(&srv->loop, &srv->sigterm);
    uv_timer_init(&srv->loop, &srv->tick);
    srv->handles_open = true;
    srv->sigint.data = srv->sigterm.data = srv->tick.data = srv;
    uv_signal_start(&srv->sigint, signal_cb, SIGINT);
    uv_signal_start(&srv->sigterm, signal_cb, SIGTERM);
    uv_timer_start(&srv->tick, tick_cb, TICK_MS, TICK_MS);
    /* a client that goes away mid-write must not kill the server */
    signal(SIGPIPE, SIG_IGN);
    push_address(L, srv, spec);
    return 2;
}

/* srv:run() -> reason: serves until Ctrl-C or SIGTERM. Between turns of
 * the loop, the handler `pump` runs what became ready (a collective); it
 * returns true if it did something. */
static int srv_run(lua_State *L)
{
    struct server *srv = checkserver(L);
    while (!srv->stopping) {
        bool busy = false;
        if (push_handler(srv, "pump") && call_handler(srv, 0, 1)) {
            busy = lua_toboolean(L, -1);
            lua_pop(L, 1);
        }
        if (!busy && !srv->stopping)
            uv_run(&srv->loop, UV_RUN_ONCE);
    }
    lua_pushstring(L, srv->stop_reason ? srv->stop_reason : "stopped");
    /* waiting members hear why before their connections close */
    if (push_handler(srv, "stopping"))
        call_handler(srv, 0, 0);
    server_close(srv);
    return 1;
}

/* srv:simulate(sim [, until_ns]) -> "done" | "until" | "stopped": the
 * simulation to its end (or to until_ns) in batches from the loop; frames
 * keep arriving meanwhile. */
static int srv_simulate(lua_State *L)
{
    struct server *srv = checkserver(L);
    if (srv->stopping) {
        lua_pushliteral(L, "stopped");
        return 1;
    }
    sim_time until = SIM_FOREVER;
    if (!lua_isnoneornil(L, 3)) {
        lua_Number ns = luaL_checknumber(L, 3);
        luaL_argcheck(L, ns >= 0 && ns < 9.2e15, 3, "until_ns out of range");
        until = (sim_time)llround(ns * 1000.0);
    }
    srv->interrupting = false;
    int n = lkb_sim_run_uv(L, 2, &srv->loop, 0, until);
    if (srv->interrupting) {
        srv->interrupting = false;
        const char *res = lua_tostring(L, -1);
        if (res && strcmp(res, "stopped") == 0 && !srv->stopping) {
            lua_pop(L, 1);
            lua_pushliteral(L, "interrupted");
        } else if (res && strcmp(res, "stopped") != 0) {
            /* the run ended before it saw the request: the engine keeps it
             * for the next run, which must not stop at once. sim_step sees
             * the request first and consumes it, doing nothing else. */
            sim_step(srv->sim, sim_now(srv->sim), 0);
        }
    }
    return n;
}

/* srv:interrupt(): the running simulation (srv:simulate) stops at its next
 * batch and returns "interrupted"; the machine is then mid-way and the
 * caller replaces it (serve.lua's rebuild). A no-op when nothing runs. */
static int srv_interrupt(lua_State *L)
{
    struct server *srv = checkserver(L);
    srv->interrupting = true;
    sim_request_stop(srv->sim);
    return 0;
}

/* srv:set_sim(sim): the machine the server serves from now on (after a
 * rebuild); the old one may then be closed. */
static int srv_set_sim(lua_State *L)
{
    struct server *srv = checkserver(L);
    srv->sim = lkb_checksim(L, 2);
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, 1, 1);
    return 0;
}

/* srv:send(conn, version, op, id, status, meta [, data]) -> sent */
static int srv_send(lua_State *L)
{
    struct server *srv = checkserver(L);
    struct conn *c = find_conn(srv, (uint32_t)luaL_checkinteger(L, 2));
    size_t mlen, dlen = 0;
    const char *meta = luaL_checklstring(L, 7, &mlen);
    const char *data = luaL_optlstring(L, 8, "", &dlen);
    bool ok = c && send_frame(c, (uint16_t)luaL_checkinteger(L, 3),
                              (uint16_t)luaL_checkinteger(L, 4),
                              (uint32_t)luaL_checkinteger(L, 5),
                              (uint32_t)luaL_checkinteger(L, 6), meta, mlen, data, dlen, false);
    lua_pushboolean(L, ok);
    return 1;
}

/* srv:send_mem(conn, version, op, id, status, meta, sys, rank, addr, nbytes, kind)
 * -> sent: a reply whose data is nbytes of a PE memory from addr */
static int srv_send_mem(lua_State *L)
{
    struct server *srv = checkserver(L);
    struct conn *c = find_conn(srv, (uint32_t)luaL_checkinteger(L, 2));
    size_t mlen;
    const char *meta = luaL_checklstring(L, 7, &mlen);
    struct frame_data fd = {.mem = lkb_check_pe_mem(L, 8, 9, 12)};
    lua_Integer addr = luaL_checkinteger(L, 10), n = luaL_checkinteger(L, 11);
    luaL_argcheck(L, addr >= 0 && n >= 0, 10, "negative address or size");
    fd.addr = (uint64_t)addr;
    fd.len = (size_t)n;
    bool ok = c && send_frame_data(c, (uint16_t)luaL_checkinteger(L, 3),
                                   (uint16_t)luaL_checkinteger(L, 4),
                                   (uint32_t)luaL_checkinteger(L, 5),
                                   (uint32_t)luaL_checkinteger(L, 6), meta, mlen, &fd, false);
    lua_pushboolean(L, ok);
    return 1;
}

/* srv:trace([on]) -> recording (boolean), events written; nil if the
 * machine has no trace (kbsim serve without --trace). With `on`, recording
 * is resumed (true) or paused (false) first. */
static int srv_trace(lua_State *L)
{
    struct server *srv = checkserver(L);
    struct sim_trace *t = sim_tracer(srv->sim);
    if (!t) {
        lua_pushnil(L);
        return 1;
    }
    if (!lua_isnoneornil(L, 2))
        sim_trace_pause(t, !lua_toboolean(L, 2));
    lua_pushboolean(L, !sim_trace_paused(t));
    lua_pushinteger(L, (lua_Integer)sim_trace_events(t));
    return 2;
}

/* srv:now_ms() -> the loop's clock, milliseconds */
static int srv_now_ms(lua_State *L)
{
    struct server *srv = checkserver(L);
    uv_update_time(&srv->loop);
    lua_pushinteger(L, (lua_Integer)uv_now(&srv->loop));
    return 1;
}

/* ---- PE memory as bytes ----------------------------------------------- */

/* mem_write(sys, rank, addr, bytes, kind): bytes as stored (no rounding);
 * bytes a string, or a frame's data pointer then its length (the handler
 * `frame` gets them; valid during that call only) */
static int l_mem_write(lua_State *L)
{
    struct kb_mem *m = lkb_check_pe_mem(L, 1, 2, lua_islightuserdata(L, 4) ? 6 : 5);
    lua_Integer addr = luaL_checkinteger(L, 3);
    size_t n;
    const char *p;
    if (lua_islightuserdata(L, 4)) {
        p = lua_touserdata(L, 4);
        lua_Integer len = luaL_checkinteger(L, 5);
        luaL_argcheck(L, len >= 0 && (p || len == 0), 5, "bad data length");
        n = (size_t)len;
    } else {
        p = luaL_checklstring(L, 4, &n);
    }
    if (addr < 0 || (n && kb_mem_write(m, (uint64_t)addr, p, n) != 0))
        return luaL_error(L, "%s", kb_mem_errmsg(m));
    return 0;
}

/* mem_zero(sys, rank, addr, bytes, kind): the range reads as zeros,
 * writing only what holds storage: a fresh tensor's never-written pages
 * stay without any (zeros written a piece at a time made a host page of
 * every page: a 2 GiB tensor took 2 GiB of the host's memory at alloc) */
static int l_mem_zero(lua_State *L)
{
    struct kb_mem *m = lkb_check_pe_mem(L, 1, 2, 5);
    lua_Integer addr = luaL_checkinteger(L, 3), n = luaL_checkinteger(L, 4);
    luaL_argcheck(L, addr >= 0 && n >= 0, 4, "negative address or size");
    static const unsigned char zeros[KB_MEM_PAGE_BYTES];
    uint64_t a = (uint64_t)addr, left = (uint64_t)n;
    while (left > 0) {
        const unsigned char *p;
        uint64_t len;
        if (kb_mem_read_span(m, a, left, &p, &len) != 0)
            return luaL_error(L, "%s", kb_mem_errmsg(m));
        /* a span ends at a page boundary: at most a page of zeros */
        if (p && kb_mem_write(m, a, zeros, len) != 0)
            return luaL_error(L, "%s", kb_mem_errmsg(m));
        a += len;
        left -= len;
    }
    return 0;
}

/* mem_copy(to_sys, rank, kind, to_addr, from_sys, from_addr, bytes): a
 * tensor's bytes from one machine's PE memory to another's (a rebuild) */
static int l_mem_copy(lua_State *L)
{
    struct kb_mem *to = lkb_check_pe_mem(L, 1, 2, 3);
    struct kb_mem *from = lkb_check_pe_mem(L, 5, 2, 3);
    lua_Integer ta = luaL_checkinteger(L, 4), fa = luaL_checkinteger(L, 6);
    lua_Integer n = luaL_checkinteger(L, 7);
    luaL_argcheck(L, ta >= 0 && fa >= 0 && n >= 0, 7, "negative address or size");
    if (n && kb_mem_copy(to, (uint64_t)ta, from, (uint64_t)fa, (uint64_t)n) != 0)
        return luaL_error(L, "%s", kb_mem_errmsg(to));
    return 0;
}

/* mem_free(sys, rank, addr, kind): a block of tl.alloc back */
static int l_mem_free(lua_State *L)
{
    struct kb_mem *m = lkb_check_pe_mem(L, 1, 2, 4);
    lua_Integer addr = luaL_checkinteger(L, 3);
    if (addr < 0 || kb_mem_dealloc(m, (uint64_t)addr) != 0)
        return luaL_error(L, "no block at address %I", addr);
    return 0;
}

/* trace_move(from_sim, to_sim): the trace of --trace goes on in the
 * machine that replaces `from` (serve.lua's rebuild, before the new
 * machine's components are made, so that they record into it). */
static int l_trace_move(lua_State *L)
{
    struct sim *from = lkb_checksim(L, 1), *to = lkb_checksim(L, 2);
    if (sim_trace_move(from, to) < 0)
        return luaL_error(L, "trace_move: the old machine has no open trace, or the new one "
                             "has one");
    return 0;
}

static const luaL_Reg server_methods[] = {
    {"run", srv_run}, {"simulate", srv_simulate}, {"send", srv_send}, {"send_mem", srv_send_mem},
    {"now_ms", srv_now_ms}, {"trace", srv_trace}, {"interrupt", srv_interrupt},
    {"set_sim", srv_set_sim}, {NULL, NULL}};

static const luaL_Reg io_funcs[] = {
    {"open", l_open}, {"mem_write", l_mem_write}, {"mem_copy", l_mem_copy},
    {"mem_free", l_mem_free}, {"mem_zero", l_mem_zero}, {"trace_move", l_trace_move},
    {NULL, NULL}};

static int luaopen_serve_io(lua_State *L)
{
    luaL_newmetatable(L, KB_SERVER);
    lua_pushcfunction(L, server_gc);
    lua_setfield(L, -2, "__gc");
    luaL_newlib(L, server_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    luaL_newlib(L, io_funcs);
    return 1;
}

/* ---- kbsim serve ------------------------------------------------------ */

static void set_opt(lua_State *L, const char *key, const char *value)
{
    if (value) {
        lua_pushstring(L, value);
        lua_setfield(L, -2, key);
    }
}

int lkb_serve(lua_State *L, const struct lkb_serve_options *opt)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_serve_io);
    lua_setfield(L, -2, "kbsim.serve_io");
    lua_pop(L, 1);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "kbsim.serve");
    int status = 0;
    /* no traceback: a bad option or configuration is one line naming it */
    if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
        lua_getfield(L, -1, "main");
        lua_newtable(L);
        set_opt(L, "listen", opt->listen);
        set_opt(L, "token", opt->token);
        set_opt(L, "max_payload", opt->max_payload);
        set_opt(L, "timeout", opt->timeout);
        set_opt(L, "kernels", opt->kernels);
        lua_pushboolean(L, opt->allow_remote);
        lua_setfield(L, -2, "allow_remote");
        if (lua_pcall(L, 1, 0, 0) != LUA_OK)
            status = 2;
    } else {
        status = 2;
    }
    if (status) {
        const char *msg = lua_tostring(L, -1);
        fprintf(stderr, "kbsim serve: %s\n", msg ? msg : "(error object is not a string)");
    }
    lua_settop(L, 0);
    return status;
}
