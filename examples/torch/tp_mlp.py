#!/usr/bin/python3
"""A Megatron column -> row parallel MLP on 8 ranks, its all-reduce on the simulated machine.

    python3 examples/torch/tp_mlp.py [--ws 8] [--in 64] [--hidden 256] [--out 32]
                                     [--tokens 4,16] [--kbsim build/kbsim] [--check]

Starts `kbsim serve` (ring_rs_ag_allreduce, as scenarios/tp_mlp.lua), then
ws ranks with torch.multiprocessing.spawn, backend "kbsim". Rank r holds
fc1's columns r (in x hidden/ws) and fc2's rows r (hidden/ws x out); the
row layer's partial sums are all-reduced through the server, with the real
values. Weights and inputs are the small integers of scenarios/tp_mlp.lua,
so every product and sum is exact and y must equal the one-process model's.

--check also runs scenarios/tp_mlp.lua with the same sizes and requires its
all_reduce_ns to equal this run's simulated all-reduce latency per token
count (docs/cosim.md).
"""
import argparse
import csv
import json
import os
import subprocess
import tempfile

import _server

import torch
import torch.distributed as dist


def weights(n_in, hidden, n_out):
    """The full weights, as scenarios/tp_mlp.lua initialises them."""
    i = torch.arange(n_in).view(-1, 1)
    j = torch.arange(hidden).view(1, -1)
    w1 = ((i + 2 * j) % 3 - 1).float()
    i = torch.arange(hidden).view(-1, 1)
    j = torch.arange(n_out).view(1, -1)
    w2 = ((3 * i + j) % 3 - 1).float()
    return w1, w2


def inputs(m, n_in):
    return (torch.arange(m * n_in) % 3).float().view(m, n_in)


class ColumnParallelLinear(torch.nn.Module):
    """y_r = x W[:, r-th block]: the output columns split over the ranks."""

    def __init__(self, weight, rank, ws):
        super().__init__()
        per = weight.shape[1] // ws
        self.weight = torch.nn.Parameter(weight[:, rank * per:(rank + 1) * per].clone())

    def forward(self, x):
        return x @ self.weight


class RowParallelLinear(torch.nn.Module):
    """y = sum_r x_r W[r-th block, :]: the input rows split, partial sums all-reduced."""

    def __init__(self, weight, rank, ws):
        super().__init__()
        per = weight.shape[0] // ws
        self.weight = torch.nn.Parameter(weight[rank * per:(rank + 1) * per].clone())

    def forward(self, x):
        y = x @ self.weight
        dist.all_reduce(y)
        return y


def rank_main(rank, a, address, outdir):
    os.environ["KBSIM_ADDRESS"] = address
    import kbsim.torch as kt
    dist.init_process_group("kbsim", init_method="file://" + os.path.join(outdir, "store"),
                            rank=rank, world_size=a.ws)
    w1, w2 = weights(a.n_in, a.hidden, a.n_out)
    fc1 = ColumnParallelLinear(w1, rank, a.ws)
    fc2 = RowParallelLinear(w2, rank, a.ws)
    out = []
    with torch.no_grad():
        for m in a.tokens:
            x = inputs(m, a.n_in)
            y = fc2(fc1(x))
            rec = kt.records()[-1]
            out.append(dict(m=m, y=y.tolist(), all_reduce_ns=rec["latency_ns"],
                            bytes=rec["bytes"], start_ns=rec["start_ns"], end_ns=rec["end_ns"]))
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()


def lua_times(kbsim, a):
    """all_reduce_ns per token count from scenarios/tp_mlp.lua with the same sizes."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([kbsim, "-q", "-o", d, os.path.join(_server.TOP, "scenarios/tp_mlp.lua"),
                        "ws=%d" % a.ws, "in=%d" % a.n_in, "hidden=%d" % a.hidden,
                        "out=%d" % a.n_out, "tokens=" + ",".join(map(str, a.tokens))],
                       check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(d, "breakdown.csv")) as f:
            return {int(r["m"]): float(r["all_reduce_ns"]) for r in csv.DictReader(f)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ws", type=_server.positive_int, default=8)
    p.add_argument("--in", dest="n_in", type=_server.positive_int, default=64)
    p.add_argument("--hidden", type=_server.positive_int, default=256)
    p.add_argument("--out", dest="n_out", type=_server.positive_int, default=32)
    p.add_argument("--tokens", type=_server.int_list(1), default=[4, 16])
    p.add_argument("--kbsim", default=None)
    p.add_argument("--start-method", default="spawn", choices=["spawn", "fork"],
                   help="how the ranks start (torch.multiprocessing); spawn by default")
    p.add_argument("--check", action="store_true",
                   help="compare with scenarios/tp_mlp.lua's all-reduce times; exit 1 if unequal")
    a = p.parse_args(argv)
    if a.hidden % a.ws:
        p.error("hidden size %d does not divide over %d ranks" % (a.hidden, a.ws))
    kbsim = _server.find_kbsim(a.kbsim)
    ranks = _server.run_ranks(kbsim, ("--set", "ccl.algorithm=ring_rs_ag_allreduce"), rank_main, a, "kbsim-tp")

    # the one-process model
    w1, w2 = weights(a.n_in, a.hidden, a.n_out)
    bad = []
    print("%6s %10s %16s %12s" % ("m", "bytes", "all_reduce_ns", "values"))
    for k, m in enumerate(a.tokens):
        want = (inputs(m, a.n_in) @ w1 @ w2)
        same = all(torch.equal(torch.tensor(ranks[r][k]["y"]), want) for r in range(a.ws))
        lat = {ranks[r][k]["all_reduce_ns"] for r in range(a.ws)}
        if not same:
            bad.append("m=%d: y differs from the one-process model" % m)
        if len(lat) != 1:
            bad.append("m=%d: the ranks report different all-reduce latencies %s" % (m, lat))
        print("%6d %10d %16.3f %12s" % (m, ranks[0][k]["bytes"], ranks[0][k]["all_reduce_ns"],
                                        "equal" if same else "DIFFER"))
    res = {"all_reduce_ns": {m: ranks[0][k]["all_reduce_ns"] for k, m in enumerate(a.tokens)}}
    if a.check:
        lua = lua_times(kbsim, a)
        for m, ns in res["all_reduce_ns"].items():
            if lua[m] != ns:
                bad.append("m=%d: all-reduce %r ns here, %r ns in scenarios/tp_mlp.lua"
                           % (m, ns, lua[m]))
        print("scenarios/tp_mlp.lua all_reduce_ns: %s" % lua)
        res["lua_all_reduce_ns"] = lua
    if bad:
        raise SystemExit("tp_mlp: " + "; ".join(bad))
    res["checked"] = a.check
    print("tp_mlp: %d ranks, values equal the one-process model%s" % (
        a.ws, ", all-reduce times equal scenarios/tp_mlp.lua's" if a.check else ""))
    return res


if __name__ == "__main__":
    main()
