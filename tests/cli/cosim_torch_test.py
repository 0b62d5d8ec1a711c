#!/usr/bin/python3
"""cosim_torch_test.py KBSIM SRCDIR WORKDIR CASE — torch.distributed backend "kbsim" (python/kbsim/torch.py).

CASE: ops | costing | tp_mlp | ddp | ddp_error | refused | fork_child | bad_root |
cpp_waits. Prints "cosim_torch_CASE ok" when every check held, or
"cosim_torch_CASE skipped: ..." when python3-torch is not installed (ctest counts
that as skipped).
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "torch"))


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def rank_ops(rank, world, address, outdir):
    """One rank of case ops: every collective of the backend, values checked here."""
    import torch
    import torch.distributed as dist
    import kbsim.torch as kt
    os.environ["KBSIM_ADDRESS"] = address
    dist.init_process_group("kbsim", init_method="file://" + os.path.join(outdir, "store"),
                            rank=rank, world_size=world)
    check(dist.get_backend() == "kbsim", "backend %r" % dist.get_backend())
    N, n = world, 64
    base = torch.arange(n, dtype=torch.float32) % 13

    def inp(r):
        return base + 100 * r
    total = sum(inp(r) for r in range(N))

    t = inp(rank).clone()
    check(dist.all_reduce(t) is None, "sync all_reduce returns None")
    check(torch.equal(t, total), "all_reduce sum: %s" % t[:4])
    # async: a Work whose wait() and get_future() give the result
    t = inp(rank).clone()
    w = dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True)
    fut = w.get_future()
    check(w.wait() is True, "wait() is True")
    check(torch.equal(t, inp(N - 1)), "all_reduce max")
    check(torch.equal(fut.wait()[0], inp(N - 1)), "the future's value is the tensor list")
    t = inp(rank).clone()
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    check(torch.equal(t, inp(0)), "all_reduce min")
    t = inp(rank).clone()
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check(torch.equal(t, total / N), "all_reduce avg")
    # f16 and bf16: integers, exact in both
    for dt in (torch.float16, torch.bfloat16):
        t = (base + rank).to(dt)
        dist.all_reduce(t)
        check(torch.equal(t, (N * base + N * (N - 1) // 2).to(dt)), "all_reduce %s" % dt)
    # all_gather, all_gather_into_tensor
    outs = [torch.zeros(n) for _ in range(N)]
    dist.all_gather(outs, inp(rank))
    check(all(torch.equal(outs[r], inp(r)) for r in range(N)), "all_gather")
    flat = torch.zeros(N * n)
    dist._all_gather_base(flat, inp(rank))
    check(torch.equal(flat, torch.cat([inp(r) for r in range(N)])), "all_gather_into_tensor")
    # broadcast from rank 2, also of an int64 tensor (moved as bytes)
    t = inp(rank).clone()
    dist.broadcast(t, src=2)
    check(torch.equal(t, inp(2)), "broadcast")
    ti = torch.arange(7, dtype=torch.int64) * (rank + 1) + (1 << 40)
    dist.broadcast(ti, src=1)
    check(torch.equal(ti, torch.arange(7, dtype=torch.int64) * 2 + (1 << 40)), "int64 broadcast")
    # reduce_scatter: rank r gets block r of the sum
    ins = [inp(rank)[k * (n // N):(k + 1) * (n // N)].clone() for k in range(N)]
    out = torch.zeros(n // N)
    dist.reduce_scatter(out, ins)
    check(torch.equal(out, total[rank * (n // N):(rank + 1) * (n // N)]), "reduce_scatter")
    dist.barrier()
    # reduce: only the root's tensor changes (torch semantics)
    t = inp(rank).clone()
    check(dist.reduce(t, dst=1) is None, "sync reduce returns None")
    check(torch.equal(t, total if rank == 1 else inp(rank)), "reduce sum: %s" % t[:4])
    t = inp(rank).clone()
    dist.reduce(t, dst=3, op=dist.ReduceOp.MAX, async_op=True).wait()
    check(torch.equal(t, inp(N - 1) if rank == 3 else inp(rank)), "reduce max")
    t = (base - 50 * rank).clone()
    dist.reduce(t, dst=0, op=dist.ReduceOp.MIN)
    check(torch.equal(t, base - 50 * (N - 1) if rank == 0 else base - 50 * rank), "reduce min")
    # gather to rank 2; an int16 tensor of 3 elements (6 bytes, moved padded)
    outs = [torch.zeros(n) for _ in range(N)] if rank == 2 else None
    dist.gather(inp(rank), outs, dst=2)
    if rank == 2:
        check(all(torch.equal(outs[r], inp(r)) for r in range(N)), "gather")
    small = torch.tensor([rank, -rank, 7 * rank], dtype=torch.int16)
    outs = [torch.zeros(3, dtype=torch.int16) for _ in range(N)] if rank == 0 else None
    dist.gather(small, outs, dst=0)
    if rank == 0:
        check(all(torch.equal(outs[r], torch.tensor([r, -r, 7 * r], dtype=torch.int16))
                  for r in range(N)), "int16 gather: %s" % outs)
    # scatter from rank 3: block k to rank k, float32 then int16
    got = torch.zeros(n)
    dist.scatter(got, [inp(k) * 3 for k in range(N)] if rank == 3 else None, src=3)
    check(torch.equal(got, inp(rank) * 3), "scatter: %s" % got[:4])
    got = torch.zeros(3, dtype=torch.int16)
    w = dist.scatter(got, [torch.tensor([k, 2 * k, -k], dtype=torch.int16) for k in range(N)]
                     if rank == 1 else None, src=1, async_op=True)
    w.wait()
    check(torch.equal(got, torch.tensor([rank, 2 * rank, -rank], dtype=torch.int16)),
          "int16 scatter: %s" % got)
    # integers reduce as float32 values, exactly (DDP's unused-parameter map is
    # an int32 sum); float64, AVG of integers and values past 2^24 are refused
    t = torch.tensor([rank, -3 * rank, 1 << 20, 0], dtype=torch.int32)
    dist.all_reduce(t)
    check(t.dtype == torch.int32 and torch.equal(t, torch.tensor(
        [N * (N - 1) // 2, -3 * N * (N - 1) // 2, N << 20, 0], dtype=torch.int32)),
        "int32 sum: %s" % t)
    t = torch.tensor([rank, -rank], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    check(torch.equal(t, torch.tensor([N - 1, 0], dtype=torch.int64)), "int64 max: %s" % t)
    rs = torch.zeros(2, dtype=torch.int16)
    dist.reduce_scatter(rs, [torch.full((2,), k + rank, dtype=torch.int16) for k in range(N)])
    check(torch.equal(rs, torch.full((2,), N * rank + N * (N - 1) // 2, dtype=torch.int16)),
          "int16 reduce_scatter: %s" % rs)
    for bad, op, want in ((torch.ones(4, dtype=torch.float64), dist.ReduceOp.SUM,
                           "cannot reduce torch.float64"),
                          (torch.ones(4, dtype=torch.int32), dist.ReduceOp.AVG,
                           "AVG of torch.int32"),
                          (torch.full((2,), (1 << 24) + 1, dtype=torch.int64), dist.ReduceOp.SUM,
                           "values up to 16777217 exactly")):
        try:
            dist.all_reduce(bad, op=op)
            check(False, "%s %s was not refused" % (bad.dtype, op))
        except RuntimeError as e:
            check(want in str(e), "%s message: %s" % (want, e))
    try:  # each value is exact, the sum is not: refused on every member alike
        dist.all_reduce(torch.full((2,), 1 << 23, dtype=torch.int32))
        check(N * (1 << 23) <= 1 << 24, "a sum past 2^24 was not refused")
    except RuntimeError as e:
        check("past 2^24" in str(e), "sum past 2^24: %s" % e)
    # an empty tensor: a no-op, as torch's own backends (it was refused)
    before = len(kt.records())
    e = torch.zeros(0)
    check(dist.all_reduce(e) is None and dist.broadcast(e, 1) is None
          and dist.reduce(e, 2) is None, "empty tensors")
    w = dist.all_reduce(e, async_op=True)
    check(w.wait() is True and len(kt.records()) == before, "empty: nothing simulated")
    # two async all_reduces in flight at once
    a, b = inp(rank).clone(), (inp(rank) * 2).clone()
    wa = dist.all_reduce(a, async_op=True)
    wb = dist.all_reduce(b, async_op=True)
    wb.wait()
    wa.wait()
    check(torch.equal(a, total) and torch.equal(b, 2 * total), "two in flight")
    # all_to_all_single, even: block j of rank r goes to rank j
    blk = n // N
    out = torch.zeros(n)
    dist.all_to_all_single(out, inp(rank))
    check(torch.equal(out, torch.cat([inp(r)[rank * blk:(rank + 1) * blk] for r in range(N)])),
          "all_to_all_single")
    # uneven splits: rank r sends (r + j) % 3 + 1 rows of 2 to rank j
    sends = [[(r + j) % 3 + 1 for j in range(N)] for r in range(N)]

    def rows(r):
        return (torch.arange(2 * sum(sends[r]), dtype=torch.float32) + 1000 * r).view(-1, 2)
    recv_rows = [sends[r][rank] for r in range(N)]
    out = torch.zeros(sum(recv_rows), 2)
    dist.all_to_all_single(out, rows(rank), output_split_sizes=recv_rows,
                           input_split_sizes=sends[rank])
    want = torch.cat([rows(r)[sum(sends[r][:rank]):sum(sends[r][:rank + 1])] for r in range(N)])
    check(torch.equal(out, want), "all_to_all_single uneven: %s, want %s" % (out, want))
    # all_to_all of lists, int64 (moved as bytes)
    ins = [torch.full((j + 1,), 10 * rank + j, dtype=torch.int64) for j in range(N)]
    outs = [torch.zeros(rank + 1, dtype=torch.int64) for _ in range(N)]
    dist.all_to_all(outs, ins)
    check(all(torch.equal(outs[r], torch.full((rank + 1,), 10 * r + rank, dtype=torch.int64))
              for r in range(N)), "all_to_all lists: %s" % outs)
    # send / recv around the ring, sync then isend / irecv
    t = inp(rank).clone()
    if rank % 2 == 0:
        dist.send(t, (rank + 1) % N)
        dist.recv(t, (rank - 1) % N)
    else:
        dist.recv(t, (rank - 1) % N)
        dist.send(inp(rank), (rank + 1) % N)
    check(torch.equal(t, inp((rank - 1) % N)), "send/recv: %s" % t[:3])
    got = torch.zeros(n // 2, dtype=torch.bfloat16)
    ws = [dist.isend(inp(rank)[:n // 2].to(torch.bfloat16), (rank + 1) % N),
          dist.irecv(got, (rank - 1) % N)]
    for w in ws:
        w.wait()
    check(torch.equal(got, inp((rank - 1) % N)[:n // 2].to(torch.bfloat16)), "isend/irecv")
    # recv from any source: rank 0 takes one message from each other rank, in the
    # order they come (the server matches the oldest send); irecv without src too
    if rank == 0:
        seen = set()
        for _ in range(N - 1):
            t = torch.zeros(n)
            src = dist.recv(t)
            check(src in range(1, N) and src not in seen and torch.equal(t, inp(src)),
                  "recv from any source: rank %r, %s" % (src, t[:3]))
            seen.add(src)
    else:
        dist.send(inp(rank), 0)
    # rank 2's second message only once rank 0 has taken the three: sent
    # earlier, an any-source receive of f32 could be matched with it (a bf16
    # send: a mismatch, as it would be in MPI) when ranks 1 and 3 are slow
    dist.barrier()
    if rank == 0:
        w = dist.irecv(got)
        w.wait()
        check(w._source_rank() == 2 and torch.equal(got, inp(2)[:n // 2].to(torch.bfloat16)),
              "irecv from any source: %r" % w._source_rank())
    elif rank == 2:
        dist.isend(inp(2)[:n // 2].to(torch.bfloat16), 0).wait()
    # a subgroup of ranks {1, 3}
    sub = dist.new_group([1, 3])
    if rank in (1, 3):
        # the ring's channels of {0,1,2,3} are taken: an error, raised by the sync call
        t = inp(rank).clone()
        try:
            dist.all_reduce(t, group=sub)
            check(False, "a ring over {1,3} after one over {0,1,2,3} did not fail")
        except RuntimeError as e:
            check("over ranks [1, 3]" in str(e) and "taken by an earlier collective" in str(e),
                  "subgroup error: %s" % e)
        check(torch.equal(t, inp(rank)), "a failed all_reduce left the tensor as it was")
        kt.set_algorithm("all_reduce", "tree_allreduce")
        dist.all_reduce(t, group=sub)
        kt.set_algorithm("all_reduce", "")
        check(torch.equal(t, inp(1) + inp(3)), "subgroup all_reduce")
    recs = kt.records()
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(recs, f)
    dist.destroy_process_group()


def rank_costing(rank, world, address, outdir):
    """One rank of case costing: compute charged to the PE, collectives overlapped."""
    import torch
    import torch.nn.functional as F
    import torch.distributed as dist
    import kbsim.torch as kt
    os.environ["KBSIM_ADDRESS"] = address
    dist.init_process_group("kbsim", init_method="file://" + os.path.join(outdir, "store"),
                            rank=rank, world_size=world)
    x, w = torch.ones(4, 64), torch.ones(64, 32)
    with kt.costing() as cost:
        y = x @ w
        g = kt.op_cost_ns("gemm", "f32", 4, 32, 64)
        check(cost.breakdown["matmul"] == {"count": 1, "ns": g} and cost.clock_ns == g,
              "matmul charged: %s" % cost.breakdown)
        h = torch.relu(F.linear(x, torch.ones(16, 64), torch.ones(16)))
        lin = kt.op_cost_ns("gemm", "f32", 4, 16, 64) + kt.op_cost_ns("add", "f32", 64)
        check(cost.breakdown["linear"]["ns"] == lin, "linear: %s" % cost.breakdown)
        check(cost.breakdown["relu"]["ns"] == kt.op_cost_ns("maximum", "f32", 64), "relu")
        check(torch.equal(h, torch.full((4, 16), 65.0)), "values under costing")
        c0 = cost.clock_ns
        check(c0 == cost.compute_ns == g + lin + kt.op_cost_ns("maximum", "f32", 64), "clock")
        # a sync all_reduce: the clock moves by its simulated latency
        dist.all_reduce(y)
        check(torch.equal(y, torch.full((4, 32), 64.0 * world)), "all_reduce under costing")
        lat = kt.records()[-1]["latency_ns"]
        check(cost.clock_ns == c0 + lat, "sync: %r != %r + %r" % (cost.clock_ns, c0, lat))
        # async: issued, k GEMMs of compute, then waited: the two overlap
        c1 = cost.clock_ns
        work = dist.all_reduce(y, async_op=True)
        for _ in range(3):
            x @ w
        work.wait()
        lat2 = kt.records()[-1]["latency_ns"]
        check(cost.clock_ns == c1 + max(3 * g, lat2),
              "async: %r != %r + max(%r, %r)" % (cost.clock_ns, c1, 3 * g, lat2))
        check(cost.compute_ns == c0 + 3 * g and cost.comm_ns == lat + lat2, "sums")
        # autograd's backward: a Linear's GEMMs for the input's and the weight's
        # gradients, relu's mask, the bias's sum, charged as 'backward.<op>'
        xg = torch.ones(4, 64, requires_grad=True)
        lin = torch.nn.Linear(64, 32)
        loss = torch.relu(lin(xg)).sum()
        c2 = cost.clock_ns
        loss.backward()
        check(xg.grad is not None and lin.weight.grad.shape == (32, 64), "gradients computed")
        bw = {k: dict(v) for k, v in cost.breakdown.items() if k.startswith("backward.")}
        want_mm = kt.op_cost_ns("gemm", "f32", 4, 64, 32) + kt.op_cost_ns("gemm", "f32", 32, 64, 4)
        check(bw.get("backward.mm") == {"count": 2, "ns": want_mm}, "backward mm: %s" % bw)
        check(bw.get("backward.threshold_backward") == {
            "count": 1, "ns": kt.op_cost_ns("mul", "f32", 128)}, "relu's backward: %s" % bw)
        check(bw.get("backward.sum") == {"count": 1, "ns": kt.op_cost_ns("sum", "f32", 128)},
              "bias's sum: %s" % bw)
        check(cost.clock_ns == c2 + sum(v["ns"] for v in bw.values()),
              "backward advances the clock: %r, %r + %s" % (cost.clock_ns, c2, bw))
        # torch.autograd.backward and torch.autograd.grad called directly: the same
        # charges as loss.backward()
        for how in ("backward", "grad"):
            xg.grad = lin.weight.grad = lin.bias.grad = None  # no accumulation (add_)
            loss = torch.relu(lin(xg)).sum()
            before = {k: dict(v) for k, v in cost.breakdown.items()}
            c3 = cost.clock_ns
            if how == "backward":
                torch.autograd.backward(loss)
            else:
                gx, gw, gb = torch.autograd.grad(loss, [xg, lin.weight, lin.bias])
                check(gx.shape == (4, 64) and gw.shape == (32, 64) and gb.shape == (32,)
                      and torch.equal(gw, lin.weight.grad if lin.weight.grad is not None
                                      else gw), "grad's gradients")
            got = {k: {"count": v["count"] - before.get(k, {"count": 0})["count"],
                       "ns": v["ns"] - before.get(k, {"ns": 0.0})["ns"]}
                   for k, v in cost.breakdown.items()}
            got = {k: v for k, v in got.items() if v["count"]}
            check(set(got) == set(bw) and all(got[k]["count"] == bw[k]["count"]
                                              and abs(got[k]["ns"] - bw[k]["ns"]) < 1e-9
                                              for k in bw)
                  and abs(cost.clock_ns - c3 - sum(v["ns"] for v in bw.values())) < 1e-6,
                  "torch.autograd.%s: %s, loss.backward() %s" % (how, got, bw))
        # functions with no rule of their own: charged by the aten operations
        # they run, each as the PE_MATH ops that compute it (decision 0066)
        def charged(fn):
            before = {k: dict(v) for k, v in cost.breakdown.items()}
            c = cost.clock_ns
            fn()
            new = {k: v["ns"] - before.get(k, {"ns": 0.0})["ns"]
                   for k, v in cost.breakdown.items()
                   if v["count"] != before.get(k, {"count": 0})["count"]}
            check(abs(cost.clock_ns - c - sum(new.values())) < 1e-6, "clock: %s" % new)
            return new

        def ops(pairs):
            return sum(kt.op_cost_ns(op, "f32", n) for op, n in pairs)

        xs = torch.arange(8 * 64, dtype=torch.float32).view(8, 64) / 100
        n = xs.numel()
        got = charged(lambda: F.layer_norm(xs, (64,), torch.ones(64), torch.zeros(64)))
        want = ops([("sum", n), ("sub", n), ("mul", n), ("sum", n), ("add", 8), ("log", 8),
                    ("mul", 8), ("exp", 8), ("mul", n), ("fma", n)])
        check(got == {"layer_norm": want}, "layer_norm: %s, want %r" % (got, want))
        sig = [("mul", n), ("exp", n), ("add", n), ("div", n)]
        check(charged(lambda: F.gelu(xs)) == {"gelu": ops(sig + [("mul", n)])}, "gelu")
        check(charged(lambda: torch.sigmoid(xs)) == {"sigmoid": ops(sig)}, "sigmoid")
        # a reduction over its input's elements (it was charged over its one output)
        check(charged(lambda: xs.sum()) == {"sum": ops([("sum", n)])}, "sum over its input")
        got = charged(lambda: xs.mean())
        check(got == {"mean": ops([("sum", n), ("div", 1)])}, "mean: %s want %r" % (got, ops([("sum", n), ("div", 1)])))
        check(charged(lambda: xs.pow(2)) == {"pow": ops([("mul", n)])}, "x^2: a mul")
        check(charged(lambda: torch.sqrt(xs)) == {"sqrt": ops([("log", n), ("mul", n),
                                                              ("exp", n)])}, "sqrt")
        z = torch.zeros(8, 64)
        check(charged(lambda: F.mse_loss(xs, z)) == {"mse_loss": ops(
            [("sub", n), ("mul", n), ("sum", n), ("div", 1)])}, "mse_loss")
        check(charged(lambda: F.mse_loss(xs, z, reduction="none")) == {"mse_loss": ops(
            [("sub", n), ("mul", n)])}, "mse_loss, no reduction")
        # a list operation (an optimizer's foreach=True): each tensor's operation
        la, lb = torch.ones(10), torch.ones(3, 7)
        check(charged(lambda: torch._foreach_mul_([la, lb], 0.5)) == {"_foreach_mul_": ops(
            [("mul", 10), ("mul", 21)])}, "_foreach_mul_")
        check(charged(lambda: torch._foreach_addcdiv_([la, lb], [la, lb], [la, lb], 0.1)) == {
            "_foreach_addcdiv_": ops([("div", 10), ("fma", 10), ("div", 21), ("fma", 21)])},
            "_foreach_addcdiv_")
        # data movement: one PE_DMA copy of the bytes written (kb_dma_time)
        check(charged(lambda: torch.cat([xs, xs])) == {"cat": kt.op_cost_ns("copy", "f32",
                                                                            2 * n * 4)}, "cat")
        check(charged(lambda: xs.t().contiguous()) == {"contiguous": kt.op_cost_ns(
            "copy", "f32", n * 4)}, "contiguous of a transpose: a clone")
        # a comparison as one element-wise op, a select as an fma-class one
        check(charged(lambda: torch.eq(xs, xs)) == {"eq": ops([("sub", n)])}, "eq")
        check(charged(lambda: torch.where(xs > 1, xs, z)) == {"gt": ops([("sub", n)]),
                                                             "where": ops([("fma", n)])}, "where")
        # reductions and functions with no PE_MATH unit, as the ops that compute them
        rows = xs.shape[0]
        check(charged(lambda: xs.argmax(-1)) == {"argmax": ops([("maximum", n)])}, "argmax")
        check(charged(lambda: xs.cumsum(-1)) == {"cumsum": ops([("add", n)])}, "cumsum")
        check(charged(lambda: torch.tril(xs)) == {"tril": ops([("fma", n)])}, "tril: a select")
        sq = [("log", 1), ("mul", 1), ("exp", 1)]
        got = charged(lambda: torch.linalg.vector_norm(xs))
        check(got == {"linalg_vector_norm": ops([("mul", n), ("sum", n)] + sq)},
              "vector_norm: %s" % got)
        check(charged(lambda: xs.norm(p=1)) == {"norm": ops([("mul", n), ("maximum", n),
                                                            ("sum", n)])}, "norm p=1")
        var = [("sum", n), ("div", rows), ("sub", n), ("mul", n), ("sum", n), ("div", rows)]
        check(charged(lambda: xs.var(-1)) == {"var": ops(var)}, "var")
        got = charged(lambda: xs.std(-1))
        check(got == {"std": ops(var + [(o, rows) for o, _ in sq])}, "std: %s" % got)
        check(charged(lambda: torch.logsumexp(xs, -1)) == {"logsumexp": ops(
            [("maximum", n), ("sub", n), ("exp", n), ("sum", n), ("log", rows),
             ("add", rows)])}, "logsumexp")
        check(charged(lambda: F.softplus(xs)) == {"softplus": ops(
            [("exp", n), ("add", n), ("log", n)])}, "softplus")
        # group norm: layer norm's ops with the groups as rows; nearest upsampling: a copy
        xg4 = torch.arange(2 * 8 * 16, dtype=torch.float32).view(2, 8, 4, 4) / 100
        ng = xg4.numel()
        got = charged(lambda: F.group_norm(xg4, 4, torch.ones(8), torch.zeros(8)))
        want = ops([("sum", ng), ("sub", ng), ("mul", ng), ("sum", ng), ("add", 8), ("log", 8),
                    ("mul", 8), ("exp", 8), ("mul", ng), ("fma", ng)])
        check(got == {"group_norm": want}, "group_norm: %s, want %r" % (got, want))
        got = charged(lambda: F.interpolate(xg4, scale_factor=2, mode="nearest"))
        check(got == {"interpolate": kt.op_cost_ns("copy", "f32", 4 * ng * 4)},
              "nearest upsampling: %s" % got)
        # torch 1.13's attention in one operation: two GEMMs, the scale and the softmax
        q = torch.ones(2, 3, 16, 8)
        kk, vv = torch.ones(2, 3, 12, 8), torch.ones(2, 3, 12, 4)
        got = charged(lambda: F._scaled_dot_product_attention(q, kk, vv))
        want = (ops([("mul", q.numel()), ("softmax", 6 * 16 * 12)])
                + 6 * kt.op_cost_ns("gemm", "f32", 16, 12, 8)
                + 6 * kt.op_cost_ns("gemm", "f32", 16, 4, 12))
        check(len(got) == 1 and abs(sum(got.values()) - want) < 1e-6,
              "scaled dot product attention: %s, want %r" % (got, want))
        # no rule (random numbers): not charged, counted and listed
        r0, u0 = torch.zeros(8), cost.uncharged.get("uniform_", 0)
        check(charged(lambda: r0.uniform_()) == {} and cost.uncharged.get("uniform_") == u0 + 1,
              "uniform_: %s" % cost.uncharged)
        # the backend's own copies (a reduce_scatter's list flattened): not the program's
        c5, u5, b5 = cost.compute_ns, dict(cost.uncharged), len(cost.breakdown)
        rs = torch.zeros(4)
        dist.reduce_scatter(rs, [torch.ones(4) for _ in range(world)])
        check(torch.equal(rs, torch.full((4,), float(world))) and cost.compute_ns == c5
              and cost.uncharged == u5 and len(cost.breakdown) == b5,
              "reduce_scatter: %s, compute %r -> %r, uncharged %s -> %s" % (rs, c5, cost.compute_ns, u5, cost.uncharged))
        # attention: its projections (GEMMs), scores (bmm), softmax, one charge
        mha = torch.nn.MultiheadAttention(64, 4, batch_first=True, dropout=0.0)
        q = torch.ones(2, 16, 64)
        got = charged(lambda: mha(q, q, q, need_weights=False))
        parts = cost.parts.get("multi_head_attention_forward", {})
        check(set(got) == {"multi_head_attention_forward"}, "attention: %s" % got)
        check(parts.get("_softmax") == {"count": 1, "ns": kt.op_cost_ns("softmax", "f32",
                                                                       2 * 4 * 16 * 16)},
              "attention's softmax: %s" % parts)
        check(parts.get("bmm", {}).get("count") == 2
              and abs(sum(v["ns"] for v in parts.values()) - got["multi_head_attention_forward"])
              < 1e-6, "attention's parts: %s" % parts)
        # a CNN's functions: convolution as a GEMM per group, batch norm, pooling, loss
        img, cw = torch.ones(2, 4, 8, 8), torch.ones(6, 2, 3, 3)  # 4 -> 6 channels, 2 groups
        got = charged(lambda: F.conv2d(img, cw, torch.ones(6), padding=1, groups=2))
        # per group: M = 2 * 8 * 8 positions, N = 3 output channels, K = 2 * 3 * 3
        want = 2 * kt.op_cost_ns("gemm", "f32", 128, 3, 18) + ops([("add", 2 * 6 * 64)])
        check(got == {"conv2d": want}, "conv2d: %s, want %r" % (got, want))
        ni = img.numel()
        got = charged(lambda: F.batch_norm(img, None, None, torch.ones(4), torch.zeros(4),
                                           training=True))
        want = ops([("sum", ni), ("sub", ni), ("mul", ni), ("sum", ni), ("add", 4), ("log", 4),
                    ("mul", 4), ("exp", 4), ("mul", ni), ("fma", ni)])
        check(got == {"batch_norm": want}, "batch_norm: %s, want %r" % (got, want))
        check(charged(lambda: F.max_pool2d(img, 2)) == {"max_pool2d": ops(
            [("maximum", 2 * 4 * 4 * 4 * 4)])}, "max_pool2d")
        check(charged(lambda: F.avg_pool2d(img, 2)) == {"avg_pool2d": ops(
            [("add", 2 * 4 * 4 * 4 * 4), ("div", 2 * 4 * 4 * 4)])}, "avg_pool2d")
        tgt = torch.arange(8)
        got = charged(lambda: F.cross_entropy(xs, tgt))
        want = ops([("softmax", n), ("log", n), ("sum", 8), ("div", 1)])
        check(got == {"cross_entropy": want}, "cross_entropy: %s, want %r" % (got, want))
        imgg, cwg = img.clone().requires_grad_(), cw.clone().requires_grad_()
        F.conv2d(imgg, cwg, padding=1, groups=2).sum().backward()
        # the input's gradient (128 x 18 from 128 x 3) and the weight's (3 x 18 from 3 x 128)
        want = 2 * (kt.op_cost_ns("gemm", "f32", 128, 18, 3)
                    + kt.op_cost_ns("gemm", "f32", 3, 18, 128))
        check(cost.breakdown.get("backward.convolution_backward") == {"count": 1, "ns": want},
              "conv2d's backward: %s" % cost.breakdown.get("backward.convolution_backward"))
        # the backward of layer_norm and gelu
        xg2 = xs.clone().requires_grad_()
        c4 = cost.clock_ns
        F.gelu(F.layer_norm(xg2, (64,))).sum().backward()
        bw2 = cost.breakdown
        check(bw2.get("backward.gelu_backward", {}).get("ns") == ops(
            sig + [("sub", n), ("mul", n), ("fma", n), ("mul", n)]), "gelu's backward")
        check(bw2.get("backward.native_layer_norm_backward", {}).get("ns") == ops(
            [("sub", n), ("mul", n), ("mul", n), ("mul", n), ("sum", n), ("sum", n),
             ("sum", n), ("mul", n), ("sum", n), ("fma", n), ("sub", n), ("mul", n)]),
            "layer_norm's backward: %s" % bw2)
        check(cost.clock_ns > c4 and xg2.grad is not None, "backward of layer_norm, gelu")
        report = cost.report()
    check("matmul" in report and "total" in report and "  _softmax" in report
          and "not charged" in report and "uniform_ " in report, report)
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(dict(gemm_ns=g, linear_gemm_ns=kt.op_cost_ns("gemm", "f32", 4, 16, 64),
                       add_ns=kt.op_cost_ns("add", "f32", 64),
                       maximum_ns=kt.op_cost_ns("maximum", "f32", 64),
                       copy_ns=kt.op_cost_ns("copy", "f32", 4096)), f)
    dist.destroy_process_group()


def rank_cpp_waits(rank, world, address, outdir):
    """One rank of case cpp_waits: collectives C++ issues outside a backward
    (DDP's constructor, _broadcast_coalesced) give rank 0's values, raise a
    failure from their wait() and move the costing clock to their end; a
    comm hook's all-reduces are waited at the backward's end; resize_ and
    set_ cost nothing."""
    import signal
    import torch
    import torch.distributed as dist
    import kbsim.torch as kt
    import ddp_step
    from torch.nn.parallel import DistributedDataParallel as DDP
    signal.alarm(300)  # a wait that never returns fails the case instead of hanging it
    os.environ["KBSIM_ADDRESS"] = address
    dist.init_process_group("kbsim", init_method="file://" + os.path.join(outdir, "store"),
                            rank=rank, world_size=world)
    out = {}

    # resize_ and set_ compute nothing: free, not listed as having no rule
    # (the trailing _ was stripped before the table of free operations was asked)
    with kt.costing() as cost:
        t = torch.ones(6)
        t.resize_(2, 3)
        u = torch.empty(0)
        u.set_(torch.zeros(5))
        s = torch.empty(0)
        torch.add(torch.ones(3), torch.ones(3), out=s)
    check(t.shape == (2, 3) and u.shape == (5,) and torch.equal(s, torch.full((3,), 2.0)),
          "resize_, set_, add(out=): %s %s %s" % (t.shape, u.shape, s))
    check(not any(k.rstrip("_") in ("resize", "set") for k in cost.uncharged)
          and not any(k.rstrip("_") in ("resize", "set") for k in cost.breakdown),
          "resize_ / set_ charged or listed: uncharged %s, breakdown %s"
          % (cost.uncharged, cost.breakdown))
    check(cost.compute_ns == cost.breakdown["add"]["ns"] == kt.op_cost_ns("add", "f32", 3),
          "only add(out=) charged: %r, %s" % (cost.compute_ns, cost.breakdown))

    def module(r):
        """Parameters and buffers (float, and BatchNorm's int64 count) that
        differ by rank; module(0) is rank 0's."""
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8),
                                torch.nn.Linear(8, 3))
        with torch.no_grad():
            for k, v in enumerate(m.state_dict().values()):
                v.add_(10 * r + k)
        return m

    def waited_at_once(recs):
        """The time the clock stood still for collectives waited with no
        compute while they ran (C++ issues and waits them): the union of
        their intervals from issue to end (_broadcast_coalesced issues a
        bucket's broadcast before it waits for the one before)."""
        stall, prev = 0.0, 0.0
        for x in recs:
            stall += max(0.0, x["model_end_ns"] - max(x["issue_ns"], prev))
            prev = max(prev, x["model_end_ns"])
        return stall

    # DDP's constructor: an all_gather and broadcasts from C++ (the parameters'
    # count and shapes checked, the states broadcast from rank 0), each waited
    # at once: every rank holds rank 0's states, and the clock went to their ends
    kt.clear_records()
    m = module(rank)
    with kt.costing() as cost:
        DDP(m)
    recs = kt.records()
    want = module(0).state_dict()
    for k, v in m.state_dict().items():
        check(torch.equal(v, want[k]), "after DDP(): %s is not rank 0's: %s" % (k, v))
    ops = [x["op"] for x in recs]
    check(ops[0] == "all_gather" and ops.count("broadcast") >= 2, "DDP()'s collectives: %s" % ops)
    stall = waited_at_once(recs)
    check(stall > 0 and abs(cost.clock_ns - cost.compute_ns - stall) < 1e-6,
          "DDP() under costing: clock %r, compute %r + waited %r" % (cost.clock_ns,
                                                                    cost.compute_ns, stall))
    out["construct_ops"], out["construct_wait_ns"] = ops, stall
    check(not kt._KEPT, "works held after they were waited: %s" % kt._KEPT)

    # _broadcast_coalesced from rank 1 in buckets of 16 bytes: several
    # broadcasts, two in flight at a time, each waited by C++
    kt.clear_records()
    ts = [torch.arange(k + 2, dtype=torch.float32) * (rank + 1) for k in range(5)]
    dist._broadcast_coalesced(dist.group.WORLD, ts, 16, 1)
    check(all(torch.equal(x, torch.arange(k + 2, dtype=torch.float32) * 2)
              for k, x in enumerate(ts)), "_broadcast_coalesced from rank 1: %s" % ts)
    n_bcast = len([x for x in kt.records() if x["op"] == "broadcast"])
    check(n_bcast >= 3, "_broadcast_coalesced's buckets: %d broadcasts" % n_bcast)
    check(not kt._KEPT, "works held after _broadcast_coalesced: %s" % kt._KEPT)

    # a forward broadcasts the buffers (BatchNorm's) from C++, waited at once:
    # the step stands still until the broadcast ends
    ddp = DDP(module(rank))
    kt.clear_records()
    with kt.costing() as cost:
        y = ddp(torch.ones(4, 6))
    recs = kt.records()
    stall = waited_at_once(recs)
    check([x["op"] for x in recs] == ["broadcast"] * len(recs) and recs and stall > 0
          and abs(cost.clock_ns - cost.compute_ns - stall) < 1e-6,
          "the forward's buffer broadcast: clock %r, compute %r, waited %r, %s"
          % (cost.clock_ns, cost.compute_ns, stall, recs))
    y.sum().backward()  # the reducer takes its all_reduce's future, never waits on the Work
    check(not kt._KEPT, "works held after a backward: %s" % kt._KEPT)

    # a broadcast, an all_gather that fails: DDP() raises the server's error
    # (it went on silently, with each rank's own parameters, or with torch's
    # "inconsistent params" from an all_gather's uninitialised output)
    for coll in ("broadcast", "all_gather"):
        kt.set_algorithm(coll, "no_such_algorithm")
        try:
            DDP(module(rank))
            check(False, "DDP() with a failing %s did not raise" % coll)
        except RuntimeError as e:
            check(("kbsim %s over ranks [0, 1]" % coll) in str(e)
                  and "unknown algorithm 'no_such_algorithm'" in str(e),
                  "DDP() with a failing %s: %s" % (coll, e))
        kt.set_algorithm(coll, "")
        check(not kt._KEPT, "failed works held: %s" % kt._KEPT)
    t = torch.full((3,), float(rank))
    dist.broadcast(t, 1)
    check(torch.equal(t, torch.ones(3)), "a broadcast after the failures: %s" % t)

    # a comm hook: its all_reduce (from Python, inside the backward) is waited
    # at the backward's end, and its end is the step's if later than the compute
    class A:
        ws, steps, batch = world, 2, 4
    ref = ddp_step.reference(A)
    hooked = []

    def hook(state, bucket):
        hooked.append(bucket.index())
        return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(
            lambda f: f.value()[0].div_(world))
    ddp = DDP(ddp_step.model())
    ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=ddp_step.LR)
    out["hook_steps"] = []
    for step in range(A.steps):
        opt.zero_grad()
        kt.clear_records()
        with kt.costing() as cost:
            loss = ddp_step.loss_of(ddp(ddp_step.batch(rank, A.batch)))
            forward_ns = cost.clock_ns
            loss.backward()
        check(len(hooked) == step + 1, "the hook ran %d times" % len(hooked))
        check(all(torch.equal(p.grad, g) for p, g in zip(ddp.parameters(), ref[step])),
              "step %d: the hook's gradients differ from the one-process model's" % step)
        recs = kt.records()
        ars = [x for x in recs if x["op"] == "all_reduce"]
        stall = waited_at_once([x for x in recs if x["op"] != "all_reduce"])
        end = max(x["model_end_ns"] for x in ars)
        check(len(ars) == 1 and forward_ns < ars[0]["issue_ns"], "step %d: %s" % (step, ars))
        check(end > cost.compute_ns + stall, "step %d: the all_reduce ends (%r) before the "
              "compute (%r + %r): the check below would prove nothing"
              % (step, end, cost.compute_ns, stall))
        check(abs(cost.clock_ns - max(cost.compute_ns + stall, end)) < 1e-6,
              "step %d: clock %r, not max(compute %r + waited %r, the hook's all_reduce's end %r)"
              % (step, cost.clock_ns, cost.compute_ns, stall, end))
        out["hook_steps"].append(dict(step_ns=cost.clock_ns, end_ns=end))
        opt.step()

    # a hook returning the all_reduce's own future, which fails: backward
    # raises the collective's error (the future held the exception as its
    # value, which the reducer tried to read as the gradients: "Unable to
    # cast kbsim all_reduce ... to Tensor")
    kt.set_algorithm("all_reduce", "no_such_algorithm")
    ddp = DDP(ddp_step.model())
    ddp.register_comm_hook(None, lambda state, bucket: dist.all_reduce(
        bucket.buffer(), async_op=True).get_future())
    try:
        ddp_step.loss_of(ddp(ddp_step.batch(rank, 4))).backward()
        check(False, "a failing all_reduce of a comm hook did not raise")
    except RuntimeError as e:
        check("kbsim all_reduce over ranks [0, 1]" in str(e) and "unknown algorithm" in str(e)
              and "Unable to cast" not in str(e), "the hook's failure: %s" % e)
    kt.set_algorithm("all_reduce", "")
    check(not kt._KEPT, "works held at the end: %s" % kt._KEPT)
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()


class Server:
    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="kbtorch")
        self.address = os.path.join(self.dir, "s.sock")
        self.proc = subprocess.Popen([KBSIM, "serve", "-q", "--listen", self.address, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     cwd=WORKDIR, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            raise AssertionError("server did not start: %r %s" % (line, self.proc.stderr.read()))

    def stop(self):
        self.proc.send_signal(2)
        _, err = self.proc.communicate(timeout=120)
        check(self.proc.returncode == 0, "server exit %d: %s" % (self.proc.returncode, err))
        check("internal error" not in err, err)


def one_rank_group(srv, store_name):
    """This process as the one rank of a process group on srv."""
    import torch.distributed as dist
    os.environ["KBSIM_ADDRESS"] = srv.address
    store = os.path.join(WORKDIR, store_name)
    if os.path.exists(store):
        os.unlink(store)
    dist.init_process_group("kbsim", init_method="file://" + store, rank=0, world_size=1)


def run_ranks(rank_fn, world, prefix):
    """rank_fn(rank, world, address, outdir) on `world` forked ranks against a
    server with the ring all-reduce; -> every rank's rank<r>.json"""
    import torch.multiprocessing as mp
    srv = Server("--set", "ccl.algorithm=ring_allreduce")
    outdir = tempfile.mkdtemp(prefix=prefix)
    try:
        mp.start_processes(rank_fn, args=(world, srv.address, outdir), nprocs=world,
                           join=True, start_method="fork")  # fork: no second import of torch
    finally:
        srv.stop()
    return [json.load(open(os.path.join(outdir, "rank%d.json" % r))) for r in range(world)]


def case_ops():
    world = 4
    recs = run_ranks(rank_ops, world, "kbtorchops")
    kinds = [x["op"] for x in recs[0]]
    check(kinds[:4] == ["all_reduce"] * 4 and "all_gather" in kinds and "broadcast" in kinds
          and "reduce_scatter" in kinds and "barrier" in kinds and "all_to_all" in kinds
          and "all_to_allv" in kinds and "send" in kinds and "recv" in kinds
          and kinds.count("reduce") == 3 and kinds.count("gather") == 2
          and kinds.count("scatter") == 2,
          "records: %s" % kinds)
    anyrecv = [x for x in recs[0] if x["op"] == "recv"][-4:]  # from any source
    check(sorted(x["group"][0] for x in anyrecv) == [1, 2, 2, 3]
          and all(x["group"][1] == 0 for x in anyrecv), "recv from any source: %s" % anyrecv)
    for r in range(world):
        prev_end = 0.0
        for x in recs[r]:
            check(x["end_ns"] > x["start_ns"] >= 0, "times %s" % x)
            check(x["latency_ns"] > 0, "latency %s" % x)
        # the machine's clock goes forward: each collective starts after the one before
        main = [x for x in recs[r] if x["group"] == list(range(world))
                and x["op"] not in ("send", "recv")]
        for x in main:
            check(x["start_ns"] >= prev_end, "rank %d: %s starts before %r" % (r, x, prev_end))
            prev_end = x["end_ns"]
    # every member of a collective sees the same latency
    coll = [[x for x in recs[r] if x["op"] not in ("send", "recv")] for r in (0, 2)]
    for k in range(len(coll[0])):
        check(coll[0][k]["latency_ns"] == coll[1][k]["latency_ns"], "latency differs at %d" % k)
    # a send's reply times are the pair's: the receiver's record has the same latency
    s0 = [x for x in recs[0] if x["op"] == "send"][0]
    r1 = [x for x in recs[1] if x["op"] == "recv"][0]
    check(s0["group"] == r1["group"] == [0, 1] and s0["latency_ns"] == r1["latency_ns"] > 0,
          "send/recv records %s %s" % (s0, r1))


def case_costing():
    got = run_ranks(rank_costing, 2, "kbtorchcost")[1]
    # the charges are the components' closed forms, as Lua's tl.gemm_time / tl.math_time
    # give them for rank 1's PE
    out = subprocess.run([KBSIM, "-q", os.path.join(HERE, "cosim_cost_ref.lua")], cwd=WORKDIR,
                         capture_output=True, text=True, check=True).stdout
    ref = {k: int(v) / 1000 for k, v in (line.split("=") for line in out.split())}
    for k in ("gemm", "linear_gemm", "add", "maximum", "copy"):
        check(got[k + "_ns"] == ref[k + "_ps"] and ref[k + "_ps"] > 0,
              "%s: %r ns, Lua %r" % (k, got[k + "_ns"], ref[k + "_ps"]))


def case_refused():
    """A backend connection whose hello is refused (its rank is taken) raises and
    leaves neither its connection nor its reader thread behind."""
    import threading
    import time
    from kbsim import Client, ServerError
    import kbsim.torch as kt
    srv = Server()
    try:
        holder = Client(srv.address, rank=0)
        before = threading.active_count()
        for _ in range(3):
            try:
                kt._Connection(srv.address, 0)
                raise AssertionError("a second connection for rank 0 was accepted")
            except ServerError as e:
                check(e.status == "refused" and "rank 0 is already claimed" in e.message, str(e))
        check(threading.active_count() == before, "reader threads left: %d, before %d"
              % (threading.active_count(), before))
        with Client(srv.address) as obs:
            for _ in range(200):
                if obs.stats()["clients"] == 2:
                    break
                time.sleep(0.01)
            check(obs.stats()["clients"] == 2, "connections after refused hellos: %d"
                  % obs.stats()["clients"])
        holder.close()
    finally:
        srv.stop()


def case_fork_child():
    """A process forked after init_process_group (a DataLoader worker, os.fork)
    has no connection: a request raises at once instead of blocking forever
    on the parent's socket (no reader thread in the child) or mixing its
    frames into the parent's; the parent's connection goes on working, also
    with an all-reduce in flight across the fork and after the child exits."""
    import signal
    import torch
    import torch.distributed as dist
    import kbsim.torch as kt
    srv = Server("--set", "ccl.algorithm=ring_allreduce")
    try:
        os.environ["KBSIM_ADDRESS"] = srv.address
        store = os.path.join(WORKDIR, "forkstore")
        if os.path.exists(store):  # a file store left by an earlier run would be reused
            os.unlink(store)
        dist.init_process_group("kbsim", init_method="file://" + store, rank=0, world_size=1)
        t = torch.arange(8, dtype=torch.float32)
        dist.all_reduce(t)
        check(torch.equal(t, torch.arange(8, dtype=torch.float32)), "all_reduce before: %s" % t)
        t = torch.arange(8, dtype=torch.float32) + 1
        w = dist.all_reduce(t, async_op=True)
        pid = os.fork()
        if pid == 0:  # the child: any failure (or a hang, by the alarm) is its exit status
            code = 3
            try:
                signal.alarm(20)
                try:
                    kt.now_ns()
                    code = 4  # the parent's connection answered the child
                except RuntimeError as e:
                    code = 0 if "no process group yet" in str(e) else 5
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        check(os.WEXITSTATUS(status) == 0 and not os.WIFSIGNALED(status),
              "forked child: status %#x (3: raised otherwise, 4: used the parent's "
              "connection, 5: another error, SIGALRM: hung)" % status)
        check(w.wait() is True and torch.equal(t, torch.arange(8, dtype=torch.float32) + 1),
              "all_reduce in flight across the fork: %s" % t)
        t = torch.full((4,), 2.0)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        check(torch.equal(t, torch.full((4,), 2.0)), "all_reduce after the child: %s" % t)
        check(kt.now_ns() >= 0 and len(kt.records()) == 3, "records: %s" % kt.records())
        dist.destroy_process_group()
        kt.shutdown()
    finally:
        srv.stop()


def case_bad_root():
    """A rooted collective whose root is not a rank of the group raises,
    naming it (an index past the group was an IndexError from inside the
    backend; a negative one silently took a rank from the end)."""
    import torch
    import torch.distributed as dist
    import kbsim.torch as kt
    srv = Server("--set", "ccl.algorithm=ring_allreduce")
    try:
        one_rank_group(srv, "rootstore")
        t = torch.arange(4, dtype=torch.float32)
        calls = [("broadcast", lambda k: dist.broadcast(t, k)),
                 ("reduce", lambda k: dist.reduce(t, k))]
        for what, call in calls:
            for k in (1, -1):
                try:
                    call(k)
                    raise AssertionError("%s from root %d ran" % (what, k))
                except RuntimeError as e:
                    want = ("kbsim %s: root rank %d is outside the group of 1 ranks (0..0)"
                            % (what, k))
                    check(str(e) == want, "%s root %d: %r" % (what, k, str(e)))
        dist.broadcast(t, 0)
        check(torch.equal(t, torch.arange(4, dtype=torch.float32)) and len(kt.records()) == 1,
              "a broadcast from root 0 after the refusals: %s %s" % (t, kt.records()))
        dist.destroy_process_group()
        kt.shutdown()
    finally:
        srv.stop()


def case_tp_mlp():
    import tp_mlp
    res = tp_mlp.main(["--kbsim", KBSIM, "--check", "--start-method", "fork"])
    check(res["checked"], "tp_mlp example did not check")


def case_ddp_error():
    """A collective that fails under DDP (the server's default all_reduce, lrab,
    does not run on a group of one rank) raises from loss.backward(), naming
    it; it was a SIGSEGV in Reducer::finalize_backward (the Python future's
    exception read as its tensor list). The connection works afterwards, and
    DDP with find_unused_parameters (an int32 all-reduce) runs."""
    import torch
    import torch.distributed as dist
    import kbsim.torch as kt
    srv = Server()
    try:
        one_rank_group(srv, "ddperrstore")
        net = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
        loss = net(torch.ones(3, 4)).sum()
        try:
            loss.backward()
            raise AssertionError("the backward's all_reduce ran")
        except RuntimeError as e:
            check("kbsim all_reduce over ranks [0]" in str(e)
                  and "does not run on the group" in str(e), "backward's error: %s" % e)
        kt.set_algorithm("all_reduce", "ring_allreduce")
        t = torch.ones(4)
        dist.all_reduce(t)
        check(torch.equal(t, torch.ones(4)), "an all_reduce after the failure: %s" % t)

        # find_unused_parameters: DDP all-reduces its int32 map of used
        # parameters (refused before: the machine reduced floats only)
        class Two(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)

            def forward(self, x):
                return self.a(x)
        two = Two()
        net = torch.nn.parallel.DistributedDataParallel(two, find_unused_parameters=True)
        net(torch.ones(3, 4)).sum().backward()
        check(two.a.weight.grad is not None and torch.equal(two.a.bias.grad, torch.full((2,), 3.0))
              and two.b.weight.grad is None, "find_unused_parameters: %s" % two.a.bias.grad)
        dist.destroy_process_group()
        kt.shutdown()
    finally:
        srv.stop()


def case_ddp():
    import ddp_step
    res = ddp_step.main(["--kbsim", KBSIM, "--check", "--start-method", "fork"])
    check(res["checked"], "ddp example did not check")


def case_cpp_waits():
    world = 2
    got = run_ranks(rank_cpp_waits, world, "kbtorchcpp")
    # every member waits as long for the same collectives
    check(got[0] == got[1], "ranks differ: %s" % got)


if __name__ == "__main__":
    KBSIM, SRCDIR, WORKDIR, CASE = sys.argv[1:5]
    try:
        import torch  # noqa: F401
    except ImportError:
        print("cosim_torch_%s skipped: python3-torch is not installed "
              "(apt-get install python3-torch, or KBSIM_TORCH=1 ./setup.sh)" % CASE)
        sys.exit(0)
    os.makedirs(WORKDIR, exist_ok=True)
    globals()["case_" + CASE]()
    print("cosim_torch_%s ok" % CASE)
