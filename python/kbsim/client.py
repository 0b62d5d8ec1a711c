"""A plain client of `kbsim serve` (protocol: docs/cosim.md). Standard library and numpy.

    from kbsim import Client
    with Client("out/serve/kbsim.sock", rank=0) as c:
        t = c.alloc(1024, "f32")
        c.write(t, numpy.ones(1024, numpy.float32))
        res = c.all_reduce([0, 1, 2, 3], t, op="sum", algorithm="ring_allreduce")
        res.data, res.start_ns, res.end_ns

One client speaks for one rank; requests are answered in order, so a client
is used by one thread at a time.
"""
import socket
import struct

import numpy as np

PROTOCOL_VERSION = 3  # docs/cosim.md: 1 had operations 1-21, 2 added 22-27
ANY_SOURCE = 0xFFFFFFFF
INJECT_KINDS = {"transfer": 0, "read": 1, "message": 2}
EVENT_STATUS = {0: "done", 1: "cancelled", 2: "lost"}
HEADER = struct.Struct("<4sHHIIII")  # magic, version, op, id, status, meta_len, data_len
MAGIC = b"KBSM"
NO_RANK = 0xFFFFFFFF
FLAG_RETURN_DATA = 1

OP = dict(hello=1, ping=2, alloc=3, free=4, write=5, read=6, all_reduce=7, all_gather=8,
          broadcast=9, barrier=10, run=11, now=12, stats=13, reduce_scatter=14, all_to_all=15,
          all_to_allv=16, send=17, recv=18, cost=19, inject=20, advance=21, reduce=22,
          gather=23, scatter=24, cancel=25, trace=26, launch=27, inject_ex=28, inject_cancel=29)
STATUS = dict(ok=0, malformed=1, unknown_op=2, version=3, too_large=4, bad_dtype=5,
              refused=6, not_found=7, bad_argument=8, collective_failed=9, sim_error=10,
              stopping=11, cancelled=12)
STATUS_NAME = {v: k for k, v in STATUS.items()}

# numpy views of the wire dtypes; bf16 travels as its 16 bits (uint16)
_NP = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2"), "bf16": np.dtype("<u2")}


def bf16_from_f32(x):
    """float32 values to bf16 bit patterns (round to nearest even), as uint16."""
    b = np.ascontiguousarray(x, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    # a NaN stays a (quiet) NaN: rounding would carry it into infinity
    nan = (b & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, (b >> 16) | 0x40, rounded).astype("<u2")


def bf16_to_f32(u):
    """bf16 bit patterns (uint16) to float32."""
    return (np.asarray(u, dtype="<u2").astype("<u4") << 16).view("<f4")


class ServerError(Exception):
    """An error reply: .status (a name of STATUS) and the server's message."""

    def __init__(self, status, message):
        super().__init__("%s: %s" % (STATUS_NAME.get(status, status), message))
        self.status = STATUS_NAME.get(status, status)
        self.message = message


class Result:
    """A collective's reply: simulated start and end (ns) on this rank, the
    collective's latency (ns, slowest member) and, if asked for, the data."""

    def __init__(self, start_ns, end_ns, latency_ns, data, source=None):
        self.start_ns, self.end_ns, self.latency_ns, self.data = start_ns, end_ns, latency_ns, data
        self.source = source  # a receive from any source: the sender's rank


class Event:
    """An injection that ended: id, tag, start_ns (its at), end_ns (the data stored at
    dst; a read's last piece in TCM; a message's last byte at dst; when it stopped),
    status ("done", "cancelled", or "lost": the machine was rebuilt while it ran) and
    the bytes it moved."""

    def __init__(self, eid, tag, start_ns, end_ns, status=0, nbytes=None):
        self.id, self.tag, self.start_ns, self.end_ns = eid, tag, start_ns, end_ns
        self.status, self.bytes = EVENT_STATUS.get(status, status), nbytes

    def __repr__(self):
        return "Event(id=%d, tag=%d, %.3f -> %.3f ns, %s, %s bytes)" % (
            self.id, self.tag, self.start_ns, self.end_ns, self.status, self.bytes)


def _s2(text):
    b = text.encode()
    return struct.pack("<H", len(b)) + b


def _group(ranks):
    ranks = list(ranks)
    return struct.pack("<I%dI" % len(ranks), len(ranks), *ranks)


class Client:
    def __init__(self, address, rank=None, token="", timeout=None, version=PROTOCOL_VERSION):
        """address: a Unix socket path, or "HOST:PORT"; rank: the rank to claim
        (None: an observer that may ask now/stats/ping); version: the protocol to
        speak (an older one behaves as a client of that version)."""
        self.version = version
        self.sock = self._connect(address, timeout)
        self.next_id = 0
        self.tensors = {}  # tid -> (n, dtype)
        self.rank = rank
        self.n_pes = self.max_payload = None
        try:
            self.hello(rank, token)
        except BaseException:
            self.sock.close()  # a refused hello leaves no connection behind
            raise

    @staticmethod
    def _connect(address, timeout):
        host, _, port = address.rpartition(":")
        s = None
        try:
            if host and port.isdigit() and "/" not in address:
                s = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            else:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(timeout)
                s.connect(address)
        except OSError as e:
            # the error named no address ("[Errno 2] No such file or directory")
            # and the Unix socket was left open; same exception type, errno kept
            if s is not None:
                s.close()
            raise type(e)(e.errno, "kbsim: cannot connect to '%s': %s (is `kbsim serve` "
                          "listening there? it prints its address)"
                          % (address, e.strerror or e)) from None
        return s

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- frames ----------------------------------------------------------

    def send_frame(self, op, meta=b"", data=b"", version=None, magic=MAGIC):
        """Sends one frame; returns its request id."""
        if version is None:
            version = self.version
        self.next_id += 1
        data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        head = HEADER.pack(magic, version, op, self.next_id, 0, len(meta), len(data))
        if len(data) > 65536:
            self.sock.sendall(head + meta)
            self.sock.sendall(data)
        else:
            self.sock.sendall(head + meta + bytes(data))
        return self.next_id

    def _recv_exact(self, n, into=None):
        buf = bytearray(n) if into is None else into
        view, got = memoryview(buf).cast("B"), 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if k == 0:
                raise ConnectionError("the server closed the connection")
            got += k
        return buf

    def recv_frame(self, into=None):
        """-> (op, id, status, meta, data); data lands in `into` (a writable buffer of
        exactly its size) if given."""
        magic, _version, op, rid, status, mlen, dlen = HEADER.unpack(self._recv_exact(HEADER.size))
        if magic != MAGIC:
            raise ConnectionError("not a kbsim frame from the server")
        meta = bytes(self._recv_exact(mlen)) if mlen else b""
        if into is not None and dlen != memoryview(into).nbytes:
            into = None
        data = self._recv_exact(dlen, into) if dlen else b""
        return op, rid, status, meta, data

    def request(self, op, meta=b"", data=b"", into=None):
        """One request and its reply: (meta, data), or ServerError."""
        rid = self.send_frame(op, meta, data)
        _op, got, status, rmeta, rdata = self.recv_frame(into)
        if got != rid:
            raise ConnectionError("reply %d to request %d" % (got, rid))
        if status != 0:
            (n,) = struct.unpack_from("<H", rmeta)
            raise ServerError(status, rmeta[2:2 + n].decode(errors="replace"))
        return rmeta, rdata

    # ---- operations ------------------------------------------------------

    def hello(self, rank=None, token=""):
        meta, _ = self.request(OP["hello"], struct.pack("<I", NO_RANK if rank is None else rank)
                               + _s2(token))
        _v, _r, self.n_pes, self.max_payload = struct.unpack("<HIIQ", meta)
        self.rank = rank

    def ping(self):
        self.request(OP["ping"])

    def alloc(self, n_elem, dtype="f32", memory=""):
        meta, _ = self.request(OP["alloc"], struct.pack("<Q", n_elem) + _s2(dtype) + _s2(memory))
        (tid,) = struct.unpack("<I", meta)
        self.tensors[tid] = (n_elem, dtype)
        return tid

    def free(self, tid):
        self.request(OP["free"], struct.pack("<I", tid))
        self.tensors.pop(tid, None)

    def write(self, tid, values, offset=0):
        """values: a numpy array of the tensor's dtype (bf16: uint16 bit patterns)."""
        dtype = self.tensors[tid][1]
        if dtype == "bf16" and np.asarray(values).dtype.kind not in "ui":
            # numpy would cast 1.5 to the bit pattern 1 (a denormal) without a word
            raise TypeError("kbsim: tensor %d is bf16: write its uint16 bit patterns "
                            "(bf16_from_f32(values)), not %s values"
                            % (tid, np.asarray(values).dtype))
        arr = np.ascontiguousarray(values, dtype=_NP[dtype]).reshape(-1)
        step = self._piece(dtype)
        for k in range(0, max(arr.size, 1), step):  # frames within --max-payload
            self.request(OP["write"], struct.pack("<IQ", tid, offset + k), arr[k:k + step].data)

    def read(self, tid, offset=0, n_elem=None, out=None):
        """-> a numpy array; `out` (a contiguous array of the dtype) receives the
        elements in place, without a new buffer."""
        n, dtype = self.tensors[tid]
        if n_elem is None:
            n_elem = n - offset if out is None else out.size
        if out is not None and (out.dtype != _NP[dtype] or out.size != n_elem
                                or not out.flags.c_contiguous):
            raise ValueError("out must be a contiguous %s array of %d elements" % (dtype, n_elem))
        step = self._piece(dtype)
        if n_elem > step:  # frames within --max-payload, into one array
            if out is None:
                out = np.empty(n_elem, _NP[dtype])
            for k in range(0, n_elem, step):
                m = min(step, n_elem - k)
                self.request(OP["read"], struct.pack("<IQQ", tid, offset + k, m),
                             into=out[k:k + m])
            return out
        _, data = self.request(OP["read"], struct.pack("<IQQ", tid, offset, n_elem), into=out)
        return out if out is not None else np.frombuffer(data, dtype=_NP[dtype])

    def _piece(self, dtype):
        """Elements of dtype one frame's data holds: the server's --max-payload (said
        in its hello), which refuses a larger write or read."""
        size = np.dtype(_NP[dtype]).itemsize
        if self.max_payload is not None and self.max_payload < size:
            raise ValueError("kbsim: the server's --max-payload of %d bytes is smaller than "
                             "one %s element" % (self.max_payload, dtype))
        return self.max_payload // size if self.max_payload else 1 << 62

    def _too_large(self, tid, n_elem=None):
        """Whether tid's data (n_elem elements, all by default) is over the server's
        --max-payload: a reply then carries none and the data is read in pieces."""
        if tid is None or tid not in self.tensors:
            return False
        n, dtype = self.tensors[tid]
        return (n if n_elem is None else n_elem) > self._piece(dtype)

    def _collective(self, name, group, fields, tid, return_data=True, flags=True):
        """One collective: the group, its own fields, the flags byte; the reply's
        times and (if asked) the data of tensor tid."""
        meta = _group(group) + fields
        read_after = return_data and self._too_large(tid)
        if flags:
            meta += struct.pack("<B", FLAG_RETURN_DATA if return_data and not read_after else 0)
        rmeta, data = self.request(OP[name], meta)
        start, end, lat = struct.unpack("<ddd", rmeta)
        if read_after:  # over --max-payload: in pieces, after the reply
            return Result(start, end, lat, self.read(tid))
        arr = np.frombuffer(data, dtype=_NP[self.tensors[tid][1]]) if data else None
        return Result(start, end, lat, arr)

    def all_reduce(self, group, tid, op="sum", algorithm="", return_data=True):
        return self._collective("all_reduce", group, struct.pack("<I", tid) + _s2(op)
                                + _s2(algorithm), tid, return_data)

    def all_gather(self, group, in_tid, out_tid, algorithm="", return_data=True):
        return self._collective("all_gather", group, struct.pack("<II", in_tid, out_tid)
                                + _s2(algorithm), out_tid, return_data)

    def reduce_scatter(self, group, in_tid, out_tid, op="sum", algorithm="", return_data=True):
        return self._collective("reduce_scatter", group, struct.pack("<II", in_tid, out_tid)
                                + _s2(op) + _s2(algorithm), out_tid, return_data)

    def broadcast(self, group, tid, src, algorithm="", return_data=True):
        return self._collective("broadcast", group, struct.pack("<II", tid, src)
                                + _s2(algorithm), tid, return_data)

    def reduce(self, group, tid, root, op="sum", algorithm="", return_data=True):
        """The reduction of every member's tid lands in the root's tid (in place); the
        other members' tensors are left as they were."""
        return self._collective("reduce", group, struct.pack("<II", tid, root) + _s2(op)
                                + _s2(algorithm), tid, return_data)

    def gather(self, group, in_tid, out_tid, root, algorithm="", return_data=True):
        """The root's out_tid (>= N x input elements) gets every member's input, in group
        order; out_tid is None on the other members. Data: the root's output."""
        return self._collective("gather", group, struct.pack("<III", in_tid, out_tid or 0, root)
                                + _s2(algorithm), out_tid, return_data)

    def scatter(self, group, in_tid, out_tid, root, algorithm="", return_data=True):
        """Block k of the root's in_tid (N x C elements; None on the other members) goes
        to the out_tid (C elements) of the group's k-th member."""
        return self._collective("scatter", group, struct.pack("<III", in_tid or 0, out_tid, root)
                                + _s2(algorithm), out_tid, return_data)

    def all_to_all(self, group, in_tid, out_tid, algorithm="", return_data=True):
        """Block j of this rank's input (N blocks) goes to rank j; block i of the output
        comes from rank i."""
        return self._collective("all_to_all", group, struct.pack("<II", in_tid, out_tid)
                                + _s2(algorithm), out_tid, return_data)

    def all_to_allv(self, group, in_tid, out_tid, send_counts, algorithm="", return_data=True):
        """send_counts[j] elements go to rank j (from the input, in order); the output
        holds what each rank sends here, in rank order."""
        counts = list(send_counts)
        return self._collective("all_to_allv", group, struct.pack("<III", in_tid, out_tid,
                                                                  len(counts))
                                + struct.pack("<%dQ" % len(counts), *counts) + _s2(algorithm),
                                out_tid, return_data)

    def send(self, dst, tid, n_elem=None):
        """The first n_elem elements (all) of tid to rank dst: answered once dst has
        received them. -> Result without data."""
        n = self.tensors[tid][0] if n_elem is None else n_elem
        rmeta, _ = self.request(OP["send"], struct.pack("<IIQ", dst, tid, n))
        return Result(*struct.unpack("<ddd", rmeta), None)

    def recv(self, src, tid, n_elem=None, return_data=True):
        """n_elem elements (all of tid) from rank src into tid; src None: from any
        source (the oldest send to this rank not yet received), whose rank is the
        Result's .source."""
        n = self.tensors[tid][0] if n_elem is None else n_elem
        read_after = return_data and self._too_large(tid, n)
        rmeta, data = self.request(OP["recv"], struct.pack(
            "<IIQB", ANY_SOURCE if src is None else src, tid, n,
            FLAG_RETURN_DATA if return_data and not read_after else 0))
        arr = np.frombuffer(data, dtype=_NP[self.tensors[tid][1]]) if data else None
        if read_after:  # over --max-payload: in pieces, after the reply
            arr = self.read(tid, 0, n)
        source = struct.unpack_from("<I", rmeta, 24)[0] if len(rmeta) == 28 else src
        return Result(*struct.unpack_from("<ddd", rmeta), arr, source=source)

    def barrier(self, group, algorithm=""):
        return self._collective("barrier", group, _s2(algorithm), None, flags=False)

    def inject(self, src, dst, nbytes, at_ns, tag=0, kind="transfer", chunk=0):
        """A timed injection of nbytes (a multiple of 4) starting at simulated time at_ns
        (not before the time advanced to). kind "transfer": from PE src's memory to PE
        dst's; "read": PE src's PE_DMA reads its memory (dst = src); "message": a raw
        message from src's node to dst's on the fabric. chunk: bytes per piece (0: one),
        the grain of a cancel. -> event id"""
        if kind == "transfer" and chunk == 0:
            meta, _ = self.request(OP["inject"], struct.pack("<IIQdI", src, dst, nbytes,
                                                             at_ns, tag))
        else:
            meta, _ = self.request(OP["inject_ex"], struct.pack(
                "<BIIQdIQ", INJECT_KINDS[kind], src, dst, nbytes, at_ns, tag, chunk))
        return struct.unpack("<I", meta)[0]

    def inject_cancel(self, event_id, at_ns):
        """Stops an injection of this client at its first piece boundary at or after
        at_ns. -> True if it was pending (its event says how it ended)."""
        meta, _ = self.request(OP["inject_cancel"], struct.pack("<Id", event_id, at_ns))
        return meta == b"\x01"

    def advance(self, quantum_ns):
        """Runs the machine quantum_ns further. -> (time reached in ns, [Event]): this
        client's injections that ended since the last advance."""
        meta, _ = self.request(OP["advance"], struct.pack("<d", quantum_ns))
        now, n = struct.unpack_from("<dI", meta)
        size, fmt = (33, "<IIddBQ") if self.version >= 3 else (24, "<IIdd")
        events = [Event(*struct.unpack_from(fmt, meta, 12 + size * i)) for i in range(n)]
        return now, events

    def launch(self, group, kernel, in_tid=None, out_tid=None, args=None, return_data=True):
        """Runs the kernel `kernel` of the server's --kernels file on the group's PEs, once
        every member has launched it (the same kernel, sizes and args): in_tid and out_tid
        are its input and output on this rank (out_tid None: the input); args: a dict of
        str -> float, int or str. -> Result (data: the output)."""
        parts = [struct.pack("<H", len(args or {}))]
        for key, v in (args or {}).items():
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise TypeError("launch argument %r: a float, an int or a str" % key)
            if isinstance(v, str):
                parts.append(_s2(key) + b"\x02" + _s2(v))
            elif isinstance(v, int):
                parts.append(_s2(key) + b"\x01" + struct.pack("<q", v))
            else:
                parts.append(_s2(key) + b"\x00" + struct.pack("<d", v))
        tid = out_tid or in_tid
        return self._collective("launch", group, _s2(kernel) + struct.pack(
            "<II", in_tid or 0, out_tid or 0) + b"".join(parts), tid, return_data)

    def trace(self, on=None):
        """Pauses (False) or resumes (True) the server's trace (kbsim serve --trace FILE);
        None only asks. -> (recording, events written so far)"""
        meta, _ = self.request(OP["trace"], struct.pack("<B", 2 if on is None else int(bool(on))))
        rec, events = struct.unpack("<BQ", meta)
        return bool(rec), events

    def cancel(self, request_id):
        """Cancels a request sent with send_frame and not yet answered (a collective
        not yet running, a run or an advance). -> (True if it was cancelled, the frames
        that came before the cancel's reply: the cancelled request's error among them)."""
        rid = self.send_frame(OP["cancel"], struct.pack("<I", request_id))
        before = []
        while True:
            frame = self.recv_frame()
            if frame[1] == rid:
                break
            before.append(frame)
        _op, _rid, status, meta, _data = frame
        if status != 0:
            (n,) = struct.unpack_from("<H", meta)
            raise ServerError(status, meta[2:2 + n].decode(errors="replace"))
        return meta == b"\x01", before

    def run(self):
        """Waits until no collective is ready or running; -> simulated now, ns."""
        meta, _ = self.request(OP["run"])
        return struct.unpack("<d", meta)[0]

    def now(self):
        """-> (ns as a float, ps as an integer)"""
        meta, _ = self.request(OP["now"])
        return struct.unpack("<dQ", meta)

    def stats(self):
        meta, _ = self.request(OP["stats"])
        keys = ("now_ns", "activations", "timed_events", "deltas", "switches", "clients",
                "collectives_done", "simulating", "pending", "issued")
        return dict(zip(keys, struct.unpack("<dQQQQIQBII", meta)))
