#!/usr/bin/python3
"""DistributedDataParallel training steps with backend "kbsim": gradients all-reduced on the simulated machine.

    python3 examples/torch/ddp_step.py [--ws 4] [--steps 2] [--batch 4] [--kbsim build/kbsim] [--check]

Starts `kbsim serve` (ring_allreduce), then ws ranks with
torch.multiprocessing.spawn. Each rank trains the same small MLP
(16 -> 32 -> ReLU -> 8) wrapped in DistributedDataParallel on its own
batch; DDP's bucketed gradient all-reduce (and its start-up broadcast and
parameter check) run through the server with the real values. Weights and
data are small integers and the learning rate a power of two, so every
gradient is exact: after each step every rank's gradients must equal those
of one process training on all ranks' batches at once. Prints the
simulated time of each step's gradient all-reduce, its compute, the time
it stood waiting for DDP's broadcasts (from step 1: the rebuilt buckets'
indices, waited at once in the forward) and the step's time.
"""
import argparse
import json
import os

import _server

import torch
import torch.distributed as dist

IN, HID, OUT = 16, 32, 8
LR = 0.125


def model():
    m = torch.nn.Sequential(torch.nn.Linear(IN, HID), torch.nn.ReLU(), torch.nn.Linear(HID, OUT))
    with torch.no_grad():
        for k, p in enumerate(m.parameters()):
            p.copy_((torch.arange(p.numel()) * (k + 2) % 3 - 1).float().view(p.shape))
    return m


def batch(rank, b):
    return (torch.arange(b * IN) * (rank + 1) % 3).float().view(b, IN)


def loss_of(y):
    # 0.5 * sum(y^2): its gradient y is an integer
    return 0.5 * (y * y).sum()


def rank_main(rank, a, address, outdir):
    os.environ["KBSIM_ADDRESS"] = address
    import kbsim.torch as kt
    dist.init_process_group("kbsim", init_method="file://" + os.path.join(outdir, "store"),
                            rank=rank, world_size=a.ws)
    net = torch.nn.parallel.DistributedDataParallel(model())
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    steps = []
    for _ in range(a.steps):
        kt.clear_records()
        opt.zero_grad()
        # compute costing: forward and autograd's backward charged to the rank's PE;
        # DDP's gradient all-reduce is issued during the backward and waited at its
        # end; its broadcasts in the forward (the buckets' indices, rebuilt after
        # the first backward) are waited at once, from C++
        with kt.costing() as cost:
            loss = loss_of(net(batch(rank, a.batch)))
            forward_ns = cost.clock_ns
            loss.backward()
        recs = [r for r in kt.records() if r["op"] == "all_reduce"]
        at_once = [r for r in kt.records() if r["op"] != "all_reduce"]
        steps.append(dict(grads=[p.grad.tolist() for p in net.parameters()],
                          forward_ns=forward_ns, compute_ns=cost.compute_ns,
                          step_ns=cost.clock_ns,
                          issue_ns=[r["issue_ns"] for r in recs],
                          model_end_ns=[r["model_end_ns"] for r in recs],
                          at_once=[(r["op"], r["issue_ns"], r["model_end_ns"])
                                   for r in at_once],
                          backward_ops=sorted(k for k in cost.breakdown
                                              if k.startswith("backward.")),
                          all_reduces=len(recs), bytes=sum(r["bytes"] for r in recs),
                          all_reduce_ns=sum(r["latency_ns"] for r in recs),
                          start_ns=min(r["start_ns"] for r in recs),
                          end_ns=max(r["end_ns"] for r in recs)))
        opt.step()
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(steps, f)
    dist.destroy_process_group()


def reference(a):
    """One process, every rank's batch: DDP's averaged gradients, step by step."""
    m = model()
    opt = torch.optim.SGD(m.parameters(), lr=LR)
    out = []
    for _ in range(a.steps):
        opt.zero_grad()
        total = sum(loss_of(m(batch(r, a.batch))) for r in range(a.ws)) / a.ws
        total.backward()
        out.append([p.grad.clone() for p in m.parameters()])
        opt.step()
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ws", type=_server.positive_int, default=4)
    p.add_argument("--steps", type=_server.positive_int, default=2)
    p.add_argument("--batch", type=_server.positive_int, default=4)
    p.add_argument("--kbsim", default=None)
    p.add_argument("--start-method", default="spawn", choices=["spawn", "fork"],
                   help="how the ranks start (torch.multiprocessing); spawn by default")
    p.add_argument("--check", action="store_true",
                   help="exit 1 unless the gradients equal the one-process model's")
    a = p.parse_args(argv)
    kbsim = _server.find_kbsim(a.kbsim)
    ranks = _server.run_ranks(kbsim, ("--set", "ccl.algorithm=ring_allreduce"), rank_main, a, "kbsim-ddp")
    ref = reference(a)
    bad = []
    print("%5s %12s %8s %14s %12s %10s %12s %14s" % (
        "step", "all_reduces", "bytes", "all_reduce_ns", "compute_ns", "stall_ns", "step_ns",
        "gradients"))
    for s in range(a.steps):
        same = all(torch.equal(torch.tensor(g), w)
                   for r in range(a.ws) for g, w in zip(ranks[r][s]["grads"], ref[s]))
        if not same:
            bad.append("step %d: gradients differ from the one-process model" % s)
        x = ranks[0][s]
        print("%5d %12d %8d %14.3f %12.3f %10.3f %12.3f %14s" % (
            s, x["all_reduces"], x["bytes"], x["all_reduce_ns"], x["compute_ns"],
            sum(e - i for _, i, e in x["at_once"]), x["step_ns"], "equal" if same else "DIFFER"))
        for r in range(a.ws):
            y = ranks[r][s]
            # the collectives waited at once (DDP's broadcasts, in the forward):
            # the clock stood still from each one's issue to its end, and the
            # next one was issued after it
            stall, prev_end = 0.0, 0.0
            for op, issue, end in y["at_once"]:
                if not (op == "broadcast" and prev_end - 1e-9 <= issue <= y["forward_ns"]):
                    bad.append("step %d rank %d: %s issued at %r, after %r, forward %r" % (
                        s, r, op, issue, prev_end, y["forward_ns"]))
                stall, prev_end = stall + end - issue, end
            # issued during the backward (after the forward), the step's time is
            # compute and those stalls, or the all-reduces (overlapped with the
            # rest of the backward, waited at its end) if they end later
            if not (y["all_reduces"] and all(y["forward_ns"] < t <= y["compute_ns"] + stall + 1e-9
                                             for t in y["issue_ns"])):
                bad.append("step %d rank %d: all-reduces issued at %s, forward %r, compute %r, "
                           "stalls %r" % (s, r, y["issue_ns"], y["forward_ns"], y["compute_ns"],
                                          stall))
            if abs(y["step_ns"] - max([y["compute_ns"] + stall] + y["model_end_ns"])) > 1e-6:
                bad.append("step %d rank %d: step %r ns, not max(compute %r + stalls %r, ends %s)"
                           % (s, r, y["step_ns"], y["compute_ns"], stall, y["model_end_ns"]))
        if s == 1 and not x["at_once"]:  # (DDP rebuilds its buckets after the first step)
            bad.append("step 1: no broadcast of the rebuilt buckets' indices")
            if "backward.mm" not in y["backward_ops"]:
                bad.append("step %d rank %d: backward not charged: %s" % (s, r, y["backward_ops"]))
    if bad:
        raise SystemExit("ddp_step: " + "; ".join(bad))
    print("ddp_step: %d ranks, %d steps, gradients equal the one-process model's" % (a.ws,
                                                                                    a.steps))
    return {"checked": a.check, "steps": ranks[0]}


if __name__ == "__main__":
    main()
