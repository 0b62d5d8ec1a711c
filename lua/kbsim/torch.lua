-- kbsim/torch.lua — torch-like host API: sharded tensors in PE HBM, torch.distributed, spawn
--
--   local torch = require("kbsim.torch").new(sim, sys)
--   local t = torch.zeros({1, 4096}, {dtype = "f32", placement = "column_wise"})
--   t:copy_(torch.from_table(values, {dtype = "f32"}))
--   torch.distributed.init_process_group{backend = "ahbm"}
--   local rep = torch.distributed.all_reduce(t)
--
-- Host reads and writes take no simulated time. A collective launches its
-- algorithm's kernel on every rank of the group, runs the simulation to
-- the end and reports latency, bandwidths and a check against a host
-- reference computed from the inputs before the run (docs/kernel_api.md).
local kb = require("kbsim")
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local M = {}

local DTYPE_BYTES = {f16 = 2, bf16 = 2, f32 = 4}

-- Rounding to a binary float format with `mbits` mantissa bits, minimum
-- normal exponent `emin` and largest finite value `max`, to nearest even,
-- so the host reference rounds exactly as the PE's arithmetic does.
local function rounder(mbits, emin, max)
  return function(x)
    if x ~= x or x == 0 or x == math.huge or x == -math.huge then return x end
    local a = math.abs(x)
    local e = math.floor(math.log(a, 2))
    if 2.0 ^ e > a then e = e - 1 elseif 2.0 ^ (e + 1) <= a then e = e + 1 end
    if e < emin then e = emin end
    local q = 2.0 ^ (e - mbits)
    local m = a / q
    local r = math.floor(m)
    local frac = m - r
    if frac > 0.5 or (frac == 0.5 and r % 2 == 1) then r = r + 1 end
    local v = r * q
    if v > max then v = math.huge end
    return x < 0 and -v or v
  end
end

local ROUND = {
  f32 = rounder(23, -126, 3.4028234663852886e38),
  bf16 = rounder(7, -126, 3.3895313892515355e38),
  f16 = rounder(10, -14, 65504.0),
}
-- Unit roundoff: the check's tolerance grows with it and the rank count.
local EPS = {f32 = 2.0 ^ -23, bf16 = 2.0 ^ -7, f16 = 2.0 ^ -10}

-- nccl-tests bus bandwidth factors.
local BUS = {
  all_reduce = function(n) return 2 * (n - 1) / n end,
  all_gather = function(n) return (n - 1) / n end,
  reduce_scatter = function(n) return (n - 1) / n end,
  all_to_all = function(n) return (n - 1) / n end,
  all_to_allv = function(n) return (n - 1) / n end,
  broadcast = function() return 1 end,
  reduce = function() return 1 end,
  gather = function(n) return (n - 1) / n end,
  scatter = function(n) return (n - 1) / n end,
  barrier = function() return 0 end,
}

M.round = function(dtype, x) return ROUND[dtype](x) end

-- An options table of `what` holds only the keys listed in `known` (a
-- list, in the order the message names them); level as for error().
local function checkopts(o, known, what, level)
  if o == nil then return {} end
  if type(o) ~= "table" then
    error(("%s: the options must be a table, got %s"):format(what, type(o)), level + 1)
  end
  kb._check_keys(o, known, what, "option", "", level + 1)
  return o
end

local function checkdtype(dt, what)
  if not DTYPE_BYTES[dt] then
    error(("%s: unknown dtype '%s' (f16, bf16, f32)"):format(what, tostring(dt)), 3)
  end
  return dt
end

-- A nested table of numbers flattened row-major, with its shape.
local function flatten(v, out, shape, depth)
  if type(v) == "number" then
    out[#out + 1] = v
    return
  end
  if type(v) ~= "table" then
    error(("from_table: expected numbers, got a %s"):format(type(v)), 4)
  end
  if shape[depth] == nil then shape[depth] = #v
  elseif shape[depth] ~= #v then
    error(("from_table: ragged table: %d entries where %d were expected"):format(#v, shape[depth]), 4)
  end
  for i = 1, #v do flatten(v[i], out, shape, depth + 1) end
end

-- The SIP/cube geometry of a system as the collectives need it, read from
-- its counts and neighbour maps (nil for a graph). The SIP topology is
-- recognised by where SIP 0's global links lead.
local function topology_of(sys)
  local c = sys:counts()
  if c.sips == 0 then return nil end
  local t = {sips = c.sips, cubes = c.cubes, pes = c.pes}
  t.pes_per_cube = c.pes // c.cubes
  t.cubes_per_sip = c.cubes // c.sips
  local w, r = 1, 0
  while true do
    local e = sys:neighbor(r, "E")
    if not e or sys:pe(e).sip ~= 0 or e == 0 then break end
    w, r = w + 1, e
  end
  t.cube_w, t.cube_h = w, t.cubes_per_sip // w
  local function sip_of(rank) return rank and sys:pe(rank).sip end
  local function walk(dir)
    local n, s = 1, sip_of(sys:neighbor(0, dir))
    local r2 = sys:neighbor(0, dir)
    while s and s ~= 0 do
      n = n + 1
      r2 = sys:neighbor(r2, dir)
      s = sip_of(r2)
    end
    return n, s == 0
  end
  local sw, wrap_e = walk("global_E")
  local sh, wrap_s = walk("global_S")
  if sh == 1 and not sys:neighbor(0, "global_N") then
    t.sip_topology = (sw > 1 and not wrap_e) and "mesh_2d_no_wrap" or "ring_1d"
    if t.sip_topology == "ring_1d" then sw = c.sips end
  else
    t.sip_topology = (wrap_e or sw == 1) and (wrap_s or sh == 1) and "torus_2d" or "mesh_2d_no_wrap"
  end
  t.sip_w, t.sip_h = sw, sh
  return t
end
M.topology_of = topology_of

--------------------------------------------------------------------------
-- Tensors

local Tensor = {}
Tensor.__index = Tensor

local function numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

local function checkshape(shape, what)
  if type(shape) == "number" then shape = {shape} end
  if type(shape) ~= "table" or #shape == 0 then
    error(("%s: shape must be a list of sizes"):format(what), 3)
  end
  for i, d in ipairs(shape) do
    if math.type(d) ~= "integer" or d < 1 then
      error(("%s: dimension %d must be a positive integer, got %s"):format(what, i, tostring(d)), 3)
    end
  end
  return shape
end

-- The full tensor's flat index of element j of a shard (column_wise:
-- the shard holds columns [k*cs, (k+1)*cs) of every row).
local function full_index(t, k, j)
  if t.placement == "replicate" then return j end
  local cols = t.shape[#t.shape]
  local cs = cols // #t.ranks
  local row, col = j // cs, j % cs
  return row * cols + k * cs + col
end

-- The shard of t on rank, or an error at the line that called the method
-- that asked (every caller below is one call from the user).
local function shard_of(t, rank)
  local k = t.index[rank]
  if not k then
    error(("tensor has no shard on rank %s"):format(tostring(rank)), 3)
  end
  return {rank = rank, addr = t.addrs[k], n = t.shard_n, kind = t.memory, dtype = t.dtype}
end

function Tensor:shard(rank)
  local s = shard_of(self, rank)
  return s
end

-- The same as four values, addr, n, kind, dtype, with no table made: what
-- tl.load and tl.store ask for on every call (kbsim.tl).
function Tensor:shard_place(rank)
  local k = self.index[rank]
  if not k then
    error(("tensor has no shard on rank %s"):format(tostring(rank)), 2)
  end
  return self.addrs[k], self.shard_n, self.memory, self.dtype
end

local VEC_MT = getmetatable(tl.vec_new(1))

-- One shard's values (host read, no time).
function Tensor:shard_table(rank)
  local s = shard_of(self, rank)
  return tl.host_read(self.sys, rank, s.addr, self.dtype, s.n, self.memory)
end

-- One shard as a host vector (kbsim.vec: C speed, no time); with `into`, a
-- vector of the shard's length, read into it (a check of many shards
-- reuses one vector rather than making one a shard).
function Tensor:shard_vec(rank, into)
  local s = shard_of(self, rank)
  if into == nil then
    return tl.vec_read(self.sys, rank, s.addr, self.dtype, s.n, s.kind)
  end
  if getmetatable(into) ~= VEC_MT then
    error(("shard_vec: 'into' must be a host vector (tl.vec_new, ...), got %s"):format(type(into)), 2)
  end
  if #into ~= s.n then
    error(("shard_vec: 'into' has %d elements, the shard %d"):format(#into, s.n), 2)
  end
  return into:read(self.sys, rank, s.addr, self.dtype, s.kind)
end

-- Writes a host vector into one shard (no time); rounded to the dtype.
function Tensor:shard_write_vec(rank, v)
  local s = shard_of(self, rank)
  if getmetatable(v) ~= VEC_MT then
    error(("shard_write_vec: a host vector (tl.vec_new, tl.vec_from, ...) is expected, got %s")
      :format(type(v)), 2)
  end
  if #v ~= s.n then
    error(("shard_write_vec: %d values for a shard of %d elements"):format(#v, s.n), 2)
  end
  v:write(self.sys, rank, s.addr, self.dtype, s.kind)
  return self
end

-- Writes one shard (host write, no time); values are rounded to the dtype.
function Tensor:shard_copy_(rank, values)
  local s = shard_of(self, rank)
  if #values ~= s.n then
    error(("shard_copy_: %d values for a shard of %d elements"):format(#values, s.n), 2)
  end
  tl.host_write(self.sys, rank, s.addr, self.dtype, values, self.memory)
  return self
end

-- The whole tensor, row-major (replicate: rank ranks[1]'s copy).
function Tensor:to_table()
  if self.placement == "replicate" then
    return self:shard_table(self.ranks[1])
  end
  local out = {}
  for k, r in ipairs(self.ranks) do
    local v = self:shard_table(r)
    for j = 1, #v do out[full_index(self, k - 1, j - 1) + 1] = v[j] end
  end
  return out
end

-- Copies a host tensor (from_table) or another tensor of the same size in.
function Tensor:copy_(src)
  local vals
  if getmetatable(src) == Tensor then
    vals = src:to_table()
  elseif type(src) == "table" and src.host then
    vals = src.values
  else
    error("copy_: source must be a tensor or torch.from_table(...)", 2)
  end
  if #vals ~= self.numel then
    error(("copy_: source has %d elements, tensor %d"):format(#vals, self.numel), 2)
  end
  for k, r in ipairs(self.ranks) do
    local shard = {}
    for j = 0, self.shard_n - 1 do shard[j + 1] = vals[full_index(self, k - 1, j) + 1] end
    tl.host_write(self.sys, r, self.addrs[k], self.dtype, shard, self.memory)
  end
  return self
end

function Tensor:__tostring()
  return ("tensor(%s, %s, %s over %d ranks)"):format(table.concat(self.shape, "x"), self.dtype,
    self.placement, #self.ranks)
end

--------------------------------------------------------------------------
-- torch.distributed

-- Reads ccl.yaml through the binding's strict reader (kb.ccl_config):
-- configs/ccl.yaml, then `config` (a path, a table mirroring the YAML,
-- or else ./ccl.yaml when present), then --set. A table is read as a
-- tree, as kb.system reads one: its messages name the script line that
-- called init_process_group and the key's path.
local function load_ccl(config)
  if config == nil then
    local f = io.open("ccl.yaml", "r")
    if f then f:close(); config = "ccl.yaml" end
  end
  return kb.ccl_config(config)
end

local function group_world(T, cfg, algo, name)
  local entry = cfg.algorithms and cfg.algorithms[name]
  local ws = entry and entry.world_size
  if ws and ws > T.counts.pes then
    error(("%s: world size %d of '%s' exceeds the %d PEs of the system")
      :format(cfg.where or "ccl.yaml", ws, name, T.counts.pes), 0)
  end
  local ranks
  if algo.ranks then
    ranks = algo.ranks(T.topology, ws)
  else
    ws = ws or T.counts.pes
    ranks = {}
    for i = 0, ws - 1 do ranks[i + 1] = i end
  end
  return ranks
end

-- Wires an algorithm once per system: the same channel asked for again
-- (another collective on the same ring, a second call) is already there,
-- and a different one on a taken direction is an error naming both.
local function wire_once(T, algo, ranks, a)
  local raw = tl.wire
  local seen = T.wired
  local function memo(sys, x, dx, y, dy, ...)
    local tx, rx = x .. ":" .. dx, y .. ":" .. dy
    local want = tx .. ">" .. rx
    if seen["tx " .. tx] == want and seen["rx " .. rx] == want then return end
    if seen["tx " .. tx] or seen["rx " .. rx] then
      error(("'%s' wants channel %s -> %s, but %s is taken by an earlier collective")
        :format(algo.name, tx, rx, seen["tx " .. tx] and ("sending side " .. tx)
          or ("receiving side " .. rx)), 0)
    end
    raw(sys, x, dx, y, dy, ...)
    seen["tx " .. tx], seen["rx " .. rx] = want, want
  end
  tl.wire = memo
  local ok, err = pcall(algo.wire, T.sys, ranks, a)
  tl.wire = raw
  if not ok then error(err, 0) end
end
-- T: {sys = a system, wired = {}} kept across calls (kbsim serve wires
-- its collectives through it too).
M.wire_once = wire_once

-- Launches algo on ranks with args a, runs the simulation, and returns
-- latency and per-rank times.
local function execute(T, algo, ranks, a, input, output)
  wire_once(T, algo, ranks, a)
  local run = tl.launch(T.sys, ranks, algo.kernel, a, input, output)
  T.sim:run()
  local per = {}
  for r, t in pairs(run:times()) do per[r] = t.exec_ns end
  return run:latency_ns(), per
end

-- Every rank's output against its reference; tolerance n_ranks roundings
-- of the largest finite reference value (exact for f32 integer sums). A
-- reference that is not finite (an overflow to ±inf, a NaN input) must
-- be matched exactly (NaN by NaN) and does not widen the tolerance: one
-- inf once made every error pass, and NaN = NaN made the check fail.
-- Tight loops: at milestone sizes this reads millions of elements.
local function compare(out, ref, dtype, n_ranks)
  local maxref, seen = 0, {}
  for _, v in pairs(ref) do
    if not seen[v] then
      seen[v] = true
      for j = 1, #v do
        local x = v[j]
        if x < 0 then x = -x end
        if x > maxref and x ~= math.huge then maxref = x end
      end
    end
  end
  local tol = n_ranks * EPS[dtype] * (dtype == "f32" and maxref or math.max(maxref, 1))
  local maxerr = 0
  for r, want in pairs(ref) do
    local got = out:shard_table(r)
    for j = 1, #want do
      local w, g = want[j], got[j]
      local e = g - w
      if e < 0 then e = -e end
      if not (e <= maxerr) then
        if w ~= w then e = (g ~= g) and 0 or math.huge -- NaN wants NaN
        elseif w == math.huge or w == -math.huge then e = (g == w) and 0 or math.huge
        elseif e ~= e then e = math.huge end
        if e > maxerr then maxerr = e end
      end
    end
  end
  return maxerr <= tol and "passed" or "failed", maxerr
end

-- compare() on host vectors: every rank's shard against one reference;
-- a reference or a difference that is not finite is settled by compare()
local function compare_vec(out, ranks, ref, dtype)
  local maxref = ref:max_abs()
  local tol = #ranks * EPS[dtype] * (dtype == "f32" and maxref or math.max(maxref, 1))
  local maxerr, buf = 0, tl.vec_new(#ref)
  for _, r in ipairs(ranks) do
    local e = out:shard_vec(r, buf):max_abs_diff(ref)
    if e > maxerr then maxerr = e end
  end
  if maxerr == math.huge or maxref == math.huge then
    local t, refs = ref:to_table(), {}
    for _, r in ipairs(ranks) do refs[r] = t end
    return compare(out, refs, dtype, #ranks)
  end
  return maxerr <= tol and "passed" or "failed", maxerr
end

-- x op y elementwise on host tables (op: "sum" or nil, "max", "min"),
-- as the host reference of a reduction; a new table.
local function elementwise(op, x, y)
  local z = {}
  if op == "max" then
    for j = 1, #x do z[j] = math.max(x[j], y[j]) end
  elseif op == "min" then
    for j = 1, #x do z[j] = math.min(x[j], y[j]) end
  else
    for j = 1, #x do z[j] = x[j] + y[j] end
  end
  return z
end

local function report(T, name, coll, ranks, n_elem, bytes, lat, per, check, maxerr)
  local n = #ranks
  local algbw = lat > 0 and bytes / lat or 0
  return {
    algorithm = name, collective = coll, world_size = n, n_elem = n_elem, bytes = bytes,
    latency_ns = lat, per_rank_ns = per, algbw_gbps = algbw,
    busbw_gbps = algbw * BUS[coll](n), check = check, max_err = maxerr,
  }
end

local function checktensor(x, what, sys, ranks, n)
  if getmetatable(x) ~= Tensor then
    error(("%s must be a tensor"):format(what), 4)
  end
  if x.sys ~= sys then
    error(("%s belongs to another system than the process group's"):format(what), 4)
  end
  for _, r in ipairs(ranks) do
    if not x.index[r] then
      error(("%s has no shard on rank %d of the process group"):format(what, r), 4)
    end
  end
  if n and x.shard_n < n then
    error(("%s: shards of %d elements, the collective needs %d"):format(what, x.shard_n, n), 4)
  end
end

-- The directory of the kbsim Lua library (…/lua), for telling its
-- frames and messages from a script's.
local LIBDIR = debug.getinfo(1, "S").source:match("^@(.*)/kbsim/torch%.lua$")

-- "FILE:LINE" of the innermost caller outside the library (the script's
-- line that called a torch.distributed function), or nil.
local function user_line()
  for level = 3, 50 do
    local info = debug.getinfo(level, "Sl")
    if not info then return nil end
    if info.what ~= "C" and info.currentline > 0 and not (LIBDIR and info.source:sub(1, 1) == "@"
        and info.source:sub(2, #LIBDIR + 1) == LIBDIR) then
      return info.short_src .. ":" .. info.currentline
    end
  end
end

-- An error raised inside a collective, as the script should see it: a
-- message without a place, or placed inside the library (a wiring of
-- torch.lua, a check of a ccl algorithm, a kernel's failure), is placed
-- at the script's line instead; one already placed elsewhere (the
-- script's own line, ccl.yaml:LINE:COL, a user's algorithm) is kept.
local function user_error(e)
  if type(e) ~= "string" then return e end
  local where = user_line()
  if not where then return e end
  local placed = e:match("^(%S+):%d+:")
  if placed and not (LIBDIR and placed:sub(1, #LIBDIR) == LIBDIR) then return e end
  if placed then e = e:gsub("^%S+:%d+: ", "", 1) end
  return where .. ": " .. e
end

local function new_distributed(T)
  local D = {}
  local G -- the process group once initialised

  local function group(what)
    if not G then
      error(("torch.distributed.%s: call init_process_group first"):format(what), 3)
    end
    return G
  end

  -- The algorithm for a collective: opts.algorithm, else (all_reduce) the
  -- one ccl.yaml names, else the collective's own file.
  local function pick(coll, opts)
    local name = opts and opts.algorithm
    local where
    if not name then
      if coll == "all_reduce" then name, where = G.cfg.algorithm, G.cfg.where
      else name = coll end
    end
    local algo = ccl.get(name, where)
    if algo.collective ~= coll then
      error(("%salgorithm '%s' is a %s, not a %s"):format(where and (where .. ": ") or "",
        name, algo.collective, coll), 0)
    end
    return algo
  end

  local function args_for(algo, n_elem, dtype, extra)
    local o = {dtype = dtype, topology = T.topology, buffer_kind = G.cfg.buffer_kind,
               backpressure = G.cfg.backpressure}
    for k, v in pairs(extra or {}) do o[k] = v end
    return algo.args(#G.ranks, n_elem, o)
  end

  function D.init_process_group(o)
    o = checkopts(o, {"backend", "config"}, "init_process_group", 2)
    if o.backend and o.backend ~= "ahbm" then
      error(("init_process_group: unknown backend '%s' (ahbm)"):format(tostring(o.backend)), 2)
    end
    local cfg = load_ccl(o.config)
    local algo = ccl.get(cfg.algorithm, cfg.where)
    -- ccl.yaml's IPCQ settings are those of the collectives' channels: the
    -- PE units are made with them (an error if they already exist otherwise)
    T.sys:set_ipcq{buffer_kind = cfg.buffer_kind, backpressure = cfg.backpressure}
    G = {cfg = cfg, backend = "ahbm", algorithm = algo,
         ranks = group_world(T, cfg, algo, cfg.algorithm), epoch = 0, barrier_state = {}}
    G.index = {}
    for i, r in ipairs(G.ranks) do G.index[r] = i - 1 end
    return D
  end

  function D.is_initialized() return G ~= nil end
  function D.get_backend() return group("get_backend").backend end
  function D.get_world_size() return #group("get_world_size").ranks end
  -- Inside torch.multiprocessing.spawn: the worker's rank; else 0.
  function D.get_rank()
    group("get_rank")
    return T.current_rank or 0
  end
  function D.get_ranks() return group("get_ranks").ranks end
  function D.get_config() return group("get_config").cfg end

  local ops = {}

  function ops.all_reduce(t, o)
    o = o or {}
    local ranks = G.ranks
    checktensor(t, "all_reduce: tensor", T.sys, ranks)
    local n, dt = t.shard_n, t.dtype
    local algo = pick("all_reduce", o)
    -- o.op (sum, max, min) is checked against what the algorithm accepts
    -- by its args (the registry's check)
    local a = args_for(algo, n, dt, o)
    -- o.check == false: no host reference (timing sweeps at scale)
    -- the sum's reference and check run on host vectors (C speed): at
    -- milestone sizes they read millions of elements; max and min (exact
    -- in any dtype) on tables
    local sum, ref
    if o.check ~= false and (o.op or "sum") == "sum" then
      sum = t:shard_vec(ranks[1])
      for k = 2, #ranks do sum:add(t:shard_vec(ranks[k])) end
      sum:round(dt)
    elseif o.check ~= false then
      local m = t:shard_table(ranks[1])
      for k = 2, #ranks do m = elementwise(o.op, m, t:shard_table(ranks[k])) end
      ref = {}
      for _, r in ipairs(ranks) do ref[r] = m end
    end
    local lat, per = execute(T, algo, ranks, a, t, t)
    local check, err = "skipped", 0
    if sum then check, err = compare_vec(t, ranks, sum, dt) end
    if ref then check, err = compare(t, ref, dt, 1) end
    local rep = report(T, algo.name, "all_reduce", ranks, n, n * DTYPE_BYTES[dt], lat, per, check,
      err)
    -- a chooser (ccl/auto.lua) names what it ran, its estimate and every
    -- candidate's ({name = ns})
    rep.chosen, rep.chosen_ns = a.chosen, a.chosen_ns
    if a.candidates then
      rep.estimates = {}
      for _, c in ipairs(a.candidates) do rep.estimates[c.name] = c.ns end
    end
    return rep
  end

  function ops.all_gather(out, inp, o)
    local ranks, N = G.ranks, #G.ranks
    checktensor(inp, "all_gather: input", T.sys, ranks)
    local C, dt = inp.shard_n, inp.dtype
    checktensor(out, "all_gather: output", T.sys, ranks, N * C)
    local algo = pick("all_gather", o)
    local ref
    if not (o and o.check == false) then
      local cat = {}
      for k, r in ipairs(ranks) do
        local v = inp:shard_table(r)
        for j = 1, C do cat[(k - 1) * C + j] = v[j] end
      end
      ref = {}
      for _, r in ipairs(ranks) do ref[r] = cat end
    end
    local lat, per = execute(T, algo, ranks, args_for(algo, C, dt, o), inp, out)
    local check, err = "skipped", 0
    if ref then check, err = compare(out, ref, dt, 1) end
    return report(T, algo.name, "all_gather", ranks, C, N * C * DTYPE_BYTES[dt], lat, per, check, err)
  end

  function ops.reduce_scatter(out, inp, o)
    local ranks, N = G.ranks, #G.ranks
    checktensor(inp, "reduce_scatter: input", T.sys, ranks)
    local dt = inp.dtype
    if inp.shard_n % N ~= 0 then
      error(("reduce_scatter: input shards of %d elements do not split over %d ranks")
        :format(inp.shard_n, N), 0)
    end
    local C = inp.shard_n // N
    checktensor(out, "reduce_scatter: output", T.sys, ranks, C)
    local algo = pick("reduce_scatter", o)
    local ref
    if not (o and o.check == false) then
      -- the reference reduces with the op the kernel uses (sum, max, min)
      local sum = inp:shard_table(ranks[1])
      for k = 2, N do sum = elementwise(o and o.op, sum, inp:shard_table(ranks[k])) end
      ref = {}
      for k, r in ipairs(ranks) do
        local v = {}
        for j = 1, C do v[j] = ROUND[dt](sum[(k - 1) * C + j]) end
        ref[r] = v
      end
    end
    local lat, per = execute(T, algo, ranks, args_for(algo, C, dt, o), inp, out)
    local check, err = "skipped", 0
    if ref then check, err = compare(out, ref, dt, N) end
    return report(T, algo.name, "reduce_scatter", ranks, C, N * C * DTYPE_BYTES[dt], lat, per,
      check, err)
  end

  function ops.all_to_all(out, inp, o)
    local ranks, N = G.ranks, #G.ranks
    checktensor(inp, "all_to_all: input", T.sys, ranks)
    local dt = inp.dtype
    if inp.shard_n % N ~= 0 then
      error(("all_to_all: input shards of %d elements do not split over %d ranks")
        :format(inp.shard_n, N), 0)
    end
    local C = inp.shard_n // N
    checktensor(out, "all_to_all: output", T.sys, ranks, N * C)
    local algo = pick("all_to_all", o)
    local ref
    if not (o and o.check == false) then
      local src = {}
      for k, r in ipairs(ranks) do src[k] = inp:shard_table(r) end
      ref = {}
      for j, r in ipairs(ranks) do
        local v = {}
        for i = 1, N do
          for e = 1, C do v[(i - 1) * C + e] = src[i][(j - 1) * C + e] end
        end
        ref[r] = v
      end
    end
    local lat, per = execute(T, algo, ranks, args_for(algo, C, dt, o), inp, out)
    local check, err = "skipped", 0
    if ref then check, err = compare(out, ref, dt, 1) end
    return report(T, algo.name, "all_to_all", ranks, C, N * C * DTYPE_BYTES[dt], lat, per, check, err)
  end

  -- in_splits[i][j]: elements launch index i-1 sends to j-1; out_splits
  -- must be its transpose (out_splits[j][i], what j receives from i).
  function ops.all_to_allv(out, inp, out_splits, in_splits, o)
    local ranks, N = G.ranks, #G.ranks
    checktensor(inp, "all_to_allv: input", T.sys, ranks)
    local dt = inp.dtype
    if type(in_splits) ~= "table" or #in_splits ~= N then
      error(("all_to_allv: in_splits must be a %d x %d table"):format(N, N), 0)
    end
    local maxin, maxout = 0, 0
    for i = 1, N do
      local si, so = 0, 0
      for j = 1, N do
        local c = in_splits[i][j]
        if out_splits and (type(out_splits[j]) ~= "table" or out_splits[j][i] ~= c) then
          error(("all_to_allv: out_splits[%d][%d] = %s but in_splits[%d][%d] = %s")
            :format(j - 1, i - 1, tostring(out_splits[j] and out_splits[j][i]), i - 1, j - 1,
              tostring(c)), 0)
        end
        si = si + (c or 0)
        so = so + (in_splits[j][i] or 0)
      end
      maxin, maxout = math.max(maxin, si), math.max(maxout, so)
    end
    local extra = {splits = in_splits}
    for k, v in pairs(o or {}) do extra[k] = v end
    local algo = pick("all_to_allv", extra)
    local a = args_for(algo, maxin, dt, extra)
    checktensor(inp, "all_to_allv: input", T.sys, ranks, maxin)
    checktensor(out, "all_to_allv: output", T.sys, ranks, maxout)
    local src = {}
    for k, r in ipairs(ranks) do src[k] = inp:shard_table(r) end
    local ref = {}
    for j, r in ipairs(ranks) do
      local v = {}
      for i = 1, N do
        local base = a.in_off[i][j]
        for e = 1, in_splits[i][j] do v[#v + 1] = src[i][base + e] end
      end
      ref[r] = v
    end
    local lat, per = execute(T, algo, ranks, a, inp, out)
    local check, err = compare(out, ref, dt, 1)
    return report(T, algo.name, "all_to_allv", ranks, maxin, maxin * DTYPE_BYTES[dt], lat, per,
      check, err)
  end

  function ops.broadcast(t, src, o)
    local ranks = G.ranks
    checktensor(t, "broadcast: tensor", T.sys, ranks)
    src = src or 0
    if not G.index[ranks[(src or 0) + 1] or -1] then
      error(("broadcast: source rank %s is not in 0..%d"):format(tostring(src), #ranks - 1), 0)
    end
    local n, dt = t.shard_n, t.dtype
    local extra = {src = src}
    for k, v in pairs(o or {}) do extra[k] = v end
    local algo = pick("broadcast", extra)
    local ref
    if extra.check ~= false then
      local v = t:shard_table(ranks[src + 1])
      ref = {}
      for _, r in ipairs(ranks) do ref[r] = v end
    end
    local lat, per = execute(T, algo, ranks, args_for(algo, n, dt, extra), t, t)
    local check, err = "skipped", 0
    if ref then check, err = compare(t, ref, dt, 1) end
    return report(T, algo.name, "broadcast", ranks, n, n * DTYPE_BYTES[dt], lat, per, check, err)
  end

  -- The rooted collectives (reduce, gather, scatter), torch's meaning: the
  -- root is a rank of the group (0..N-1, as broadcast's src), given after
  -- the tensors or as opts[key] ("dst" or "src"), default 0. Returns the
  -- root and the options (only the keys in known).
  local function rooted(what, key, x, y, known)
    local o = y
    if type(x) == "table" and y == nil then x, o = nil, x end
    o = checkopts(o, known, what, 2)
    if x ~= nil and o[key] ~= nil then
      error(("%s: %s given twice (as an argument and as an option)"):format(what, key), 0)
    end
    local root = x
    if root == nil then root = o[key] end
    if root == nil then root = 0 end
    local N = #G.ranks
    local r = type(root) == "number" and math.tointeger(root)
    if not r or r < 0 or r >= N then
      error(("%s: %s rank %s is not a rank of the group (0..%d)"):format(what, key,
        type(root) == "string" and ("'" .. root .. "'") or tostring(root), N - 1), 0)
    end
    return r, o
  end

  -- A rooted collective's tensor list (gather_list, scatter_list): N
  -- tensors of dtype dt, each with a shard of at least C elements on rank.
  local function checklist(l, what, rank, N, C, dt)
    if #l ~= N then
      error(("%s has %d tensors, the group has %d ranks"):format(what, #l, N), 0)
    end
    for i = 1, N do
      local x = l[i]
      local w = ("%s[%d]"):format(what, i)
      checktensor(x, w, T.sys, {rank}, C)
      if x.dtype ~= dt then
        error(("%s is %s, the collective's elements %s"):format(w, x.dtype, dt), 0)
      end
    end
  end

  -- A buffer of n elements on rank only, kept for the next call of the
  -- same shape: what a list form's kernel reads or writes (the host copies
  -- between it and the list take no simulated time).
  local function staging(rank, n, dt)
    local key = ("%d:%d:%s"):format(rank, n, dt)
    T.staging = T.staging or {}
    if not T.staging[key] then
      T.staging[key] = T.zeros({n}, {dtype = dt, placement = "replicate", ranks = {rank}})
    end
    return T.staging[key]
  end

  -- n elements of t's shard on rank from element off, and a write of them
  -- (host, no time)
  local function read_part(t, rank, off, n)
    return tl.host_read(t.sys, rank, t.addrs[t.index[rank]] + off * DTYPE_BYTES[t.dtype],
      t.dtype, n, t.memory)
  end
  local function write_part(t, rank, off, v)
    tl.host_write(t.sys, rank, t.addrs[t.index[rank]] + off * DTYPE_BYTES[t.dtype], t.dtype, v,
      t.memory)
  end

  -- reduce(t, dst, {op=, ...}) or reduce(t, {dst=, op=, ...}): t's shards
  -- on every rank reduced into dst's; the other ranks' are left as they
  -- were (the check reads them too).
  function ops.reduce(t, x, y)
    local ranks, N = G.ranks, #G.ranks
    local dst, o = rooted("reduce", "dst", x, y, {"dst", "op", "algorithm", "chunks", "check"})
    checktensor(t, "reduce: tensor", T.sys, ranks)
    local n, dt = t.shard_n, t.dtype
    local algo = pick("reduce", o)
    -- o.op (sum, max, min) is checked by the registry, as all_reduce's
    local a = args_for(algo, n, dt, {root = dst, op = o.op, chunks = o.chunks})
    local ref
    if o.check ~= false then
      ref = {}
      local m = t:shard_table(ranks[1])
      ref[ranks[1]] = m
      for k = 2, N do
        local v = t:shard_table(ranks[k])
        ref[ranks[k]] = v
        m = elementwise(o.op, m, v)
      end
      for j = 1, n do m[j] = ROUND[dt](m[j]) end
      ref[ranks[dst + 1]] = m
    end
    local lat, per = execute(T, algo, ranks, a, t, t)
    local check, err = "skipped", 0
    if ref then check, err = compare(t, ref, dt, N) end
    return report(T, algo.name, "reduce", ranks, n, n * DTYPE_BYTES[dt], lat, per, check, err)
  end

  -- gather(out, in, dst, opts) or gather(out, in, {dst=, ...}): every
  -- rank's input (C elements) into dst's output, in group order. out: a
  -- tensor with a shard of at least N*C elements on dst (block k from
  -- rank k), or a list of N tensors (gather_list: list[k+1]'s shard on
  -- dst gets rank k's C elements). Only dst's shards change; the other
  -- ranks need none.
  function ops.gather(out, inp, x, y)
    local ranks, N = G.ranks, #G.ranks
    local dst, o = rooted("gather", "dst", x, y, {"dst", "algorithm", "check"})
    checktensor(inp, "gather: input", T.sys, ranks)
    local C, dt, root = inp.shard_n, inp.dtype, ranks[dst + 1]
    local list = getmetatable(out) ~= Tensor and type(out) == "table" and out or nil
    if list then
      checklist(list, "gather: gather list", root, N, C, dt)
    else
      checktensor(out, "gather: output", T.sys, {root}, N * C)
      if out.dtype ~= dt then
        error(("gather: output is %s, the input %s"):format(out.dtype, dt), 0)
      end
    end
    local algo = pick("gather", o)
    local a = args_for(algo, C, dt, {root = dst})
    local blocks, keep
    if o.check ~= false then
      blocks = {}
      for k, r in ipairs(ranks) do blocks[k] = inp:shard_table(r) end
      -- the shards that must not change: the output's on the other ranks
      keep = {}
      if not list then
        for _, r in ipairs(out.ranks) do if r ~= root then keep[r] = out:shard_table(r) end end
      end
    end
    local target = list and staging(root, N * C, dt) or out
    local lat, per = execute(T, algo, ranks, a, inp, target)
    if list then
      for k = 1, N do write_part(list[k], root, 0, read_part(target, root, (k - 1) * C, C)) end
    end
    local check, err = "skipped", 0
    if blocks then
      local fails = {}
      if list then
        for k = 1, N do fails[#fails + 1] = {list[k], {[root] = blocks[k]}} end
      else
        local cat = {}
        for k = 1, N do for j = 1, C do cat[(k - 1) * C + j] = blocks[k][j] end end
        keep[root] = cat
        fails[1] = {out, keep}
      end
      check = "passed"
      for _, f in ipairs(fails) do
        local c, e = compare(f[1], f[2], dt, 1)
        if c == "failed" then check = c end
        if e > err then err = e end
      end
    end
    return report(T, algo.name, "gather", ranks, C, N * C * DTYPE_BYTES[dt], lat, per, check, err)
  end

  -- scatter(out, in, src, opts) or scatter(out, in, {src=, ...}): block k
  -- of src's input into rank k's output (C elements, out's shard size).
  -- in: a tensor with a shard of at least N*C elements on src, or a list
  -- of N tensors (scatter_list: list[k+1]'s shard on src, at least C
  -- elements, goes to rank k). The other ranks need no input.
  function ops.scatter(out, inp, x, y)
    local ranks, N = G.ranks, #G.ranks
    local src, o = rooted("scatter", "src", x, y, {"src", "algorithm", "check"})
    checktensor(out, "scatter: output", T.sys, ranks)
    local C, dt, root = out.shard_n, out.dtype, ranks[src + 1]
    local list = getmetatable(inp) ~= Tensor and type(inp) == "table" and inp or nil
    if list then
      checklist(list, "scatter: scatter list", root, N, C, dt)
    else
      checktensor(inp, "scatter: input", T.sys, {root}, N * C)
      if inp.dtype ~= dt then
        error(("scatter: input is %s, the output %s"):format(inp.dtype, dt), 0)
      end
    end
    local algo = pick("scatter", o)
    local a = args_for(algo, C, dt, {root = src})
    local source = inp
    if list then
      source = staging(root, N * C, dt)
      for k = 1, N do write_part(source, root, (k - 1) * C, read_part(list[k], root, 0, C)) end
    end
    local ref
    if o.check ~= false then
      ref = {}
      for k, r in ipairs(ranks) do ref[r] = read_part(source, root, (k - 1) * C, C) end
    end
    local lat, per = execute(T, algo, ranks, a, source, out)
    local check, err = "skipped", 0
    if ref then check, err = compare(out, ref, dt, 1) end
    return report(T, algo.name, "scatter", ranks, C, N * C * DTYPE_BYTES[dt], lat, per, check, err)
  end

  function ops.barrier(o)
    local algo = pick("barrier", o)
    G.epoch = G.epoch + 1
    local a = args_for(algo, 0, "f32", {epoch = G.epoch, state = G.barrier_state})
    local lat, per = execute(T, algo, G.ranks, a)
    return report(T, algo.name, "barrier", G.ranks, 0, 0, lat, per, "skipped", 0)
  end

  -- Every collective: run it now, or inside spawn wait until every worker
  -- has called it and run it once for all of them. An error of the run
  -- names the caller's line (see user_error).
  for name, fn in pairs(ops) do
    D[name] = function(...)
      group(name)
      if T.spawn_yield then return T.spawn_yield(name, fn, ...) end
      local res = table.pack(pcall(fn, ...))
      if not res[1] then error(user_error(res[2]), 0) end
      return table.unpack(res, 2, res.n)
    end
  end
  return D
end

--------------------------------------------------------------------------
-- torch.multiprocessing

-- Workers are host coroutines; a collective is a rendezvous: when every
-- live worker waits in one, it runs once and all of them resume with its
-- report. All workers must call the same collective on the same tensors.
local function new_multiprocessing(T)
  local MP = {}

  function MP.spawn(worker, nprocs, ...)
    if type(worker) ~= "function" then error("spawn: worker must be a function", 2) end
    if math.type(nprocs) ~= "integer" or nprocs < 1 then
      error(("spawn: nprocs must be a positive integer, got %s"):format(tostring(nprocs)), 2)
    end
    if T.spawn_yield then error("spawn: already inside spawn", 2) end
    local extra = table.pack(...)
    local co, tb, waiting, results = {}, {}, {}, {}
    for r = 0, nprocs - 1 do
      co[r] = coroutine.create(function()
        return xpcall(worker, function(e) return debug.traceback(tostring(e), 2) end,
          r, nprocs, table.unpack(extra, 1, extra.n))
      end)
    end
    T.spawn_yield = function(name, fn, ...)
      return coroutine.yield({name = name, fn = fn, args = table.pack(...)})
    end
    local function fail(r, msg)
      T.spawn_yield, T.current_rank = nil, nil
      error(("spawn: rank %d failed: %s"):format(r, msg), 0)
    end
    local alive = nprocs
    local resume_val = {}
    local ok_all, err_all = pcall(function()
      while alive > 0 do
        for r = 0, nprocs - 1 do
          if co[r] and not waiting[r] then
            T.current_rank = r
            local ok, a, b = coroutine.resume(co[r], resume_val[r])
            T.current_rank = nil
            if not ok then fail(r, tostring(a)) end
            if coroutine.status(co[r]) == "dead" then
              if not a then fail(r, tostring(b)) end
              co[r] = nil
              alive = alive - 1
            else
              waiting[r] = a
            end
          end
        end
        local first, names = nil, {}
        for r = 0, nprocs - 1 do
          if waiting[r] then
            first = first or waiting[r]
            names[#names + 1] = ("rank %d in %s"):format(r, waiting[r].name)
          end
        end
        if first then
          local n = 0
          for r = 0, nprocs - 1 do
            if waiting[r] then
              n = n + 1
              if waiting[r].name ~= first.name then
                fail(r, ("collective mismatch: %s"):format(table.concat(names, ", ")))
              end
            end
          end
          if n < nprocs then
            local done = {}
            for r = 0, nprocs - 1 do if not waiting[r] then done[#done + 1] = tostring(r) end end
            fail(tonumber(done[1]), ("finished while other ranks wait in a collective (%s)")
              :format(table.concat(names, ", ")))
          end
          local rep = first.fn(table.unpack(first.args, 1, first.args.n))
          for r = 0, nprocs - 1 do
            resume_val[r] = rep
            waiting[r] = nil
          end
        end
      end
    end)
    T.spawn_yield, T.current_rank = nil, nil
    if not ok_all then error(err_all, 0) end
    return results
  end
  return MP
end

--------------------------------------------------------------------------
-- The torch object

function M.new(sim, sys)
  local T = {sim = sim, sys = sys, wired = {}}
  T.counts = sys:counts()
  T.topology = topology_of(sys)
  local torch = {sim = sim, sys = sys, topology = T.topology}

  -- dtype, placement ("column_wise" | "replicate"), ranks (global): the
  -- process group's ranks by default, else every PE; memory: "hbm"
  -- (default) or "tcm".
  function torch.zeros(shape, o)
    o = checkopts(o, {"dtype", "placement", "ranks", "memory"}, "torch.zeros", 2)
    shape = checkshape(shape, "torch.zeros")
    local dt = checkdtype(o.dtype or "f32", "torch.zeros")
    local placement = o.placement or "column_wise"
    if placement ~= "column_wise" and placement ~= "replicate" then
      error(("torch.zeros: unknown placement '%s' (column_wise, replicate)"):format(placement), 2)
    end
    local ranks = o.ranks
    if not ranks and torch.distributed.is_initialized() then
      ranks = torch.distributed.get_ranks()
    end
    if not ranks then
      ranks = {}
      for i = 0, T.counts.pes - 1 do ranks[i + 1] = i end
    end
    if type(ranks) ~= "table" or #ranks == 0 then
      error("torch.zeros: ranks must be a non-empty list of ranks", 2)
    end
    for _, r in ipairs(ranks) do
      if math.type(r) ~= "integer" or r < 0 or r >= T.counts.pes then
        error(("torch.zeros: no PE of rank %s (ranks 0..%d)"):format(tostring(r), T.counts.pes - 1), 2)
      end
    end
    local n = numel(shape)
    local shard_n = n
    if placement == "column_wise" then
      local cols = shape[#shape]
      if cols % #ranks ~= 0 then
        error(("torch.zeros: %d columns do not split evenly over %d ranks"):format(cols, #ranks), 2)
      end
      shard_n = n // #ranks
    end
    -- a graph's PEs have no HBM: their shards live in TCM
    local memory = o.memory or (sys:pe(ranks[1]).hbm and "hbm" or "tcm")
    if memory ~= "hbm" and memory ~= "tcm" then
      error(("torch.zeros: unknown memory '%s' (hbm, tcm)"):format(tostring(memory)), 2)
    end
    local t = setmetatable({sys = sys, shape = shape, numel = n, dtype = dt, placement = placement,
                            ranks = ranks, shard_n = shard_n, addrs = {}, index = {},
                            memory = memory}, Tensor)
    -- zeros written a bounded piece at a time: a 64 MiB shard does not
    -- need a 64 Mi-element host vector
    local piece = math.min(shard_n, 1 << 16)
    local zero = tl.vec_new(piece)
    for k, r in ipairs(ranks) do
      if t.index[r] then error(("torch.zeros: rank %d listed twice"):format(r), 2) end
      t.index[r] = k
      t.addrs[k] = tl.alloc(sys, r, memory, shard_n * DTYPE_BYTES[dt])
      for off = 0, shard_n - 1, piece do
        local len = math.min(piece, shard_n - off)
        local z = len == piece and zero or zero:slice(0, len)
        z:write(sys, r, t.addrs[k] + off * DTYPE_BYTES[dt], dt, memory)
      end
    end
    -- the shards never move: tl.load and tl.store read their places here
    -- (the same as t:shard_place gives) instead of calling it a chunk
    t.shard_places = tl.shard_places(ranks, t.addrs, shard_n, memory, dt)
    return t
  end

  -- A host tensor: values (nested tables are flattened row-major), dtype.
  function torch.from_table(values, o)
    o = o or {}
    local dt = checkdtype(o.dtype or "f32", "torch.from_table")
    local flat, shape = {}, {}
    flatten(values, flat, shape, 1)
    for j = 1, #flat do flat[j] = ROUND[dt](flat[j]) end
    return {host = true, values = flat, shape = o.shape or shape, dtype = dt,
            to_table = function(self) return self.values end}
  end

  T.zeros = torch.zeros -- the rooted collectives' staging buffers
  torch.distributed = new_distributed(T)
  torch.multiprocessing = new_multiprocessing(T)
  torch.round = M.round
  return torch
end

-- A simulation (`o.guard`, `o.stack_size`: as kb.sim takes them), a
-- system (`o.topology`: nil, a file or a table, as kb.system takes it;
-- `o.timing_only`) and the torch object on them.
function M.init(o)
  o = checkopts(o, {"topology", "timing_only", "guard", "stack_size"}, "torch.init", 2)
  local ok, sim = pcall(kb.sim, {guard = o.guard, stack_size = o.stack_size})
  if not ok then
    error("torch.init: " .. tostring(sim):gsub("^[^:]*:%d+: ", ""), 2)
  end
  local sys = kb.system(sim, o.topology, {timing_only = o.timing_only})
  return M.new(sim, sys)
end

return M
