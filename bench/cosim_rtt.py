#!/usr/bin/python3
"""cosim_rtt.py KBSIM — what a round trip to `kbsim serve` costs (not a test: numbers only).

  1. an empty request (ping) over the Unix socket: median and 99th percentile round trip;
  2. payload throughput: write and read of a 64 MiB f32 tensor;
  3. an 8-rank all_reduce of 1 MiB per rank (ring_allreduce) through the server, wall time
     from the first request to the last reply, beside the same collective launched from
     Lua in one process (bench/cosim_ref.lua; both exclude the start-up).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import numpy as np  # noqa: E402
from kbsim import Client  # noqa: E402

KBSIM = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build", "kbsim")


def main():
    sock = os.path.join(tempfile.mkdtemp(prefix="kbrtt"), "s.sock")
    srv = subprocess.Popen([KBSIM, "serve", "-q", "--listen", sock], stdout=subprocess.PIPE,
                           text=True)
    srv.stdout.readline()
    try:
        with Client(sock, rank=0) as c:
            for _ in range(1000):
                c.ping()
            rtt = []
            for _ in range(20000):
                t0 = time.perf_counter()
                c.ping()
                rtt.append(time.perf_counter() - t0)
            rtt.sort()
            print("empty request round trip: median %.1f us, p99 %.1f us (%d requests)"
                  % (statistics.median(rtt) * 1e6, rtt[len(rtt) * 99 // 100] * 1e6, len(rtt)))

            n = 16 << 20  # 64 MiB of f32
            t = c.alloc(n, "f32")
            x = np.arange(n, dtype=np.float32)
            y = np.empty_like(x)
            w, r = [], []
            for _ in range(5):
                t0 = time.perf_counter()
                c.write(t, x)
                w.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                c.read(t, out=y)
                r.append(time.perf_counter() - t0)
            assert np.array_equal(x, y)
            mb = n * 4 / 1e9
            print("payload throughput (64 MiB): write %.2f GB/s, read %.2f GB/s (median of 5)"
                  % (mb / statistics.median(w), mb / statistics.median(r)))
            c.free(t)

        N, elems = 8, 1 << 18  # 1 MiB of f32 per rank
        group = list(range(N))
        clients = [Client(sock, rank=q) for q in group]
        tids = [cl.alloc(elems) for cl in clients]
        barrier = threading.Barrier(N + 1)
        lat = {}

        def member(q):
            barrier.wait()
            lat[q] = clients[q].all_reduce(group, tids[q], algorithm="ring_allreduce",
                                           return_data=False).latency_ns
        ths = [threading.Thread(target=member, args=(q,)) for q in group]
        for th in ths:
            th.start()
        barrier.wait()
        t0 = time.perf_counter()
        for th in ths:
            th.join()
        wall = time.perf_counter() - t0
        for cl in clients:
            cl.close()
        ref = subprocess.run([KBSIM, "-q", os.path.join(HERE, "cosim_ref.lua"), "ranks=8",
                              "n=%d" % elems, "algorithm=ring_allreduce"],
                             capture_output=True, text=True, check=True).stdout.split()
        kv = dict(f.split("=") for f in ref)
        print("8-rank all_reduce of 1 MiB (ring_allreduce): server %.3f s wall, Lua in one "
              "process %.3f s (ratio %.2f); simulated latency %s ns and %s ns"
              % (wall, float(kv["wall_s"]), wall / float(kv["wall_s"]), repr(lat[0]),
                 kv["latency_ns"]))
    finally:
        srv.send_signal(2)
        srv.wait(60)


if __name__ == "__main__":
    main()
