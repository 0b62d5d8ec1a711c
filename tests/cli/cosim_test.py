#!/usr/bin/python3
"""cosim_test.py KBSIM SRCDIR WORKDIR CASE — `kbsim serve` through python/kbsim's client.

CASE: collectives | rooted | bounds | cancel | trace | trace_rebuild | disconnect_running | launch | exchange | inject | errors | disconnect | busy | tcp | stop | stop_running. Prints "cosim_CASE ok" when every
check held; any failed check raises (non-zero exit, the reason on stderr).
"""
import atexit
import math
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

KBSIM, SRCDIR, WORKDIR, CASE = sys.argv[1:5]
sys.path.insert(0, os.path.join(SRCDIR, "python"))
import numpy as np  # noqa: E402
from kbsim import Client, ServerError, OP  # noqa: E402
from kbsim.client import bf16_from_f32, bf16_to_f32, HEADER, _s2, _group, PROTOCOL_VERSION  # noqa: E402

os.makedirs(WORKDIR, exist_ok=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


RUNNING = []


@atexit.register
def _kill_servers():
    # a failed check must not leave a server behind
    for proc in RUNNING:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class Server:
    """`kbsim serve` on a fresh socket; stop() sends Ctrl-C and checks a clean end."""

    def __init__(self, *args, listen=None):
        self.dir = tempfile.mkdtemp(prefix="kbcosim")  # short: a socket path has <= 107 bytes
        self.listen = listen or os.path.join(self.dir, "s.sock")
        self.proc = subprocess.Popen([KBSIM, "serve", "--listen", self.listen, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     cwd=WORKDIR, text=True)
        RUNNING.append(self.proc)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.wait(timeout=30)
            raise AssertionError("server did not start: %r %s" % (line, self.proc.stderr.read()))
        self.address = line.split("listening on ")[1].split(" (")[0]

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        return self.ended()

    def ended(self):
        """After Ctrl-C: status 0, the stop message, the socket file gone."""
        out, err = self.proc.communicate(timeout=120)
        check(self.proc.returncode == 0, "server exit status %d: %s" % (self.proc.returncode, err))
        check("stopped: interrupted (Ctrl-C)" in err, "no clean stop message: %r" % err)
        check("internal error" not in err, "internal error: %s" % err)
        if not self.listen.count(":"):
            check(not os.path.exists(self.listen), "socket file left behind")
        return err


def on_ranks(n, fn):
    """fn(rank) on n threads; returns {rank: result}, re-raising the first error."""
    res, errs = {}, []

    def run(r):
        try:
            res[r] = fn(r)
        except BaseException as e:  # noqa: BLE001 - reported below
            errs.append((r, e))
    ths = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(300)
    if errs:
        raise AssertionError("rank %d: %r" % errs[0])
    return res


def reference(collective, ranks, n, algorithm, src=None):
    """The same collective run from Lua in one process (tests/cli/cosim_ref.lua)."""
    args = [KBSIM, "-q", os.path.join(SRCDIR, "tests/cli/cosim_ref.lua"),
            "collective=" + collective, "ranks=%d" % ranks, "n=%d" % n, "algorithm=" + algorithm]
    if src is not None:
        args.append("src=%d" % src)
    out = subprocess.run(args, capture_output=True, text=True, cwd=WORKDIR, check=True).stdout
    kv = dict(line.split("=", 1) for line in out.split())
    check(kv["check"] == "passed", "reference check failed")
    return float(kv["latency_ns"]), [float(kv["exec_ns.%d" % r]) for r in range(ranks)]


def inputs(r, n):
    # integers: every sum, max, min and quarter of them is exact in f32
    return (np.arange(n) % 97 + 100 * r).astype(np.float32)


def same_times(res, ref, what):
    lat, per = ref
    for r, x in res.items():
        check(x.start_ns == 0.0, "%s: rank %d started at %r ns" % (what, r, x.start_ns))
        check(x.end_ns - x.start_ns == per[r],
              "%s: rank %d took %r ns, the Lua run %r" % (what, r, x.end_ns - x.start_ns, per[r]))
        check(x.latency_ns == lat, "%s: latency %r ns, the Lua run %r" % (what, x.latency_ns, lat))


def case_collectives():
    # bf16 conversion: a NaN stays a NaN (rounding carried it into infinity)
    nan_bits = np.array([0x7F800001, 0xFFC00000], dtype="<u4").view("<f4")
    check(list(bf16_from_f32(nan_bits)) == [0x7FC0, 0xFFC0], "bf16 of NaN is NaN")
    check(list(bf16_from_f32(np.array([1.0, np.inf], dtype="<f4"))) == [0x3F80, 0x7F80],
          "bf16 of 1 and inf")
    N, n = 4, 1024
    group = list(range(N))
    ins = [inputs(r, n) for r in range(N)]

    # all_reduce (sum): values exact, times those of the Lua run
    srv = Server("-q")

    def step1(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(n, "f32")
            c.write(t, ins[r])
            res = c.all_reduce(group, t, op="sum", algorithm="ring_allreduce")
            check(np.array_equal(c.read(t), res.data), "read differs from the reply")
            out = {"sum": res}
            for op in ("max", "min", "avg"):
                c.write(t, ins[r])
                out[op] = c.all_reduce(group, t, op=op, algorithm="ring_allreduce")
            # f16 and bf16: small integers are exact in both
            h = c.alloc(n, "f16")
            c.write(h, (np.arange(n) % 13 + r).astype(np.float16))
            out["f16"] = c.all_reduce(group, h, algorithm="tree_allreduce")
            b = c.alloc(n, "bf16")
            c.write(b, bf16_from_f32((np.arange(n) % 7 + r).astype(np.float32)))
            out["bf16"] = c.all_reduce(group, b, algorithm="ring_rs_ag_allreduce")
            # max and min through the other algorithms that take an op; not lrab or mesh
            c.write(t, ins[r])
            out["tree_max"] = c.all_reduce(group, t, op="max", algorithm="tree_allreduce")
            c.write(t, ins[r])
            out["rsag_min"] = c.all_reduce(group, t, op="min", algorithm="ring_rs_ag_allreduce")
            out["mesh_max"] = error_of(lambda: c.all_reduce(group, t, op="max",
                                                            algorithm="mesh_allreduce"))
            # large frames twice: read in place, buffers reused on both sides
            big = c.alloc(1 << 18, "f32")
            got = np.empty(1 << 18, np.float32)
            for k in (1, 2):
                want = np.arange(1 << 18, dtype=np.float32) * k + r
                c.write(big, want)
                check(np.array_equal(c.read(big, out=got), want) and
                      np.array_equal(got, want), "1 MiB write and read, pass %d" % k)
            check(np.array_equal(c.read(big, 5, 3), np.array([5, 6, 7]) * 2 + r), "a slice")
            out["barrier"] = c.barrier(group)
            out["now"] = c.now()
            out["run"] = c.run()
            return out
    res = on_ranks(N, step1)
    total = sum(ins)
    want = {"sum": total, "max": ins[N - 1], "min": ins[0], "avg": total / N}
    for r in range(N):
        for op, v in want.items():
            check(np.array_equal(res[r][op].data, v.astype(np.float32)),
                  "all_reduce %s on rank %d: %r" % (op, r, res[r][op].data[:4]))
        f16 = sum((np.arange(n) % 13 + q) for q in range(N)).astype(np.float16)
        check(np.array_equal(res[r]["f16"].data, f16), "f16 all_reduce")
        bf = sum((np.arange(n) % 7 + q) for q in range(N)).astype(np.float32)
        check(np.array_equal(bf16_to_f32(res[r]["bf16"].data), bf), "bf16 all_reduce")
        check(np.array_equal(res[r]["tree_max"].data, ins[N - 1]), "tree_allreduce max")
        check(np.array_equal(res[r]["rsag_min"].data, ins[0]), "ring_rs_ag_allreduce min")
        e = res[r]["mesh_max"]
        check(e.status == "bad_argument" and "'mesh_allreduce' reduces with sum only, not 'max'"
              in e.message, str(e))
        check(res[r]["barrier"].end_ns > res[r]["barrier"].start_ns > 0, "barrier times")
        check(res[r]["max"].start_ns >= res[r]["sum"].end_ns, "collectives run in order")
    same_times({r: res[r]["sum"] for r in range(N)}, reference("all_reduce", N, n,
               "ring_allreduce"), "all_reduce")
    with Client(srv.address) as obs:
        st = obs.stats()
        check(st["collectives_done"] == 9 and st["simulating"] == 0, "stats %r" % st)
        check(obs.now()[0] == st["now_ns"] > 0, "now")
    srv.stop()

    # all_gather and broadcast: values and times
    C = 256
    srv = Server("-q")

    def step2(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(C)
            o = c.alloc(N * C)
            c.write(t, inputs(r, C))
            return c.all_gather(group, t, o, algorithm="all_gather")
    res = on_ranks(N, step2)
    cat = np.concatenate([inputs(r, C) for r in range(N)])
    for r in range(N):
        check(np.array_equal(res[r].data, cat), "all_gather values on rank %d" % r)
    same_times(res, reference("all_gather", N, C, "all_gather"), "all_gather")
    srv.stop()

    srv = Server("-q")

    def step_rs(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(N * C)
            o = c.alloc(C)
            c.write(t, inputs(r, N * C))
            first = c.reduce_scatter(group, t, o, algorithm="reduce_scatter")
            c.write(t, inputs(r, N * C))
            return first, c.reduce_scatter(group, t, o, op="max", algorithm="reduce_scatter")
    res = on_ranks(N, step_rs)
    total = sum(inputs(q, N * C) for q in range(N))
    for r in range(N):
        check(np.array_equal(res[r][0].data, total[r * C:(r + 1) * C]),
              "reduce_scatter values on rank %d" % r)
        check(np.array_equal(res[r][1].data, inputs(N - 1, N * C)[r * C:(r + 1) * C]),
              "reduce_scatter max on rank %d" % r)
    same_times({r: res[r][0] for r in range(N)},
               reference("reduce_scatter", N, N * C, "reduce_scatter"), "reduce_scatter")
    srv.stop()

    srv = Server("-q")

    def step3(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(C)
            c.write(t, inputs(r, C))
            return c.broadcast(group, t, src=2, algorithm="broadcast")
    res = on_ranks(N, step3)
    for r in range(N):
        check(np.array_equal(res[r].data, inputs(2, C)), "broadcast values on rank %d" % r)
    same_times(res, reference("broadcast", N, C, "broadcast", src=2), "broadcast")
    srv.stop()


def ps(ns):
    """ns as whole picoseconds (the engine's unit): times that are differences of
    start and end compare exactly."""
    return round(ns * 1000)


def rooted_reference(collective, ranks, n, root, op="sum"):
    """reduce / gather / scatter launched from Lua in one process (cosim_rooted_ref.lua)."""
    out = subprocess.run([KBSIM, "-q", os.path.join(SRCDIR, "tests/cli/cosim_rooted_ref.lua"),
                          "collective=" + collective, "ranks=%d" % ranks, "n=%d" % n,
                          "root=%d" % root, "op=" + op],
                         capture_output=True, text=True, cwd=WORKDIR, check=True).stdout
    kv = dict(line.split("=", 1) for line in out.split())
    return float(kv["latency_ns"]), [float(kv["exec_ns.%d" % r]) for r in range(ranks)]


def case_rooted():
    """reduce, gather and scatter (operations 22-24): values as torch.distributed defines
    them, times those of the same kernels launched from Lua, and for two ranks the
    closed forms of a send/recv pair."""
    N, n = 4, 256
    group = [2, 0, 3, 1]  # group order is not rank order: root indices are group ranks
    srv = Server("-q")

    def member(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(n)
            out = {}
            for op, root in (("sum", 3), ("max", 0), ("min", 2), ("avg", 1)):
                c.write(t, inputs(r, n))
                out[op] = c.reduce(group, t, root, op=op)
                out[op + "_after"] = c.read(t)
            c.write(t, inputs(r, n))
            o = c.alloc(N * n) if r == 0 else None
            out["gather"] = c.gather(group, t, o, 0)
            big = None
            if r == 3:
                big = c.alloc(N * n)
                c.write(big, np.arange(N * n, dtype=np.float32) * 2)
            out["scatter"] = c.scatter(group, big, t, 3)
            # refusals: a root outside the group; the root without its output
            out["bad_root"] = error_of(lambda: c.reduce(group, t, 9))
            if r == 0:
                out["no_out"] = error_of(lambda: c.gather(group, t, None, 0))
            return out
    res = on_ranks(N, member)
    ins = {r: inputs(r, n) for r in range(N)}
    total = sum(ins.values())
    for r in range(N):
        for op, root, v in (("sum", 3, total), ("max", 0, ins[3]), ("min", 2, ins[0]),
                            ("avg", 1, total / N)):
            want = v if r == root else ins[r]  # only the root's tensor changes
            check(np.array_equal(res[r][op + "_after"], want.astype(np.float32)),
                  "reduce %s on rank %d (root %d): %r" % (op, r, root, res[r][op + "_after"][:4]))
            check(np.array_equal(res[r][op].data, want), "reduce %s reply data" % op)
        check((res[r]["gather"].data is None) == (r != 0), "gather data only at the root")
        k = group.index(r)
        check(np.array_equal(res[r]["scatter"].data,
                             np.arange(k * n, (k + 1) * n, dtype=np.float32) * 2),
              "scatter block %d on rank %d" % (k, r))
        e = res[r]["bad_root"]
        check(e.status == "bad_argument" and "root rank 9 is not in the group {2,0,3,1}"
              in e.message, str(e))
    g = res[0]["gather"].data
    check(np.array_equal(g, np.concatenate([ins[q] for q in group])), "gather values %r" % g)
    e = res[0]["no_out"]
    check(e.status == "bad_argument" and "gather: the root's output holds 0 elements" in e.message,
          str(e))
    srv.stop()

    # times: the served collective takes what the same kernels take launched from Lua
    srv = Server("-q")
    ranks = list(range(N))

    def timed(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(n)
            big = c.alloc(N * n) if r == 1 else None
            return (c.reduce(ranks, t, 2), c.gather(ranks, t, big, 1),
                    c.scatter(ranks, big, t, 1))
    res = on_ranks(N, timed)
    for i, (name, root) in enumerate((("reduce", 2), ("gather", 1), ("scatter", 1))):
        lat, per = rooted_reference(name, N, n, root)
        for r in range(N):
            x = res[r][i]
            check(x.latency_ns == lat and ps(x.end_ns - x.start_ns) == ps(per[r]),
                  "%s on rank %d: %r ns of %r, the Lua run %r of %r"
                  % (name, r, x.end_ns - x.start_ns, x.latency_ns, per[r], lat))
    srv.stop()

    # two ranks: a send/recv's closed form. The non-root's part of a reduce or a
    # gather is the sender's (load, send); scatter's receiver is the receiver's; the
    # reduce's root also pays PE_MATH's add (cost operation) before its store
    srv = Server("-q")

    def pair(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(n)
            p2p = c.send(1, t) if r == 0 else c.recv(0, t)
            big = c.alloc(2 * n) if r == 0 else None
            o = c.alloc(2 * n) if r == 1 else None
            add = struct.unpack("<dQ", c.request(OP["cost"], _s2("add") + _s2("f32")
                                                 + struct.pack("<QQQ", n, 0, 0))[0])[0]
            return (p2p, c.reduce([0, 1], t, 1), c.gather([0, 1], t, o, 1),
                    c.scatter([0, 1], big, t, 0), add)
    res = on_ranks(2, pair)
    p2p = res[0][0]
    send_ns = p2p.end_ns - p2p.start_ns
    red, gat, sca = res[0][1], res[0][2], res[1][3]
    check(ps(red.end_ns - red.start_ns) == ps(send_ns) == ps(gat.end_ns - gat.start_ns),
          "a non-root's reduce / gather %r, %r ns: a send takes %r"
          % (red.end_ns - red.start_ns, gat.end_ns - gat.start_ns, send_ns))
    check(ps(sca.end_ns - sca.start_ns) == ps(p2p.latency_ns),
          "scatter's receiver: %r ns, a send/recv %r" % (sca.end_ns - sca.start_ns,
                                                        p2p.latency_ns))
    root = res[1][1]
    check(root.end_ns - root.start_ns >= p2p.latency_ns + res[1][4] > p2p.latency_ns,
          "reduce's root: %r ns, a send/recv %r + add %r" % (root.end_ns - root.start_ns,
                                                             p2p.latency_ns, res[1][4]))
    srv.stop()


def case_cancel():
    """cancel (operation 25): a collective not yet complete is cancelled for every
    member; one that runs is not; the next collective of the group works."""
    srv = Server("-q")
    c0, c1 = Client(srv.address, rank=0), Client(srv.address, rank=1)
    t0, t1 = c0.alloc(64), c1.alloc(64)
    c0.write(t0, inputs(0, 64))
    c1.write(t1, inputs(1, 64))
    meta = struct.pack("<III", 2, 0, 1) + struct.pack("<I", t0) + _s2("sum") + _s2("") + b"\x01"
    rid = c0.send_frame(OP["all_reduce"], meta)
    wait_issued(srv, 1)
    ok, before = c0.cancel(rid)
    check(ok and len(before) == 1 and before[0][1] == rid and before[0][2] == 12,
          "the cancelled all_reduce's reply: %r" % (before,))
    msg = before[0][3][2:].decode()
    check(msg == "all_reduce over ranks {0,1} cancelled by rank 0", msg)
    e = error_of(lambda: c1.all_reduce([0, 1], t1, algorithm="ring_allreduce"))
    check(e.status == "collective_failed" and e.message == msg, "rank 1 told: %s" % e)
    check(c0.cancel(rid) == (False, []), "a second cancel finds nothing")
    check(c0.cancel(12345) == (False, []), "an unknown id")
    # the group goes on: the next all_reduce of both works
    res = on_ranks(2, lambda r: (c0, c1)[r].all_reduce([0, 1], (t0, t1)[r],
                                                       algorithm="ring_allreduce"))
    check(all(np.array_equal(res[r].data, inputs(0, 64) + inputs(1, 64)) for r in (0, 1)),
          "all_reduce after a cancel")
    c0.close()
    c1.close()
    srv.stop()


def largest_block(c, memory="tcm"):
    """The most f32 elements one alloc in `memory` of c's rank gets (to 16 elements)."""
    lo, hi = 0, 1 << 23  # 32 MiB: more than a TCM
    while hi - lo > 16:
        mid = (lo + hi) // 2
        try:
            c.free(c.alloc(mid, "f32", memory))
            lo = mid
        except ServerError:
            hi = mid
    return lo


def case_cancel_running():
    """cancel (operation 25) of a collective that is running: every member gets
    `cancelled` naming the rank and the time, the machine is rebuilt where it stopped
    (docs/cosim.md, Recovery), and the next collective of the group gives the right
    values and the same times as before, with the same TCM free."""
    srv = Server("-q")
    N, n, big = 4, 4096, 1 << 20
    group = list(range(N))
    cs = [Client(srv.address, rank=r) for r in group]
    ts = [c.alloc(n) for c in cs]
    bs = [c.alloc(big) for c in cs]
    for r, c in enumerate(cs):
        c.write(ts[r], inputs(r, n))
        c.write(bs[r], inputs(r, big))
    ring = "ring_allreduce"
    first = on_ranks(N, lambda r: cs[r].all_reduce(group, ts[r], algorithm=ring))
    full = on_ranks(N, lambda r: cs[r].all_reduce(group, bs[r], algorithm=ring))
    free_tcm = largest_block(cs[0])
    for r, c in enumerate(cs):
        c.write(bs[r], inputs(r, big))
    rids = [c.send_frame(OP["all_reduce"], _group(group) + struct.pack("<I", t) + _s2("sum")
                         + _s2(ring) + b"\0") for c, t in zip(cs, bs)]
    with Client(srv.address) as obs:
        deadline = time.time() + 60
        while not obs.stats()["simulating"]:
            check(time.time() < deadline, "the 4-rank all_reduce never ran")
        ok, before = cs[2].cancel(rids[2])
        check(ok and len(before) == 1 and before[0][1] == rids[2] and before[0][2] == 12,
              "the cancelled all_reduce's reply on rank 2: %r" % (before,))
        msg = before[0][3][2:].decode()
        check(msg.startswith("all_reduce over ranks {0,1,2,3} cancelled by rank 2 while running "
                             "(at ") and "the machine was reset" in msg, msg)
        cut = float(msg.split("(at ")[1].split(" ns")[0])
        started = full[0].end_ns
        check(started < cut < started + full[0].latency_ns,
              "cancelled mid-way: at %r ns, the run started at %r and takes %r ns"
              % (cut, started, full[0].latency_ns))
        for r in (0, 1, 3):
            _op, got, status, meta, _ = cs[r].recv_frame()
            check(got == rids[r] and status == 12 and meta[2:].decode() == msg,
                  "rank %d told: %r" % (r, (got, status, meta)))
        now_ns, now_ps = obs.now()
        check(abs(now_ns - cut) < 1e-3, "the clock after the rebuild: %r, cut at %r" % (now_ns,
                                                                                         cut))
        st = obs.stats()
        check(st["simulating"] == 0 and st["collectives_done"] == 2, "stats: %r" % st)
    # the same collective as the first: right values, the same durations, started at
    # the cut; the tensors of other collectives kept their values
    for r, c in enumerate(cs):
        check(np.array_equal(c.read(ts[r]), first[r].data), "rank %d's tensor kept" % r)
        c.write(ts[r], inputs(r, n))
    again = on_ranks(N, lambda r: cs[r].all_reduce(group, ts[r], algorithm=ring))
    want = sum(inputs(r, n) for r in group)
    for r in group:
        x, y = again[r], first[r]
        check(np.array_equal(x.data, want), "values after the cancel on rank %d" % r)
        check(x.start_ns == now_ns and ps(x.end_ns - x.start_ns) == ps(y.end_ns - y.start_ns)
              and ps(x.latency_ns) == ps(y.latency_ns),
              "times after the cancel on rank %d: %r..%r (%r), first %r..%r (%r)"
              % (r, x.start_ns, x.end_ns, x.latency_ns, y.start_ns, y.end_ns, y.latency_ns))
    check(largest_block(cs[0]) == free_tcm, "rank 0's free TCM after the cancel")
    # a cancel that comes after the run ended finds nothing
    rid = cs[0].send_frame(OP["ping"])
    check(cs[0].cancel(rid)[0] is False, "a cancel of an answered request")
    for c in cs:
        c.close()
    srv.stop()


def case_recover():
    """A failed simulation (a kernel that raises; the TCM running out) fails the
    collective for every member with its cause; the machine is rebuilt where it
    stopped, so the same session and the next one run collectives with the right
    values and times, with the same TCM free (docs/cosim.md, Recovery)."""
    kernels = os.path.join(SRCDIR, "tests/cli/cosim_kernels.lua")
    srv = Server("-q", "--kernels", kernels)
    N, n = 4, 4096
    group = list(range(N))

    def session(r, fail):
        with Client(srv.address, rank=r) as c:
            t, o = c.alloc(n), c.alloc(n)
            c.write(t, inputs(r, n))
            out = {"first": c.launch(group, "ring_shift", t, o)}
            if r == 0:
                out["tcm"] = largest_block(c)
            # tensors in the cube's shared SRAM and in the TCM: kept across the rebuild
            kept = {mem: c.alloc(64 + r, "f32", mem) for mem in ("sram", "tcm")}
            for mem, k in kept.items():
                c.write(k, inputs(r + 20, 64 + r))
            c.launch(group, "scale", t, args={"scale": 1.0})  # all have measured
            out["fail"] = error_of(lambda: c.launch(group, *fail))
            for mem, k in kept.items():
                check(np.array_equal(c.read(k), inputs(r + 20, 64 + r)),
                      "rank %d's %s tensor after the rebuild" % (r, mem))
                c.free(k)
            out["now"] = c.now()[0]
            out["again"] = c.launch(group, "ring_shift", t, o)
            c.write(t, inputs(r + 10, n))
            out["third"] = c.launch(group, "ring_shift", t, o)
            if r == 0:
                out["tcm_after"] = largest_block(c)
            return out

    def check_session(res, what):
        for r in group:
            x = res[r]
            prev = group[(r - 1) % N]
            check(np.array_equal(x["again"].data, inputs(prev, n)),
                  "%s: values after the failure on rank %d" % (what, r))
            check(np.array_equal(x["third"].data, inputs(prev + 10, n)),
                  "%s: values of the next launch on rank %d" % (what, r))
            a, f = x["again"], x["first"]
            check(a.start_ns == x["now"] and ps(a.end_ns - a.start_ns) == ps(f.end_ns - f.start_ns)
                  and ps(a.latency_ns) == ps(f.latency_ns),
                  "%s: times after the failure on rank %d: %r..%r, first %r..%r"
                  % (what, r, a.start_ns, a.end_ns, f.start_ns, f.end_ns))
        check(res[0]["tcm_after"] == res[0]["tcm"], "%s: rank 0's free TCM %d, before %d"
              % (what, res[0]["tcm_after"], res[0]["tcm"]))
        return [res[r]["fail"] for r in group]

    # a kernel that raises, then (the next session: new clients on the same
    # ranks) a kernel that runs out of TCM
    errs = check_session(on_ranks(N, lambda r: session(r, ("fails", None, None,
                                                            {"bad": 2, "why": "r2"}))), "raise")
    for e in errs:
        check(e.status == "sim_error" and "kernel failure on purpose (r2)" in e.message
              and e.message.startswith("launch over ranks {0,1,2,3} failed: "), str(e))
    big = 1 << 20  # 4 MiB: the fifth load does not fit in 16 MiB of TCM
    def hog(r):
        with Client(srv.address, rank=r) as c:
            h = c.alloc(big)
            e = error_of(lambda: c.launch(group, "hog", h))
            c.free(h)
            return e
    for e in on_ranks(N, hog).values():
        check(e.status == "sim_error" and "TCM scratch is full (tcm of 'sip0.cube0.pe" in e.message
              and "4194304 requested" in e.message, str(e))
    errs = check_session(on_ranks(N, lambda r: session(r, ("fails", None, None,
                                                            {"bad": 0, "why": "r0"}))),
                         "after the out-of-memory")
    with Client(srv.address) as obs:
        check(obs.stats()["collectives_done"] == 8, "stats: %r" % obs.stats())
    srv.stop()


def case_launch():
    """launch (operation 27): kernels of --kernels FILE run by name on a group, with
    the members' tensors and the client's arguments; values, times against the same
    kernel launched from Lua, a failing kernel, refusals."""
    kernels = os.path.join(SRCDIR, "tests/cli/cosim_kernels.lua")
    srv = Server("-q", "--kernels", kernels)
    N, n = 4, 256
    group = [1, 3, 0, 2]

    def member(r):
        with Client(srv.address, rank=r) as c:
            t, o = c.alloc(n), c.alloc(n)
            c.write(t, inputs(r, n))
            out = {"scale": c.launch(group, "scale", t, args={"scale": 2.5})}
            out["shift"] = c.launch(group, "ring_shift", t, o)
            out["unknown"] = error_of(lambda: c.launch(group, "nope", t))
            out["reserved"] = error_of(lambda: c.launch(group, "scale", t, args={"n_elem": 1}))
            # members that disagree on the arguments: a mismatch for all
            out["mismatch"] = error_of(lambda: c.launch(group, "scale", t,
                                                        args={"scale": float(r == 0)}))
            out["after"] = c.launch(group, "scale", t, args={"scale": 0.5})
            # a kernel that fails: every member hears it; the machine is rebuilt and
            # the next launch runs (cli.cosim_recover checks more)
            out["fails"] = error_of(lambda: c.launch(group, "fails",
                                                     args={"bad": 3, "why": "rank %d" % 3}))
            out["recovered"] = c.launch(group, "scale", t, args={"scale": 1.0})
            out["ping"] = c.ping()
            return out
    res = on_ranks(N, member)
    for r in range(N):
        x = res[r]
        check(np.array_equal(x["scale"].data, inputs(r, n) * 2.5), "scale on rank %d" % r)
        prev = group[(group.index(r) - 1) % N]
        check(np.array_equal(x["shift"].data, inputs(prev, n) * 2.5),
              "ring_shift on rank %d: %r" % (r, x["shift"].data[:3]))
        e = x["fails"]
        check(e.status == "sim_error" and "kernel failure on purpose (rank 3)" in e.message,
              str(e))
        e = x["unknown"]
        check(e.status == "bad_argument" and "no kernel 'nope'" in e.message
              and "(known: fails, hog, read, ring_shift, scale)" in e.message, str(e))
        e = x["reserved"]
        check(e.status == "bad_argument" and "argument name 'n_elem'" in e.message, str(e))
        e = x["mismatch"]
        check(e.status == "collective_failed" and "collective mismatch" in e.message, str(e))
        check(np.array_equal(x["after"].data, inputs(r, n) * 2.5 * 0.5), "the server goes on")
        check(np.array_equal(x["recovered"].data, inputs(r, n) * 2.5 * 0.5),
              "a launch after the failure on rank %d" % r)
    for name, k in (("scale", "scale"), ("ring_shift", "shift")):
        out = subprocess.run([KBSIM, "-q", os.path.join(SRCDIR, "tests/cli/cosim_rooted_ref.lua"),
                              "kernels=" + kernels, "collective=" + name, "ranks=%d" % N,
                              "n=%d" % n, "scale=2.5", "group=" + ",".join(map(str, group))],
                             capture_output=True, text=True, cwd=WORKDIR, check=True).stdout
        kv = dict(line.split("=", 1) for line in out.split())
        for r in group:
            x = res[r][k]
            check(x.latency_ns == float(kv["latency_ns"])
                  and ps(x.end_ns - x.start_ns) == ps(float(kv["exec_ns.%d" % r])),
                  "%s on rank %d: %r of %r ns, Lua %s" % (name, r, x.end_ns - x.start_ns,
                                                         x.latency_ns, kv))
    srv.stop()
    # without --kernels: refused; a bad kernels file: exit 2 naming it
    srv = Server("-q")
    with Client(srv.address, rank=0) as c:
        e = error_of(lambda: c.launch([0], "scale", c.alloc(4)))
        check(e.status == "bad_argument" and "start it with --kernels FILE" in e.message, str(e))
    srv.stop()
    bad = os.path.join(WORKDIR, "bad_kernels.lua")
    with open(bad, "w") as f:
        f.write("return {k = 42}\n")
    p = subprocess.run([KBSIM, "serve", "--kernels", bad, "--listen",
                        os.path.join(tempfile.mkdtemp(prefix="kbk"), "s.sock")],
                       capture_output=True, text=True, cwd=WORKDIR, timeout=60)
    check(p.returncode == 2 and "--kernels %s: 'k' is not a function" % bad in p.stderr,
          p.stderr)
    # a misspelt field is named (it was "'k' is not a function or a table ...")
    with open(bad, "w") as f:
        f.write("return {k = {kernal = function() end}}\n")
    p = subprocess.run([KBSIM, "serve", "--kernels", bad, "--listen",
                        os.path.join(tempfile.mkdtemp(prefix="kbk"), "s.sock")],
                       capture_output=True, text=True, cwd=WORKDIR, timeout=60)
    check(p.returncode == 2 and p.stderr == "kbsim serve: --kernels %s: 'k': unknown field "
          "'kernal' (fields: kernel, wire)\n" % bad, p.stderr)


def case_trace():
    """kbsim serve --trace FILE and the trace operation (26): a collective run while
    the trace is paused leaves no span; the others do."""
    import json
    path = os.path.join(WORKDIR, "serve_trace.json")
    srv = Server("-q", "--trace", path)
    N, n = 4, 256
    group = list(range(N))

    def member(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(n)
            out = [c.all_reduce(group, t, algorithm="ring_allreduce")]
            c.barrier(group)
            if r == 0:
                out.append(c.trace(False))
            c.barrier(group)
            out.append(c.all_reduce(group, t, algorithm="ring_allreduce"))
            c.barrier(group)
            if r == 0:
                out.append(c.trace())
                out.append(c.trace(True))
            c.barrier(group)
            out.append(c.all_reduce(group, t, algorithm="ring_allreduce"))
            return out
    res = on_ranks(N, member)
    with Client(srv.address) as obs:
        e = error_of(lambda: obs.request(OP["trace"], b"\x07"))
        check(e.status == "bad_argument" and "trace: 7 (0 pause" in e.message, str(e))
        final = obs.trace()
    srv.stop()
    r0 = res[0]
    paused, asked, resumed = r0[1], r0[3], r0[4]
    check(paused[0] is False and asked == paused and resumed[0] is True,
          "trace states %r %r %r" % (paused, asked, resumed))
    check(final[0] and final[1] > resumed[1], "events after the third all_reduce: %r" % (final,))
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    spans = [e for e in ev if e.get("ph") == "X" and e.get("name") == "ring_allreduce"]
    windows = [(res[0][k].start_ns, res[0][k].end_ns) for k in (0, 2, 5)]
    inside = [sum(1 for e in spans if ps(lo) <= round(e["ts"] * 1e6) <= ps(hi))
              for lo, hi in windows]
    check(inside == [N, 0, N] and len(spans) == 2 * N,
          "kernel spans per all_reduce (traced, paused, traced): %r of %d" % (inside, len(spans)))
    # without --trace the operation is refused; --trace-point is for scripts
    srv = Server("-q")
    with Client(srv.address) as obs:
        e = error_of(obs.trace)
        check(e.status == "bad_argument" and "start it with --trace FILE" in e.message, str(e))
    srv.stop()
    p = subprocess.run([KBSIM, "serve", "--trace", path, "--trace-point", "2"],
                       capture_output=True, text=True, cwd=WORKDIR)
    check(p.returncode == 2 and "--trace-point is for scripts" in p.stderr, p.stderr)


def error_of(fn):
    try:
        fn()
    except ServerError as e:
        return e
    raise AssertionError("no error reply")


def raw_reply(c, *frame_args, **kw):
    c.send_frame(*frame_args, **kw)
    op, _rid, status, meta, _data = c.recv_frame()
    (k,) = struct.unpack_from("<H", meta) if status else (0,)
    return status, meta[2:2 + k].decode() if status else ""


def case_errors():
    srv = Server("-q", "--max-payload", "4096")
    c = Client(srv.address, rank=0)
    # malformed arguments: an alloc with 3 bytes of arguments
    st, msg = raw_reply(c, OP["alloc"], b"abc")
    check(st == 1 and "malformed alloc arguments" in msg, "malformed: %d %s" % (st, msg))
    c.ping()
    # unknown operation
    st, msg = raw_reply(c, 99)
    check(st == 2 and "unknown operation 99" in msg, "unknown op: %d %s" % (st, msg))
    c.ping()
    # wrong version
    st, msg = raw_reply(c, OP["ping"], version=7)
    check(st == 3 and "protocol version 7 is not supported (this server speaks 1 to 3)" in msg,
          "version: %d %s" % (st, msg))
    # a version 1 client: served, its replies in version 1; version 2's operations
    # are unknown to it
    old = Client.__new__(Client)  # no hello yet
    old.sock, old.next_id = Client._connect(srv.address, None), 0
    with old:
        old.send_frame(OP["hello"], struct.pack("<I", 0xFFFFFFFF) + _s2(""), version=1)
        hdr = old.sock.recv(HEADER.size, socket.MSG_WAITALL)
        _m, ver, _op, _id, st, mlen, _dl = HEADER.unpack(hdr)
        meta = old.sock.recv(mlen, socket.MSG_WAITALL)
        check(st == 0 and ver == 1 and struct.unpack_from("<H", meta)[0] == 1,
              "a version 1 hello: %d %d %r" % (st, ver, meta))
        st, msg = raw_reply(old, OP["ping"], version=1)
        check(st == 0, "a version 1 ping: %d %s" % (st, msg))
        st, msg = raw_reply(old, OP["trace"], b"\x02", version=1)
        check(st == 2 and "operation 26 (trace) is protocol 2; this frame is protocol 1" in msg,
              "a version 2 operation in version 1: %d %s" % (st, msg))
        st, msg = raw_reply(old, OP["ping"], version=2)
        check(st == 3 and "on a connection that said hello in 1" in msg, "mixed: %s" % msg)
    c.ping()
    # float values into a bf16 tensor: refused by the client (numpy cast 1.5
    # to the bit pattern 1 and the tensor silently held denormals)
    b = c.alloc(4, "bf16")
    try:
        c.write(b, np.full(4, 1.5, np.float32))
        raise AssertionError("float values written into a bf16 tensor")
    except TypeError as e:
        check(str(e) == "kbsim: tensor %d is bf16: write its uint16 bit patterns "
              "(bf16_from_f32(values)), not float32 values" % b, str(e))
    c.write(b, bf16_from_f32(np.full(4, 1.5, np.float32)))
    check(list(bf16_to_f32(c.read(b))) == [1.5] * 4, "bf16 write of bit patterns")
    c.free(b)
    # bad dtype
    e = error_of(lambda: c.alloc(16, "f64"))
    check(e.status == "bad_dtype" and "unknown dtype 'f64'" in e.message, str(e))
    c.ping()
    # a payload over the limit: refused from its header, the connection goes on
    t = c.alloc(4096, "f32")
    big = np.ones(4096, np.float32)  # 16 KiB > 4096
    st, msg = raw_reply(c, OP["write"], struct.pack("<IQ", t, 0), big.tobytes())
    check(st == 4 and "payload refused: 16384 bytes, the limit is 4096" in msg,
          "too large: %d %s" % (st, msg))
    c.ping()
    c.write(t, np.full(1024, 2.5, np.float32))
    check(np.array_equal(c.read(t, 0, 1024), np.full(1024, 2.5, np.float32)),
          "usable after a refused payload")
    # a tensor allocated where a freed one was reads as zeros
    old = c.alloc(300, "f32")
    c.write(old, np.full(300, 7, np.float32))
    c.free(old)
    new = c.alloc(300, "f32")
    check(not c.read(new).any(), "a new tensor is not zero")
    e = error_of(lambda: c.request(OP["read"], struct.pack("<IQQ", old, 0, 1)))
    check(e.status == "not_found", str(e))
    # arguments over their own limit, same
    st, msg = raw_reply(c, OP["ping"], b"x" * 70000)
    check(st == 4 and "bytes of arguments" in msg, "meta too large: %d %s" % (st, msg))
    c.ping()
    # a second client claiming rank 0: refused; it may take another rank
    d = Client(srv.address)
    e = error_of(lambda: d.hello(0))
    check(e.status == "refused" and "rank 0 is already claimed" in e.message, str(e))
    d.hello(1)
    d.ping()
    # requests before hello, unknown tensors, rank outside the machine
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(srv.address)
        s.sendall(HEADER.pack(b"KBSM", 1, OP["now"], 1, 0, 0, 0))
        head = HEADER.unpack(s.recv(HEADER.size, socket.MSG_WAITALL))
        check(head[4] == 6, "now before hello: status %d" % head[4])
    e = error_of(lambda: c.request(OP["read"], struct.pack("<IQQ", 77, 0, 1)))
    check(e.status == "not_found" and "rank 0 has no tensor 77" in e.message, str(e))
    e = error_of(lambda: Client(srv.address, rank=100000))
    check(e.status == "bad_argument" and "no rank 100000" in e.message, str(e))
    # a collective whose group leaves out the caller, and a mismatch
    e = error_of(lambda: c.all_reduce([1, 2], t))
    check("rank 0 issued it but is not in the group {1,2}" in e.message, str(e))
    u = d.alloc(8, "f32")
    box = {}
    th = threading.Thread(target=lambda: box.setdefault("e", error_of(
        lambda: c.all_reduce([0, 1], t, algorithm="ring_allreduce"))))
    th.start()
    time.sleep(0.2)  # order only: rank 0 first (the test holds either way)
    e = error_of(lambda: d.all_reduce([0, 1], u, algorithm="ring_allreduce"))
    th.join(60)
    check("collective mismatch over ranks {0,1}" in e.message, str(e))
    check(box["e"].status == "collective_failed" and "mismatch" in box["e"].message,
          str(box["e"]))
    c.ping()
    # an unknown algorithm: found out once the group is complete, told to both
    v = c.alloc(8, "f32")
    th = threading.Thread(target=lambda: box.__setitem__("e", error_of(
        lambda: c.all_reduce([0, 1], v, algorithm="nope"))))
    th.start()
    e = error_of(lambda: d.all_reduce([0, 1], u, algorithm="nope"))
    th.join(60)
    for x in (e, box["e"]):
        check(x.status == "bad_argument" and "unknown algorithm 'nope' (known: " in x.message,
              str(x))
    c.ping()
    # ccl.yaml's default all-reduce (lrab: PE 0 of every cube) on a group of 2:
    # bad_argument (it was a sim_error), naming where the
    # default was set; an explicit one names itself
    for algo, who in (("", "configs/ccl.yaml:4:14: algorithm 'lrab' (ccl.yaml's all_reduce "
                       "default; name one in the request or --set ccl.algorithm=NAME)"),
                      ("lrab", "failed: algorithm 'lrab'")):
        th = threading.Thread(target=lambda: box.__setitem__("e", error_of(
            lambda: c.all_reduce([0, 1], v, algorithm=algo))))
        th.start()
        e = error_of(lambda: d.all_reduce([0, 1], u, algorithm=algo))
        th.join(60)
        for x in (e, box["e"]):
            check(x.status == "bad_argument" and who + " does not run on the group {0,1}: 'lrab' "
                  "runs on PE 0 of every cube: world size must be 32, got 2" in x.message, str(x))
    c.ping()
    # bad magic: an error reply, then the server closes (no way to resync)
    st, msg = raw_reply(c, OP["ping"], magic=b"XXXX")
    check(st == 1 and "no 'KBSM' magic" in msg, "bad magic: %d %s" % (st, msg))
    check(c.sock.recv(1) == b"", "connection not closed after a bad magic")
    # the server is still there
    with Client(srv.address, rank=0) as again:
        again.ping()
    # an address where no server is: the error names it (it said only
    # "[Errno 2] No such file or directory")
    gone = os.path.join(srv.dir, "no_server.sock")
    try:
        Client(gone, rank=0)
        raise AssertionError("connected to %s" % gone)
    except FileNotFoundError as e:
        check(str(e) == "[Errno 2] kbsim: cannot connect to '%s': No such file or directory "
              "(is `kbsim serve` listening there? it prints its address)" % gone, str(e))
    d.close()
    srv.stop()


def case_bounds():
    """u64 arguments near 2^63 and 2^64 (offsets, counts, sizes): refused with the
    number as sent, never wrapped into a read or write outside the tensor (the reply
    used to never come, or an 'internal error'), nor a cost of 0 ns. A refused hello
    leaves no connection open."""
    srv = Server("-q")
    c = Client(srv.address, rank=0, timeout=30)
    t = c.alloc(16)
    c.write(t, np.arange(16, dtype=np.float32))

    def refused_with(op, meta, data, text):
        e = error_of(lambda: c.request(OP[op], meta, data))
        check(e.status == "bad_argument" and text in e.message, "%s: %s" % (op, e))
    refused_with("read", struct.pack("<IQQ", t, (1 << 63) - 1, 1), b"",
                 "read: 1 elements from element 9223372036854775807 are outside tensor")
    refused_with("read", struct.pack("<IQQ", t, 1 << 62, 1 << 62), b"",
                 "read: 4611686018427387904 elements from element 4611686018427387904")
    refused_with("write", struct.pack("<IQ", t, (1 << 63) - 1), b"\0" * 8,
                 "write: 2 elements from element 9223372036854775807 are outside tensor")
    refused_with("write", struct.pack("<IQ", t, (1 << 64) - 2), b"\0" * 8,
                 "write: 2 elements from element 18446744073709551614 are outside tensor")
    refused_with("alloc", struct.pack("<Q", 1 << 62) + _s2("f32") + _s2(""), b"",
                 "alloc: 4611686018427387904 elements (1 .. 2^50)")
    refused_with("alloc", struct.pack("<Q", (1 << 64) - 1) + _s2("f32") + _s2(""), b"",
                 "alloc: 18446744073709551615 elements (1 .. 2^50)")
    refused_with("cost", _s2("gemm") + _s2("f32") + struct.pack("<QQQ", 1 << 62, 1 << 62, 4), b"",
                 "cost: a GEMM of 4611686018427387904 x 4611686018427387904 x 4 (each >= 1, "
                 "M*N*K <= 2^48)")
    refused_with("cost", _s2("add") + _s2("f32") + struct.pack("<QQQ", 1 << 60, 0, 0), b"",
                 "cost: add over 1152921504606846976 elements (1 .. 2^40)")
    # the largest allowed still answer, with a positive time
    ns, _ps = struct.unpack("<dQ", c.request(OP["cost"], _s2("gemm") + _s2("f32") +
                                             struct.pack("<QQQ", 1 << 16, 1 << 16, 1 << 16))[0])
    check(ns > 0, "gemm cost of 2^48: %r" % ns)
    check(np.array_equal(c.read(t), np.arange(16, dtype=np.float32)), "tensor untouched")
    # a client whose hello is refused (rank 0 is taken) closes its connection,
    # even while the error (and its traceback) is kept
    errors = [error_of(lambda: Client(srv.address, rank=0)) for _ in range(3)]
    check(all(e.status == "refused" for e in errors), str(errors[0]))
    with Client(srv.address) as obs:
        for _ in range(200):
            if obs.stats()["clients"] == 2:
                break
            time.sleep(0.01)
        check(obs.stats()["clients"] == 2, "connections after refused hellos: %d (want rank 0 "
              "and the observer)" % obs.stats()["clients"])
    c.close()
    srv.stop()


def wait_issued(srv, n):
    """Until n members wait in collectives (the server has read their requests)."""
    with Client(srv.address) as obs:
        while obs.stats()["issued"] < n:
            time.sleep(0.01)


def case_disconnect():
    # timeout 2 s: ranks that never issue it
    srv = Server("-q", "--timeout", "2")
    group = [0, 1, 2]
    lazy = Client(srv.address, rank=2)  # connected, never issues

    def members(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(64)
            return error_of(lambda: c.all_reduce(group, t, algorithm="ring_allreduce"))
    res = on_ranks(2, members)
    for r in range(2):
        check(res[r].status == "collective_failed" and
              "rank 2 did not issue it within 2 s" in res[r].message, str(res[r]))
    t = lazy.alloc(64)
    e = error_of(lambda: lazy.all_reduce(group, t, algorithm="ring_allreduce"))
    check("did not issue it within 2 s" in e.message, "the late rank: %s" % e)
    lazy.close()

    # a member that leaves while the others wait in the collective
    def leaver():
        c = Client(srv.address, rank=2)
        wait_issued(srv, 2)
        c.close()

    def issuer(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(64)
            return error_of(lambda: c.all_reduce(group, t, algorithm="ring_allreduce"))
    th = threading.Thread(target=leaver)
    th.start()
    res = on_ranks(2, issuer)
    th.join()
    for r in range(2):
        check("rank 2 disconnected during all_reduce over ranks {0,1,2}" in res[r].message,
              str(res[r]))

    # a member that leaves once it has issued a long collective: the run
    # ends, the others hear of it, the server stays up
    N, n = 4, 1 << 20
    big = list(range(N))

    def long_one(r):
        c = Client(srv.address, rank=r)
        t = c.alloc(n)
        if r == N - 1:
            wait_issued(srv, N - 1)
            c.send_frame(OP["all_reduce"], struct.pack("<I4I", 4, *big) + struct.pack("<I", t)
                         + b"\x03\x00sum" + b"\x0e\x00ring_allreduce" + b"\x00")
            c.close()
            return None
        e = error_of(lambda: c.all_reduce(big, t, algorithm="ring_allreduce"))
        c.close()
        return e
    res = on_ranks(N, long_one)
    # whether the run had begun when the server saw rank 3 leave depends on
    # timing: before, "... disconnected during ..."; while it ran, the run is
    # stopped and "... cancelled: rank 3 disconnected while it ran" (0042)
    for r in range(N - 1):
        m = res[r].message
        check("all_reduce over ranks {0,1,2,3}" in m and
              ("rank 3 disconnected during" in m or "rank 3 disconnected while it ran" in m),
              str(res[r]))

    # the next session on the same server works (on the same ring: a ring
    # over {0,1,2} would want port E of rank 2 that {0,1,2,3} wired)
    def fine(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(64)
            c.write(t, np.full(64, r + 1, np.float32))
            return c.all_reduce(big, t, algorithm="ring_allreduce").data
    res = on_ranks(N, fine)
    for r in range(N):
        check(np.array_equal(res[r], np.full(64, 10, np.float32)), "after the failures")
    srv.stop()


# A rank's client in a process of its own (killed by the test mid-collective):
# argv: python dir, address, rank, elements, TCM elements. It allocates a
# tensor in HBM and one in the TCM, says "issued" and waits in an all_reduce.
LEAVER = r"""
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from kbsim import Client
r, n, k = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
c = Client(sys.argv[2], rank=r)
t = c.alloc(n)
c.write(t, (np.arange(n) % 97 + 100 * r).astype(np.float32))
c.alloc(k, "f32", "tcm")
print("issued", flush=True)
c.all_reduce([0, 1, 2, 3], t, algorithm="ring_allreduce")
print("answered", flush=True)
"""


def case_disconnect_running():
    """A member's process killed while its collective runs: the run stops at the
    next batch, the other members get `cancelled` naming the rank and the time, the
    machine is rebuilt where it stopped without the leaver's tensors (decision 0042),
    and a new client on that rank runs the next collective with the right values
    and the same times as on a fresh server."""
    srv = Server("-q")
    N, n, big, tcm = 4, 4096, 1 << 20, 1 << 18
    group = list(range(N))
    ring = "ring_allreduce"
    # rank 2 speaks protocol 1, which has no status 12 (cancelled)
    cs = [Client(srv.address, rank=r, version=1 if r == 2 else PROTOCOL_VERSION) for r in group]
    ts = [c.alloc(n) for c in cs]
    bs = [c.alloc(big) for c in cs]
    for r, c in enumerate(cs):
        c.write(ts[r], inputs(r, n))
        c.write(bs[r], inputs(r, big))
    first = on_ranks(N, lambda r: cs[r].all_reduce(group, ts[r], algorithm=ring))
    full = on_ranks(N, lambda r: cs[r].all_reduce(group, bs[r], algorithm=ring))
    cs[3].close()  # rank 3 goes to a process of its own
    with Client(srv.address, rank=3) as probe:
        free_tcm = largest_block(probe)  # rank 3 with no tensors
    for r in range(3):
        cs[r].write(bs[r], inputs(r, big))
    with Client(srv.address) as obs:
        start = obs.now()[0]
        done = obs.stats()["collectives_done"]
        child = subprocess.Popen([sys.executable, "-c", LEAVER, os.path.join(SRCDIR, "python"),
                                  srv.address, "3", str(big), str(tcm)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        RUNNING.append(child)
        check(child.stdout.readline().strip() == "issued", "the rank 3 process did not start")
        rids = [cs[r].send_frame(OP["all_reduce"], _group(group) + struct.pack("<I", bs[r])
                                 + _s2("sum") + _s2(ring) + b"\0") for r in range(3)]
        deadline = time.time() + 60
        while not obs.stats()["simulating"]:
            check(time.time() < deadline, "the 4-rank all_reduce never ran")
        child.kill()
        out, _ = child.communicate(timeout=30)
        check("answered" not in out, "rank 3 got an answer before it was killed")
        msgs = []
        for r in range(3):
            _op, got, status, meta, _ = cs[r].recv_frame()
            want = 9 if r == 2 else 12  # collective_failed for the version 1 client
            check(got == rids[r] and status == want, "rank %d told: %r" % (r, (got, status, meta)))
            msgs.append(meta[2:].decode())
        msg = msgs[0]
        check(msgs == [msg] * 3, "the members' messages differ: %r" % msgs)
        check(msg.startswith("all_reduce over ranks {0,1,2,3} cancelled: rank 3 disconnected "
                             "while it ran (at ") and "the machine was reset" in msg, msg)
        cut = float(msg.split("(at ")[1].split(" ns")[0])
        check(start < cut < start + full[0].latency_ns,
              "stopped mid-way: at %r ns, the run started at %r and takes %r ns"
              % (cut, start, full[0].latency_ns))
        check(abs(obs.now()[0] - cut) < 1e-3, "the clock after the rebuild: %r, cut at %r"
              % (obs.now()[0], cut))
        st = obs.stats()
        check(st["simulating"] == 0 and st["collectives_done"] == done and st["clients"] == 4,
              "stats after the rebuild: %r" % st)
    # rank 3 is free again for a new client
    cs[3] = c3 = Client(srv.address, rank=3)
    ts[3] = c3.alloc(n)
    for r, c in enumerate(cs):
        c.write(ts[r], inputs(r, n))
    again = on_ranks(N, lambda r: cs[r].all_reduce(group, ts[r], algorithm=ring))
    want = sum(inputs(r, n) for r in group)
    for r in group:
        x, y = again[r], first[r]
        check(np.array_equal(x.data, want), "values after the rebuild on rank %d" % r)
        check(x.start_ns == cut and ps(x.end_ns - x.start_ns) == ps(y.end_ns - y.start_ns)
              and ps(x.latency_ns) == ps(y.latency_ns),
              "times after the rebuild on rank %d: %r..%r (%r), first %r..%r (%r)"
              % (r, x.start_ns, x.end_ns, x.latency_ns, y.start_ns, y.end_ns, y.latency_ns))
    # the killed process's tensors (HBM and TCM) were freed with it: with the ring
    # wired again, rank 3's TCM is as free as it was before that process came
    c3.free(ts[3])
    check(largest_block(c3) == free_tcm, "rank 3's free TCM after its process was killed: %d, "
          "before %d" % (largest_block(c3), free_tcm))
    for c in cs:
        c.close()
    srv.stop()


def case_trace_rebuild():
    """--trace goes on across a rebuild (a failed kernel): one file, the kernels'
    rows kept, a "machine rebuilt" span at the cut, the new machine's kernel, DMA and
    link spans after it, the trace operation still answers (decision 0042)."""
    import json
    path = os.path.join(WORKDIR, "serve_trace_rebuild.json")
    kernels = os.path.join(SRCDIR, "tests/cli/cosim_kernels.lua")
    srv = Server("-q", "--trace", path, "--kernels", kernels)
    N, n = 4, 256
    group = list(range(N))

    def member(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(n)
            c.write(t, inputs(r, n))
            out = {"first": c.all_reduce(group, t, algorithm="ring_allreduce")}
            out["fail"] = error_of(lambda: c.launch(group, "fails", None, None,
                                                    {"bad": 1, "why": "trace"}))
            out["cut"] = c.now()[0]
            if r == 0:
                out["trace"] = c.trace()
            c.write(t, inputs(r, n))
            out["again"] = c.all_reduce(group, t, algorithm="ring_allreduce")
            return out
    res = on_ranks(N, member)
    with Client(srv.address) as obs:
        final = obs.trace()
    srv.stop()
    r0 = res[0]
    cut = r0["cut"]
    check(r0["fail"].status == "sim_error", str(r0["fail"]))
    check(r0["trace"][0] is True and final[1] > r0["trace"][1],
          "the trace after the rebuild: %r, at the end %r" % (r0["trace"], final))
    for r in group:
        a = res[r]["again"]
        check(np.array_equal(a.data, sum(inputs(x, n) for x in group)), "values on rank %d" % r)
        check(a.start_ns == cut and ps(a.end_ns - a.start_ns) ==
              ps(res[r]["first"].end_ns - res[r]["first"].start_ns),
              "rank %d's all_reduce after the rebuild: %r..%r" % (r, a.start_ns, a.end_ns))
    with open(path) as f:
        ev = json.load(f)["traceEvents"]   # one file, one JSON document
    spans = [e for e in ev if e.get("ph") == "X"]
    ring = [e for e in spans if e.get("name") == "ring_allreduce"]
    before = [e for e in ring if round(e["ts"] * 1e6) < ps(cut)]
    after = [e for e in ring if round(e["ts"] * 1e6) >= ps(cut)]
    check(len(before) == N and len(after) == N, "kernel spans before / after the cut: %d / %d"
          % (len(before), len(after)))
    check(sorted((e["pid"], e["tid"]) for e in before) == sorted((e["pid"], e["tid"])
                                                                  for e in after),
          "the new machine's kernels are on the old rows")
    mark = [e for e in spans if e.get("name") == "machine rebuilt"]
    check(len(mark) == 1 and round(mark[0]["ts"] * 1e6) == ps(cut) and mark[0]["dur"] == 0
          and mark[0]["args"]["after"] == "a failed launch" and mark[0]["args"]["machine"] == 2,
          "the rebuild's mark: %r (cut %r)" % (mark, cut))
    for cat in ("dma", "link"):
        late = [e for e in spans if e.get("cat") == cat and round(e["ts"] * 1e6) >= ps(cut)]
        check(late, "no %s span of the new machine" % cat)
    names = [e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"]
    check(len(names) == len(set((e["pid"], e["args"]["name"]) for e in ev
                                if e.get("ph") == "M" and e["name"] == "thread_name")),
          "a row named twice")


def refused(args, text):
    p = subprocess.run([KBSIM, "serve", *args], capture_output=True, text=True, cwd=WORKDIR,
                       timeout=60)
    check(p.returncode == 2 and text in p.stderr,
          "%s: exit %d, %r" % (args, p.returncode, p.stderr))


def case_tcp():
    srv = Server("-q", "--token", "s3cret", listen="127.0.0.1:0")
    check(srv.address.startswith("127.0.0.1:") and not srv.address.endswith(":0"), srv.address)
    e = error_of(lambda: Client(srv.address, rank=0))
    check(e.status == "refused" and "wrong or missing token" in e.message, str(e))
    with Client(srv.address, rank=0, token="s3cret") as c:
        c.ping()
        t = c.alloc(16)
        c.write(t, np.arange(16, dtype=np.float32))
        check(np.array_equal(c.all_reduce([0], t, algorithm="ring_allreduce").data,
                             np.arange(16, dtype=np.float32)), "one-rank all_reduce over TCP")
    srv.stop()
    msg = "not a loopback address; a listener other hosts can reach needs --allow-remote"
    refused(["--listen", "0.0.0.0:0"], msg)
    refused(["--listen", "0.0.0.0:0", "--token", "x"], msg)
    refused(["--listen", "0.0.0.0:0", "--allow-remote"], "--allow-remote needs --token TOKEN")
    refused(["--listen", "[::]:0"], msg)
    refused(["--timeout", "abc"], "bad value 'abc' for '--timeout'")
    refused(["--max-payload", "0"], "bad value '0' for '--max-payload'")
    # the limits as written, an integer's whole ("a number in 1..4.29497e+09" before)
    refused(["--max-payload", "1.5"],
            "bad value '1.5' for '--max-payload' (expected an integer from 1 to 4294967295)")
    refused(["--timeout", "0"],
            "bad value '0' for '--timeout' (expected a number from 0.001 to 86400)")
    refused(["--timeout", " 5"], "bad value ' 5' for '--timeout'")
    refused(["extra.lua"], "'kbsim serve' takes no script or argument, got 'extra.lua'")
    refused(["--set", "sips.cuont=2"], "unknown key 'sips.cuont'")
    # socket paths: one line without a script position; a live server's socket is
    # not taken over, a stale one (a file left by a server that is gone) is
    refused(["--listen", "/nonexistent/dir/s.sock"],
            "kbsim serve: --listen '/nonexistent/dir/s.sock': ")
    live = Server("-q")
    refused(["--listen", live.listen], "--listen '%s': another server listens there"
            % live.listen)
    live.stop()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(live.listen)
    stale.close()
    again = Server("-q", listen=live.listen)
    with Client(again.address) as c:
        c.ping()
    again.stop()


def case_busy():
    # The loop answers while a long collective is simulated: an observer sees
    # "simulating" (only a reply sent between two batches of the run can
    # say so), and the members then get their exact results.
    srv = Server("-q")
    N, n = 4, 1 << 20
    seen = {}

    def observe():
        with Client(srv.address) as obs:
            while True:
                st = obs.stats()
                if st["simulating"] or st["collectives_done"]:
                    seen.update(st)
                    return

    def member(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(n)
            c.write(t, np.full(n, r + 1, np.float32))
            if r == 0:
                threading.Thread(target=observe).start()
            return c.all_reduce(list(range(N)), t, algorithm="ring_allreduce").data
    res = on_ranks(N, member)
    check(seen.get("simulating") == 1, "the server never answered during the run: %r" % seen)
    for r in range(N):
        check(np.array_equal(res[r], np.full(n, 10, np.float32)), "values on rank %d" % r)
    srv.stop()


def told_stopping(res):
    for r, v in res.items():
        check(v == "stopping: all_reduce over ranks {0,1,2,3} failed: the server is stopping",
              "rank %d: %s" % (r, v))


def case_stop():
    # Ctrl-C while members wait in a collective: they get an error, the
    # server ends with status 0 and removes its socket
    srv = Server("-q")
    N = 4

    def member(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(64)
            if r == 0:
                def stop():
                    wait_issued(srv, N - 1)
                    srv.proc.send_signal(signal.SIGINT)
                threading.Thread(target=stop).start()
            e = error_of(lambda: c.all_reduce(list(range(N)), t, algorithm="ring_allreduce"))
            return "%s: %s" % (e.status, e.message)
    res = on_ranks(N - 1, member)  # rank 3 never comes
    srv.ended()
    told_stopping(res)


def case_stop_running():
    # Ctrl-C while a long collective is simulated: the run stops at its next
    # batch, the members get "stopping", the server ends with status 0
    srv = Server("-q")
    N, n = 4, 1 << 20

    def stop_when_running():
        with Client(srv.address) as obs:
            while not obs.stats()["simulating"]:
                pass
        srv.proc.send_signal(signal.SIGINT)

    def member(r):
        with Client(srv.address, rank=r) as c:
            t = c.alloc(n)
            if r == 0:
                threading.Thread(target=stop_when_running).start()
            e = error_of(lambda: c.all_reduce(list(range(N)), t, algorithm="ring_allreduce"))
            return "%s: %s" % (e.status, e.message)
    res = on_ranks(N, member)
    srv.ended()
    told_stopping(res)


def case_exchange():
    """all_to_all, all_to_allv and send/recv through the plain client: values, and
    the bad arguments of each."""
    srv = Server("-q")
    N, C = 4, 3
    group = list(range(N))
    counts = [[(r + j) % 3 for j in range(N)] for r in range(N)]  # rank r -> rank j

    def member(r):
        with Client(srv.address, rank=r) as c:
            t, o = c.alloc(N * C), c.alloc(N * C)
            c.write(t, np.arange(N * C, dtype=np.float32) + 100 * r)
            a2a = c.all_to_all(group, t, o)
            tv, ov = c.alloc(sum(counts[r]) + 1), c.alloc(20)
            c.write(tv, np.arange(sum(counts[r]) + 1, dtype=np.float32) + 100 * r)
            a2av = c.all_to_allv(group, tv, ov, counts[r])
            s = c.alloc(5, "f16")
            if r % 2 == 0:
                c.write(s, np.arange(5, dtype=np.float16) + r)
                p2p = c.send(r + 1, s, 4)
            else:
                p2p = c.recv(r - 1, s, 4)
            return a2a, a2av, p2p
    res = on_ranks(N, member)
    for r in range(N):
        a2a, a2av, p2p = res[r]
        want = np.concatenate([np.arange(r * C, (r + 1) * C) + 100.0 * i for i in range(N)])
        check(np.array_equal(a2a.data, want), "all_to_all rank %d: %s" % (r, a2a.data))
        got = []
        for i in range(N):
            first = sum(counts[i][:r])
            got += list(np.arange(first, first + counts[i][r]) + 100.0 * i)
        want = np.zeros(20, np.float32)
        want[:len(got)] = got
        check(np.array_equal(a2av.data, want), "all_to_allv rank %d: %s" % (r, a2av.data))
        check(a2a.latency_ns > 0 and a2av.latency_ns > 0, "exchange latencies")
        if r % 2:
            check(np.array_equal(p2p.data, np.arange(4, dtype=np.float16) + r - 1),
                  "recv rank %d: %s" % (r, p2p.data))
            check(p2p.latency_ns == res[r - 1][2].latency_ns > 0, "send and recv latencies")
        else:
            check(p2p.data is None and p2p.end_ns > p2p.start_ns, "send reply")
    # bad arguments: refused at once, the connection goes on
    with Client(srv.address, rank=0) as c:
        t, o = c.alloc(10), c.alloc(10)
        for fn, status, text in [
                (lambda: c.all_to_all(group, t, o), "bad_argument",
                 "an input of 10 elements over 4 ranks needs a multiple of 4"),
                (lambda: c.all_to_allv(group, t, o, [1, 2]), "bad_argument",
                 "2 send counts for a group of 4 ranks"),
                (lambda: c.all_to_allv(group, t, o, [5, 5, 5, 5]), "bad_argument",
                 "the send counts add up to 20, the input holds 10"),
                (lambda: c.send(0, t), "bad_argument",
                 "rank 0 cannot send to rank 0 (ranks 0..%d, not itself)" % (c.n_pes - 1)),
                (lambda: c.send(c.n_pes, t), "bad_argument", "cannot send to rank %d" % c.n_pes),
                (lambda: c.recv(1, t, 11), "bad_argument", "recv: 11 elements, tensor 1 holds 10"),
                (lambda: c.send(1, 77, 1), "not_found", "rank 0 has no tensor 77")]:
            e = error_of(fn)
            check(e.status == status and text in e.message, "%s: %s" % (text, e))
            c.ping()
        # cost: the closed forms; a bad unit, size or dtype is refused
        meta, _ = c.request(19, _s2("gemm") + _s2("f32") + struct.pack("<QQQ", 4, 32, 64))
        check(struct.unpack("<dQ", meta)[1] > 0, "gemm cost")
        for unit, dt, dims, status, text in [
                ("bogus", "f32", (3, 0, 0), "bad_argument", "unknown math op 'bogus'"),
                ("gemm", "f32", (0, 1, 1), "bad_argument", "a GEMM of 0 x 1 x 1"),
                ("add", "f64", (3, 0, 0), "bad_dtype", "unknown dtype 'f64'")]:
            e = error_of(lambda: c.request(19, _s2(unit) + _s2(dt) + struct.pack("<QQQ", *dims)))
            check(e.status == status and text in e.message, "cost %s: %s" % (unit, e))
        c.ping()
        st, msg = raw_reply(c, OP["all_to_allv"], _group_bytes(group)
                            + struct.pack("<III", t, o, 2) + b"\0\0")
        check(st == 1 and "malformed all_to_allv arguments" in msg, "%d %s" % (st, msg))
        c.ping()

    # an output too small for what a rank receives fails for every member
    def small(r):
        with Client(srv.address, rank=r) as c:
            t, o = c.alloc(8), c.alloc(8 if r != 2 else 5)
            return error_of(lambda: c.all_to_allv(group, t, o, [2, 2, 2, 2]))
    for r, e in on_ranks(N, small).items():
        check(e.status == "bad_argument" and "rank 2 receives 8 elements, its output holds 5"
              in e.message, "rank %d: %s" % (r, e))
    srv.stop()


def case_inject():
    """External models: timed transfers, advancing by a quantum, completion events
    (examples/cosim/host_model.py drives them)."""
    sys.path.insert(0, os.path.join(SRCDIR, "examples", "cosim"))
    import host_model
    nbytes, q, chunks = 4096, 25.0, 4
    # the same transfer as a send/recv on an idle machine: its latency
    srv = Server("-q")
    lat = {}
    for dst in (1, 2, 3):
        def pair(r, dst=dst):
            with Client(srv.address, rank=r) as c:
                t = c.alloc(nbytes // 4)
                return c.send(dst, t) if r == 0 else c.recv(0, t)
        res = on_ranks(2, lambda i: pair([0, dst][i]))
        lat[dst] = res[1].latency_ns
    srv.stop()

    srv = Server("-q")
    log, steps, _ = host_model.run(srv.address, q, [1, 2, 3], chunks, nbytes)
    check(len(log) == 3 * chunks, "%d transfers" % len(log))
    for k, (now, _) in enumerate(steps):
        check(now == q * (k + 1), "advance %d reached %r ns, not %r" % (k, now, q * (k + 1)))
    last = {}
    for dst, start, end, status, moved in log:  # PE 0 feeds three PEs: never faster than alone
        check(status == "done" and moved == nbytes, "an event: %r %r" % (status, moved))
        check(end - start >= lat[dst] - 1e-6,
              "transfer to %d took %r ns, a send/recv alone %r" % (dst, end - start, lat[dst]))
        if dst in last:  # closed loop: the next chunk at the first quantum after the landing
            check(start == math.ceil(last[dst] / q) * q,
                  "to %d: started %r after a landing at %r" % (dst, start, last[dst]))
        last[dst] = end
    # with doorbells (raw messages back to PE 0): the next chunk starts at the first
    # quantum after the doorbell arrived, which starts when the host learned of the
    # landing; with a deadline, what is in flight stops at a piece boundary
    t0 = Client(srv.address).now()[0]
    log, steps, host = host_model.run(srv.address, q, [1, 2, 3], chunks, nbytes,
                                      doorbell=True, deadline=t0 + 500, piece=1024)
    bells = sorted(host.bells, key=lambda b: b[1])
    check(bells and all(e > s for _, s, e in bells), "doorbells: %r" % bells)
    learned = dict(host.learned)
    for dst, start, end, status, moved in log:
        if status == "done":
            check(moved == nbytes and any(s == learned[end] and t == dst for t, s, _ in bells),
                  "a doorbell from %d at %r after its chunk ended %r" % (dst, learned.get(end),
                                                                          end))
        else:
            check(status == "cancelled" and moved % 1024 == 0 and moved < nbytes
                  and end >= t0 + 500, "aborted at the deadline: %r" % ((dst, end, moved),))
    check(any(x[3] == "cancelled" for x in log) and all(x[1] < t0 + 500 for x in log),
          "the deadline aborted transfers and started none: %r" % log)
    for dst, start, end, status, moved in log:
        nxt = [x for x in log if x[0] == dst and x[1] > start]
        bell = [b for b in bells if b[0] == dst and b[1] == learned.get(end)]
        if nxt and bell:
            check(min(x[1] for x in nxt) == math.ceil(bell[0][2] / q) * q,
                  "to %d: the next chunk at %r, the doorbell arrived at %r"
                  % (dst, min(x[1] for x in nxt), bell[0][2]))
    # bad arguments: refused, the connection goes on
    with Client(srv.address) as c:
        # alone, an injected transfer takes what the same send/recv takes
        now = c.now()[0]
        eid = c.inject(0, 2, nbytes, now + 10, tag=5)
        t, evs = c.advance(5)
        check(t == now + 5 and evs == [], "no event before it is done: %r" % evs)
        t, evs = c.advance(200)
        check(len(evs) == 1 and (evs[0].id, evs[0].tag, evs[0].start_ns) == (eid, 5, now + 10),
              "the event: %r" % evs)
        check(abs(evs[0].end_ns - evs[0].start_ns - lat[2]) < 1e-6,
              "alone: %r ns, a send/recv %r" % (evs[0].end_ns - evs[0].start_ns, lat[2]))
        now = c.now()[0]
        for args, text in [((1, 1, 64, now), "inject: rank 1 to itself"),
                           ((0, c.n_pes, 64, now), "inject: no rank %d" % c.n_pes),
                           ((0, 1, 6, now), "inject: 6 bytes (a multiple of 4"),
                           ((0, 1, 64, now - 1), "is before the machine's time")]:
            e = error_of(lambda: c.inject(*args))
            check(e.status == "bad_argument" and text in e.message, "%s: %s" % (text, e))
        for bad in (0.0, -5.0, float("nan")):
            e = error_of(lambda: c.advance(bad))
            check(e.status == "bad_argument" and "advance: a quantum of" in e.message, str(e))
        check(c.advance(q)[0] == now + q, "usable after the refusals")
    srv.stop()


def until_events(c, want, quantum=50.0):
    """Advances c until `want` events came; -> {id: Event}."""
    got = {}
    for _ in range(2000):
        if len(got) >= want:
            return got
        now, evs = c.advance(quantum)
        if os.environ.get("KB_DEBUG"):
            print("advance", now, evs, file=sys.stderr)
        for e in evs:
            got[e.id] = e
    raise AssertionError("events never came: %r" % got)


def case_inject_kinds():
    """inject_ex (operation 28), inject_cancel (29), advance's events in protocol 3:
    a DMA read at one PE (timed as the same load in a kernel), a raw message on the
    fabric (timed as sys:inject from Lua), a transfer in pieces, one cancelled
    mid-way and before it starts, one lost when a failed kernel has the machine
    rebuilt (and one not yet started then, started again); a version 2 client; the
    refusals."""
    kernels = os.path.join(SRCDIR, "tests/cli/cosim_kernels.lua")
    srv = Server("-q", "--kernels", kernels)
    m = Client(srv.address)
    KiB = 1024
    # a read at PE 2 against a kernel's load of the same bytes on PE 2
    with Client(srv.address, rank=2) as c2:
        t = c2.alloc(16 * KiB)
        ref = c2.launch([2], "read", t)
        now = c2.now()[0]
        eid = m.inject(2, 2, 64 * KiB, now + 10, tag=1, kind="read")
        e = until_events(m, 1)[eid]
        check(e.status == "done" and e.bytes == 64 * KiB and e.start_ns == now + 10
              and ps(e.end_ns - e.start_ns) == ps(ref.end_ns - ref.start_ns),
              "a read: %r, the kernel's load took %r ns" % (e, ref.end_ns - ref.start_ns))
    # a raw message from PE 0 to PE 5 against sys:inject from Lua
    out = subprocess.run([KBSIM, "-q", os.path.join(SRCDIR, "tests/cli/cosim_message_ref.lua"),
                          "src=0", "dst=5", "bytes=4096"], capture_output=True, text=True,
                         cwd=WORKDIR, check=True).stdout
    lat = float(out.split("latency_ns=")[1])
    now = m.now()[0]
    eid = m.inject(0, 5, 4096, now + 5, tag=2, kind="message")
    e = until_events(m, 1)[eid]
    check(e.status == "done" and e.bytes == 4096 and ps(e.end_ns - e.start_ns) == ps(lat),
          "a message: %r, Lua's %r ns" % (e, lat))
    # cancelled once on the fabric (half-way): the fabric cannot call it back, so it
    # arrives whole, at the same time (docs/cosim.md, A message once sent)
    now = m.now()[0]
    eid = m.inject(0, 5, 4096, now + 5, tag=4, kind="message")
    check(m.inject_cancel(eid, now + 5 + lat / 2) is True, "cancel a pending message")
    e = until_events(m, 1)[eid]
    check(e.status == "done" and e.bytes == 4096 and ps(e.end_ns - e.start_ns) == ps(lat),
          "a message cancelled once sent: %r, Lua's %r ns" % (e, lat))
    # a transfer of 1 MiB in 64 KiB pieces, whole
    now = m.now()[0]
    eid = m.inject(0, 1, 1 << 20, now, chunk=64 * KiB)
    whole = until_events(m, 1)[eid]
    dur = whole.end_ns - whole.start_ns
    check(whole.status == "done" and whole.bytes == 1 << 20 and dur > 0, repr(whole))
    # the same cancelled at half its time: it stops at the next piece boundary
    now = m.now()[0]
    eid = m.inject(0, 1, 1 << 20, now, tag=3, chunk=64 * KiB)
    check(m.inject_cancel(eid, now + dur / 2) is True, "cancel a pending transfer")
    e = until_events(m, 1)[eid]
    check(e.status == "cancelled" and 0 < e.bytes < 1 << 20 and e.bytes % (64 * KiB) == 0
          and now + dur / 2 <= e.end_ns < now + dur, "cancelled mid-way: %r (whole %r ns)"
          % (e, dur))
    # cancelled before it starts: nothing moves; a message likewise
    now = m.now()[0]
    a = m.inject(0, 1, 1 << 20, now + 100, chunk=64 * KiB)
    b = m.inject(0, 5, 4096, now + 100, kind="message")
    check(m.inject_cancel(a, now) and m.inject_cancel(b, now + 50), "cancels before the start")
    ev = until_events(m, 2)
    for x in (a, b):
        check(ev[x].status == "cancelled" and ev[x].bytes == 0 and ev[x].end_ns == now + 100,
              "cancelled before its start: %r" % ev[x])
    check(m.inject_cancel(a, m.now()[0]) is False, "a cancel of an ended injection")
    # a failed kernel while a transfer is under way: the machine is rebuilt, the
    # transfer is lost (with what it had stored), one not yet started starts again
    now = m.now()[0]
    lost = m.inject(0, 1, 1 << 20, now, tag=4, chunk=64 * KiB)
    later = m.inject(0, 1, 1 << 20, now + 10 * dur, tag=5, chunk=64 * KiB)
    m.advance(dur / 2)
    with Client(srv.address, rank=3) as c3:
        err = error_of(lambda: c3.launch([3], "fails", args={"bad": 0, "why": "now"}))
        check(err.status == "sim_error" and "on purpose (now)" in err.message, str(err))
    ev = until_events(m, 2, quantum=dur)
    check(ev[lost].status == "lost" and ev[lost].end_ns == now + dur / 2
          and 0 < ev[lost].bytes < 1 << 20, "lost in the rebuild: %r" % ev[lost])
    check(ev[later].status == "done" and ev[later].start_ns == now + 10 * dur
          and ps(ev[later].end_ns - ev[later].start_ns) == ps(dur),
          "started again after the rebuild: %r, whole %r ns" % (ev[later], dur))
    # a version 2 client: operation 28 is unknown, events in version 2's layout
    old = Client(srv.address, version=2)
    st, msg = raw_reply(old, OP["inject_ex"], struct.pack("<BIIQdIQ", 0, 0, 1, 64, 0.0, 0, 0))
    check(st == 2 and "operation 28 (inject_ex) is protocol 3" in msg, msg)
    now = old.now()[0]
    eid = old.inject(0, 1, 4096, now)
    e = until_events(old, 1)[eid]
    check(e.status == "done" and e.bytes is None and e.end_ns > e.start_ns == now, repr(e))
    old.close()
    # refusals
    now = m.now()[0]
    for args, kw, text in [((0, 1, 64, now), {"kind": "read"}, "a read is at one PE"),
                           ((0, 1, 64, now), {"chunk": 6}, "pieces of 6 bytes"),
                           ((0, 1, 64, now), {"kind": "message", "chunk": 32},
                            "a message is one piece")]:
        e = error_of(lambda: m.inject(*args, **kw))
        check(e.status == "bad_argument" and text in e.message, "%s: %s" % (text, e))
    st, msg = raw_reply(m, OP["inject_ex"], struct.pack("<BIIQdIQ", 7, 0, 1, 64, now, 0, 0))
    check(st == 8 and "inject_ex: kind 7" in msg, msg)
    st, msg = raw_reply(m, OP["inject_ex"], struct.pack("<BIIQdIQ", 0, 0, 1, 64, now, 0,
                                                        (1 << 64) - 4))
    check(st == 8 and "pieces of -4 bytes" in msg, msg)
    e = error_of(lambda: m.inject_cancel(1, now - 1))
    check(e.status == "bad_argument" and "before the machine's time" in e.message, str(e))
    st, msg = raw_reply(m, OP["inject_cancel"], b"\0\0")
    check(st == 1 and "malformed" in msg, msg)
    m.close()
    srv.stop()


def case_recv_any():
    """recv from any source (protocol 3: source 0xFFFFFFFF): the oldest send to the
    rank not yet received, or the next one; the reply names the sender; the pair's
    later receives stay in order; cancel; a version 2 client is refused."""
    srv = Server("-q", "--timeout", "2")
    n = 64
    cs = {r: Client(srv.address, rank=r) for r in range(4)}
    ts = {r: cs[r].alloc(n) for r in range(4)}
    for r in range(4):
        cs[r].write(ts[r], inputs(r, n))
    # rank 1 sends first, then rank 3; rank 0 receives from any source twice
    sends = {}
    sends[1] = cs[1].send_frame(OP["send"], struct.pack("<IIQ", 0, ts[1], n))
    wait_issued(srv, 1)
    sends[3] = cs[3].send_frame(OP["send"], struct.pack("<IIQ", 0, ts[3], n))
    wait_issued(srv, 2)
    a = cs[0].recv(None, ts[0])
    check(a.source == 1 and np.array_equal(a.data, inputs(1, n)), "first: %r" % a.source)
    b = cs[0].recv(None, ts[0])
    check(b.source == 3 and np.array_equal(b.data, inputs(3, n)) and b.start_ns >= a.end_ns,
          "second: %r" % b.source)
    for r in (1, 3):
        _op, rid, st, meta, _ = cs[r].recv_frame()
        check(rid == sends[r] and st == 0 and len(meta) == 24, "sender %d answered" % r)
    # a receive from any source that waits, then a send from rank 2; then the pair
    # {2, 0}'s next receive (named) matches rank 2's next send
    rid = cs[0].send_frame(OP["recv"], struct.pack("<IIQB", 0xFFFFFFFF, ts[0], n, 1))
    res = on_ranks(1, lambda _: cs[2].send(0, ts[2]))
    _op, got, st, meta, data = cs[0].recv_frame()
    check(got == rid and st == 0 and struct.unpack_from("<I", meta, 24)[0] == 2
          and np.array_equal(np.frombuffer(data, np.float32), inputs(2, n))
          and struct.unpack_from("<d", meta)[0] == res[0].start_ns,
          "a waiting receive from any source: %r, the send's %r" % (
              struct.unpack_from("<dddI", meta), (res[0].start_ns, res[0].end_ns)))
    cs[2].write(ts[2], inputs(7, n))
    res = on_ranks(2, lambda r: cs[2].send(0, ts[2]) if r else cs[0].recv(2, ts[0]))
    check(np.array_equal(res[0].data, inputs(7, n)) and res[0].source == 2, "the pair goes on")
    # cancel a waiting one; a waiting one that no send reaches fails after --timeout
    rid = cs[0].send_frame(OP["recv"], struct.pack("<IIQB", 0xFFFFFFFF, ts[0], n, 1))
    ok, before = cs[0].cancel(rid)
    check(ok and before[0][1] == rid and before[0][2] == 12, "cancelled: %r" % (before,))
    e = error_of(lambda: cs[0].recv(None, ts[0]))
    check(e.status == "collective_failed" and "recv from any source on rank 0: no send to it "
          "within 2 s" in e.message, str(e))
    st, msg = raw_reply(cs[0], OP["recv"], struct.pack("<IIQB", 0xFFFFFFFF, 99, n, 1))
    check(st == 7 and "rank 0 has no tensor 99" in msg, msg)
    for c in cs.values():
        c.close()
    with Client(srv.address, rank=0, version=2) as old:
        t = old.alloc(n)
        e = error_of(lambda: old.recv(None, t))
        check(e.status == "bad_argument" and "cannot receive from rank 4294967295" in e.message,
              str(e))
    srv.stop()


def case_payload():
    """The client keeps its frames within the server's --max-payload: a write and a read
    go in pieces, and a collective or a recv whose data is larger replies without it and
    reads it in pieces (the reply was 16 KiB over a 4 KiB limit, a write refused)."""
    srv = Server("-q", "--max-payload", "4096")
    n = 4096 + 3  # f32: 4 pieces and 3 elements

    def member(r):
        with Client(srv.address, rank=r) as c:
            check(c.max_payload == 4096, "hello's max payload: %r" % c.max_payload)
            t = c.alloc(n)
            c.write(t, inputs(r, n))
            check(np.array_equal(c.read(t), inputs(r, n)), "a split write and read")
            part = c.read(t, 1000, 2000)
            check(np.array_equal(part, inputs(r, n)[1000:3000]), "a split read at an offset")
            res = c.all_reduce([0, 1], t, algorithm="ring_allreduce")
            want = inputs(0, n) + inputs(1, n)
            check(res.data is not None and np.array_equal(res.data, want),
                  "all_reduce's data read in pieces")
            check(np.array_equal(c.read(t), want), "the tensor holds the sum")
            small = c.alloc(8)
            c.write(small, inputs(r, 8))
            res = c.all_reduce([0, 1], small, algorithm="ring_allreduce")
            check(np.array_equal(res.data, inputs(0, 8) + inputs(1, 8)), "a small reply")
            # a point-to-point recv over the limit, likewise
            if r == 0:
                c.write(t, inputs(5, n))
                c.send(1, t)
                return None
            got = c.recv(0, t)
            check(np.array_equal(got.data, inputs(5, n)), "recv's data read in pieces")
            return len(got.data)
    res = on_ranks(2, member)
    check(res[1] == n, "rank 1 received %r elements" % res[1])
    srv.stop()
    # a limit smaller than one element: a clear refusal, not a refused frame per element
    srv = Server("-q", "--max-payload", "2")
    with Client(srv.address, rank=0) as c:
        t = c.alloc(4)
        try:
            c.write(t, inputs(0, 4))
            raise AssertionError("a write with a 2-byte limit")
        except ValueError as e:
            check(str(e) == "kbsim: the server's --max-payload of 2 bytes is smaller than "
                  "one f32 element", str(e))
    srv.stop()


def case_alloc_memory():
    """A fresh tensor reads as zeros without taking host memory for them: an HBM-sized
    tensor (2 GiB) took 2 GiB of the server's memory at alloc (zeros written)."""
    srv = Server("-q")

    def rss_kib():
        with open("/proc/%d/status" % srv.proc.pid) as f:
            return int(next(x for x in f if x.startswith("VmRSS")).split()[1])
    with Client(srv.address, rank=0) as c:
        before = rss_kib()
        t = c.alloc(1 << 29, "f32", "hbm")  # the whole 2 GiB HBM
        grew = rss_kib() - before
        check(grew < 64 << 10, "a 2 GiB tensor's alloc took %d KiB of the server" % grew)
        check(not c.read(t, (1 << 29) - 1024, 1024).any(), "a fresh tensor reads as zeros")
        c.write(t, np.full(3000, 7, np.float32), offset=100)
        c.free(t)
        t = c.alloc(1 << 29, "f32", "hbm")
        check(not c.read(t, 0, 4096).any(), "written, freed and allocated again: zeros")
        c.free(t)
    srv.stop()


def case_example_args():
    """examples/cosim/host_model.py (and the torch examples' shared option types) with
    bad options: argparse's usage error naming the option (exit 2), a server refusal as
    one line (exit 1), a --kbsim that does not exist named; they were tracebacks
    (ZeroDivisionError, ValueError, ServerError) or, for --kbsim, another kbsim ran."""
    prog = os.path.join(SRCDIR, "examples", "cosim", "host_model.py")

    def run(*args):
        r = subprocess.run([sys.executable, prog, "--kbsim", KBSIM, *args], capture_output=True,
                           text=True, cwd=WORKDIR, timeout=120)
        check("Traceback" not in r.stderr, "%s: a traceback: %s" % (args, r.stderr))
        return r.returncode, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    for args, want in [
            (("--chunks", "0"), "argument --chunks: '0': expected an integer >= 1"),
            (("--quantum", "0"), "argument --quantum: '0': expected a number > 0"),
            (("--quantum", "nan"), "argument --quantum: 'nan': expected a number > 0"),
            (("--bytes", "6"), "argument --bytes: '6': expected an integer >= 4 and a multiple of 4"),
            (("--targets", "1,x"), "argument --targets: 'x' is not an integer"),
            (("--targets", "1,,2"), "argument --targets: '1,,2' has an empty item")]:
        rc, last = run(*args)
        check(rc == 2 and last == "host_model.py: error: " + want, "%s: %d %r" % (args, rc, last))
    rc, last = run("--targets", "999", "--chunks", "1")
    check(rc == 1 and last == "host_model: bad_argument: inject: no rank 999 (ranks 0..255)",
          "a rank the machine lacks: %d %r" % (rc, last))
    rc, last = run("--kbsim", os.path.join(WORKDIR, "no-such-kbsim"))
    check(rc == 1 and last == "--kbsim %s: no such file" % os.path.join(WORKDIR, "no-such-kbsim"),
          "a --kbsim that does not exist: %d %r" % (rc, last))
    rc, last = run("--chunks", "1", "--quantum", "12.5")  # a fraction is a number
    check(rc == 0, "a good run: %d %r" % (rc, last))


def _group_bytes(ranks):
    return struct.pack("<I%dI" % len(ranks), len(ranks), *ranks)


globals()["case_" + CASE]()
print("cosim_%s ok" % CASE)
