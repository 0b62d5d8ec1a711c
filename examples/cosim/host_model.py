#!/usr/bin/python3
"""An external model in lockstep with kbsim: a host that streams data to PEs, closed loop.

    python3 examples/cosim/host_model.py [--kbsim build/kbsim] [--quantum 25] [--chunks 6]
                                         [--bytes 4096] [--targets 1,2,3]
                                         [--doorbell] [--deadline NS --piece BYTES]

The host is a toy simulator of its own, in Python: a DMA queue that sends
--chunks chunks of --bytes from PE 0's memory to each target PE in turn,
and starts a target's next chunk only when the machine reports that its
previous one has landed (closed loop). It advances the machine in quanta
of --quantum ns (conservative lockstep, as a TLM quantum keeper): between
two advances it injects what its own model decides at its own time, never
in the machine's past, and reacts to the completion events (with their
simulated times) that each advance returns. docs/cosim.md, "External
models".

--doorbell: a target acknowledges each chunk with a 64-byte raw message on
the fabric back to PE 0 (a doorbell; no memory is touched), and the host
starts the target's next chunk when the doorbell has arrived, not when the
chunk landed. --deadline NS: at the first quantum at or after NS the host
aborts what is in flight (inject_cancel: a transfer stops at its next
piece of --piece bytes) and starts nothing more; the aborted transfers are
reported with the bytes they moved.
"""
import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import _server  # noqa: E402  (starts and stops kbsim serve)
from kbsim import Client, ServerError  # noqa: E402


DOORBELL_BYTES = 64


class Host:
    """The host's own model: per target, the chunks left and what is in flight (a
    chunk, or with doorbells the chunk's acknowledgement)."""

    def __init__(self, targets, chunks, nbytes, doorbell=False):
        self.left = {t: chunks for t in targets}
        self.busy = {}  # event id -> (target, "chunk" | "doorbell")
        self.nbytes, self.doorbell = nbytes, doorbell
        self.log = []  # (target, at_ns, end_ns, status, bytes moved)
        self.bells = []  # (target, at_ns, end_ns): doorbells
        self.learned = []  # (chunk end_ns, time the host learned it)
        self.stopped = False

    def decide(self, now_ns):
        """The transfers to start at now_ns: one per idle target with chunks left."""
        if self.stopped:
            return []
        idle = [t for t in self.left if self.left[t]
                and t not in [x for x, _ in self.busy.values()]]
        return [(0, t, self.nbytes, now_ns) for t in idle]

    def started(self, eid, target, what="chunk"):
        self.busy[eid] = (target, what)
        if what == "chunk":
            self.left[target] -= 1

    def completed(self, ev, now_ns):
        """-> the doorbell to send now (src, dst) or None."""
        target, what = self.busy.pop(ev.id)
        if what == "doorbell":
            self.bells.append((target, ev.start_ns, ev.end_ns))
            return None
        self.log.append((target, ev.start_ns, ev.end_ns, ev.status, ev.bytes))
        self.learned.append((ev.end_ns, now_ns))
        if self.doorbell and ev.status == "done" and not self.stopped:
            return target, 0
        return None

    def done(self):
        return not self.busy and (self.stopped or not any(self.left.values()))


def run(address, quantum, targets, chunks, nbytes, max_quanta=100000, doorbell=False,
        deadline=None, piece=0):
    host = Host(targets, chunks, nbytes, doorbell)
    machine = Client(address)  # an observer: no rank of its own
    now, steps = machine.now()[0], []
    while not host.done():
        if deadline is not None and now >= deadline and not host.stopped:
            host.stopped = True  # abort what is in flight, start nothing more
            for eid, (_, what) in list(host.busy.items()):
                if what == "chunk":
                    machine.inject_cancel(eid, now)
        for src, dst, n, at in host.decide(now):
            host.started(machine.inject(src, dst, n, at, tag=dst, chunk=piece), dst)
        now, events = machine.advance(quantum)
        steps.append((now, len(events)))
        for ev in events:
            bell = host.completed(ev, now)
            if bell:
                eid = machine.inject(bell[0], bell[1], DOORBELL_BYTES, now, tag=bell[0],
                                     kind="message")
                host.started(eid, bell[0], "doorbell")
        if len(steps) > max_quanta:
            raise SystemExit("host_model: no end after %d quanta" % max_quanta)
    machine.close()
    return host.log, steps, host


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kbsim", default=None)
    p.add_argument("--quantum", type=_server.positive_float, default=25.0)
    p.add_argument("--chunks", type=_server.positive_int, default=6)
    p.add_argument("--bytes", type=_server.int_at_least(4, 4), default=4096)
    p.add_argument("--targets", type=_server.int_list(0), default=[1, 2, 3])
    p.add_argument("--doorbell", action="store_true")
    p.add_argument("--deadline", type=_server.positive_float, default=None)
    p.add_argument("--piece", type=_server.non_negative_int, default=0)
    a = p.parse_args(argv)
    targets = a.targets
    with _server.Server(_server.find_kbsim(a.kbsim)) as srv:
        try:
            log, steps, host = run(srv.address, a.quantum, targets, a.chunks, a.bytes,
                                   doorbell=a.doorbell, deadline=a.deadline, piece=a.piece)
        except ServerError as e:  # the machine refused what the options asked (a rank it lacks)
            raise SystemExit("host_model: %s" % e) from None
    print("%6s %12s %12s %10s %10s %8s" % ("target", "start_ns", "end_ns", "ns", "status",
                                         "bytes"))
    for t, s, e, st, b in log:
        print("%6d %12.3f %12.3f %10.3f %10s %8d" % (t, s, e, e - s, st, b))
    for t, s, e in host.bells:
        print("%6d %12.3f %12.3f %10.3f %10s %8d" % (t, s, e, e - s, "doorbell", DOORBELL_BYTES))
    end = max(e for _, _, e, _, _ in log)
    moved = sum(b for _, _, _, _, b in log)
    print("host_model: %d transfers of %d bytes (%d cancelled) in %d quanta of %g ns; last "
          "landed at %.3f ns (%.2f GB/s)" % (len(log), a.bytes,
                                             sum(x[3] == "cancelled" for x in log), len(steps),
                                             a.quantum, end, moved / end))
    return {"log": log, "steps": steps, "quantum": a.quantum,
            "quanta_needed": math.ceil(end / a.quantum)}


if __name__ == "__main__":
    main()
