#!/usr/bin/python3
"""An external model in lockstep with kbsim: a host that streams data to PEs, closed loop.

    python3 examples/cosim/host_model.py [--kbsim build/kbsim] [--quantum 25] [--chunks 6]
                                         [--bytes 4096] [--targets 1,2,3]

The host is a toy simulator of its own, in Python: a DMA queue that sends
--chunks chunks of --bytes from PE 0's memory to each target PE in turn,
and starts a target's next chunk only when the machine reports that its
previous one has landed (closed loop). It advances the machine in quanta
of --quantum ns (conservative lockstep, as a TLM quantum keeper): between
two advances it injects what its own model decides at its own time, never
in the machine's past, and reacts to the completion events (with their
simulated times) that each advance returns. docs/cosim.md, "External
models".
"""
import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import _server  # noqa: E402  (starts and stops kbsim serve)
from kbsim import Client  # noqa: E402


class Host:
    """The host's own model: per target, the chunks left and whether one is in flight."""

    def __init__(self, targets, chunks, nbytes):
        self.left = {t: chunks for t in targets}
        self.busy = {}  # event id -> target
        self.nbytes = nbytes
        self.log = []  # (target, at_ns, end_ns)

    def decide(self, now_ns):
        """The transfers to start at now_ns: one per idle target with chunks left."""
        idle = [t for t in self.left if self.left[t] and t not in self.busy.values()]
        return [(0, t, self.nbytes, now_ns) for t in idle]

    def started(self, eid, target):
        self.busy[eid] = target
        self.left[target] -= 1

    def completed(self, ev):
        target = self.busy.pop(ev.id)
        self.log.append((target, ev.start_ns, ev.end_ns))

    def done(self):
        return not self.busy and not any(self.left.values())


def run(address, quantum, targets, chunks, nbytes, max_quanta=100000):
    host = Host(targets, chunks, nbytes)
    machine = Client(address)  # an observer: no rank of its own
    now, steps = machine.now()[0], []
    while not host.done():
        for src, dst, n, at in host.decide(now):
            host.started(machine.inject(src, dst, n, at, tag=dst), dst)
        now, events = machine.advance(quantum)
        steps.append((now, len(events)))
        for ev in events:
            host.completed(ev)
        if len(steps) > max_quanta:
            raise SystemExit("host_model: no end after %d quanta" % max_quanta)
    machine.close()
    return host.log, steps


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kbsim", default=None)
    p.add_argument("--quantum", type=float, default=25.0)
    p.add_argument("--chunks", type=int, default=6)
    p.add_argument("--bytes", type=int, default=4096)
    p.add_argument("--targets", default="1,2,3")
    a = p.parse_args(argv)
    targets = [int(t) for t in a.targets.split(",")]
    with _server.Server(_server.find_kbsim(a.kbsim)) as srv:
        log, steps = run(srv.address, a.quantum, targets, a.chunks, a.bytes)
    print("%6s %12s %12s %10s" % ("target", "start_ns", "end_ns", "ns"))
    for t, s, e in log:
        print("%6d %12.3f %12.3f %10.3f" % (t, s, e, e - s))
    end = max(e for _, _, e in log)
    print("host_model: %d transfers of %d bytes in %d quanta of %g ns; last landed at %.3f ns "
          "(%.2f GB/s)" % (len(log), a.bytes, len(steps), a.quantum, end,
                           len(log) * a.bytes / end))
    return {"log": log, "steps": steps, "quantum": a.quantum,
            "quanta_needed": math.ceil(end / a.quantum)}


if __name__ == "__main__":
    main()
