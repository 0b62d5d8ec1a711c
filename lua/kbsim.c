/* kbsim.c — the kbsim command line: parse options, run one Lua script */
#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "lkbsim.h"
#include "lserve.h"
#include "lrender.h"
#include "lsweep.h"
#include "lsweep_mpi.h"
#include "ltrace.h"

enum { EXIT_CHECK = 1, EXIT_USAGE = 2 };

/* The longest --set key the configuration reader takes
 * (components/config_schema.c). */
#define KB_SET_KEY_MAX 255

static const char usage_text[] =
    "usage: kbsim [options] SCRIPT.lua [key=value ...]\n"
    "       kbsim serve [options]   (a co-simulation server: docs/cosim.md)\n"
    "Runs a kbsim scenario script (Lua 5.4); 'kbsim SCRIPT.lua --help' lists\n"
    "the script's own key=value parameters.\n"
    "\n"
    "options:\n"
    "  -o, --out DIR        output folder (default out/<script name>); created\n"
    "                       only when the script asks for it (kb.outdir())\n"
    "  -j, --jobs N         parallel sweep points (default: the cores kbsim may run on)\n"
    "  --set KEY=VALUE      override a key of configs/topology.yaml or ccl.yaml\n"
    "                       (repeatable; kb.options.set)\n"
    "  --topology FILE      system description used by scenarios\n"
    "                       (kb.options.topology)\n"
    "  --fast               reuse cached sweep points whose inputs are\n"
    "                       unchanged (kb.options.fast)\n"
    "  --no-huge-pages      keep malloc's memory on the kernel's small pages; by\n"
    "                       default kbsim runs itself again with glibc's tunables\n"
    "                       for 2 MiB pages where the kernel gives them on request\n"
    "                       (about half the CPU at system scale; decision 0073)\n"
    "  --huge-pages         ask for them, with a notice when they cannot be had\n"
    "  --point-timeout S    a sweep point still running after S seconds fails\n"
    "                       (kb.options.point_timeout)\n"
    "  --shard I/N          run only share I of N of every kb.sweep's points into\n"
    "                       the cache, write no outputs (docs/cluster.md)\n"
    "  --merge              assemble the outputs from the cache; a sweep point\n"
    "                       missing from it is an error (docs/cluster.md)\n"
    "  (mpirun -n N kbsim ...: every rank runs the script, the kb.sweep points are\n"
    "   shared by the ranks, rank 0 writes the outputs; docs/cluster.md)\n"
    "  --trace FILE         write a Perfetto / Chrome trace of one simulation:\n"
    "                       the first, or in kb.sweep point 1 (docs/trace.md)\n"
    "  --trace-point N      with --trace: the Nth simulation / sweep point instead\n"
    "  --describe           no script: build the system (configs/topology.yaml,\n"
    "                       --topology, --set), make every PE's units and list\n"
    "                       its modules, their ports and bindings (docs/modules.md);\n"
    "                       with a script: run it and list every system it makes\n"
    "                       (Lua modules included), each when it is closed or at\n"
    "                       the end\n"
    "  --describe-dot FILE  likewise, as a Graphviz graph written to FILE (with a\n"
    "                       script: its first system) ('dot -Tsvg FILE > wiring.svg')\n"
    "  -q, --quiet          no progress output\n"
    "  --version            print the version and exit\n"
    "  -h, --help           print this help and exit\n"
    "\n"
    "kbsim serve options (besides -o, -q, --set, --topology):\n"
    "  --listen ADDR        a Unix socket path (default OUT/kbsim.sock, mode 0600)\n"
    "                       or 127.0.0.1:PORT (TCP on loopback; port 0: any)\n"
    "  --allow-remote       with --token: TCP on an address other hosts reach\n"
    "  --token TOKEN        clients' hello must carry TOKEN\n"
    "  --max-payload BYTES  largest frame payload (default 268435456)\n"
    "  --timeout SECONDS    how long a collective waits for its members (default 60)\n"
    "  --kernels FILE.lua   Lua kernels clients may launch by name (docs/cosim.md)\n"
    "  --trace FILE         a trace of the machine; clients pause and resume it\n"
    "\n"
    "exit status: 0 success, 1 a check or a sweep point failed, 2 usage,\n"
    "configuration or script error, 130 a sweep stopped by Ctrl-C (a second\n"
    "Ctrl-C leaves points stuck in C behind), 143 a sweep stopped by SIGTERM\n";

/* The script's error. Alone, and on rank 0, it is printed at once; under
 * mpirun the other ranks' are said by rank 0 when every rank has ended
 * (lkb_mpi_error_once), each distinct one once: every rank runs the script
 * and met the same error, which every rank printed. */
static char *pending_error;
static bool pending_said;

static void script_error(const char *msg)
{
    bool say = lkb_mpi_rank() == 0;
    if (say)
        fprintf(stderr, "kbsim: %s\n", msg);
    if (lkb_mpi_size() == 1)
        return;
    free(pending_error);
    pending_error = strdup(msg);
    pending_said = say;
    if (pending_error == NULL && !say)
        fprintf(stderr, "kbsim: rank %d: %s\n", lkb_mpi_rank(), msg);
}

static void usage_error(const char *fmt, const char *subject)
{
    /* one write: under mpirun every rank says it, and pieces of the ranks'
     * lines interleaved ("kbsim: kbsim: 'kbsim serve' is ...") */
    char msg[4608];
    int n = snprintf(msg, sizeof msg, "kbsim: ");
    n += snprintf(msg + n, sizeof msg - (size_t)n, fmt, subject);
    if (n > (int)sizeof msg - 1)
        n = (int)sizeof msg - 1;
    snprintf(msg + n, sizeof msg - (size_t)n,
             "\nusage: kbsim [options] SCRIPT.lua [key=value ...] (try 'kbsim --help')\n");
    fputs(msg, stderr);
    exit(EXIT_USAGE);
}

/* path without "./" in front and "/" at the end, for comparing folders */
static size_t trimmed_path(const char **p)
{
    while ((*p)[0] == '.' && (*p)[1] == '/')
        *p += 2;
    size_t n = strlen(*p);
    while (n > 1 && (*p)[n - 1] == '/')
        n--;
    return n;
}

/* --describe-dot FILE and --trace FILE are checked before the script runs
 * (which may take long: a bad --trace failed the traced sweep point, its
 * row lost): a name, not a folder, in a folder that can be written, or in
 * the output folder `out` (NULL: none) that the run makes. */
static void check_out_file(const char *option, const char *path, const char *out)
{
    struct stat st;
    if (!*path) {
        fprintf(stderr, "kbsim: option '%s' needs a file name\n", option);
        exit(EXIT_USAGE);
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "kbsim: %s: %s is a folder\n", option, path);
        exit(EXIT_USAGE);
    }
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (access(dir, W_OK) != 0) {
        const char *a = dir, *b = out;
        if (errno == ENOENT && b != NULL) {
            size_t na = trimmed_path(&a), nb = trimmed_path(&b);
            if (na == nb && memcmp(a, b, na) == 0)
                return; /* made by the run (out_problem checked it can be) */
        }
        fprintf(stderr, "kbsim: %s: cannot write %s: %s: %s\n", option, path, dir,
                strerror(errno));
        exit(EXIT_USAGE);
    }
}

/* The value of an option: attached ("--out=DIR", "-oDIR") or the next
 * argument. */
static const char *optvalue(int argc, char **argv, int *i, const char *name,
                            const char *attached)
{
    if (attached != NULL)
        return attached;
    if (*i + 1 >= argc)
        usage_error("option '%s' needs a value", name);
    return argv[++*i];
}

/* The default -j: the CPUs this process may run on. mpirun binds each
 * rank to a core or a socket (Open MPI's default), taskset and Slurm's
 * --cpus-per-task narrow it too: more threads than that would only take
 * turns on the same CPUs. */
static int usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* strtol and strtod skip white space before a number, and refuse it
 * after: a value starts with a digit (or a sign, a dot) or is refused */
static bool starts_number(const char *v)
{
    return v[0] != '\0' && !isspace((unsigned char)v[0]);
}

static int parse_jobs(const char *v)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!starts_number(v) || errno != 0 || end == v || *end != '\0' || n <= 0 || n > 4096)
        usage_error("bad value '%s' for '--jobs' (expected an integer from 1 to 4096)", v);
    return (int)n;
}

/* A positive count for option `name`. */
static int parse_count(const char *v, const char *name)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!starts_number(v) || errno != 0 || end == v || *end != '\0' || n <= 0 ||
        n > 1000000000) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "bad value '%.64s' for '%s' (expected an integer from 1 to 1000000000)", v, name);
        usage_error("%s", msg);
    }
    return (int)n;
}

/* A positive number of seconds for --point-timeout. */
static double parse_seconds(const char *v)
{
    char *end;
    errno = 0;
    double t = strtod(v, &end);
    if (!starts_number(v) || errno != 0 || end == v || *end != '\0' || !(t > 0) || t > 1e9) {
        char msg[256];
        snprintf(msg, sizeof msg, "bad value '%.64s' for '--point-timeout' (expected a "
                 "positive number of seconds)", v);
        usage_error("%s", msg);
    }
    return t;
}

/* --shard I/N: 1 <= I <= N. */
static void parse_shard(const char *v, int *shard, int *shards)
{
    char *slash, *end;
    errno = 0;
    long i = strtol(v, &slash, 10), n = 0;
    bool ok = errno == 0 && v[0] >= '0' && v[0] <= '9' && *slash == '/' &&
              slash[1] >= '0' && slash[1] <= '9';
    if (ok) {
        n = strtol(slash + 1, &end, 10);
        ok = errno == 0 && *end == '\0' && n >= 1 && n <= 1000000 && i >= 1 && i <= n;
    }
    if (!ok) {
        char msg[256];
        snprintf(msg, sizeof msg, "bad value '%.64s' for '--shard' (expected I/N, the share I "
                 "of N, 1 <= I <= N, e.g. 2/8)", v);
        usage_error("%s", msg);
    }
    *shard = (int)i;
    *shards = (int)n;
}

/* A --set KEY=VALUE, its key no longer than the configuration reader
 * takes. */
static void check_set(const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv)
        usage_error("bad '--set %s' (expected KEY=VALUE)", kv);
    if (eq - kv > KB_SET_KEY_MAX) {
        char msg[256];
        snprintf(msg, sizeof msg, "bad '--set %.32s...': the key has %d characters, "
                 "more than %d", kv, (int)(eq - kv), KB_SET_KEY_MAX);
        usage_error("%s", msg);
    }
}

/* NULL, or why `dir` can never be the output folder (a file is in its
 * place or in a parent's): said before the script runs, not when its first
 * output is written after a long sweep. A missing folder is fine: it is
 * made on demand (kb.outdir). */
static const char *out_problem(const char *dir)
{
    static char why[4200];
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return "a file of that name exists";
        if (access(dir, W_OK | X_OK) != 0) {
            snprintf(why, sizeof why, "cannot write in it: %s", strerror(errno));
            return why;
        }
        return NULL;
    }
    if (errno == ENOTDIR)
        return "a part of its path is a file";
    /* missing: it will be made in the nearest folder that exists, which
     * must take new entries (not read-only, not another user's) */
    char anc[4096];
    snprintf(anc, sizeof anc, "%s", dir);
    for (;;) {
        char *slash = strrchr(anc, '/');
        while (slash && slash > anc && slash[1] == '\0') { /* trailing slashes */
            *slash = '\0';
            slash = strrchr(anc, '/');
        }
        if (!slash)
            strcpy(anc, ".");
        else if (slash == anc)
            anc[1] = '\0';
        else
            *slash = '\0';
        if (stat(anc, &st) == 0)
            break;
        if (strcmp(anc, ".") == 0 || strcmp(anc, "/") == 0)
            return NULL;
    }
    if (S_ISDIR(st.st_mode) && access(anc, W_OK | X_OK) != 0) {
        snprintf(why, sizeof why, "cannot create it in '%s': %s", anc, strerror(errno));
        return why;
    }
    return NULL;
}

/* "out/<basename without .lua>" */
static char *default_out(const char *script)
{
    const char *base = strrchr(script, '/');
    base = base ? base + 1 : script;
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".lua") == 0)
        n -= 4;
    char *out = malloc(n + 5);
    if (out == NULL) {
        fputs("kbsim: out of memory\n", stderr);
        exit(EXIT_USAGE);
    }
    memcpy(out, "out/", 4);
    memcpy(out + 4, base, n);
    out[n + 4] = '\0';
    return out;
}

/* The global `arg` as lua(1) builds it: arg[0] the script, arg[1..] its
 * arguments, the command and options at negative indices. */
static void set_arg(lua_State *L, int argc, char **argv, int script)
{
    lua_createtable(L, argc - script - 1, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

/* A Lua state with the kbsim module preloaded with opt, or NULL. */
static lua_State *new_state(const struct lkb_options *opt)
{
    char err[256];
    lua_State *L = lkb_new_state(opt, err, sizeof err);
    if (L == NULL)
        fprintf(stderr, "kbsim: %s\n", err);
    return L;
}

/* kbsim --describe / --describe-dot FILE: builds the system of the
 * options in a simulation, makes every PE's units and writes the listing
 * (stdout) and the Graphviz graph (dot_file) of sys:describe. */
static const char describe_chunk[] =
    "local kb = require('kbsim')\n"
    "local text, dot_file = ...\n"
    "local ok, sys = pcall(kb.system, kb.sim())\n"
    "if not ok then error(sys, 0) end\n"
    "local function describe(o)\n"
    "  local ok, d = pcall(sys.describe, sys, o)\n"
    "  if not ok then error((d:gsub('^describe:%d+: ', '')), 0) end\n"
    "  return d\n"
    "end\n"
    "if text then describe{ports = true, units = true, links = true, to = io.stdout} end\n"
    "if dot_file then\n"
    "  local f, err = io.open(dot_file, 'w')\n"
    "  if not f then error('--describe-dot: ' .. err, 0) end\n"
    "  local ok, err = pcall(describe, {format = 'dot', units = true, links = true, to = f})\n"
    "  if not ok then f:close(); os.remove(dot_file); error(err, 0) end\n"
    "  local ok, err = f:close()\n"
    "  if not ok then error('--describe-dot: ' .. dot_file .. ': ' .. err, 0) end\n"
    "end\n";

static int describe_main(struct lkb_options *opt, bool text, const char *dot_file)
{
    int status = EXIT_USAGE;
    lua_State *L = lkb_check_config(opt) == 0 ? new_state(opt) : NULL;
    if (L) {
        if (luaL_loadbuffer(L, describe_chunk, sizeof describe_chunk - 1, "=describe") != LUA_OK) {
            fprintf(stderr, "kbsim: %s\n", lua_tostring(L, -1));
        } else {
            lua_pushboolean(L, text);
            if (dot_file)
                lua_pushstring(L, dot_file);
            else
                lua_pushnil(L);
            if (lua_pcall(L, 2, 0, 0) != LUA_OK)
                fprintf(stderr, "kbsim: %s\n", lua_tostring(L, -1));
            else
                status = 0;
        }
        lua_close(L);
    }
    free((void *)opt->set);
    return status;
}

/* kbsim serve [options]: no script; the output folder defaults to
 * out/serve (the default socket lives there). */
static int serve_main(struct lkb_options *opt, const struct lkb_serve_options *serve,
                      const char *extra)
{
    if (extra != NULL)
        usage_error("'kbsim serve' takes no script or argument, got '%s'", extra);
    if (opt->trace_point > 1)
        usage_error("%s", "--trace-point is for scripts; 'kbsim serve' traces its one machine");
    /* sweep options: the server runs no kb.sweep */
    if (opt->shards > 0 || opt->merge || opt->fast || opt->point_timeout > 0)
        usage_error("%s", "--shard, --merge, --fast and --point-timeout are for sweeps; "
                    "'kbsim serve' runs none");
    /* every rank would start a server: on one socket path they refused or
     * replaced each other's, on TCP each took its own port (the clients are
     * the ranks of the co-simulation, not of mpirun) */
    if (lkb_mpi_size() > 1)
        usage_error("%s", "'kbsim serve' is one server: run it without mpirun (its clients "
                    "are the ranks: docs/cosim.md)");
    if (lkb_check_config(opt) != 0) {
        free((void *)opt->set);
        return EXIT_USAGE;
    }
    if (opt->out == NULL)
        opt->out = "out/serve";
    const char *why = out_problem(opt->out);
    if (why) {
        fprintf(stderr, "kbsim serve: cannot use '%s' as the output folder: %s\n", opt->out, why);
        free((void *)opt->set);
        return EXIT_USAGE;
    }
    if (opt->trace)
        check_out_file("--trace", opt->trace, opt->out);
    lua_State *L = new_state(opt);
    int status = L ? lkb_serve(L, serve) : EXIT_USAGE;
    if (L)
        lua_close(L);
    free((void *)opt->set);
    return status;
}

static int kbsim_main(int argc, char **argv)
{
    struct lkb_options opt = {.jobs = 0};
    const char **set = calloc((size_t)argc, sizeof *set);
    if (set == NULL) {
        fputs("kbsim: out of memory\n", stderr);
        return EXIT_USAGE;
    }
    opt.set = set;

    struct lkb_serve_options serve = {0};
    bool describe = false;
    const char *describe_dot = NULL;
    bool serving = argc > 1 && strcmp(argv[1], "serve") == 0;
    int i;
    for (i = serving ? 2 : 1; i < argc; i++) {
        char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0')
            break;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        const char *attached = NULL;
        char name[64];
        if (a[1] == '-') {
            /* "--name=value" */
            const char *eq = strchr(a, '=');
            size_t n = eq ? (size_t)(eq - a) : strlen(a);
            if (n >= sizeof name)
                usage_error("unknown option '%s'", a);
            memcpy(name, a, n);
            name[n] = '\0';
            attached = eq ? eq + 1 : NULL;
        } else {
            /* "-x" or "-xVALUE" */
            name[0] = '-';
            name[1] = a[1];
            name[2] = '\0';
            attached = a[2] ? a + 2 : NULL;
        }
        bool flag = false;
        if (strcmp(name, "-o") == 0 || strcmp(name, "--out") == 0) {
            opt.out = optvalue(argc, argv, &i, name, attached);
            /* -o "" ran the script, which failed at its first output
             * ("kb.options.out is not set") after its sweeps */
            if (!*opt.out)
                usage_error("option '%s' needs a folder name", name);
        } else if (strcmp(name, "-j") == 0 || strcmp(name, "--jobs") == 0) {
            opt.jobs = parse_jobs(optvalue(argc, argv, &i, name, attached));
        } else if (strcmp(name, "--set") == 0) {
            const char *kv = optvalue(argc, argv, &i, name, attached);
            check_set(kv);
            set[opt.nset++] = kv;
        } else if (strcmp(name, "--topology") == 0) {
            opt.topology = optvalue(argc, argv, &i, name, attached);
        } else if (strcmp(name, "--trace") == 0) {
            opt.trace = optvalue(argc, argv, &i, name, attached);
        } else if (strcmp(name, "--trace-point") == 0) {
            opt.trace_point = parse_count(optvalue(argc, argv, &i, name, attached),
                                          "--trace-point");
        } else if (strcmp(name, "--point-timeout") == 0) {
            opt.point_timeout = parse_seconds(optvalue(argc, argv, &i, name, attached));
        } else if (strcmp(name, "--shard") == 0) {
            parse_shard(optvalue(argc, argv, &i, name, attached), &opt.shard, &opt.shards);
        } else if (!serving && strcmp(name, "--describe") == 0) {
            describe = flag = true;
        } else if (!serving && strcmp(name, "--describe-dot") == 0) {
            describe_dot = optvalue(argc, argv, &i, name, attached);
        } else if (strcmp(name, "--merge") == 0) {
            opt.merge = flag = true;
        } else if (strcmp(name, "--fast") == 0) {
            opt.fast = flag = true;
        } else if (strcmp(name, "--huge-pages") == 0 || strcmp(name, "--no-huge-pages") == 0) {
            flag = true; /* (done at the start: malloc_tune) */
        } else if (strcmp(name, "-q") == 0 || strcmp(name, "--quiet") == 0) {
            opt.quiet = flag = true;
        } else if (serving && strcmp(name, "--listen") == 0) {
            serve.listen = optvalue(argc, argv, &i, name, attached);
        } else if (serving && strcmp(name, "--token") == 0) {
            serve.token = optvalue(argc, argv, &i, name, attached);
        } else if (serving && strcmp(name, "--max-payload") == 0) {
            serve.max_payload = optvalue(argc, argv, &i, name, attached);
        } else if (serving && strcmp(name, "--timeout") == 0) {
            serve.timeout = optvalue(argc, argv, &i, name, attached);
        } else if (serving && strcmp(name, "--kernels") == 0) {
            serve.kernels = optvalue(argc, argv, &i, name, attached);
        } else if (serving && strcmp(name, "--allow-remote") == 0) {
            serve.allow_remote = flag = true;
        } else if (strcmp(name, "--version") == 0) {
            printf("kbsim %s\n", KBSIM_VERSION);
            free(set);
            return 0;
        } else if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0) {
            fputs(usage_text, stdout);
            free(set);
            return 0;
        } else {
            usage_error("unknown option '%s'", a);
        }
        if (flag && attached != NULL)
            usage_error("option '%s' takes no value", name);
    }
    if (serving)
        return serve_main(&opt, &serve, i < argc ? argv[i] : NULL);
    if (describe_dot)
        check_out_file("--describe-dot", describe_dot, NULL);
    /* under mpirun rank 0 alone lists the system: every rank printed the
     * listing and wrote the same --describe-dot file at once */
    if ((describe || describe_dot) && i >= argc && lkb_mpi_rank() > 0) {
        free(set);
        return 0;
    }
    if ((describe || describe_dot) && i >= argc)
        return describe_main(&opt, describe, describe_dot);
    if ((describe || describe_dot) && (opt.shards > 0 || opt.merge))
        usage_error("%s", "--describe of a script runs it whole: not with --shard or --merge");
    if (i >= argc)
        usage_error("%s", "no script given");
    if (opt.trace_point && opt.trace == NULL)
        usage_error("%s", "--trace-point needs --trace FILE");
    if (opt.shards > 0 && opt.merge)
        usage_error("%s", "--shard and --merge exclude each other: run the shards, then --merge");
    if ((opt.shards > 0 || opt.merge) && opt.trace)
        usage_error("%s", "--trace cannot be used with --shard or --merge (the traced point "
                    "must run in one process: use --fast --trace)");
    /* shards and the merge share their points through the cache */
    opt.fast = opt.fast || opt.shards > 0 || opt.merge;
    if (lkb_mpi_size() > 1 && (opt.shards > 0 || opt.merge))
        usage_error("%s", "--shard and --merge are for job arrays without MPI; under mpirun "
                    "every kb.sweep is shared by the ranks already (docs/cluster.md)");
    if (lkb_mpi_rank() > 0) {
        /* rank 0 alone writes: the trace, the progress, what the script
         * prints (kb.outdir() is a scratch folder on the other ranks) */
        opt.trace = NULL;
        opt.trace_point = 0;
        opt.quiet = true;
        if (freopen("/dev/null", "w", stdout) == NULL)
            fprintf(stderr, "kbsim: rank %d: cannot silence stdout\n", lkb_mpi_rank());
    }

    const char *script = argv[i];
    FILE *fp = fopen(script, "r");
    if (fp == NULL) {
        fprintf(stderr, "kbsim: cannot open script '%s': %s\n", script,
                strerror(errno));
        free(set);
        return EXIT_USAGE;
    }
    fclose(fp);
    if (lkb_check_config(&opt) != 0) {
        free(set);
        return EXIT_USAGE;
    }

    char *out = NULL;
    if (opt.out == NULL)
        opt.out = out = default_out(script);
    const char *why = out_problem(opt.out);
    if (why) {
        fprintf(stderr, "kbsim: cannot use '%s' as the output folder: %s\n", opt.out, why);
        free(out);
        free(set);
        return EXIT_USAGE;
    }
    if (opt.trace)
        check_out_file("--trace", opt.trace, opt.out);
    if (opt.jobs == 0)
        opt.jobs = usable_cpus();

    lua_State *L = new_state(&opt);
    if (L == NULL) {
        free(out);
        free(set);
        return EXIT_USAGE;
    }
    set_arg(L, argc, argv, i);
    if (describe || describe_dot)
        lkb_describe_begin(L);

    int status = 0;
    if (lkb_loadfile(L, script) != LUA_OK) {
        script_error(lua_tostring(L, -1));
        status = EXIT_USAGE;
    } else {
        int nargs = argc - i - 1;
        luaL_checkstack(L, nargs, "too many script arguments");
        for (int k = i + 1; k < argc; k++)
            lua_pushstring(L, argv[k]);
        if (lkb_pcall(L, nargs, 0) != LUA_OK && !lkb_sweep_is_end(L, -1)) {
            const char *msg = lua_tostring(L, -1);
            script_error(msg ? msg : "(error object is not a string)");
            status = EXIT_USAGE;
        }
    }
    if (status == 0 && (describe || describe_dot)) {
        fflush(stdout);
        /* (the other ranks' stdout is /dev/null; the graph is rank 0's) */
        status = lkb_describe_end(L, describe ? stdout : NULL,
                                  lkb_mpi_rank() > 0 ? NULL : describe_dot);
    }
    int ended = lkb_sweep_end_status(L);
    if (status == 0 && ended < 0 && opt.shards > 0)
        fprintf(stderr, "shard %d/%d: every sweep of the script is in the cache; run the same "
                "command with --merge instead of --shard to write the outputs\n",
                opt.shard, opt.shards);
    if (ended > 0 && status == 0)
        status = ended;
    /* the figures still being drawn (lrender.h), before their folder may go */
    if (lkb_render_wait_all() > 0 && status == 0)
        status = EXIT_USAGE;
    lkb_remove_scratch(L);
    long failed = lkb_failed_checks(L);
    if (opt.trace && status == 0 && !lkb_trace_taken(L))
        fprintf(stderr, "kbsim: no trace written to '%s': the script created %s\n",
                opt.trace, opt.trace_point > 1 ? "fewer simulations than --trace-point"
                                               : "no simulation");
    fflush(stdout);
    /* Sweeps report even after a script error: their points' own
     * messages say more than the error that followed. */
    int sweep_status = lkb_sweep_status(L);
    lua_close(L);
    free(out);
    free(set);
    if (status == 0 && failed > 0) {
        if (lkb_mpi_rank() == 0)
            fprintf(stderr, "kbsim: %ld check%s failed\n", failed,
                    failed == 1 ? "" : "s");
        status = EXIT_CHECK;
    }
    if (status != EXIT_USAGE && sweep_status > status)
        status = sweep_status;
    /* Under MPI, failed checks and points are rank 0's to report and
     * exit with: another rank's non-zero status would make mpirun end
     * the job, maybe before rank 0 has written its outputs. */
    if (lkb_mpi_rank() > 0 && status != EXIT_USAGE)
        status = 0;
    return status;
}

/* glibc's malloc gives freed memory back to the kernel early: blocks of
 * 128 KiB and more are mmap'd and unmapped one by one (the threshold grows
 * only as far as the largest freed block), and the heap's free top is
 * trimmed past 128 KiB. A sweep makes and drops a system a point, so each
 * point faulted its pages in again: ~120,000 page faults and a quarter
 * of the milestone's CPU time. kbsim keeps what it frees for reuse
 * instead: blocks below 32 MiB come from the heap, a free top is kept up
 * to 256 MiB, and the heap grows 16 MiB at a time (only the pages touched
 * are memory). The peak is what the run needs anyway. A user's
 * GLIBC_TUNABLES, if set, decides instead (decision 0044). */
static void malloc_keep_freed_memory(void)
{
    if (getenv("GLIBC_TUNABLES"))
        return;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 16 << 20);
}

/* Huge pages (decision 0073; 0072 made them a flag): 0044's settings and
 * transparent huge pages for all of malloc's memory, as glibc tunables,
 * which are read only when a process starts: kbsim runs itself again with
 * GLIBC_TUNABLES set, once, before anything else. A run at system scale is
 * bound by TLB misses on its processes, links, Lua objects and messages,
 * spread over the heap: on 2 MiB pages lrab on 1024 SIPs takes about half
 * the CPU, timing-only or with values, in the same memory since the page
 * pool's chunks come in extents (components/memory.c). The variables are
 * taken out again in the process that runs, so programs it starts
 * (gnuplot, dot, python) see the user's environment.
 *
 * It is the default where the kernel gives huge pages on request
 * (transparent_hugepage/enabled is "madvise": with "always" the heap gets
 * them unasked, with "never" not at all), unless a user's GLIBC_TUNABLES
 * is set (it decides), the process is traced (a debugger or strace would
 * see it start twice) or under valgrind or ASan, whose allocators do not
 * read the tunables (valgrind would not follow the second start either).
 * --no-huge-pages keeps the process as it starts; --huge-pages asks for it
 * and says why when it cannot be had. Options are looked for before the
 * script, where they go. */
#define KB_TUNED_ENV "KBSIM_MALLOC_TUNED"
#define KB_HUGE_TUNABLES "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:" \
                         "glibc.malloc.trim_threshold=268435456:glibc.malloc.top_pad=16777216"

#if defined(__linux__) && defined(__GLIBC__)
/* The kernel's transparent huge page setting: 'a' always, 'm' madvise,
 * 'n' never, 0 when it cannot be read (no THP). */
static char thp_mode(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    if (!f)
        return 0;
    bool got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!got)
        return 0;
    return strstr(line, "[madvise]") ? 'm' : strstr(line, "[always]") ? 'a'
           : strstr(line, "[never]") ? 'n' : 0;
}

/* Whether not to run again by default: a tracer or valgrind is watching
 * this process, or it is built with ASan. */
static bool watched(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return true;
#else
    const char *pre = getenv("LD_PRELOAD");
    if (pre && strstr(pre, "vgpreload"))
        return true;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long tracer = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "TracerPid:", 10) == 0) {
            tracer = strtol(line + 10, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return tracer != 0;
#endif
}
#endif

static void malloc_tune(int argc, char **argv)
{
    int want = 0; /* 1 --huge-pages, -1 --no-huge-pages, 0 neither */
    for (int i = 1; i < argc; i++) {
        size_t n = strlen(argv[i]);
        if (strcmp(argv[i], "--") == 0 || (n > 4 && strcmp(argv[i] + n - 4, ".lua") == 0))
            break;
        if (strcmp(argv[i], "--huge-pages") == 0)
            want = 1;
        else if (strcmp(argv[i], "--no-huge-pages") == 0)
            want = -1;
    }
#if defined(__linux__) && defined(__GLIBC__)
    if (getenv(KB_TUNED_ENV)) { /* the second start: tuned */
        unsetenv(KB_TUNED_ENV);
        unsetenv("GLIBC_TUNABLES");
        /* the name ps, top and pkill know it by, which the exec of
         * /proc/self/exe made "exe" */
        const char *base = argc > 0 && argv[0] ? strrchr(argv[0], '/') : NULL;
        base = base ? base + 1 : argc > 0 && argv[0] ? argv[0] : "kbsim";
        (void)prctl(PR_SET_NAME, base, 0, 0, 0);
        return;
    }
    char thp = want >= 0 ? thp_mode() : 0;
    const char *why = NULL;
    if (want < 0)
        why = "";
    else if (getenv("GLIBC_TUNABLES"))
        why = "GLIBC_TUNABLES is set, so it decides (add glibc.malloc.hugetlb=1 to it)";
    else if (!thp || thp == 'n')
        why = "transparent huge pages are off here";
    else if (want == 0 && (thp == 'a' || watched()))
        why = ""; /* (always: the heap gets them unasked) */
    if (!why) {
        if (setenv("GLIBC_TUNABLES", KB_HUGE_TUNABLES, 1) == 0 &&
            setenv(KB_TUNED_ENV, "1", 1) == 0)
            execv("/proc/self/exe", argv);
        unsetenv(KB_TUNED_ENV); /* (exec failed: go on here) */
        unsetenv("GLIBC_TUNABLES");
        if (want > 0)
            fprintf(stderr, "kbsim: note: --huge-pages: could not run /proc/self/exe again "
                            "(%s); going on without\n", strerror(errno));
    } else if (want > 0) {
        fprintf(stderr, "kbsim: note: --huge-pages: %s\n", why);
    }
#else
    if (want > 0)
        fprintf(stderr, "kbsim: note: --huge-pages needs Linux and glibc; going on without\n");
#endif
    malloc_keep_freed_memory();
}

int main(int argc, char **argv)
{
    malloc_tune(argc, argv);
    int status = lkb_mpi_init(&argc, &argv);
    if (status != 0)
        return status;
    status = kbsim_main(argc, argv);
    /* collective: every rank that returned from kbsim_main */
    if (lkb_mpi_size() > 1)
        lkb_mpi_error_once(pending_error, pending_said);
    free(pending_error);
    /* figures drawn by kbsim serve or --describe scripts (lrender.h) */
    if (lkb_render_wait_all() > 0 && status == 0)
        status = EXIT_USAGE;
    lkb_mpi_finalize();
    return status;
}
