"""kbsim.torch: a torch.distributed backend "kbsim" whose collectives run on `kbsim serve`.

    import torch.distributed as dist
    import kbsim.torch                       # registers the backend
    # KBSIM_ADDRESS: the server's socket path or HOST:PORT (kbsim serve prints it)
    dist.init_process_group("kbsim", rank=r, world_size=n)
    dist.all_reduce(t)                      # the sum, computed on the simulated machine
    kbsim.torch.records()[-1]               # {'op': 'all_reduce', 'start_ns': ..., 'end_ns': ...}

Global rank g is the simulated machine's rank (PE) g. Every collective
copies the tensors into the rank's PE memory, runs the collective on the
simulated fabric with the real values, and copies the result back; its
simulated times are kept in records(). docs/cosim.md, decision 0021.

What torch 1.13 asks of a Python backend (found by experiment, decisions
0021 and 0070): every operation returns a c10d Work. A Python subclass of
Work (_Work) is what every caller gets; C++ callers (DDP's constructor,
_broadcast_coalesced, the reducer) reach its wait() and get_future() only
while its Python object lives (pybind11 drops the overrides with it, and
the base Work's wait() blocks forever), so the backend holds a C++
caller's Work until that caller is done with it. get_future()'s value is
the list of output tensors (DDP's reducer reads it).
"""
import atexit
import os
import socket
import struct
import sys
import threading

import torch
import torch.distributed as dist
import torch.overrides
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future
from torch.utils._python_dispatch import TorchDispatchMode

from .client import HEADER, MAGIC, OP, PROTOCOL_VERSION, ServerError
from .client import ANY_SOURCE, FLAG_RETURN_DATA, _group, _s2

BACKEND = "kbsim"
_WIRE = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
_ESIZE = {"f32": 4, "f16": 2, "bf16": 2}


class _Connection:
    """One rank's connection, shared by every process group of the process.
    Requests go out under a lock; a reader thread completes each request's
    callback when its reply (matched by id) comes, so collectives may be in
    flight while the program computes (async_op=True)."""

    def __init__(self, address, rank, token=""):
        from .client import Client
        self.sock = Client._connect(address, None)
        self.lock = threading.Lock()
        self.next_id = 0
        self.waiting = {}  # id -> callback(status, meta, data)
        self.closed = None
        self.pool = {}  # (n, dtype) -> [server tensor ids not in use]
        self.rank = rank
        self.reader = threading.Thread(target=self._read_loop, name="kbsim-reader", daemon=True)
        self.reader.start()
        try:
            meta, _ = self.call(OP["hello"], struct.pack("<I", rank) + _s2(token))
        except BaseException:
            self.close()  # a refused hello leaves no connection or reader behind
            raise
        _v, _r, self.n_pes, self.max_payload = struct.unpack("<HIIQ", meta)

    def submit(self, op, meta, data=b"", callback=None):
        """Sends a request; callback(status, meta, data) runs on the reader thread."""
        with self.lock:
            if self.closed:
                raise ConnectionError("kbsim: connection to the server lost: %s" % self.closed)
            self.next_id += 1
            rid = self.next_id
            self.waiting[rid] = callback
            head = HEADER.pack(MAGIC, PROTOCOL_VERSION, op, rid, 0, len(meta), len(data))
            self.sock.sendall(head + meta)
            if len(data):
                self.sock.sendall(data)
        return rid

    def call(self, op, meta, data=b""):
        """One request, waited for: (meta, data), or ServerError."""
        done = threading.Event()
        box = []

        def cb(status, rmeta, rdata):
            box.append((status, rmeta, rdata))
            done.set()
        self.submit(op, meta, data, cb)
        done.wait()
        return _result(*box[0])

    def _recv_exact(self, n):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if k == 0:
                raise ConnectionError("the server closed the connection")
            got += k
        return buf

    def _read_loop(self):
        try:
            while True:
                magic, _v, _op, rid, status, mlen, dlen = HEADER.unpack(
                    self._recv_exact(HEADER.size))
                if magic != MAGIC:
                    raise ConnectionError("not a kbsim frame from the server")
                meta = bytes(self._recv_exact(mlen)) if mlen else b""
                data = self._recv_exact(dlen) if dlen else b""
                with self.lock:
                    cb = self.waiting.pop(rid, None)
                if cb:
                    cb(status, meta, data)
        except (OSError, ConnectionError) as e:
            with self.lock:
                self.closed = str(e) or type(e).__name__
                waiting, self.waiting = self.waiting, {}
            msg = struct.pack("<H", len(self.closed.encode())) + self.closed.encode()
            for cb in waiting.values():
                if cb:
                    cb(-1, msg, b"")

    def close(self):
        """Ends the connection and its reader thread (the server frees the
        rank's tensors)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self.reader is not threading.current_thread():
            self.reader.join(10)
        self.sock.close()

    # server tensors, reused: one per (elements, dtype) in flight
    def take(self, n, dt):
        with self.lock:
            free = self.pool.get((n, dt))
            if free:
                return free.pop()
        meta, _ = self.call(OP["alloc"], struct.pack("<Q", n) + _s2(dt) + _s2(""))
        return struct.unpack("<I", meta)[0]

    def give(self, n, dt, tid):
        with self.lock:
            self.pool.setdefault((n, dt), []).append(tid)


def _result(status, meta, data):
    if status != 0:
        (n,) = struct.unpack_from("<H", meta)
        text = meta[2:2 + n].decode(errors="replace")
        if status == -1:
            raise ConnectionError("kbsim: " + text)
        raise ServerError(status, text)
    return meta, data


_CONN = None
_CONN_LOCK = threading.Lock()
_RECORDS = []
_ALGORITHMS = {}  # collective -> algorithm name ("" : the server's default)


def connection():
    """This process's connection to the server (made by init_process_group)."""
    if _CONN is None:
        raise RuntimeError("kbsim: no process group yet: call "
                           "torch.distributed.init_process_group('kbsim', ...) first")
    return _CONN


def _connect(rank):
    global _CONN
    with _CONN_LOCK:
        if _CONN is None:
            address = os.environ.get("KBSIM_ADDRESS")
            if not address:
                raise RuntimeError("kbsim: set KBSIM_ADDRESS to the address `kbsim serve` "
                                   "prints (a socket path or HOST:PORT)")
            _CONN = _Connection(address, rank, os.environ.get("KBSIM_TOKEN", ""))
        return _CONN


@atexit.register
def shutdown():
    """Closes this process's connection; a later process group connects anew.
    Runs at exit: a daemon reader thread still running while the interpreter
    finalises can abort the process inside torch."""
    global _CONN
    with _CONN_LOCK:
        conn, _CONN = _CONN, None
    if conn is not None:
        conn.close()


def _after_fork_in_child():
    """A process forked from one with a connection (a DataLoader worker, a
    rank started by os.fork or multiprocessing's fork after
    init_process_group) has the parent's socket but not its reader thread:
    a request would block forever on a reply no thread reads, or interleave
    its frames with the parent's on the shared socket. The child starts
    with no connection (it must call init_process_group itself) and fresh
    locks (another thread may have held one at the fork). The socket's file
    descriptor stays open in the child and is not shut down: that would end
    the parent's connection too. docs/cosim.md, "Starting ranks"."""
    global _CONN, _CONN_LOCK
    _CONN_LOCK = threading.Lock()
    _CONN = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def set_algorithm(collective, name):
    """The algorithm of lua/kbsim/ccl/ this process's `collective` ("all_reduce",
    "all_gather", ...) uses; "" is the server's default. Every rank must agree."""
    _ALGORITHMS[collective] = name


def records():
    """Every collective this process ran: dicts with op, group (global ranks),
    bytes (this rank's input), start_ns, end_ns (this rank's simulated kernel
    start and end), latency_ns (the slowest member's kernel time)."""
    return list(_RECORDS)


def clear_records():
    del _RECORDS[:]


def now_ns():
    """The simulated machine's time, ns."""
    meta, _ = connection().call(OP["now"], b"")
    return struct.unpack("<dQ", meta)[0]


# ---- tensors to wire bytes and back ---------------------------------------

_LOCAL = threading.local()  # .internal > 0: the backend's own tensor operations


class _internal:
    """The backend's own tensor operations (wire bytes to and from the
    user's tensors): not the program's compute, so costing charges none."""

    def __enter__(self):
        _LOCAL.internal = getattr(_LOCAL, "internal", 0) + 1

    def __exit__(self, *exc):
        _LOCAL.internal -= 1


_INT_EXACT = 1 << 24  # integers of float32: exact up to 2^24


def _wire(t, reduce, op="sum"):
    """(dtype on the wire, element count, bytes) of a contiguous copy of t. A
    dtype the server does not have travels as its bytes in f32 elements (zero
    padded) for data movement. An integer tensor is reduced as float32
    values (DDP's unused-parameter map is an int32 sum): exact while the
    values and the result are within 2^24 (a value past it is refused here,
    a result past it by _reduced_store, on every member alike); AVG of
    integers (torch has none) and other dtypes (float64, bool) are refused."""
    with _internal():
        c = t.detach().contiguous().cpu()
    dt = _WIRE.get(c.dtype)
    if dt == "bf16":
        raw = c.view(torch.int16).numpy().tobytes()
    elif dt:
        raw = c.numpy().tobytes()
    elif reduce:
        if c.is_floating_point() or c.is_complex() or c.dtype == torch.bool:
            raise RuntimeError("kbsim: cannot reduce %s tensors (the machine reduces float32, "
                               "float16, bfloat16, and integers as float32)" % c.dtype)
        if op == "avg":
            raise RuntimeError("kbsim: AVG of %s tensors (integers reduce with SUM, MAX, MIN)"
                               % c.dtype)
        with _internal():
            big = c.abs().max().item() if c.numel() else 0
            raw = c.to(torch.float32).numpy().tobytes()
        if big > _INT_EXACT:
            raise RuntimeError("kbsim: cannot reduce %s values up to %d exactly: the machine "
                               "reduces integers as float32, exact up to 2^24" % (c.dtype, big))
        dt = "f32"
    else:
        raw = c.view(-1).view(torch.uint8).numpy().tobytes() if c.numel() else b""
        raw += b"\0" * (-len(raw) % 4)
        dt = "f32"
    if not raw:
        raise RuntimeError("kbsim: an empty tensor (%s) cannot be sent" % (tuple(t.shape),))
    return dt, len(raw) // _ESIZE[dt], raw


def _store(t, raw):
    """Puts wire bytes (at least t's size) back into tensor t: float32 values
    for an integer tensor that was reduced (_reduced_store), else its bytes."""
    nbytes = t.numel() * t.element_size()
    src = torch.frombuffer(bytearray(raw[:nbytes]), dtype=torch.uint8)
    with torch.no_grad(), _internal():
        if t.is_contiguous() and t.device.type == "cpu":
            t.view(-1).view(torch.uint8).copy_(src)
        else:
            t.copy_(src.view(t.dtype).view(t.shape))


def _reduced_store(t):
    """The store of a reduction's result into t: an integer tensor's result
    comes as float32 values (exact integers, _wire) and is converted."""
    if t.dtype in _WIRE:
        return lambda d: _store(t, d)

    def store(d):
        v = torch.frombuffer(bytearray(d[:t.numel() * 4]), dtype=torch.float32)
        with torch.no_grad(), _internal():
            big = v.abs().max().item() if v.numel() else 0
            if big > _INT_EXACT:
                raise RuntimeError("the %s result reaches %.0f, past 2^24, where the machine's "
                                   "float32 is no longer exact for integers" % (t.dtype, big))
            t.copy_(v.view(t.shape).to(t.dtype))
    return store


_REDUCE = None


def _reduce_name(op):
    global _REDUCE
    if _REDUCE is None:
        _REDUCE = [(dist.ReduceOp.SUM, "sum"), (dist.ReduceOp.MAX, "max"),
                   (dist.ReduceOp.MIN, "min")]
        if hasattr(dist.ReduceOp, "AVG"):
            _REDUCE.append((dist.ReduceOp.AVG, "avg"))
    for k, name in _REDUCE:
        if op == k:
            return name
    raise RuntimeError("kbsim: reduction %s is not supported (SUM, MAX, MIN, AVG)" % op)


_COSTING = []  # the active costing contexts of this process, innermost last
_COST_CACHE = {}


def op_cost_ns(unit, dtype, a, b=0, c=0):
    """ns the rank's PE takes for one GEMM (unit "gemm", a x b x c = M x N x K)
    or one PE_MATH op ("add", "mul", "exp", ...: a elements), by the
    component's own closed form, asked of the server (operation cost)."""
    key = (unit, dtype, a, b, c)
    ns = _COST_CACHE.get(key)
    if ns is None:
        meta, _ = connection().call(OP["cost"], _s2(unit) + _s2(dtype)
                                    + struct.pack("<QQQ", a, b, c))
        ns = _COST_CACHE[key] = struct.unpack("<dQ", meta)[0]
    return ns


# What each aten operation costs on the rank's PE (decision 0066): the
# PE_MATH ops that compute it, each charged kb_math_time over a number of
# elements ("out": the operation's first output, "in": its first input,
# "rows": the per-row statistics of a normalisation). GEMMs (mm, bmm, addmm,
# baddbmm) are PE_GEMM's (_ATEN_GEMM). PE_MATH has units for add, sub, mul,
# div, maximum, minimum, fma, clamp, exp, log, softmax and sum; what it has
# no unit for is charged as the ops that compute it:
#   sigmoid x = 1 / (1 + e^-x)            mul, exp, add, div
#   tanh x    = 2 sigmoid(2x) - 1         mul, exp, add, div, fma
#   gelu x    ~ x sigmoid(1.702 x)        mul, exp, add, div, mul (either form of gelu)
#   silu x    = x sigmoid(x)              mul, exp, add, div, mul
#   x^p, sqrt, rsqrt = e^(p ln x)         log, mul, exp (x^2: mul; x^1: nothing)
#   layer_norm: mean and variance (sum, sub, mul, sum over the input), 1/sqrt(var + eps)
#   over the rows (add, log, mul, exp), normalise (mul), scale and shift (fma)
# A reduction (sum, mean, amax, ...) is charged over its input's elements.
_SIGMOID = ("mul", "exp", "add", "div")
_ATEN_GEMM = {"mm", "bmm", "addmm", "baddbmm"}


def _ew(*ops):
    """Element-wise: every op over the output's elements."""
    return lambda args, out: [(op, "out") for op in ops]


def _red(*ops):
    """A reduction: every op over the input's elements."""
    return lambda args, out: [(op, "in") for op in ops]


def _mean(args, out):
    return [("sum", "in"), ("div", "out")]


def _mse_loss(args, out):
    """(x - y)^2, then summed (reduction 2) or averaged (1, the default), or not (0)."""
    how = args[2] if len(args) > 2 else 1
    return [("sub", "in"), ("mul", "in")] + ([("sum", "in")] if how else []) \
        + ([("div", "out")] if how == 1 else [])


def _pow(args, out):
    p = args[1] if len(args) > 1 else None
    if isinstance(p, (int, float)) and not isinstance(p, bool):
        if p == 1:
            return []
        if p == 2:
            return [("mul", "out")]
    return [("log", "out"), ("mul", "out"), ("exp", "out")]


def _max_min(unit):
    """max / min: element-wise of two tensors, else a reduction of one."""
    def cost(args, out):
        if len(args) > 1 and isinstance(args[1], torch.Tensor):
            return [(unit, "out")]
        return [(unit, "in")]
    return cost


def _layer_norm(args, out):
    ops = [("sum", "in"), ("sub", "in"), ("mul", "in"), ("sum", "in"),
           ("add", "rows"), ("log", "rows"), ("mul", "rows"), ("exp", "rows"), ("mul", "in")]
    if len(args) > 2 and args[2] is not None:  # weight (and bias): one fma
        ops.append(("fma", "in"))
    return ops


def _group_norm(args, out):
    # native_group_norm(input, weight, bias, N, C, HxW, group, eps): layer
    # norm's ops with the N x group groups as rows; the weight is args[1]
    return _layer_norm((args[0], None, args[1]), out)


def _layer_norm_backward(args, out):
    # x^ = (x - mean) rstd; g w; grad_w = sum(g x^); grad_b = sum(g);
    # grad_in = rstd (g w - mean(g w) - x^ mean(g w x^))
    return [("sub", "in"), ("mul", "in"), ("mul", "in"), ("mul", "in"), ("sum", "in"),
            ("sum", "in"), ("sum", "in"), ("mul", "in"), ("sum", "in"), ("fma", "in"),
            ("sub", "in"), ("mul", "in")]


def _prod(xs):
    r = 1
    for x in xs:
        r *= int(x)
    return r


def _conv_gemm(x, w, transposed, groups, out_positions):
    """(M, N, K) of one group's GEMM of a convolution: an output position's
    C_out/g values from its C_in/g * taps inputs (transposed: an input
    position's contributions to C_out/g * taps outputs)."""
    taps = _prod(w.shape[2:])
    if transposed:  # w: (C_in, C_out/g, *k)
        return x.numel() // max(x.shape[1], 1), w.shape[1] * taps, w.shape[0] // groups
    return out_positions, w.shape[0] // groups, w.shape[1] * taps  # w: (C_out, C_in/g, *k)


def _convolution(args, out):
    # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
    # groups): per group a GEMM, M output positions x C_out/g x (C_in/g * taps)
    x, w = args[0], args[1]
    transposed, groups = bool(args[6]), int(args[8])
    m, n, k = _conv_gemm(x, w, transposed, groups, out.numel() // max(out.shape[1], 1))
    return [("gemm", (groups, m, n, k))] + ([("add", "out")] if args[2] is not None else [])


def _convolution_backward(args, out):
    # convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation,
    # transposed, output_padding, groups, output_mask): the input's gradient
    # (M x K from M x N by N x K), the weight's (N x K from N x M by M x K), the bias's (a sum)
    g, x, w = args[0], args[1], args[2]
    transposed, groups, mask = bool(args[7]), int(args[9]), args[10]
    m, n, k = _conv_gemm(x, w, transposed, groups, g.numel() // max(g.shape[1], 1))
    return (([("gemm", (groups, m, k, n))] if mask[0] else [])
            + ([("gemm", (groups, n, k, m))] if mask[1] else [])
            + ([("sum", g.numel())] if mask[2] else []))


def _batch_norm(args, out):
    # native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
    # eps): training as layer_norm over the channels' statistics; eval from the running ones
    x, w, training = args[0], args[1], bool(args[5])
    c = x.shape[1] if x.dim() > 1 else 1
    rstd = [("add", c), ("log", c), ("mul", c), ("exp", c)]
    ops = ([("sum", "in"), ("sub", "in"), ("mul", "in"), ("sum", "in")] + rstd + [("mul", "in")]
           if training else rstd + [("sub", "in"), ("mul", "in")])
    return ops + ([("fma", "in")] if w is not None else [])


def _pool(unit, dims):
    """max / avg pooling over windows of taps elements: unit over out * taps
    (avg: and a div of each output)."""
    def cost(args, out):
        k = list(args[1]) if isinstance(args[1], (list, tuple)) else [args[1]]
        taps = _prod(k) if len(k) == dims else int(k[0]) ** dims
        n = _first_tensor(out).numel() * taps
        return [(unit, n)] + ([("div", "out")] if unit == "add" else [])
    return cost


def _pool_backward(unit, dims):
    """max: each gradient added where its maximum was; avg: spread over its window."""
    def cost(args, out):
        g = args[0]
        if unit == "add":
            return [("add", g.numel())]
        k = list(args[2]) if isinstance(args[2], (list, tuple)) else [args[2]]
        taps = _prod(k) if len(k) == dims else int(k[0]) ** dims
        return [("div", g.numel()), ("add", g.numel() * taps)]
    return cost


def _nll_loss(args, out):
    # nll_loss_forward(input, target, weight, reduction, ignore_index): the
    # target's entries picked and summed (mean: and a div)
    return [("sum", args[1].numel())] + ([("div", 1)] if int(args[3]) == 1 else [])


def _root_out():
    """A root of every output element (square or p-th): e^(ln x / p)."""
    return [("log", "out"), ("mul", "out"), ("exp", "out")]


def _vector_norm(args, out):
    """linalg_vector_norm(x, ord=2, ...), norm(x, p=2, ...): the p-norm
    over the input. |x| is mul + maximum (as abs), x^p log mul exp (as pow)."""
    p = args[1] if len(args) > 1 and args[1] is not None else 2
    p = float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else 2.0
    if p == 2:
        return [("mul", "in"), ("sum", "in")] + _root_out()
    if p == 1:
        return [("mul", "in"), ("maximum", "in"), ("sum", "in")]
    if p == 0:  # the count of non-zeros: a comparison, summed
        return [("sub", "in"), ("sum", "in")]
    if p in (float("inf"), float("-inf")):
        return [("mul", "in"), ("maximum", "in"), ("maximum" if p > 0 else "minimum", "in")]
    return [("mul", "in"), ("maximum", "in"), ("log", "in"), ("mul", "in"), ("exp", "in"),
            ("sum", "in")] + _root_out()


def _var(args, out):
    # the mean (sum, div), the deviations squared (sub, mul), summed and divided
    return [("sum", "in"), ("div", "out"), ("sub", "in"), ("mul", "in"), ("sum", "in"),
            ("div", "out")]


def _sdpa(args, out):
    # _scaled_dot_product_attention_forward(q, k, v, attn_mask, dropout_p,
    # need_attn_weights, is_causal) of torch 1.13, one operation: q scaled
    # (mul), the scores q k^T (a GEMM per batch, L x S x E), a mask added,
    # softmax over the L x S scores, dropout's mask applied, then scores v
    # (L x Ev x S)
    q, k, v = args[0], args[1], args[2]
    L, E, S, Ev = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]
    batch = q.numel() // max(L * E, 1)
    scores = batch * L * S
    ops = [("mul", q.numel()), ("gemm", (batch, L, S, E))]
    if len(args) > 3 and isinstance(args[3], torch.Tensor):
        ops.append(("add", scores))
    ops.append(("softmax", scores))
    if len(args) > 4 and isinstance(args[4], (int, float)) and args[4] > 0:
        ops.append(("mul", scores))
    ops.append(("gemm", (batch, L, Ev, S)))
    return ops


_ATEN_COST = {
    "add": _ew("add"), "sub": _ew("sub"), "rsub": _ew("sub"), "mul": _ew("mul"),
    "div": _ew("div"), "maximum": _ew("maximum"), "minimum": _ew("minimum"),
    "exp": _ew("exp"), "log": _ew("log"), "addcmul": _ew("fma"), "addcdiv": _ew("div", "fma"),
    "lerp": _ew("fma"), "neg": _ew("mul"), "reciprocal": _ew("div"),
    "abs": _ew("mul", "maximum"), "clamp": _ew("clamp"), "hardtanh": _ew("clamp"),
    "relu": _ew("maximum"), "threshold_backward": _ew("mul"),  # relu's mask: a mul
    "leaky_relu": _ew("mul", "maximum"),
    "sigmoid": _ew(*_SIGMOID), "tanh": _ew("mul", "exp", "add", "div", "fma"),
    "gelu": _ew(*_SIGMOID, "mul"), "silu": _ew(*_SIGMOID, "mul"),
    "sigmoid_backward": _ew("sub", "mul", "mul"),      # g y (1 - y)
    "tanh_backward": _ew("fma", "mul"),                # g (1 - y^2)
    "gelu_backward": _ew(*_SIGMOID, "sub", "mul", "fma", "mul"),
    "silu_backward": _ew(*_SIGMOID, "sub", "fma", "mul", "mul"),
    "sqrt": _ew("log", "mul", "exp"), "rsqrt": _ew("log", "mul", "exp"), "pow": _pow,
    "_softmax": _ew("softmax"), "_softmax_backward_data": _ew("softmax"),
    "_log_softmax": _ew("softmax", "log"),
    "_log_softmax_backward_data": _ew("exp", "sum", "fma"),  # g - e^y sum(g)
    "native_dropout": _ew("mul"), "native_dropout_backward": _ew("mul"),  # the mask applied
    "sum": _red("sum"), "mean": _mean, "amax": _red("maximum"),
    "amin": _red("minimum"), "max": _max_min("maximum"), "min": _max_min("minimum"),
    "native_layer_norm": _layer_norm, "native_layer_norm_backward": _layer_norm_backward,
    "mse_loss": _mse_loss, "mse_loss_backward": _ew("sub", "mul", "mul"),
    "convolution": _convolution, "convolution_backward": _convolution_backward,
    "native_batch_norm": _batch_norm, "_native_batch_norm_legit": _batch_norm,
    "native_batch_norm_backward": _layer_norm_backward,
    "native_group_norm": _group_norm, "native_group_norm_backward": _layer_norm_backward,
    "max_pool2d_with_indices": _pool("maximum", 2), "max_pool3d_with_indices": _pool("maximum", 3),
    "avg_pool2d": _pool("add", 2), "avg_pool3d": _pool("add", 3),
    "max_pool2d_with_indices_backward": _pool_backward("add", 2),
    "max_pool3d_with_indices_backward": _pool_backward("add", 3),
    "avg_pool2d_backward": _pool_backward("div", 2), "avg_pool3d_backward": _pool_backward("div", 3),
    "_adaptive_avg_pool2d": _mean, "_adaptive_avg_pool3d": _mean,
    "_adaptive_avg_pool2d_backward": _ew("div"), "_adaptive_avg_pool3d_backward": _ew("div"),
    "nll_loss_forward": _nll_loss, "nll_loss2d_forward": _nll_loss,
    "nll_loss_backward": lambda args, out: [("mul", args[2].numel())],
    "nll_loss2d_backward": lambda args, out: [("mul", args[2].numel())],
    "embedding_dense_backward": lambda args, out: [("add", args[0].numel())],
    # a comparison or logical op is one element-wise op of two operands (as
    # sub), a select of three (where, masked_fill) an fma-class op
    "eq": _ew("sub"), "ne": _ew("sub"), "lt": _ew("sub"), "le": _ew("sub"), "gt": _ew("sub"),
    "ge": _ew("sub"), "logical_and": _ew("sub"), "logical_or": _ew("sub"),
    "logical_not": _ew("sub"), "where": _ew("fma"), "masked_fill": _ew("fma"),
    "remainder": _ew("div", "fma"), "fmod": _ew("div", "fma"), "floor_divide": _ew("div"),
    "isnan": _ew("sub"), "isinf": _ew("sub"), "bitwise_and": _ew("sub"),
    "bitwise_or": _ew("sub"), "bitwise_xor": _ew("sub"), "bitwise_not": _ew("sub"),
    "tril": _ew("fma"), "triu": _ew("fma"), "nan_to_num": _ew("sub", "fma"),
    # more reductions and element-wise functions, as the ops that compute them
    "argmax": _red("maximum"), "argmin": _red("minimum"), "all": _red("minimum"),
    "any": _red("maximum"), "prod": _red("mul"), "cumsum": _ew("add"),
    "linalg_vector_norm": _vector_norm, "norm": _vector_norm, "var": _var,
    "std": lambda args, out: _var(args, out) + _root_out(),
    "logsumexp": lambda args, out: [("maximum", "in"), ("sub", "in"), ("exp", "in"),
                                    ("sum", "in"), ("log", "out"), ("add", "out")],
    "clamp_min": _ew("maximum"), "clamp_max": _ew("minimum"),
    "log1p": _ew("add", "log"), "expm1": _ew("exp", "sub"), "exp2": _ew("mul", "exp"),
    "softplus": _ew("exp", "add", "log"),                 # ln(1 + e^x)
    "hardsigmoid": _ew("fma", "clamp"), "hardswish": _ew("fma", "clamp", "mul"),
    "_scaled_dot_product_attention_forward": _sdpa,
    # data movement: one PE_DMA copy of what is written (its bytes, within
    # the memory the rank's tensors live in; kb_dma_time)
    "clone": _ew("copy"), "copy": _ew("copy"), "_to_copy": _ew("copy"), "cat": _ew("copy"),
    "stack": _ew("copy"), "index_select": _ew("copy"), "embedding": _ew("copy"),
    "gather": _ew("copy"), "index": _ew("copy"), "repeat": _ew("copy"), "roll": _ew("copy"),
    "flip": _ew("copy"), "constant_pad_nd": _ew("copy"), "fill": _ew("copy"),
    "arange": _ew("copy"), "upsample_nearest1d": _ew("copy"), "upsample_nearest2d": _ew("copy"),
    "upsample_nearest3d": _ew("copy"),
    "zero": _ew("copy"), "slice_backward": _red("copy"), "select_backward": _red("copy"),
    "index_put": lambda args, out: [("copy", args[2].numel())],
    "scatter": lambda args, out: [("copy", args[3].numel() if len(args) > 3
                                   and isinstance(args[3], torch.Tensor) else args[2].numel())],
    "scatter_add": lambda args, out: [("copy", args[3].numel()), ("add", args[3].numel())],
}

# aten operations that compute nothing: views, shapes, fresh tensors; an
# in-place operation is looked up by its own name (resize_, set_: no
# out-of-place form) and then by its out-of-place one (detach_: detach)
_ATEN_FREE = {
    "view", "_unsafe_view", "_reshape_alias", "reshape", "view_as", "t", "transpose",
    "permute", "expand", "expand_as", "detach", "alias", "as_strided", "slice", "select",
    "squeeze", "unsqueeze", "split", "split_with_sizes", "chunk", "unbind", "narrow",
    "diagonal", "unfold", "movedim", "empty", "empty_like", "empty_strided", "zeros",
    "zeros_like", "ones", "ones_like", "full", "full_like", "new_empty", "new_empty_strided",
    "new_zeros", "new_ones", "new_full", "scalar_tensor", "lift_fresh", "_local_scalar_dense",
    "is_same_size", "_has_compatible_shallow_copy_type", "resize_", "set_", "sym_size",
    "sym_stride", "sym_numel", "sym_storage_offset", "_conj", "_neg_view", "resolve_conj",
    "resolve_neg", "result_type", "_record_function_enter", "_record_function_enter_new",
    "_record_function_exit",
}


# torch functions charged at the function level, by their shapes (_gemm_shapes)
_GEMM_FUNCTIONS = {"matmul", "mm", "bmm", "__matmul__", "__rmatmul__", "linear", "addmm",
                   "baddbmm"}
# torch functions that read a tensor on the host (printing, conversions):
# not the program's compute, not charged
_HOST_SIDE = {"__repr__", "__str__", "__format__", "tolist", "item", "numpy", "__array__",
              "__bool__", "__int__", "__float__", "__index__", "__contains__", "__reduce_ex__",
              "__deepcopy__", "__setstate__", "__hash__", "__len__", "__iter__", "__get__"}


def _numel(x):
    return x.numel() if isinstance(x, torch.Tensor) else 1


def _gemm_shapes(name, args, out):
    """(batch, M, N, K) of a matmul-like call, or None."""
    if name in ("matmul", "mm", "bmm", "__matmul__", "__rmatmul__"):
        a, b = (args[1], args[0]) if name == "__rmatmul__" else (args[0], args[1])
        K = a.shape[-1]
        M = a.shape[-2] if a.dim() > 1 else 1
        N = b.shape[-1] if b.dim() > 1 else 1
        return (max(_numel(out) // max(M * N, 1), 1), M, N, K)
    if name == "linear":
        x, w = args[0], args[1]
        K, N = w.shape[-1], (w.shape[0] if w.dim() > 1 else 1)
        return (1, max(x.numel() // K, 1), N, K)
    if name in ("addmm", "baddbmm"):
        a, b = args[1], args[2]
        M, N = a.shape[-2], b.shape[-1]
        return (max(_numel(out) // (M * N), 1), M, N, a.shape[-1])
    return None


def _aten_gemm(name, args, out):
    """(batch, M, N, K) of an aten GEMM (mm, bmm, addmm, baddbmm)."""
    a, b = (args[1], args[2]) if name in ("addmm", "baddbmm") else (args[0], args[1])
    M, N, K = a.shape[-2], b.shape[-1], a.shape[-1]
    return max(out.numel() // max(M * N, 1), 1), M, N, K


def _first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for o in out:
            if isinstance(o, torch.Tensor):
                return o
    return None


def _out_of_place(name):
    """An in-place aten operation's out-of-place name (add_: add); a dunder
    (__iand__) and any other name stay as they are."""
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def _aten_ns(name, args, out):
    """ns an aten operation (its name as aten has it, add_ for the in-place
    add) costs on the rank's PE (_ATEN_GEMM, _ATEN_COST), 0 for one that
    computes nothing (_ATEN_FREE) or has an empty output, None for one with
    no rule (random numbers, ...)."""
    if name in _ATEN_FREE:
        return 0.0
    name = _out_of_place(name)
    if name in _ATEN_FREE:
        return 0.0
    if name.startswith("_foreach_") and args and isinstance(args[0], (list, tuple)):
        # a list operation (optimizers' foreach=True): its operation on each tensor
        each = name[len("_foreach_"):]
        ts, total = list(args[0]), 0.0
        for i, t in enumerate(ts):
            a = tuple(x[i] if isinstance(x, (list, tuple)) and len(x) == len(ts) else x
                      for x in args)
            ns = _aten_ns(each, a, t)
            if ns is None:
                return None
            total += ns
        return total
    first = _first_tensor(out)
    if first is None or first.numel() == 0:
        return 0.0
    dt = _WIRE.get(first.dtype, "f32")
    if name in _ATEN_GEMM:
        batch, m, n, k = _aten_gemm(name, args, first)
        ns = batch * op_cost_ns("gemm", dt, m, n, k)
        if name in ("addmm", "baddbmm"):
            ns += op_cost_ns("add", dt, first.numel())
        return ns
    rule = _ATEN_COST.get(name)
    if rule is None:
        return None
    size = {"out": first.numel()}
    size["in"] = args[0].numel() if args and isinstance(args[0], torch.Tensor) else size["out"]
    stats = [o for o in out if isinstance(o, torch.Tensor)] if isinstance(out, (tuple, list)) else []
    size["rows"] = stats[1].numel() if len(stats) > 1 else size["out"]
    ns = 0.0
    for op, on in rule(args, out):
        if op == "gemm":  # on: (times, M, N, K)
            times, m, n, k = on
            if times > 0 and m > 0 and n > 0 and k > 0:
                ns += times * op_cost_ns("gemm", dt, m, n, k)
            continue
        k = size[on] if isinstance(on, str) else int(on)
        if k > 0 and op == "copy":  # PE_DMA: k elements' bytes within the tensors' memory
            ns += op_cost_ns("copy", "f32", k * first.element_size())
        elif k > 0:
            ns += op_cost_ns(op, dt, k)
    return ns


class _Aten(TorchDispatchMode):
    """Charges the aten operations that run while it is active, by _aten_ns:
    autograd's backward (label None: each as 'backward.<op>'), or a torch
    function with no rule of its own at the function level (label: its
    name; its aten operations summed into one charge, kept by op in
    costing.parts). An operation with no rule is counted in
    costing.uncharged."""

    def __init__(self, cost, label=None):
        super().__init__()
        self.cost, self.label = cost, label
        self.ns, self.parts = 0.0, {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(_LOCAL, "internal", 0):
            return out
        name = func.overloadpacket.__name__
        ns = _aten_ns(name, args, out)
        if ns is None:
            self.cost._not_charged(name if self.label else "backward." + name)
        elif self.label is None:
            if ns > 0:
                self.cost._charge("backward." + name, ns)
        elif ns > 0:
            self.ns += ns
            p = self.parts.setdefault(name, {"count": 0, "ns": 0.0})
            p["count"] += 1
            p["ns"] += ns
        return out


class costing(torch.overrides.TorchFunctionMode):
    """Opt-in compute costing on this rank's simulated PE:

        with kbsim.torch.costing() as cost:
            y = model(x); dist.all_reduce(y)
        cost.total_ns, cost.compute_ns, cost.breakdown  # {'linear': {'count', 'ns'}, ...}

    matmul / mm / bmm / linear / addmm are charged to PE_GEMM (kb_gemm_time
    per batch element; linear's bias and addmm's addition to PE_MATH add).
    Every other torch function is charged by the aten operations it runs
    (seen by a TorchDispatchMode), each as the PE_MATH ops that compute it
    (_ATEN_COST: add, relu, softmax, sum, layer_norm, gelu, dropout, ...;
    decision 0066), summed under the function's name (the parts by aten
    operation in cost.parts); data movement (cat, clone, index_select, ...)
    as one PE_DMA copy of the bytes written (kb_dma_time); an operation with
    no rule (random numbers, ...) costs nothing and is counted in
    cost.uncharged, which report() lists. The backend's own copies (wire
    bytes) are not charged. The times are the closed forms of the rank's own
    components, asked of the server
    (op_cost_ns). Compute advances the rank's clock (clock_ns); a collective
    issued at clock t starts at max(t, the rank's previous collective's
    end) and lasts its simulated latency; wait() (and a sync call) moves
    the clock to its end, so an async collective overlaps the compute done
    before its wait. The waits of C++ callers count alike (DDP's broadcasts
    at its construction and of its buffers and bucket indices in a forward:
    the step goes on after they end). loss.backward() (Tensor.backward),
    torch.autograd.backward and torch.autograd.grad are charged too:
    autograd's aten operations (mm, bmm, addmm, element-wise, sum,
    threshold_backward) as 'backward.<op>', seen by a TorchDispatchMode
    while they run (backward=False turns that off); collectives issued
    meanwhile (DDP's gradient buckets, a comm hook's all_reduce) overlap the
    rest of the backward and are waited at its end. The two autograd functions are
    seen as attributes of torch.autograd while a costing context is open (a
    name imported from it earlier is the original)."""

    def __init__(self, backward=True):
        super().__init__()
        self.backward = backward
        self.in_backward = False
        self.in_function = False  # a function being charged by its aten operations
        self.backward_end_ns = None  # latest end of the collectives issued in a backward
        self.clock_ns = 0.0
        self.comm_end_ns = 0.0
        self.compute_ns = 0.0
        self.comm_ns = 0.0
        self.breakdown = {}
        self.parts = {}  # function -> {aten operation: {'count', 'ns'}}
        self.uncharged = {}  # operation -> times it ran with no rule (costs nothing)
        self.backward_futures = []  # their futures, waited at the backward's end
        self.lock = threading.Lock()

    def __enter__(self):
        if not _COSTING:  # torch.autograd.backward / grad: not torch functions
            torch.autograd.backward, torch.autograd.grad = _autograd_backward, _autograd_grad
        _COSTING.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        _COSTING.remove(self)
        if not _COSTING:
            torch.autograd.backward, torch.autograd.grad = _AUTOGRAD
        return super().__exit__(*exc)

    def _charge(self, name, ns, parts=None):
        with self.lock:
            self.clock_ns += ns
            self.compute_ns += ns
            b = self.breakdown.setdefault(name, {"count": 0, "ns": 0.0})
            b["count"] += 1
            b["ns"] += ns
            for op, v in (parts or {}).items():
                q = self.parts.setdefault(name, {}).setdefault(op, {"count": 0, "ns": 0.0})
                q["count"] += v["count"]
                q["ns"] += v["ns"]

    def _not_charged(self, name):
        with self.lock:
            self.uncharged[name] = self.uncharged.get(name, 0) + 1

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "backward" and self.backward:
            return self._backward(func, args, kwargs)
        if name in _HOST_SIDE or self.in_backward or self.in_function \
                or getattr(_LOCAL, "internal", 0) \
                or isinstance(func, torch._ops.OpOverload):
            # (inside a backward or a charged function, _Aten sees the operations)
            return func(*args, **kwargs)
        if name in _GEMM_FUNCTIONS:
            out = func(*args, **kwargs)
            shape = _gemm_shapes(name, args, out) if isinstance(out, torch.Tensor) else None
            if shape is not None:
                dt = _WIRE.get(out.dtype, "f32")
                batch, m, n, k = shape
                ns = batch * op_cost_ns("gemm", dt, m, n, k)
                if name in ("addmm", "baddbmm") or (name == "linear" and (
                        (len(args) > 2 and args[2] is not None)
                        or kwargs.get("bias") is not None)):
                    ns += op_cost_ns("add", dt, out.numel())
                self._charge(name, ns)
            return out
        # any other function: by the aten operations it runs
        mode = _Aten(self, name)
        self.in_function = True
        try:
            with mode:
                out = func(*args, **kwargs)
        finally:
            self.in_function = False
        if mode.parts:
            self._charge(name, mode.ns, mode.parts)
        return out

    def _backward(self, func, args, kwargs):
        """loss.backward(): autograd's operations charged (_Aten); the
        collectives issued meanwhile (DDP's gradient buckets from C++, a comm
        hook's all_reduce from Python) start at the clock of their issue,
        overlapping the rest of the backward, and are waited at its end, as
        DDP's reducer does (on their futures, unseen here)."""
        self.in_backward, self.backward_end_ns = True, None
        try:
            with _Aten(self):
                out = func(*args, **kwargs)
        finally:
            self.in_backward = False
        # their replies complete on the reader thread, which sets
        # backward_end_ns before completing each future: wait for them all
        for fut in list(self.backward_futures):
            try:
                fut.wait()
            except Exception:  # noqa: BLE001 - the caller sees it on its own wait
                pass
        self.backward_futures = []
        if self.backward_end_ns is not None:
            self._waited(self.backward_end_ns)
        return out

    def _autograd(self, func, args, kwargs):
        """torch.autograd.backward / grad under this costing."""
        if not self.backward or self.in_backward:  # (Tensor.backward calls it)
            return func(*args, **kwargs)
        return self._backward(func, args, kwargs)

    # collectives (called by the process group)
    def _completed(self, rec, issue_ns):
        with self.lock:
            start = max(issue_ns, self.comm_end_ns)
            rec["issue_ns"], rec["model_start_ns"] = issue_ns, start
            rec["model_end_ns"] = self.comm_end_ns = start + rec["latency_ns"]
            self.comm_ns += rec["latency_ns"]

    def _waited(self, end_ns):
        with self.lock:
            self.clock_ns = max(self.clock_ns, end_ns)

    def synchronize(self):
        """Waits (in the model) for every collective issued so far: the clock
        moves to the last one's end (for collectives whose wait is not a
        Work's: a future taken and waited outside a backward). -> clock_ns"""
        self._waited(self.comm_end_ns)
        return self.clock_ns

    @property
    def total_ns(self):
        return max(self.clock_ns, self.comm_end_ns)

    def report(self):
        """A table: per op its count and ns (a function charged by several
        aten operations: each of them below it), then compute, collectives,
        total, and the operations that ran with no rule (not charged)."""
        rows = []
        for k, v in sorted(self.breakdown.items(), key=lambda kv: (-kv[1]["ns"], kv[0])):
            rows.append((k, v))
            parts = self.parts.get(k, {})
            if len(parts) > 1:
                for op, q in sorted(parts.items(), key=lambda kv: (-kv[1]["ns"], kv[0])):
                    rows.append(("  " + op, q))
        w = max([12] + [len(k) for k, _ in rows])
        lines = ["%-*s %6s %14s" % (w, "op", "count", "ns")]
        lines += ["%-*s %6d %14.3f" % (w, k, v["count"], v["ns"]) for k, v in rows]
        lines.append("compute %.3f ns, collectives %.3f ns, total %.3f ns"
                     % (self.compute_ns, self.comm_ns, self.total_ns))
        if self.uncharged:
            lines.append("not charged (no rule: random numbers, ...; "
                         "decision 0066): " + ", ".join(
                             "%s %d" % kv for kv in sorted(self.uncharged.items())))
        return "\n".join(lines)


def _from_python():
    """True when a torch.distributed function (Python) called the process
    group, false when C++ did (DDP's constructor and reducer,
    _broadcast_coalesced, ...): the Work goes back to C++ and must be held
    (_Work.keep)."""
    f = sys._getframe(1)
    while f is not None and f.f_globals.get("__name__") == __name__:
        f = f.f_back  # out of this module: the process group's caller
    return f is not None and f.f_globals.get("__name__") == "torch.distributed.distributed_c10d"


_KEPT = {}  # id -> the _Work of a C++ caller, until that caller is done with it (_Work.keep)
_KEPT_LOCK = threading.Lock()


class _Work(dist.Work):
    """Every collective's Work. wait() raises the collective's error and moves
    a costing clock to the collective's end; get_future() is a torch Future
    completed with the output tensors.

    A C++ caller (DDP's constructor and reducer, _broadcast_coalesced) holds
    only the C++ part of this object. pybind11 calls the Python wait() and
    get_future() only while the Python object lives; without it the base
    Work's wait() blocks forever and its getFuture() raises. keep() holds
    the object until the caller's first wait() returns, or, once the
    caller has taken the future (the reducer, which never waits on the
    Work), until the collective completes. A C++ wait() that gave True on a
    failed collective (the C++ work of _create_work_from_future) let DDP's
    constructor go on with parameters that were never broadcast."""

    def __init__(self, fut, kind):
        super().__init__()
        self.fut, self.kind, self.error = fut, kind, None
        self.cost, self.model_end_ns = None, None
        self.source = None  # recv from any source: the sender's rank in the group
        self.kept = False
        self.derived = None  # get_future()'s Future
        self.lock = threading.Lock()

    def keep(self):
        self.kept = True
        with _KEPT_LOCK:
            _KEPT[id(self)] = self

    def _release(self):
        if self.kept:
            with _KEPT_LOCK:
                _KEPT.pop(id(self), None)

    def wait(self, timeout=None):
        try:
            try:
                self.fut.wait()
            except Exception:  # noqa: BLE001 - self.error says it
                pass
            if self.error is not None:
                raise self.error
            if self.cost is not None and self.model_end_ns is not None:
                self.cost._waited(self.model_end_ns)
            return True
        finally:
            self._release()

    def get_future(self):
        """A Future derived from the collective's: the same value, but a
        failure is a C++ error in it, which value() raises. A Python Future's
        set_exception stores the exception as its value, which DDP's reducer
        took for the gradients: a SIGSEGV in Reducer::finalize_backward from
        its default hook, "Unable to cast kbsim all_reduce ... to Tensor"
        from a comm hook that returned this future."""
        if self.kept:  # (first: the caller, woken by the derived Future, finds it released)
            self.fut.add_done_callback(lambda f: self._release())
        with self.lock:
            if self.derived is None:
                self.derived = self.fut.then(lambda f: f.value())
        return self.derived

    def _source_rank(self):
        """The sender of a receive from any source (dist.recv without src asks it)."""
        self.wait()
        if self.source is None:
            raise RuntimeError("kbsim: not a receive from any source")
        return self.source

    def is_completed(self):
        return self.fut.done()

    def is_success(self):
        return self.fut.done() and self.error is None

    def exception(self):
        return self.error

    def result(self):
        self.wait()
        return self.fut.value()

    def synchronize(self):
        self.wait()


class ProcessGroupKbsim(dist.ProcessGroup):
    """A process group whose collectives run on the simulated machine."""

    def __init__(self, rank, size):
        super().__init__(rank, size)
        self._ranks = None

    def getBackendName(self):
        return BACKEND

    def _root(self, opts, what):
        """The group rank of a rooted collective's root (opts.rootRank), checked:
        an index past the group raised IndexError, a negative one picked a
        rank from the end."""
        k = opts.rootRank if opts is not None else 0
        if not 0 <= k < self.size():
            raise RuntimeError("kbsim %s: root rank %d is outside the group of %d ranks (0..%d)"
                               % (what, k, self.size(), self.size() - 1))
        return k

    def _group(self):
        """The group's global ranks, in group-rank order."""
        if self._ranks is None:
            try:
                m = dist.distributed_c10d._pg_group_ranks[self]  # global -> group rank
                ranks = sorted(m, key=m.get)
            except (KeyError, AttributeError):
                ranks = list(range(self.size()))
            self._ranks = ranks
        return self._ranks

    # One collective: tensors written, the request, a Future completed with
    # `value` when the reply comes (its data stored by `on_data`).
    def _run(self, kind, fields, inputs, out_spec, value, on_data, nbytes, flags=True,
             group=None):
        conn = connection()
        p2p = group is not None  # send, recv: no group in the arguments
        group = group or self._group()
        held = []
        try:
            for dt, n, raw in inputs:
                tid = conn.take(n, dt)
                held.append((n, dt, tid))
                if raw is not None:  # (recv: nothing to write)
                    conn.call(OP["write"], struct.pack("<IQ", tid, 0), raw)
            if out_spec:
                n, dt = out_spec
                held.append((n, dt, conn.take(n, dt)))
        except Exception:
            for n, dt, tid in held:
                conn.give(n, dt, tid)
            raise
        tids = [h[2] for h in held]
        meta = (b"" if p2p else _group(group)) + fields(tids)
        if flags:
            meta += struct.pack("<B", FLAG_RETURN_DATA if on_data else 0)
        fut = Future()
        work = _Work(fut, kind)
        from_cpp = not _from_python()
        cost = _COSTING[-1] if _COSTING else None
        issue_ns = cost.clock_ns if cost is not None else 0.0
        work.cost = cost
        # issued during a backward, by C++ (DDP's gradient buckets) or by Python
        # (a comm hook's all_reduce): DDP's reducer waits for them at the
        # backward's end on their futures, which costing does not see, so
        # costing._backward waits for them there itself
        in_backward = cost is not None and cost.in_backward
        if in_backward:
            cost.backward_futures.append(fut)

        def done(status, rmeta, rdata):
            for n, dt, tid in held:
                conn.give(n, dt, tid)
            try:
                rmeta, rdata = _result(status, rmeta, rdata)
                start, end, lat = struct.unpack_from("<ddd", rmeta)
                members = list(group)
                if len(rmeta) == 28:  # a receive from any source: who sent
                    (src,) = struct.unpack_from("<I", rmeta, 24)
                    if src not in self._group():
                        raise RuntimeError("recv from any source: rank %d, outside the group %s, "
                                           "sent it" % (src, self._group()))
                    members[0] = src
                    work.source = self._group().index(src)
                if on_data:
                    on_data(rdata)
                rec = dict(op=kind, group=members, bytes=nbytes, start_ns=start,
                           end_ns=end, latency_ns=lat)
                if cost is not None:
                    cost._completed(rec, issue_ns)
                    work.model_end_ns = rec["model_end_ns"]
                    if in_backward:
                        with cost.lock:
                            cost.backward_end_ns = max(cost.backward_end_ns or 0.0,
                                                       rec["model_end_ns"])
                _RECORDS.append(rec)
            except Exception as e:  # noqa: BLE001 - handed to the waiter
                work.error = RuntimeError("kbsim %s over ranks %s: %s" % (kind, group, e))
                fut.set_exception(work.error)
                return
            fut.set_result(value)
        conn.submit(OP[kind], meta, b"", done)
        if from_cpp:
            work.keep()
        return work

    @staticmethod
    def _one(tensors, what):
        if len(tensors) != 1:
            raise RuntimeError("kbsim %s: one tensor per rank, got %d" % (what, len(tensors)))
        return tensors[0]

    def _nothing(self, kind, tensors, root=None):
        """A collective of an empty tensor: nothing to move, a no-op (as
        torch's own backends), completed at once; not simulated, no record."""
        if root is not None:
            self._root(root, kind)
        fut = Future()
        fut.set_result(tensors)
        # a C++ caller: a Work all in C++ (nothing can fail, nothing to hold)
        return _Work(fut, kind) if _from_python() else _create_work_from_future(fut)

    def allreduce(self, tensors, opts=None):
        t = self._one(tensors, "all_reduce")
        if t.numel() == 0:
            _reduce_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
            return self._nothing("all_reduce", tensors)
        op = _reduce_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        dt, n, raw = _wire(t, True, op)
        algo = _ALGORITHMS.get("all_reduce", "")
        return self._run("all_reduce", lambda tid: struct.pack("<I", tid[0]) + _s2(op)
                         + _s2(algo), [(dt, n, raw)], None, tensors,
                         _reduced_store(t), len(raw))

    def broadcast(self, tensors, opts=None):
        t = self._one(tensors, "broadcast")
        if t.numel() == 0:
            return self._nothing("broadcast", tensors, opts)
        src = self._group()[self._root(opts, "broadcast")]
        dt, n, raw = _wire(t, False)
        algo = _ALGORITHMS.get("broadcast", "")
        return self._run("broadcast", lambda tid: struct.pack("<II", tid[0], src) + _s2(algo),
                         [(dt, n, raw)], None, tensors, lambda d: _store(t, d), len(raw))

    def _gather(self, inp, outs, value, base=None):
        dt, n, raw = _wire(inp, False)
        N = self.size()
        algo = _ALGORITHMS.get("all_gather", "")
        step = n * _ESIZE[dt]

        def store(d):
            if base is not None:
                flat = b"".join(d[k * step:k * step + len(raw)] for k in range(N))
                _store(base, flat)
            else:
                for k, o in enumerate(outs):
                    _store(o, d[k * step:(k + 1) * step])
        return self._run("all_gather", lambda tid: struct.pack("<II", tid[0], tid[1])
                         + _s2(algo), [(dt, n, raw)], (N * n, dt), value, store, len(raw))

    def allgather(self, output_tensors, input_tensors, opts=None):
        inp = self._one(input_tensors, "all_gather")
        outs = self._one(output_tensors, "all_gather")
        if len(outs) != self.size() or any(o.numel() != inp.numel() or o.dtype != inp.dtype
                                           for o in outs):
            raise RuntimeError("kbsim all_gather: needs %d outputs like the input"
                               % self.size())
        return self._gather(inp, outs, output_tensors)

    def _allgather_base(self, output, input, opts=None):
        if output.numel() != self.size() * input.numel() or output.dtype != input.dtype:
            raise RuntimeError("kbsim all_gather_into_tensor: the output needs %d x %d elements"
                               % (self.size(), input.numel()))
        return self._gather(input, None, [output], base=output)

    def _scatter_reduce(self, out, flat_in, value, op):
        N = self.size()
        op = _reduce_name(op)
        dt, n, raw = _wire(flat_in, True, op)
        if n % N:
            raise RuntimeError("kbsim reduce_scatter: %d elements do not split over %d ranks"
                               % (n, N))
        algo = _ALGORITHMS.get("reduce_scatter", "")
        return self._run("reduce_scatter", lambda tid: struct.pack("<II", tid[0], tid[1])
                         + _s2(op) + _s2(algo), [(dt, n, raw)], (n // N, dt), value,
                         _reduced_store(out), len(raw))

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = self._one(output_tensors, "reduce_scatter")
        ins = self._one(input_tensors, "reduce_scatter")
        if len(ins) != self.size() or any(i.numel() != out.numel() or i.dtype != out.dtype
                                          for i in ins):
            raise RuntimeError("kbsim reduce_scatter: needs %d inputs like the output"
                               % self.size())
        with _internal():
            flat = torch.cat([i.detach().reshape(-1) for i in ins])
        return self._scatter_reduce(out, flat, output_tensors,
                                    opts.reduceOp if opts is not None else dist.ReduceOp.SUM)

    def _reduce_scatter_base(self, output, input, opts=None):
        if input.numel() != self.size() * output.numel():
            raise RuntimeError("kbsim reduce_scatter_tensor: the input needs %d x %d elements"
                               % (self.size(), output.numel()))
        return self._scatter_reduce(output, input.reshape(-1), [output],
                                    opts.reduceOp if opts is not None else dist.ReduceOp.SUM)

    def reduce(self, tensors, opts=None):
        """torch.distributed.reduce: the root's tensor gets the reduction; the
        other members' tensors are left as they were."""
        t = self._one(tensors, "reduce")
        root = self._group()[self._root(opts, "reduce")]
        op = _reduce_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        if t.numel() == 0:
            return self._nothing("reduce", tensors)
        dt, n, raw = _wire(t, True, op)
        algo = _ALGORITHMS.get("reduce", "")
        me = self._group()[self.rank()]
        return self._run("reduce", lambda tid: struct.pack("<II", tid[0], root) + _s2(op)
                         + _s2(algo), [(dt, n, raw)], None, tensors,
                         _reduced_store(t) if me == root else None, len(raw))

    def gather(self, output_tensors, input_tensors, opts=None):
        """torch.distributed.gather: the root's list gets every member's tensor,
        in group order (output_tensors is [] on the other members)."""
        inp = self._one(input_tensors, "gather")
        N = self.size()
        root_g = self._root(opts, "gather")
        root = self._group()[root_g]
        is_root = self.rank() == root_g
        outs = self._one(output_tensors, "gather") if is_root else None
        if is_root and (len(outs) != N or any(o.numel() != inp.numel()
                                             or o.dtype != inp.dtype for o in outs)):
            raise RuntimeError("kbsim gather: the root needs %d outputs like the input" % N)
        if not is_root and output_tensors and any(len(x) for x in output_tensors):
            raise RuntimeError("kbsim gather: only the root gives output tensors")
        dt, n, raw = _wire(inp, False)
        step = n * _ESIZE[dt]
        algo = _ALGORITHMS.get("gather", "")

        def store(d):
            for k, o in enumerate(outs):
                _store(o, d[k * step:(k + 1) * step])
        return self._run("gather", lambda tid: struct.pack(
                             "<III", tid[0], tid[1] if is_root else 0, root) + _s2(algo),
                         [(dt, n, raw)], (N * n, dt) if is_root else None, output_tensors,
                         store if is_root else None, len(raw))

    def scatter(self, output_tensors, input_tensors, opts=None):
        """torch.distributed.scatter: block k of the root's list goes to the
        group's k-th member (input_tensors is [] on the other members)."""
        out = self._one(output_tensors, "scatter")
        N = self.size()
        root_g = self._root(opts, "scatter")
        root = self._group()[root_g]
        is_root = self.rank() == root_g
        odt, on, _ = _wire(out, False)
        inputs = []
        if is_root:
            ins = self._one(input_tensors, "scatter")
            if len(ins) != N or any(i.numel() != out.numel() or i.dtype != out.dtype
                                    for i in ins):
                raise RuntimeError("kbsim scatter: the root needs %d inputs like the output"
                                   % N)
            # block by block: a dtype moved as f32 words is padded per block,
            # as the output is
            raw = b"".join(_wire(i, False)[2] for i in ins)
            inputs = [(odt, len(raw) // _ESIZE[odt], raw)]
        elif input_tensors and any(len(x) for x in input_tensors):
            raise RuntimeError("kbsim scatter: only the root gives input tensors")
        algo = _ALGORITHMS.get("scatter", "")

        def fields(tid):
            tin, tout = (tid[0], tid[1]) if is_root else (0, tid[0])
            return struct.pack("<III", tin, tout, root) + _s2(algo)
        return self._run("scatter", fields, inputs, (on, odt), output_tensors,
                         lambda d: _store(out, d), on * _ESIZE[odt])

    def _exchange(self, inp, out, in_counts, out_counts, value, stores):
        """all_to_all (even counts) or all_to_allv; counts in elements of the
        tensors' dtype, stores(data bytes) puts the result back."""
        dt, n, raw = _wire(inp, False)
        N = self.size()
        if _WIRE.get(inp.dtype) is None:  # moved as f32 words
            es = inp.element_size()
            if any(c * es % 4 for c in list(in_counts) + list(out_counts)):
                raise RuntimeError("kbsim all_to_all: %s blocks must be whole 4-byte words"
                                   % inp.dtype)
            in_counts = [c * es // 4 for c in in_counts]
            out_counts = [c * es // 4 for c in out_counts]
        n_out = max(sum(out_counts), 1)
        if len(set(in_counts)) == 1 and len(set(out_counts)) == 1 \
                and in_counts[0] == out_counts[0] and N * in_counts[0] == n:
            algo = _ALGORITHMS.get("all_to_all", "")
            return self._run("all_to_all", lambda tid: struct.pack("<II", tid[0], tid[1])
                             + _s2(algo), [(dt, n, raw)], (n, dt), value, stores, len(raw))
        algo = _ALGORITHMS.get("all_to_allv", "")
        return self._run("all_to_allv", lambda tid: struct.pack("<III", tid[0], tid[1], N)
                         + struct.pack("<%dQ" % N, *in_counts) + _s2(algo), [(dt, n, raw)],
                         (n_out, dt), value, stores, len(raw))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        N = self.size()

        def counts(t, splits, what):
            rows = t.shape[0] if t.dim() else 1
            per_row = t.numel() // rows if rows else 0
            if not splits:
                if rows % N:
                    raise RuntimeError("kbsim all_to_all_single: %s's first dimension %d does "
                                       "not split over %d ranks" % (what, rows, N))
                return [rows // N * per_row] * N
            if len(splits) != N or sum(splits) != rows:
                raise RuntimeError("kbsim all_to_all_single: %s splits %s for %d rows and %d "
                                   "ranks" % (what, list(splits), rows, N))
            return [k * per_row for k in splits]
        ic = counts(input, input_split_sizes, "the input")
        oc = counts(output, output_split_sizes, "the output")
        return self._exchange(input, output, ic, oc, [output], lambda d: _store(output, d))

    def alltoall(self, output_tensors, input_tensors, opts=None):
        N = self.size()
        if len(input_tensors) != N or len(output_tensors) != N:
            raise RuntimeError("kbsim all_to_all: %d input and %d output tensors for %d ranks"
                               % (len(input_tensors), len(output_tensors), N))
        dts = {t.dtype for t in list(input_tensors) + list(output_tensors)}
        if len(dts) != 1:
            raise RuntimeError("kbsim all_to_all: tensors of one dtype, got %s"
                               % sorted(map(str, dts)))
        with _internal():
            flat = torch.cat([t.detach().reshape(-1) for t in input_tensors])
        ic = [t.numel() for t in input_tensors]
        oc = [t.numel() for t in output_tensors]
        es = flat.element_size()

        def stores(d):
            off = 0
            for t in output_tensors:
                _store(t, d[off:off + t.numel() * es])
                off += t.numel() * es
        return self._exchange(flat, None, ic, oc, output_tensors, stores)

    def send(self, tensors, dst, tag=0):
        t = self._one(tensors, "send")
        me, peer = self._group()[self.rank()], self._group()[dst]
        dt, n, raw = _wire(t, False)
        return self._run("send", lambda tid: struct.pack("<IIQ", peer, tid[0], n),
                         [(dt, n, raw)], None, tensors, None, len(raw), flags=False,
                         group=[me, peer])

    def recv(self, tensors, src, tag=0):
        t = self._one(tensors, "recv")
        me, peer = self._group()[self.rank()], self._group()[src]
        dt, n, raw = _wire(t, False)
        return self._run("recv", lambda tid: struct.pack("<IIQ", peer, tid[0], n),
                         [(dt, n, None)], None, tensors, lambda d: _store(t, d),
                         len(raw), group=[peer, me])

    def recv_anysource(self, tensors, tag=0):
        """A receive from whichever rank sends to this one first (the server matches
        it with the oldest send not yet received); the Work's _source_rank() is the
        sender's rank in the group (dist.recv returns it as a global rank). Tags are
        not matched."""
        t = self._one(tensors, "recv")
        me = self._group()[self.rank()]
        dt, n, raw = _wire(t, False)
        return self._run("recv", lambda tid: struct.pack("<IIQ", ANY_SOURCE, tid[0], n),
                         [(dt, n, None)], None, tensors, lambda d: _store(t, d),
                         len(raw), group=[None, me])

    def barrier(self, opts=None):
        algo = _ALGORITHMS.get("barrier", "")
        return self._run("barrier", lambda tid: _s2(algo), [], None, [], None, 0, flags=False)


_AUTOGRAD = (torch.autograd.backward, torch.autograd.grad)


def _autograd_backward(*args, **kwargs):
    if _COSTING:
        return _COSTING[-1]._autograd(_AUTOGRAD[0], args, kwargs)
    return _AUTOGRAD[0](*args, **kwargs)


def _autograd_grad(*args, **kwargs):
    if _COSTING:
        return _COSTING[-1]._autograd(_AUTOGRAD[1], args, kwargs)
    return _AUTOGRAD[1](*args, **kwargs)


def _create(store, rank, size, timeout):
    global_rank = dist.get_rank() if dist.is_initialized() else rank
    _connect(global_rank)
    return ProcessGroupKbsim(rank, size)


if not hasattr(dist.Backend, BACKEND.upper()):  # a re-import registers nothing
    dist.Backend.register_backend(BACKEND, _create)
