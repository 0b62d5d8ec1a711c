-- kbsim/serve.lua — `kbsim serve`: what the co-simulation protocol's frames mean
--
-- lua/lserve.c reads whole frames off the sockets and calls frame(),
-- closed(), tick() and pump() here. One machine (the usual configs,
-- --topology, --set) is served to clients that each claim a rank (a PE).
-- Tensors live in that PE's memory. A collective is issued by every member
-- of its group (NCCL's rule); the last one to issue it makes it ready, and
-- pump() runs it on the simulated fabric with the members' real data while
-- the loop keeps answering. The protocol is docs/cosim.md.
local kb = require("kbsim")
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")
local torch = require("kbsim.torch")
local io_ = require("kbsim.serve_io")

local M = {}

-- Protocol versions: 2 added operations 22-27 (reduce, gather, scatter,
-- cancel, trace, launch) and status 12; 3 added operations 28-29
-- (inject_ex, inject_cancel), an event's status and bytes in advance's
-- reply, and recv from any source. A connection speaks the version of its
-- hello, and its replies carry it.
M.VERSION = 3
M.MIN_VERSION = 1
local OP_SINCE = {[22] = 2, [23] = 2, [24] = 2, [25] = 2, [26] = 2, [27] = 2, [28] = 3, [29] = 3}

M.OP = {
  hello = 1, ping = 2, alloc = 3, free = 4, write = 5, read = 6,
  all_reduce = 7, all_gather = 8, broadcast = 9, barrier = 10,
  run = 11, now = 12, stats = 13, reduce_scatter = 14, all_to_all = 15, all_to_allv = 16,
  send = 17, recv = 18, cost = 19, inject = 20, advance = 21, reduce = 22, gather = 23,
  scatter = 24, cancel = 25, trace = 26, launch = 27, inject_ex = 28, inject_cancel = 29,
}

M.STATUS = {
  ok = 0, malformed = 1, unknown_op = 2, version = 3, too_large = 4, bad_dtype = 5,
  refused = 6, not_found = 7, bad_argument = 8, collective_failed = 9, sim_error = 10,
  stopping = 11, cancelled = 12,
}

local ESIZE = {f32 = 4, f16 = 2, bf16 = 2}
local NO_RANK = 0xFFFFFFFF
local ANY_SOURCE = 0xFFFFFFFF
local FLAG_RETURN_DATA = 1

-- A request's failure: the status and message its error reply carries.
local Refusal = {}
Refusal.__index = Refusal
local function refuse(status, fmt, ...)
  error(setmetatable({status = M.STATUS[status], msg = fmt:format(...)}, Refusal), 0)
end

-- A u64 argument (read as a Lua integer, negative from 2^63 on) in decimal.
local function u64(n)
  if n >= 0 then return tostring(n) end
  local q = (n >> 1) // 5 -- n / 10 as unsigned
  return tostring(q) .. tostring(n - q * 10)
end

-- The most elements of a tensor: 2^50 keeps its size in bytes, and any
-- sum of two offsets, in 64 bits.
local MAX_ELEMS = 1 << 50

--------------------------------------------------------------------------
-- Arguments: fixed layouts read with string.unpack (docs/cosim.md)

local Reader = {}
Reader.__index = Reader

local function reader(meta, what)
  return setmetatable({s = meta, pos = 1, what = what}, Reader)
end

-- The next field of format `fmt` ("I4", "I8", "B"; "s2": a u16-prefixed
-- string).
function Reader:field(fmt)
  local ok, v, pos = pcall(string.unpack, "<" .. fmt, self.s, self.pos)
  if not ok then
    refuse("malformed", "malformed %s arguments: %d bytes end too soon", self.what, #self.s)
  end
  self.pos = pos
  return v
end

function Reader:str() return self:field("s2") end
function Reader:int(fmt) return self:field(fmt) end

-- A group: u32 count, then that many u32 ranks.
function Reader:group()
  local n = self:int("I4")
  if n < 1 or n > 65536 then
    refuse("malformed", "malformed %s arguments: a group of %d ranks", self.what, n)
  end
  local g = {}
  for i = 1, n do g[i] = self:int("I4") end
  return g
end

function Reader:done()
  if self.pos ~= #self.s + 1 then
    refuse("malformed", "malformed %s arguments: %d bytes, %d expected", self.what, #self.s,
      self.pos - 1)
  end
end

--------------------------------------------------------------------------
-- The server state

local S -- set by main()

-- data: bytes, or {t = a tensor, addr =, n = bytes} sent straight from
-- its PE memory.
local function send(c, op, id, status, meta, data)
  if type(data) == "table" then
    S.srv:send_mem(c.id, c.version or M.VERSION, op, id, status, meta or "", S.sys, data.t.rank, data.addr,
      data.n, data.t.kind)
  else
    S.srv:send(c.id, c.version or M.VERSION, op, id, status, meta or "", data)
  end
end

local function reply_error(c, op, id, status, msg)
  if #msg > 65535 then msg = msg:sub(1, 65535) end
  -- status 12 is protocol 2: a version 1 client hears of a collective
  -- stopped while it ran as it hears of any other failed one
  if status == M.STATUS.cancelled and (c.version or M.VERSION) < 2 then
    status = M.STATUS.collective_failed
  end
  send(c, op, id, status, string.pack("<s2", msg))
end

local function group_text(g)
  return "{" .. table.concat(g, ",") .. "}"
end

local function log(fmt, ...)
  if not S.quiet then
    io.stderr:write(("kbsim serve: " .. fmt .. "\n"):format(...))
  end
end

-- The tensor `tid` of client c.
local function tensor_of(c, tid)
  local t = c.tensors[tid]
  if not t then refuse("not_found", "rank %d has no tensor %d", c.rank, tid) end
  return t
end

local function check_dtype(dt)
  if not ESIZE[dt] then refuse("bad_dtype", "unknown dtype '%s' (f32, f16, bf16)", dt) end
  return dt
end

--------------------------------------------------------------------------
-- Requests that answer at once

local handle = {}

function handle.hello(c, r)
  local rank, token = r:int("I4"), r:str()
  r:done()
  if S.token and token ~= S.token then
    refuse("refused", "hello refused: wrong or missing token")
  end
  if rank ~= NO_RANK then
    if rank >= S.n_pes then
      refuse("bad_argument", "no rank %d: the machine has ranks 0..%d", rank, S.n_pes - 1)
    end
    local owner = S.ranks[rank]
    if owner and owner ~= c then
      refuse("refused", "rank %d is already claimed by another client", rank)
    end
    if c.rank and c.rank ~= rank then
      refuse("refused", "this client already is rank %d", c.rank)
    end
    S.ranks[rank], c.rank = c, rank
    -- sequence numbers belong to the rank: a client that takes a rank over
    -- from one that left goes on with its numbering (decision 0042)
    S.rank_seq[rank] = S.rank_seq[rank] or {}
    c.seq = S.rank_seq[rank]
  end
  c.hello = true
  return string.pack("<I2I4I4I8", c.version, rank, S.n_pes, S.max_payload)
end

function handle.ping(_, r)
  r:done()
  return ""
end

local function my_rank(c)
  if not c.rank then refuse("refused", "this client claimed no rank (hello with a rank first)") end
  return c.rank
end

function handle.alloc(c, r)
  local n, dt, mem = r:int("I8"), r:str(), r:str()
  r:done()
  local rank = my_rank(c)
  check_dtype(dt)
  if n < 1 or n > MAX_ELEMS then
    refuse("bad_argument", "alloc: %s elements (1 .. 2^50)", u64(n))
  end
  if mem == "" then mem = S.sys:pe(rank).hbm and "hbm" or "tcm" end
  if mem ~= "hbm" and mem ~= "tcm" and mem ~= "sram" then
    refuse("bad_argument", "alloc: unknown memory '%s' (hbm, tcm, sram)", mem)
  end
  local ok, addr = pcall(tl.alloc, S.sys, rank, mem, n * ESIZE[dt])
  if not ok then refuse("bad_argument", "alloc: %s", tostring(addr)) end
  -- a fresh tensor reads as zeros, whatever the block held before (an
  -- inject may write outside blocks); only pages that hold storage are
  -- written, so a tensor as large as an HBM takes no host memory until used
  io_.mem_zero(S.sys, rank, addr, n * ESIZE[dt], mem)
  c.next_tid = c.next_tid + 1
  c.tensors[c.next_tid] = {rank = rank, addr = addr, n = n, kind = mem, dtype = dt}
  return string.pack("<I4", c.next_tid)
end

-- A tensor that a queued or running collective still uses cannot go.
local function busy_tensor(c, tid)
  for _, inst in ipairs(S.ready) do
    local m = inst.members[c.rank]
    if m and (m.p.tid == tid or m.p.out == tid) then return true end
  end
  local m = S.running and S.running.members[c.rank]
  return m and (m.p.tid == tid or m.p.out == tid)
end

function handle.free(c, r)
  local tid = r:int("I4")
  r:done()
  local t = tensor_of(c, tid)
  if busy_tensor(c, tid) then refuse("refused", "tensor %d is in a collective", tid) end
  io_.mem_free(S.sys, t.rank, t.addr, t.kind)
  c.tensors[tid] = nil
  return ""
end

-- data: the frame's data as lua/lserve.c hands it over, {ptr, len}.
function handle.write(c, r, data)
  local tid, off = r:int("I4"), r:int("I8")
  r:done()
  local t = tensor_of(c, tid)
  local es, len = ESIZE[t.dtype], data.len
  if len % es ~= 0 then
    refuse("bad_argument", "write: %d bytes is not a whole number of %s elements", len, t.dtype)
  end
  if off < 0 or off > t.n or len // es > t.n - off then
    refuse("bad_argument", "write: %d elements from element %s are outside tensor %d of %d",
      len // es, u64(off), tid, t.n)
  end
  io_.mem_write(S.sys, t.rank, t.addr + off * es, data.ptr, len, t.kind)
  return ""
end

function handle.read(c, r)
  local tid, off, n = r:int("I4"), r:int("I8"), r:int("I8")
  r:done()
  local t = tensor_of(c, tid)
  if off < 0 or n < 0 or off > t.n or n > t.n - off then
    refuse("bad_argument", "read: %s elements from element %s are outside tensor %d of %d",
      u64(n), u64(off), tid, t.n)
  end
  if n * ESIZE[t.dtype] > S.max_payload then
    refuse("too_large", "read: %d bytes are over the payload limit of %d", n * ESIZE[t.dtype],
      S.max_payload)
  end
  return "", {t = t, addr = t.addr + off * ESIZE[t.dtype], n = n * ESIZE[t.dtype]}
end

-- cost: the time the rank's PE takes for one GEMM (unit "gemm": a x b x c
-- = M x N x K), one PE_MATH op (unit "add", "exp", ...: a elements) or one
-- PE_DMA copy of a bytes within the memory its tensors live in (unit
-- "copy": HBM, or TCM where there is none), by the component's own closed
-- form (kb_gemm_time, kb_math_time, kb_dma_time); nothing is simulated.
function handle.cost(c, r)
  local unit, dt, a, b, k = r:str(), r:str(), r:int("I8"), r:int("I8"), r:int("I8")
  r:done()
  local rank = c.rank or 0
  check_dtype(dt)
  local ok, ps
  if unit == "gemm" then
    if a < 1 or b < 1 or k < 1 or (a + 0.0) * b * k > 2.0 ^ 48 then
      refuse("bad_argument", "cost: a GEMM of %s x %s x %s (each >= 1, M*N*K <= 2^48)", u64(a),
        u64(b), u64(k))
    end
    ok, ps = pcall(tl.gemm_time, S.sys, a, b, k, rank)
  elseif unit == "copy" then
    if a < 1 then refuse("bad_argument", "cost: a copy of %s bytes (>= 1)", u64(a)) end
    ok, ps = pcall(tl.copy_time, S.sys, a, nil, nil, rank)
  else
    if a < 1 or a > 1 << 40 then
      refuse("bad_argument", "cost: %s over %s elements (1 .. 2^40)", unit, u64(a))
    end
    ok, ps = pcall(tl.math_time, S.sys, unit, a, dt, rank)
  end
  if not ok then refuse("bad_argument", "cost: %s", tostring(ps)) end
  return string.pack("<dI8", ps / 1000, ps)
end

function handle.now(_, r)
  r:done()
  local ns = S.sim:now()
  return string.pack("<dI8", ns, S.sim:now_ps())
end

function handle.stats(_, r)
  r:done()
  local st = S.sim:stats()
  local clients = 0
  for _ in pairs(S.clients) do clients = clients + 1 end
  local pending, issued = 0, 0
  for _, inst in pairs(S.pending) do pending, issued = pending + 1, issued + inst.count end
  local b = S.stats_base
  return string.pack("<dI8I8I8I8I4I8BI4I4", S.sim:now(), b.activations + st.activations,
    b.timed_events + st.timed_events, b.deltas + st.deltas, b.switches + st.switches, clients,
    S.done, S.running and 1 or 0, pending, issued)
end

--------------------------------------------------------------------------
-- Collectives: rendezvous, checks, the run

local fail_instance, elements_per_rank, rebuild

-- A collective (key "group#k") that failed while rank r had no client
-- counts as issued by r: the rank's next client starts after it, in step
-- with the members that go on.
local function skip_seq(r, key)
  local gk, k = key:match("^(.*)#(%d+)$")
  local seq = S.rank_seq[r] or {}
  S.rank_seq[r] = seq
  seq[gk] = math.max(seq[gk] or 0, tonumber(k))
end

local function fmt_ns(ns) return ("%.10g"):format(ns) end

-- What every member must agree on, and how to say it.
local function signature(kind, p, t, out)
  if kind == "send_recv" then return ("send/recv(%d %s)"):format(p.count, t.dtype) end
  if kind == "launch" then
    return ("launch(%s, %s, args %s)"):format(p.kernel, t and (t.n .. " " .. t.dtype)
      or "no tensor", p.argtext)
  end
  -- scatter: only the root has an input; the members agree on the output
  if kind == "scatter" then t = out end
  -- all_to_allv: every member sends its own amounts (checked at launch)
  local n = kind ~= "all_to_allv" and t and (t.n .. " ") or ""
  return ("%s(op=%s, algorithm=%s, %s%s, src=%s)"):format(kind, p.op or "-",
    p.algorithm == "" and "default" or p.algorithm, n, t and t.dtype or "",
    tostring(p.src or p.root or "-"))
end

local function group_key(g)
  return table.concat(g, ",")
end

local function check_group(c, g, what)
  local seen = {}
  for _, r in ipairs(g) do
    if r >= S.n_pes then
      refuse("bad_argument", "%s: no rank %d in the group (ranks 0..%d)", what, r, S.n_pes - 1)
    end
    if seen[r] then refuse("bad_argument", "%s: rank %d is twice in the group", what, r) end
    seen[r] = true
  end
  if not seen[c.rank] then
    refuse("bad_argument", "%s: rank %d issued it but is not in the group %s", what, c.rank,
      group_text(g))
  end
end

-- Registers c's part in the collective; it becomes ready with the last
-- member. Returns nothing: the reply comes when the collective has run.
local function issue(c, op, id, kind, p)
  local rank = my_rank(c)
  check_group(c, p.group, kind)
  local t = p.tid and tensor_of(c, p.tid)
  local out = p.out and tensor_of(c, p.out)
  if out and t and out.dtype ~= t.dtype then
    refuse("bad_dtype", "%s: output tensor is %s, input %s", kind, out.dtype, t.dtype)
  end
  local N = #p.group
  if kind == "all_gather" and out.n < N * t.n then
    refuse("bad_argument", "all_gather: the output holds %d elements, %d ranks x %d need %d",
      out.n, N, t.n, N * t.n)
  end
  if kind == "reduce_scatter" and (t.n % N ~= 0 or out.n < t.n // N) then
    refuse("bad_argument", "reduce_scatter: an input of %d elements over %d ranks needs a "
      .. "multiple of %d and an output of %d; the output holds %d", t.n, N, N,
      t.n // N, out.n)
  end
  if kind == "all_to_all" and (t.n % N ~= 0 or out.n < t.n) then
    refuse("bad_argument", "all_to_all: an input of %d elements over %d ranks needs a multiple "
      .. "of %d and an output of as many; the output holds %d", t.n, N, N, out.n)
  end
  if kind == "all_to_allv" then
    if #p.splits ~= N then
      refuse("bad_argument", "all_to_allv: %d send counts for a group of %d ranks",
        #p.splits, N)
    end
    local sum = 0
    for _, k in ipairs(p.splits) do sum = sum + k end
    if sum > t.n then
      refuse("bad_argument", "all_to_allv: the send counts add up to %d, the input holds %d",
        sum, t.n)
    end
  end
  if kind == "gather" and rank == p.root and not (out and out.n >= N * t.n) then
    refuse("bad_argument", "gather: the root's output holds %d elements, %d ranks x %d need %d",
      out and out.n or 0, N, t.n, N * t.n)
  end
  if kind == "scatter" and rank == p.root and not (t and t.n >= N * out.n) then
    refuse("bad_argument", "scatter: the root's input holds %d elements, %d ranks x %d need %d",
      t and t.n or 0, N, out.n, N * out.n)
  end
  if kind == "send_recv" and (p.count < 1 or p.count > t.n) then
    refuse("bad_argument", "%s: %s elements, tensor %d holds %d", p.role, u64(p.count), p.tid, t.n)
  end
  local gk = (kind == "send_recv" and "p2p:" or "") .. group_key(p.group)
  local seq = (c.seq[gk] or 0) + 1
  c.seq[gk] = seq
  local key = gk .. "#" .. seq
  if c.failed[key] then
    local msg = c.failed[key]
    c.failed[key] = nil
    refuse("collective_failed", "%s", msg)
  end
  local inst = S.pending[key]
  local sig = signature(kind, p, t, out)
  local fresh = not inst
  if not inst then
    S.order = S.order + 1
    inst = {key = key, kind = kind, group = p.group, members = {}, count = 0, sig = sig,
            first = rank, deadline = S.srv:now_ms() + S.timeout_ms, p = p, order = S.order}
    S.pending[key] = inst
  elseif inst.sig ~= sig then
    local msg = ("collective mismatch over ranks %s: rank %d issued %s, rank %d issued %s")
      :format(group_text(p.group), inst.first, inst.sig, rank, sig)
    fail_instance(inst, msg)
    c.failed[key] = nil -- told now, by the refusal
    refuse("collective_failed", "%s", msg)
  end
  inst.members[rank] = {client = c, op = op, id = id, p = p, t = t, out = out}
  inst.count = inst.count + 1
  if inst.count == #inst.group then
    S.pending[key] = nil
    S.ready[#S.ready + 1] = inst
  end
  -- a new send to a rank that waits in a receive from any source: that
  -- receive takes it (its refusal goes to its own request)
  local to = kind == "send_recv" and fresh and p.role == "send" and S.ranks[p.group[2]]
  while to and #to.any_recvs > 0 and not inst.members[to.rank] do
    local x = table.remove(to.any_recvs, 1)
    x.p.group = p.group
    to.seq[gk] = seq - 1
    local ok, err = pcall(issue, to, x.op, x.id, "send_recv", x.p)
    if not ok then
      if getmetatable(err) == Refusal then reply_error(to, x.op, x.id, err.status, err.msg)
      else error(err, 0) end
    end
  end
end

-- Every member that issued inst gets an error; the connected members that
-- did not yet get the same one when they issue it.
function fail_instance(inst, msg, status)
  for _, r in ipairs(inst.group) do
    local c = S.ranks[r]
    if c and not inst.members[r] then c.failed[inst.key] = msg end
    if not c and not inst.members[r] then skip_seq(r, inst.key) end
  end
  S.pending[inst.key] = nil
  for i = #S.ready, 1, -1 do
    if S.ready[i] == inst then table.remove(S.ready, i) end
  end
  inst.failed = msg
  for _, m in pairs(inst.members) do
    if S.clients[m.client.id] then
      reply_error(m.client, m.op, m.id, status or M.STATUS.collective_failed, msg)
    end
  end
  inst.members = {}
  log("%s", msg)
end

-- The algorithm: the one asked for, else ccl.yaml's for all_reduce, else
-- the collective's own file; its rank rule, if it has one, must give the
-- group.
local function pick(kind, name, group)
  local where
  if name == "" then
    if kind == "all_reduce" then name, where = S.cfg.algorithm, S.cfg.where else name = kind end
  end
  local algo, msg = ccl.find(name, where)
  if not algo then refuse("bad_argument", "%s", msg) end
  if algo.collective ~= kind then
    refuse("bad_argument", "algorithm '%s' is a %s, not a %s", name, algo.collective, kind)
  end
  if algo.ranks then
    -- ccl.yaml's all_reduce algorithm is named with where it was set (a
    -- client that named none learns why it was chosen); a rank rule that
    -- cannot give a group of this size raises: the group is refused as
    -- one its rule does not give is, before any kernel runs
    local who = where and ("%s: algorithm '%s' (ccl.yaml's all_reduce default; name one in the "
      .. "request or --set ccl.algorithm=NAME)"):format(where, name) or ("algorithm '%s'"):format(name)
    local ok, want = pcall(algo.ranks, S.topology, #group)
    if not ok then
      refuse("bad_argument", "%s does not run on the group %s: %s", who, group_text(group),
        tostring(want))
    end
    if group_key(want) ~= group_key(group) then
      refuse("bad_argument", "%s runs on ranks %s, the group is %s", who,
        group_text(want), group_text(group))
    end
  end
  return algo
end

-- send/recv: one channel per ordered pair of ranks, "q<peer>" (global
-- ranks) on both sides, so it never takes a port of lua/kbsim/ccl/.
local function p2p_kernel(a, input, output)
  if tl.rank() == 0 then
    local h = tl.load(input, 0, a.n_elem)
    tl.send("q" .. a.dst, h)
    tl.free(h)
  else
    local got = tl.wait(tl.recv_async("q" .. a.src, a.n_elem, a.dtype))
    tl.store(output, 0, got)
    tl.free(got)
  end
end
tl.name(p2p_kernel, "send_recv")

local P2P = {
  name = "send_recv", collective = "send_recv",
  args = function(_, n_elem, o)
    return {n_elem = n_elem, dtype = o.dtype, src = o.pair[1], dst = o.pair[2]}
  end,
  wire = function(sys, ranks) tl.wire(sys, ranks[1], "q" .. ranks[2], ranks[2], "q" .. ranks[1]) end,
  kernel = p2p_kernel,
}

-- all_to_allv's split matrix from the members' send counts; every
-- member's output must hold what it receives.
local function split_matrix(inst)
  local sp = {}
  for i, r in ipairs(inst.group) do sp[i] = inst.members[r].p.splits end
  for j, r in ipairs(inst.group) do
    local got = 0
    for i = 1, #inst.group do got = got + sp[i][j] end
    local out = inst.members[r].out
    if got > out.n then
      refuse("bad_argument", "all_to_allv: rank %d receives %d elements, its output holds %d",
        r, got, out.n)
    end
  end
  return sp
end

-- The view of the members' tensors that tl.load / tl.store take.
local function tensor_view(inst, field)
  local shards = {}
  for r, m in pairs(inst.members) do shards[r] = m[field] end
  return {shard = function(_, r) return shards[r] end}
end

local function scale_kernel(a, t)
  local h = tl.load(t, 0, a.n)
  local s = h * a.factor
  tl.free(h)
  tl.store(t, 0, s)
  tl.free(s)
end
tl.name(scale_kernel, "avg_scale")

-- The n_elem of the algorithm's args: a rank's input, or its share of
-- it (reduce_scatter).
function elements_per_rank(inst)
  local any = inst.members[inst.group[1]]
  if inst.kind == "scatter" then return any.out.n end
  local t = any.t
  if not t then return 0 end
  if inst.kind == "send_recv" then return any.p.count end
  return (inst.kind == "reduce_scatter" or inst.kind == "all_to_all") and t.n // #inst.group
    or t.n
end

-- Collectives whose output is their input.
local IN_PLACE = {all_reduce = true, broadcast = true, reduce = true, barrier = true,
                  send_recv = true}

-- Launches the kernels of inst; returns the launch and the output view.
local function launch(inst)
  local p, kind = inst.p, inst.kind
  local algo = kind == "send_recv" and P2P or kind == "launch" and S.kernels[p.kernel]
    or pick(kind, p.algorithm, inst.group)
  local any = inst.members[inst.group[1]]
  local t = any.t
  local dt = (t or any.out or {}).dtype
  local o = {dtype = dt or "f32", topology = S.topology,
             buffer_kind = S.cfg.buffer_kind, backpressure = S.cfg.backpressure}
  if p.op then o.op = p.op == "avg" and "sum" or p.op end
  if kind == "broadcast" then
    for i, r in ipairs(inst.group) do if r == p.src then o.src = i - 1 end end
  end
  if p.root then
    for i, r in ipairs(inst.group) do if r == p.root then o.root = i - 1 end end
  end
  if kind == "all_to_allv" then o.splits = split_matrix(inst) end
  if kind == "send_recv" then o.pair = inst.group end
  if kind == "barrier" then
    local b = S.barriers[group_key(inst.group)] or {epoch = 0, state = {}}
    S.barriers[group_key(inst.group)] = b
    b.epoch = b.epoch + 1
    o.epoch, o.state = b.epoch, b.state
  end
  if kind == "launch" then o.user = p.args end
  local ok, a = pcall(algo.args, #inst.group, elements_per_rank(inst), o)
  if not ok then refuse("bad_argument", "%s", tostring(a)) end
  local ok2, err = pcall(torch.wire_once, S.wiring, algo, inst.group, a)
  if not ok2 then refuse("bad_argument", "%s", tostring(err)) end
  local input = tensor_view(inst, "t")
  local output = (IN_PLACE[kind] or kind == "launch" and not any.out) and input
    or tensor_view(inst, "out")
  return tl.launch(S.sys, inst.group, algo.kernel, a, input, output), output
end

local STOPPING = "the server is stopping"
local INTERRUPTED = {} -- srv:interrupt() stopped the run mid-way (a cancel)

-- The simulation to its end; false and a message if it failed (or
-- INTERRUPTED).
local function simulate()
  local ok, res = pcall(S.srv.simulate, S.srv, S.sim)
  if not ok then return false, tostring(res) end
  if res == "stopped" then return false, STOPPING end
  if res == "interrupted" then return false, INTERRUPTED end
  return true
end

local function reply_results(inst, runs)
  local first = runs[1]
  for _, r in ipairs(inst.group) do
    local m = inst.members[r]
    local t0 = first.t[r].start_ns
    local t1
    for _, run in ipairs(runs) do t1 = run.t[r] and run.t[r].end_ns or t1 end
    local lat = 0
    for _, run in ipairs(runs) do lat = lat + run:latency_ns() end
    local data
    local src = m.p.any and string.pack("<I4", inst.group[1]) or ""
    local x = m.out or m.t
    if inst.kind == "gather" and r ~= m.p.root then x = nil end
    if x and m.p.flags & FLAG_RETURN_DATA ~= 0 then
      local n = inst.kind == "send_recv" and m.p.count or x.n
      data = {t = x, addr = x.addr, n = n * ESIZE[x.dtype]}
    end
    send(m.client, m.op, m.id, M.STATUS.ok, string.pack("<ddd", t0, t1, lat) .. src, data)
  end
end

-- Runs one ready collective; the loop serves the sockets meanwhile. A
-- failed simulation, or one a cancel interrupted, leaves the machine
-- mid-way: it is rebuilt (rebuild) after the members are told.
local function run_instance(inst)
  S.running = inst
  local reset
  local ok, runs = pcall(function()
    local run, view = launch(inst)
    local runs = {run}
    local sim_ok, msg = simulate()
    if sim_ok and not inst.failed and inst.p.op == "avg" then
      runs[2] = tl.launch(S.sys, inst.kind == "reduce" and {inst.p.root} or inst.group,
        scale_kernel,
        {n = elements_per_rank(inst), factor = 1 / #inst.group}, view)
      sim_ok, msg = simulate()
    end
    if msg == INTERRUPTED then
      reset = "cancelled"
      local ns = S.sim:now()
      if inst.cancel.left then
        refuse("cancelled", "%s over ranks %s cancelled: rank %d disconnected while it ran "
          .. "(at %s ns; the machine was reset: its tensors hold what the run had stored)",
          inst.kind, group_text(inst.group), inst.cancel.by, fmt_ns(ns))
      end
      refuse("cancelled", "%s over ranks %s cancelled by rank %d while running (at %s ns; "
        .. "the machine was reset: its tensors hold what the run had stored)", inst.kind,
        group_text(inst.group), inst.cancel.by, fmt_ns(ns))
    end
    if not sim_ok then
      if msg ~= STOPPING then reset = "failed" end
      refuse(msg == STOPPING and "stopping" or "sim_error", "%s", msg)
    end
    return runs
  end)
  S.running = nil
  if reset then
    rebuild(reset == "failed" and ("a failed " .. inst.kind)
      or inst.cancel.left and ("rank %d left a running %s"):format(inst.cancel.by, inst.kind)
      or ("a cancelled " .. inst.kind))
  end
  for _, t in ipairs(S.orphans) do io_.mem_free(S.sys, t.rank, t.addr, t.kind) end
  S.orphans = {}
  local function answer_cancels()
    for _, x in ipairs(inst.cancels or {}) do
      if S.clients[x.client.id] then
        send(x.client, x.op, x.id, M.STATUS.ok, string.pack("<B", reset == "cancelled" and 1 or 0))
      end
    end
  end
  if inst.failed then answer_cancels() return end -- a member left: the others were told
  if not ok then
    local refusal = getmetatable(runs) == Refusal
    fail_instance(inst, refusal and runs.status == M.STATUS.cancelled and runs.msg
      or ("%s over ranks %s failed: %s"):format(inst.kind,
      group_text(inst.group), refusal and runs.msg or tostring(runs)),
      refusal and runs.status or M.STATUS.sim_error)
    answer_cancels()
    return
  end
  S.done = S.done + 1
  reply_results(inst, runs)
  answer_cancels()
end

local REDUCTIONS = {sum = true, max = true, min = true, avg = true}

-- send: u32 destination, u32 tensor, u64 elements; recv: u32 source, u32
-- tensor, u64 elements, u8 flags. The pair is the group {source,
-- destination}, matched per ordered pair.
local function parse_p2p(c, role, r)
  local peer, tid, count = r:int("I4"), r:int("I4"), r:int("I8")
  local flags = role == "recv" and r:int("B") or 0
  r:done()
  local me = my_rank(c)
  if role == "recv" and peer == ANY_SOURCE and c.version >= 3 then
    return {any = true, tid = tid, count = count, flags = flags, role = role, algorithm = ""}
  end
  if peer >= S.n_pes or peer == me then
    refuse("bad_argument", "%s: rank %d cannot %s rank %d (ranks 0..%d, not itself)", role, me,
      role == "send" and "send to" or "receive from", peer, S.n_pes - 1)
  end
  local group = role == "send" and {me, peer} or {peer, me}
  return {group = group, tid = tid, count = count, flags = flags, role = role, algorithm = ""}
end

local function parse_collective(kind, r)
  local p = {group = r:group()}
  if kind == "all_reduce" then
    p.tid, p.op, p.algorithm, p.flags = r:int("I4"), r:str(), r:str(), r:int("B")
  elseif kind == "all_gather" then
    p.tid, p.out, p.algorithm, p.flags = r:int("I4"), r:int("I4"), r:str(), r:int("B")
  elseif kind == "reduce_scatter" then
    p.tid, p.out, p.op = r:int("I4"), r:int("I4"), r:str()
    p.algorithm, p.flags = r:str(), r:int("B")
  elseif kind == "all_to_all" then
    p.tid, p.out, p.algorithm, p.flags = r:int("I4"), r:int("I4"), r:str(), r:int("B")
  elseif kind == "all_to_allv" then
    p.tid, p.out = r:int("I4"), r:int("I4")
    local n = r:int("I4")
    if n > 65536 then refuse("malformed", "malformed all_to_allv arguments: %d counts", n) end
    p.splits = {}
    for i = 1, n do
      local k = r:int("I8")
      if k < 0 or k > 0xFFFFFFFF then
        refuse("bad_argument", "all_to_allv: send count %d is out of range", k)
      end
      p.splits[i] = k
    end
    p.algorithm, p.flags = r:str(), r:int("B")
  elseif kind == "broadcast" then
    p.tid, p.src, p.algorithm, p.flags = r:int("I4"), r:int("I4"), r:str(), r:int("B")
    local inside = false
    for _, x in ipairs(p.group) do inside = inside or x == p.src end
    if not inside then
      refuse("bad_argument", "broadcast: source rank %d is not in the group %s", p.src,
        group_text(p.group))
    end
  elseif kind == "reduce" then
    p.tid, p.root, p.op = r:int("I4"), r:int("I4"), r:str()
    p.algorithm, p.flags = r:str(), r:int("B")
  elseif kind == "gather" or kind == "scatter" then
    -- tensor 0: none (gather: a member's output but the root's; scatter:
    -- a member's input but the root's)
    p.tid, p.out, p.root = r:int("I4"), r:int("I4"), r:int("I4")
    p.algorithm, p.flags = r:str(), r:int("B")
    if p.tid == 0 then p.tid = nil end
    if p.out == 0 then p.out = nil end
    if kind == "gather" and not p.tid then
      refuse("bad_argument", "gather: every member needs an input tensor")
    end
    if kind == "scatter" and not p.out then
      refuse("bad_argument", "scatter: every member needs an output tensor")
    end
  else
    p.algorithm, p.flags = r:str(), 0
  end
  r:done()
  if p.root then
    local inside = false
    for _, x in ipairs(p.group) do inside = inside or x == p.root end
    if not inside then
      refuse("bad_argument", "%s: root rank %d is not in the group %s", kind, p.root,
        group_text(p.group))
    end
  end
  if p.op and not REDUCTIONS[p.op] then
    refuse("bad_argument", "%s: unknown op '%s' (sum, max, min, avg)", kind, p.op)
  end
  return p
end

for _, kind in ipairs{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "barrier",
                      "all_to_all", "all_to_allv", "reduce", "gather", "scatter"} do
  handle[kind] = function(c, r, _, op, id)
    issue(c, op, id, kind, parse_collective(kind, r))
    return nil -- answered once every member has issued it and it has run
  end
end

-- A receive from any source (protocol 3: source 0xFFFFFFFF) takes the
-- oldest send to this rank that no receive has taken yet, or waits for the
-- next one; it then is that pair's receive (the pair's next in order).
local function recv_any(c, op, id, p)
  local t = tensor_of(c, p.tid)
  if p.count < 1 or p.count > t.n then
    refuse("bad_argument", "recv: %s elements, tensor %d holds %d", u64(p.count), p.tid, t.n)
  end
  local best
  for _, inst in pairs(S.pending) do
    if inst.kind == "send_recv" and inst.group[2] == c.rank and not inst.members[c.rank]
        and (not best or inst.order < best.order) then
      best = inst
    end
  end
  if best then
    p.group = best.group
    local gk = "p2p:" .. group_key(best.group)
    c.seq[gk] = tonumber(best.key:match("#(%d+)$")) - 1
    issue(c, op, id, "send_recv", p)
  else
    local q = c.any_recvs
    q[#q + 1] = {op = op, id = id, p = p, deadline = S.srv:now_ms() + S.timeout_ms}
  end
end

for _, role in ipairs{"send", "recv"} do
  handle[role] = function(c, r, _, op, id)
    local p = parse_p2p(c, role, r)
    if p.any then recv_any(c, op, id, p) return nil end
    issue(c, op, id, "send_recv", p)
    return nil -- answered once the peer has issued its half and it has run
  end
end

--------------------------------------------------------------------------
-- External models: timed injections, their cancellation, advancing by a
-- quantum

-- What an injection does (operation 28's kind; operation 20 is a
-- transfer in one piece).
local INJECT_KINDS = {[0] = "transfer", [1] = "read", [2] = "message"}
-- How an injection ended (an event's status, protocol 3).
local EV_DONE, EV_CANCELLED, EV_LOST = 0, 1, 2

-- A transfer or a read runs as a kernel that sleeps until `at`, then
-- works in pieces of a.chunk_elem elements. Before each piece the source
-- looks at the injection's cancel time: a cancel takes effect at the first
-- piece boundary at or after it (the piece under way completes, as a DMA
-- engine finishes its current descriptor). transfer: src's PE_DMA loads a
-- piece from its memory (HBM, or TCM without), sends it over the IPCQ
-- channel "x<dst>" (channels of their own: never those of send/recv or of
-- lua/kbsim/ccl/) and dst stores it; the source tells the destination
-- through a fifo what comes (a piece's size, negative for the last one;
-- false: cancelled). read: PE_DMA loads the pieces from the PE's memory
-- into its TCM (a memory access at the PE; nothing moves further).
local function inject_kernel(a, input, output)
  local st = a.state
  local wait = a.at_ns - kb.now()
  if wait > 0 then kb.wait(wait) end
  local n, step = a.n_elem, a.chunk_elem
  local function cancelled() return st.cancel_at and kb.now() >= st.cancel_at end
  if a.kind == "read" then
    local off = 0
    while off < n and not cancelled() do
      local k = math.min(step, n - off)
      tl.free(tl.load(input, off, k))
      off = off + k
      st.done_elem = off
    end
    st.end_ns, st.cancelled = kb.now(), off < n
  elseif tl.rank() == 0 then
    local off = 0
    while off < n do
      if cancelled() then st.fifo:write(false) break end
      local k = math.min(step, n - off)
      st.fifo:write(off + k < n and k or -k)
      local h = tl.load(input, off, k)
      tl.send("x" .. a.dst, h)
      tl.free(h)
      off = off + k
    end
  else
    local off = 0
    while true do
      local k = st.fifo:read()
      if not k then st.cancelled = true break end
      local got = tl.recv("x" .. a.src, math.abs(k), "f32")
      tl.store(output, off, got)
      tl.free(got)
      off = off + math.abs(k)
      st.done_elem = off
      if k < 0 then break end
    end
    st.end_ns = kb.now()
  end
end
tl.name(inject_kernel, "injected_transfer")

local INJECT = {
  name = "injected_transfer", collective = "inject",
  wire = function(sys, ranks) tl.wire(sys, ranks[1], "x" .. ranks[2], ranks[2], "x" .. ranks[1]) end,
}

-- A raw message: at `at`, unless cancelled by then, sys:inject puts it on
-- the fabric from src's node to dst's (routed as fabric.routing says;
-- timing only: no memory is read or written). Once on the fabric it
-- cannot be called back.
local function message_process(inj)
  return function()
    local st = inj.state
    local wait = inj.at - kb.now()
    if wait > 0 then kb.wait(wait) end
    if st.cancel_at and kb.now() >= st.cancel_at then
      st.end_ns, st.cancelled = kb.now(), true
      return
    end
    st.h = inj.sys:inject{src = {inj.src}, dst = {inj.dst}, t_ns = {0}, bytes = inj.bytes}
  end
end

-- Starts (or, after a rebuild, starts again) injection inj on the machine
-- S.sys: its buffers, wiring and kernel.
local function start_injection(inj)
  inj.sys, inj.state = S.sys, {cancel_at = inj.state and inj.state.cancel_at, done_elem = 0}
  if inj.kind == "message" then
    S.sim:spawn("inject_message", message_process(inj))
    return
  end
  local ranks = inj.kind == "read" and {inj.src} or {inj.src, inj.dst}
  local bufs = {}
  for i, x in ipairs(ranks) do
    local kind = S.sys:pe(x).hbm and "hbm" or "tcm"
    local ok, addr = pcall(tl.alloc, S.sys, x, kind, inj.bytes)
    if not ok then
      for _, b in ipairs(bufs) do io_.mem_free(S.sys, b.rank, b.addr, b.kind) end
      refuse("bad_argument", "inject: %s", tostring(addr))
    end
    bufs[i] = {rank = x, addr = addr, n = inj.bytes // 4, kind = kind, dtype = "f32"}
  end
  local n = inj.bytes // 4
  local step = inj.chunk > 0 and inj.chunk // 4 or n
  local a = {at_ns = inj.at, n_elem = n, chunk_elem = step, src = inj.src, dst = inj.dst,
             kind = inj.kind, state = inj.state}
  if inj.kind == "transfer" then
    inj.state.fifo = S.sim:fifo("inject_" .. inj.id, (n + step - 1) // step + 1)
    torch.wire_once(S.wiring, INJECT, ranks, a)
  end
  local view = {shard = function(_, x) return x == inj.src and bufs[1] or bufs[2] end}
  inj.bufs = bufs
  inj.run = tl.launch(S.sys, ranks, inject_kernel, a, view, view)
end

-- Checks and starts an injection; -> its event id.
local function inject(c, kind, src, dst, bytes, at, tag, chunk)
  for _, x in ipairs{src, dst} do
    if x >= S.n_pes then
      refuse("bad_argument", "inject: no rank %d (ranks 0..%d)", x, S.n_pes - 1)
    end
  end
  if kind == "read" then
    if src ~= dst then
      refuse("bad_argument", "inject: a read is at one PE (source %d, destination %d)", src, dst)
    end
  elseif src == dst then
    refuse("bad_argument", "inject: rank %d to itself", src)
  end
  if bytes < 4 or bytes % 4 ~= 0 or bytes > S.max_payload then
    refuse("bad_argument", "inject: %d bytes (a multiple of 4, 4 .. %d)", bytes, S.max_payload)
  end
  if chunk < 0 or chunk % 4 ~= 0 or (chunk > 0 and bytes // math.max(chunk, 4) > 65536) then
    refuse("bad_argument", "inject: pieces of %d bytes (a multiple of 4; 0: one piece; at "
      .. "most 65536 pieces)", chunk)
  end
  if kind == "message" and chunk ~= 0 then
    refuse("bad_argument", "inject: a message is one piece (chunk 0)")
  end
  local horizon = S.sim:now()
  if at ~= at or at < horizon or at > 9e15 then
    refuse("bad_argument", "inject: at %s ns is before the machine's time %s ns", tostring(at),
      tostring(horizon))
  end
  local inj = {id = S.next_event + 1, tag = tag, client = c, kind = kind, src = src, dst = dst,
               bytes = bytes, at = at, chunk = chunk}
  start_injection(inj)
  S.next_event = inj.id
  S.injections[#S.injections + 1] = inj
  return inj.id
end

-- inject: u32 src, u32 dst, u64 bytes (a multiple of 4), f64 at_ns (not
-- before the machine's time), u32 tag -> u32 event id. A transfer from
-- src's memory to dst's, in one piece.
function handle.inject(c, r)
  local src, dst, bytes, at, tag = r:int("I4"), r:int("I4"), r:int("I8"), r:field("d"),
    r:int("I4")
  r:done()
  return string.pack("<I4", inject(c, "transfer", src, dst, bytes, at, tag, 0))
end

-- inject_ex (protocol 3): u8 kind (0 transfer, 1 read, 2 message), u32
-- src, u32 dst, u64 bytes, f64 at_ns, u32 tag, u64 chunk bytes (0: one
-- piece) -> u32 event id.
function handle.inject_ex(c, r)
  local k, src, dst, bytes = r:int("B"), r:int("I4"), r:int("I4"), r:int("I8")
  local at, tag, chunk = r:field("d"), r:int("I4"), r:int("I8")
  r:done()
  local kind = INJECT_KINDS[k]
  if not kind then
    refuse("bad_argument", "inject_ex: kind %d (0 transfer, 1 read, 2 message)", k)
  end
  return string.pack("<I4", inject(c, kind, src, dst, bytes, at, tag, chunk))
end

-- inject_cancel (protocol 3): u32 event id, f64 at_ns (not before the
-- machine's time) -> u8 1 (the injection is pending: it stops at its
-- first piece boundary at or after at_ns; its event says whether it ended
-- first) or 0 (no such injection pending: ended, or not this client's).
function handle.inject_cancel(c, r)
  local eid, at = r:int("I4"), r:field("d")
  r:done()
  local horizon = S.sim:now()
  if at ~= at or at < horizon or at > 9e15 then
    refuse("bad_argument", "inject_cancel: at %s ns is before the machine's time %s ns",
      tostring(at), tostring(horizon))
  end
  for _, inj in ipairs(S.injections) do
    if inj.id == eid and inj.client == c then
      local st = inj.state
      st.cancel_at = math.min(st.cancel_at or at, at)
      return string.pack("<B", 1)
    end
  end
  return string.pack("<B", 0)
end

-- Whether inj has ended; then its status, end and bytes moved.
local function injection_end(inj)
  local st = inj.state
  if inj.kind == "message" then
    if st.cancelled then return EV_CANCELLED, st.end_ns, 0 end
    local lat = st.h and st.h:results().latency_ns[1]
    if lat and lat >= 0 then return EV_DONE, inj.at + lat, inj.bytes end
    return nil
  end
  if not inj.run:latency_ns() then return nil end
  if st.cancelled then return EV_CANCELLED, st.end_ns, st.done_elem * 4 end
  local me = inj.kind == "read" and inj.src or inj.dst
  return EV_DONE, inj.run:times()[me].end_ns, inj.bytes
end

local function add_event(inj, status, end_ns, moved)
  if S.clients[inj.client.id] then
    local ev = inj.client.events
    ev[#ev + 1] = {id = inj.id, tag = inj.tag, start_ns = inj.at, end_ns = end_ns,
                   status = status, bytes = moved}
  end
end

local function free_buffers(inj)
  for _, b in ipairs(inj.bufs or {}) do io_.mem_free(S.sys, b.rank, b.addr, b.kind) end
  inj.bufs = nil
end

-- Injections that ended go to their client's events; their buffers are freed.
local function collect_injections()
  local left = {}
  for _, inj in ipairs(S.injections) do
    local status, end_ns, moved = injection_end(inj)
    if status then
      free_buffers(inj)
      add_event(inj, status, end_ns, moved)
    else
      left[#left + 1] = inj
    end
  end
  S.injections = left
end

-- A new machine in place of one a failed or cancelled run left mid-way
-- (decision 0037). What survives: the clock (the new machine starts where
-- the old one stopped), every client's tensors (same memories, same
-- addresses, same bytes: those of the interrupted collective's members
-- hold what the run had stored), the ranks and connections, queued
-- collectives, and injections that had not started (started again).
-- What does not: the IPCQ channels (wired again by the next collective of
-- each algorithm), kernel scratch, injections under way (event status
-- lost). The trace goes on: the recorder moves to the new machine before
-- its components are made (their rows are the old ones, found by name),
-- and a span "machine rebuilt" on row server/machine marks the cut.
function rebuild(why)
  local old_sim, old_sys = S.sim, S.sys
  collect_injections()
  local cut_ps = old_sim:now_ps()
  local st = old_sim:stats()
  for _, k in ipairs{"activations", "timed_events", "deltas", "switches"} do
    S.stats_base[k] = S.stats_base[k] + st[k]
  end
  local sim = kb.sim{trace = false}
  local had_trace = S.srv:trace() ~= nil
  if had_trace then io_.trace_move(old_sim, sim) end
  local sys = kb.system(sim)
  sys:set_ipcq{buffer_kind = S.cfg.buffer_kind, backpressure = S.cfg.backpressure}
  if cut_ps > 0 then
    sim:spawn("clock", function() kb.wait(cut_ps / 1000) end)
    sim:run()
  end
  assert(sim:now_ps() == cut_ps, "the rebuilt machine's clock")
  -- the tensors at their addresses: in address order per memory (a cube's
  -- SRAM is shared by its PEs: by kind, then address), a filler takes any
  -- gap below a tensor (first fit), then they are freed
  local list = {}
  for _, c in pairs(S.clients) do
    for _, t in pairs(c.tensors) do list[#list + 1] = t end
  end
  table.sort(list, function(a, b)
    if a.kind ~= b.kind then return a.kind < b.kind end
    if a.addr ~= b.addr then return a.addr < b.addr end
    return a.rank < b.rank
  end)
  local fillers = {}
  for _, t in ipairs(list) do
    local bytes = t.n * ESIZE[t.dtype]
    local addr = tl.alloc(sys, t.rank, t.kind, bytes)
    for _ = 1, 64 do
      if addr >= t.addr then break end
      io_.mem_free(sys, t.rank, addr, t.kind)
      fillers[#fillers + 1] = {t.rank, tl.alloc(sys, t.rank, t.kind, t.addr - addr), t.kind}
      addr = tl.alloc(sys, t.rank, t.kind, bytes)
    end
    io_.mem_copy(sys, t.rank, t.kind, addr, old_sys, t.addr, bytes)
    t.addr = addr
  end
  for _, f in ipairs(fillers) do io_.mem_free(sys, f[1], f[2], f[3]) end
  S.srv:set_sim(sim)
  S.sim, S.sys, S.topology = sim, sys, torch.topology_of(sys)
  S.wiring, S.barriers, S.orphans = {sys = sys, wired = {}}, {}, {}
  S.resets = S.resets + 1
  if had_trace then
    sim:trace_span("server.machine", "serve", "machine rebuilt", cut_ps / 1000, cut_ps / 1000,
      {after = why, machine = S.resets + 1})
  end
  -- injections: those not started begin again on the new machine
  local cut_ns = cut_ps / 1000
  local keep = {}
  for _, inj in ipairs(S.injections) do
    if inj.at > cut_ns then
      inj.bufs = nil
      start_injection(inj)
      keep[#keep + 1] = inj
    else
      add_event(inj, EV_LOST, cut_ns, (inj.state.done_elem or 0) * 4)
    end
  end
  S.injections = keep
  old_sim:close()
  log("the machine was rebuilt at %s ns after %s", fmt_ns(cut_ns), why)
end

-- advance: f64 quantum_ns > 0 -> f64 time reached, u32 count, then per
-- event of this client's injections: u32 id, u32 tag, f64 start_ns (its
-- at), f64 end_ns (protocol 3: then u8 status 0 done, 1 cancelled, 2 lost
-- in a rebuild; u64 bytes moved). Runs after the ready collectives.
function handle.advance(c, r, _, op, id)
  local q = r:field("d")
  r:done()
  if not (q > 0 and q < 9e15) then
    refuse("bad_argument", "advance: a quantum of %s ns (it must be > 0)", tostring(q))
  end
  S.advancing[#S.advancing + 1] = {client = c, op = op, id = id, quantum = q}
  return nil
end

local function run_advance(x)
  -- a process that sleeps to the target moves the clock there even when
  -- nothing else is pending (the quantum keeper's time)
  local now_ps = S.sim:now_ps()
  local step_ps = math.max(1, math.floor(x.quantum * 1000 + 0.5))
  local target = (now_ps + step_ps) / 1000
  S.sim:spawn("quantum", function() kb.wait(step_ps / 1000) end)
  local ok, res = pcall(S.srv.simulate, S.srv, S.sim, target)
  if not ok and not S.stopping then
    -- an injection failed: the machine is rebuilt where it stopped
    reply_error(x.client, x.op, x.id, M.STATUS.sim_error, tostring(res))
    rebuild("a failed injection")
    return
  end
  if not S.clients[x.client.id] then return end
  if not ok or res == "stopped" then
    reply_error(x.client, x.op, x.id, M.STATUS.stopping, STOPPING)
    return
  end
  collect_injections()
  local ev = x.client.events
  x.client.events = {}
  local parts = {string.pack("<dI4", S.sim:now(), #ev)}
  local v3 = x.client.version >= 3
  for _, e in ipairs(ev) do
    parts[#parts + 1] = string.pack("<I4I4dd", e.id, e.tag, e.start_ns, e.end_ns)
    if v3 then parts[#parts + 1] = string.pack("<BI8", e.status, e.bytes) end
  end
  send(x.client, x.op, x.id, M.STATUS.ok, table.concat(parts))
end

-- run: answered once nothing is ready or running.
function handle.run(c, r, _, op, id)
  r:done()
  S.waiting_idle[#S.waiting_idle + 1] = {client = c, op = op, id = id}
  return nil
end

local function answer_idle()
  if S.running or #S.ready > 0 then return end
  local w = S.waiting_idle
  S.waiting_idle = {}
  for _, x in ipairs(w) do
    if S.clients[x.client.id] then
      send(x.client, x.op, x.id, M.STATUS.ok, string.pack("<d", S.sim:now()))
    end
  end
end

-- launch: group, s2 kernel, u32 input (0: none), u32 output (0: the
-- input), u16 count then per argument s2 key, u8 type (0 f64, 1 i64, 2
-- s2), the value; u8 flags. A kernel of --kernels FILE run on the group's
-- PEs once every member has issued it (the same name, tensors' size and
-- arguments), as a collective.
local ARG_RESERVED = {world_size = true, n_elem = true, dtype = true}

function handle.launch(c, r, _, op, id)
  local p = {group = r:group(), kernel = r:str()}
  p.tid, p.out = r:int("I4"), r:int("I4")
  local n = r:int("I2")
  p.args = {}
  local text = {}
  for _ = 1, n do
    local key, ty = r:str(), r:int("B")
    local v
    if ty == 0 then v = r:field("d") elseif ty == 1 then v = r:int("i8")
    elseif ty == 2 then v = r:str()
    else refuse("malformed", "malformed launch arguments: argument type %d", ty) end
    if not key:match("^[%a_][%w_]*$") or ARG_RESERVED[key] or p.args[key] ~= nil then
      refuse("bad_argument", "launch: argument name '%s' (an identifier, once; not "
        .. "world_size, n_elem or dtype)", key)
    end
    p.args[key] = v
    text[#text + 1] = key .. "=" .. tostring(v)
  end
  table.sort(text)
  p.argtext = "{" .. table.concat(text, ", ") .. "}"
  p.flags = r:int("B")
  p.algorithm = ""
  r:done()
  if p.tid == 0 then p.tid = nil end
  if p.out == 0 then p.out = nil end
  if not S.kernels then
    refuse("bad_argument", "launch: this server has no kernels (start it with --kernels FILE)")
  end
  if not S.kernels[p.kernel] then
    local names = {}
    for k in pairs(S.kernels) do names[#names + 1] = k end
    table.sort(names)
    refuse("bad_argument", "launch: no kernel '%s' in %s (known: %s)", p.kernel, S.kernels_file,
      table.concat(names, ", "))
  end
  issue(c, op, id, "launch", p)
  return nil
end

-- The kernels of --kernels FILE: a Lua file returning a table name ->
-- function(args, input, output) (a kernel of docs/kernel_api.md), or name ->
-- {kernel = function, wire = function(sys, ranks, args)} when it talks over
-- IPCQ channels. args: the client's arguments plus world_size, n_elem (the
-- input's elements per rank) and dtype.
local function load_kernels(path)
  local chunk, err = loadfile(path, "t")
  if not chunk then error(("--kernels: %s"):format(err), 0) end
  local ok, lib = pcall(chunk)
  if not ok then error(("--kernels %s: %s"):format(path, tostring(lib)), 0) end
  if type(lib) ~= "table" then
    error(("--kernels %s: the file returns a %s, not a table of kernels"):format(path,
      type(lib)), 0)
  end
  local out = {}
  for name, k in pairs(lib) do
    if type(name) ~= "string" then
      error(("--kernels %s: a kernel's name must be a string"):format(path), 0)
    end
    if type(k) == "function" then k = {kernel = k} end
    if type(k) == "table" then -- a misspelt field: named (it read as a kernel-less table)
      local odd
      for key in pairs(k) do
        if key ~= "kernel" and key ~= "wire" and (odd == nil or tostring(key) < odd) then
          odd = tostring(key)
        end
      end
      if odd then
        error(("--kernels %s: '%s': unknown field '%s' (fields: kernel, wire)"):format(path,
          name, odd), 0)
      end
    end
    if type(k) ~= "table" or type(k.kernel) ~= "function"
        or (k.wire ~= nil and type(k.wire) ~= "function") then
      error(("--kernels %s: '%s' is not a function or a table {kernel = function, wire = "
        .. "function}"):format(path, name), 0)
    end
    tl.name(k.kernel, name)
    local wire = k.wire
    out[name] = {
      name = name, collective = "launch", kernel = k.kernel,
      wire = function(sys, ranks, a) if wire then wire(sys, ranks, a) end end,
      args = function(N, n_elem, o)
        local a = {world_size = N, n_elem = n_elem, dtype = o.dtype}
        for key, v in pairs(o.user) do a[key] = v end
        return a
      end,
    }
  end
  return out
end

-- trace: u8 0 (pause), 1 (record), 2 (only ask) -> u8 recording, u64
-- events written so far. The trace is the file of --trace; without it,
-- bad_argument.
function handle.trace(_, r)
  local want = r:int("B")
  r:done()
  if want > 2 then refuse("bad_argument", "trace: %d (0 pause, 1 record, 2 ask)", want) end
  local set
  if want < 2 then set = want == 1 end
  local on, events = S.srv:trace(set)
  if on == nil then
    refuse("bad_argument", "trace: this server has no trace (start it with --trace FILE)")
  end
  return string.pack("<BI8", on and 1 or 0, events)
end

-- cancel: u32 request id of one of this client's requests not yet answered
-- -> u8 1 (cancelled: that request got a `cancelled` error first) or 0 (no
-- such request waits: answered already, or never sent). A collective is
-- cancelled for every member that issued it (the others get the same error
-- when they issue it). One already running is stopped at the simulation's
-- next batch and the machine rebuilt (rebuild); the cancel's reply then
-- follows the members' errors (0 if the run ended first).
function handle.cancel(c, r, _, op, id)
  local rid = r:int("I4")
  r:done()
  local function mine(m) return m.client == c and m.id == rid end
  local inst = S.running
  if inst and not inst.failed then
    for _, m in pairs(inst.members) do
      if mine(m) then
        inst.cancel = inst.cancel or {by = c.rank}
        inst.cancels = inst.cancels or {}
        inst.cancels[#inst.cancels + 1] = {client = c, op = op, id = id}
        S.srv:interrupt()
        return nil -- answered when the run has stopped
      end
    end
  end
  local found
  for _, inst in pairs(S.pending) do
    for _, m in pairs(inst.members) do if mine(m) then found = inst end end
  end
  for _, inst in ipairs(S.ready) do
    for _, m in pairs(inst.members) do if mine(m) then found = inst end end
  end
  if found then
    fail_instance(found, ("%s over ranks %s cancelled by rank %d"):format(found.kind,
      group_text(found.group), c.rank), M.STATUS.cancelled)
    return string.pack("<B", 1)
  end
  for _, list in ipairs{S.waiting_idle, S.advancing, c.any_recvs} do
    for i, x in ipairs(list) do
      if (x.client or c) == c and x.id == rid then
        table.remove(list, i)
        reply_error(c, x.op, x.id, M.STATUS.cancelled, ("request %d cancelled"):format(rid))
        return string.pack("<B", 1)
      end
    end
  end
  return string.pack("<B", 0)
end

--------------------------------------------------------------------------
-- Callbacks of lua/lserve.c

local OPNAME = {}
for name, code in pairs(M.OP) do OPNAME[code] = name end

local H = {}

function H.opened(id)
  S.clients[id] = {id = id, tensors = {}, next_tid = 0, seq = {}, failed = {}, events = {},
                   any_recvs = {}}
end

function H.frame(id, version, op, req, meta, data_ptr, data_len)
  local data = {ptr = data_ptr, len = data_len}
  local c = S.clients[id]
  if not c then return end
  local name = OPNAME[op]
  local ok, m, d = pcall(function()
    if version < M.MIN_VERSION or version > M.VERSION then
      refuse("version", "protocol version %d is not supported (this server speaks %d to %d)",
        version, M.MIN_VERSION, M.VERSION)
    end
    if c.hello and version ~= c.version then
      refuse("version", "protocol version %d on a connection that said hello in %d", version,
        c.version)
    end
    if not name then refuse("unknown_op", "unknown operation %d", op) end
    if (OP_SINCE[op] or 1) > version then
      refuse("unknown_op", "operation %d (%s) is protocol %d; this frame is protocol %d", op,
        name, OP_SINCE[op], version)
    end
    if name == "hello" and not c.hello then c.version = version end
    if not c.hello and name ~= "hello" then
      refuse("refused", "%s before hello: the first frame must be a hello", name)
    end
    if data_len > 0 and name ~= "write" then
      refuse("malformed", "%s takes no data, got %d bytes", name, data_len)
    end
    return handle[name](c, reader(meta, name), data, op, req)
  end)
  if not ok then
    if getmetatable(m) == Refusal then
      reply_error(c, op, req, m.status, m.msg)
    else
      reply_error(c, op, req, M.STATUS.sim_error, "internal error: " .. tostring(m))
      log("internal error in %s: %s", tostring(name), tostring(m))
    end
  elseif m then
    send(c, op, req, M.STATUS.ok, m, d)
  end
end

-- A client that leaves: its rank is free again; every collective of a
-- group it belongs to that has not answered fails, naming it. One that is
-- running is stopped at the simulation's next batch, as a cancel stops it
-- (decision 0042): its members get `cancelled` naming the rank that left,
-- and the machine is rebuilt without the leaver's tensors.
function H.closed(id)
  local c = S.clients[id]
  if not c then return end
  S.clients[id] = nil
  if c.rank == nil or S.stopping then return end
  S.ranks[c.rank] = nil
  -- failures it was to hear of when it issued them: its successor skips them
  for key in pairs(c.failed) do skip_seq(c.rank, key) end
  local function involves(inst)
    for _, r in ipairs(inst.group) do if r == c.rank then return true end end
    return false
  end
  local doomed = {}
  for _, inst in pairs(S.pending) do if involves(inst) then doomed[#doomed + 1] = inst end end
  for _, inst in ipairs(S.ready) do if involves(inst) then doomed[#doomed + 1] = inst end end
  local run = S.running
  if run and involves(run) and not run.failed then
    run.cancel = run.cancel or {by = c.rank, left = true}
    S.srv:interrupt()
  end
  table.sort(doomed, function(a, b) return a.key < b.key end)
  for _, inst in ipairs(doomed) do
    fail_instance(inst, ("rank %d disconnected during %s over ranks %s"):format(c.rank,
      inst.kind, group_text(inst.group)))
  end
  -- its tensors go back to the PE's memory, after the running collective
  -- if its kernels may still use them (a rebuild drops them: only the
  -- connected clients' tensors move to the new machine)
  for _, t in pairs(c.tensors) do
    if S.running then S.orphans[#S.orphans + 1] = t
    else io_.mem_free(S.sys, t.rank, t.addr, t.kind) end
  end
end

-- Collectives whose members did not all come within the timeout fail; so
-- does a receive from any source that no send reached.
function H.tick(now)
  for _, c in pairs(S.clients) do
    local q = c.any_recvs
    while q[1] and now >= q[1].deadline do
      local x = table.remove(q, 1)
      reply_error(c, x.op, x.id, M.STATUS.collective_failed, ("recv from any source on rank "
        .. "%d: no send to it within %g s"):format(c.rank, S.timeout_ms / 1000))
    end
  end
  local late = {}
  for _, inst in pairs(S.pending) do
    if now >= inst.deadline then late[#late + 1] = inst end
  end
  table.sort(late, function(a, b) return a.key < b.key end)
  for _, inst in ipairs(late) do
    local missing = {}
    for _, r in ipairs(inst.group) do
      if not inst.members[r] then missing[#missing + 1] = tostring(r) end
    end
    fail_instance(inst, ("%s over ranks %s: rank%s %s did not issue it within %g s")
      :format(inst.kind, group_text(inst.group), #missing > 1 and "s" or "",
        table.concat(missing, ", "), S.timeout_ms / 1000))
  end
end

-- The server stops: every collective not yet answered fails; the
-- connections then close without blaming each other.
function H.stopping()
  S.stopping = true
  local all = {}
  for _, inst in pairs(S.pending) do all[#all + 1] = inst end
  for _, inst in ipairs(S.ready) do all[#all + 1] = inst end
  table.sort(all, function(a, b) return a.key < b.key end)
  for _, inst in ipairs(all) do
    fail_instance(inst, ("%s over ranks %s failed: %s"):format(inst.kind,
      group_text(inst.group), STOPPING), M.STATUS.stopping)
  end
  for _, list in ipairs{S.waiting_idle, S.advancing} do
    for _, x in ipairs(list) do
      if S.clients[x.client.id] then
        reply_error(x.client, x.op, x.id, M.STATUS.stopping, STOPPING)
      end
    end
  end
  for _, c in pairs(S.clients) do
    for _, x in ipairs(c.any_recvs) do reply_error(c, x.op, x.id, M.STATUS.stopping, STOPPING) end
    c.any_recvs = {}
  end
  S.waiting_idle, S.advancing = {}, {}
end

function H.pump()
  local inst = table.remove(S.ready, 1)
  if inst then
    run_instance(inst)
    collect_injections()
    answer_idle()
    return true
  end
  answer_idle()
  local x = table.remove(S.advancing, 1)
  if x then
    run_advance(x)
    return true
  end
  return false
end

--------------------------------------------------------------------------

-- integer: whole numbers only ("expected an integer from 1 to 4294967295",
-- not "a number in 1..4.29497e+09"); white space around the value is
-- refused, as kbsim's other options' (tonumber took " 5")
local function number_option(v, name, default, min, max, integer)
  if v == nil then return default end
  local n = not v:find("^%s") and not v:find("%s$") and tonumber(v)
  if integer then n = n and math.tointeger(n) end
  if not n or n < min or n > max then
    error(("bad value '%s' for '%s' (expected %s from %s to %s)"):format(v, name,
      integer and "an integer" or "a number", min, max), 0)
  end
  return n
end

-- opts: listen, token, allow_remote, max_payload, timeout (strings as
-- given on the command line).
function M.main(opts)
  local listen = opts.listen or (kb.outdir() .. "/kbsim.sock")
  local max_payload = number_option(opts.max_payload, "--max-payload", 256 << 20, 1,
    0xFFFFFFFF, true)
  local timeout = number_option(opts.timeout, "--timeout", 60, 0.001, 86400)
  if opts.allow_remote and not opts.token then
    error("--allow-remote needs --token TOKEN", 0)
  end
  local sim = kb.sim{}
  local sys = kb.system(sim)
  local cfg = kb.ccl_config(nil)
  sys:set_ipcq{buffer_kind = cfg.buffer_kind, backpressure = cfg.backpressure}
  S = {sim = sim, sys = sys, cfg = cfg, topology = torch.topology_of(sys),
       n_pes = sys:counts().pes, token = opts.token, max_payload = max_payload,
       timeout_ms = math.floor(timeout * 1000 + 0.5), quiet = kb.options.quiet,
       clients = {}, ranks = {}, pending = {}, ready = {}, barriers = {},
       waiting_idle = {}, orphans = {}, done = 0, injections = {}, advancing = {},
       next_event = 0, wiring = {sys = sys, wired = {}}, resets = 0, order = 0, rank_seq = {},
       stats_base = {activations = 0, timed_events = 0, deltas = 0, switches = 0}}
  if opts.kernels then
    S.kernels, S.kernels_file = load_kernels(opts.kernels), opts.kernels
  end
  local ok, srv, address = pcall(io_.open, {listen = listen, allow_remote = opts.allow_remote,
                                            token = opts.token, max_payload = max_payload,
                                            sim = sim, handlers = H})
  if not ok then error((tostring(srv):gsub("^[^:]*:%d+: ", "")), 0) end
  S.srv = srv
  io.stdout:write(("kbsim serve: listening on %s (protocol %d, %d ranks)\n")
    :format(address, M.VERSION, S.n_pes))
  -- (the newest version; clients of versions M.MIN_VERSION.. are served too)
  io.stdout:flush()
  local why = srv:run()
  io.stderr:write(("kbsim serve: stopped: %s\n"):format(why))
end

return M
