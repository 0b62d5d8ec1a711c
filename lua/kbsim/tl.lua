-- tl.lua — the per-PE kernel language (`local tl = require("kbsim.tl")`)
--
-- Kernels call tl.* with no PE argument: tl.launch binds each kernel's Lua
-- thread to its PE, and the C core (kbsim.tlcore, lua/ltl.c) finds the PE
-- of the running thread. This file resolves tensors to this PE's shard and
-- keeps the launch bookkeeping; the work and its time are in the core.
-- The contract is docs/kernel_api.md.
local core = require("kbsim.tlcore")

local tl = {}

-- Host side (no simulated time) and wiring, straight from the core.
tl.alloc = core.alloc
tl.host_write = core.host_write
tl.host_read = core.host_read
tl.wire = core.wire
tl.wired = core.wired
tl.bind_port = core.bind_port

-- A one-way ring over ranks (a list of ranks, in ring order): each rank's
-- port `out` (default "E") sends into the next one's port `inp` (default
-- "W"), the last into the first. Fewer than two ranks need no wire.
function tl.wire_ring(sys, ranks, out, inp)
  if type(ranks) ~= "table" then
    error(("tl.wire_ring: a list of ranks is expected, got %s"):format(type(ranks)), 2)
  end
  local n = #ranks
  if n < 2 then return end
  for i = 1, n do
    tl.wire(sys, ranks[i], out or "E", ranks[i % n + 1], inp or "W") -- as wrapped now
  end
end
-- Host vectors for inputs, references and checks at C speed (lua/lvec.c).
tl.vec_new = core.vec_new
tl.vec_affine = core.vec_affine
tl.vec_from = core.vec_from
tl.vec_read = core.vec_read
tl.vec_matmul = core.vec_matmul
-- Closed forms and unit counters of a PE (host side, no simulated time).
tl.gemm_time = core.gemm_time
tl.math_time = core.math_time
tl.copy_time = core.copy_time
tl.pe_stats = core.pe_stats

-- Inside a kernel.
for _, name in ipairs{"rank", "world_size", "program_id", "pe", "full", "zeros", "add", "sub",
                      "mul", "div", "maximum", "minimum", "fma", "clamp", "exp", "log", "softmax",
                      "cdiv", "sum", "dot", "send", "recv", "recv_async", "wait", "free", "sendrecv",
                      "gemm_tile", "fetch", "accumulate", "cast"} do
  tl[name] = core[name]
end


-- tl.spawn(name, fn, ...): from a kernel, a helper thread process
-- "<pe name>.<name>" that acts for the same PE and shares the kernel's
-- handles (the stages of a tile pipeline). The kernel must outlive its
-- helpers: its handles are freed when it returns.
function tl.spawn(name, fn, ...)
  local ctx, sim = core.context()
  if type(fn) ~= "function" then
    error(("tl.spawn(name, fn, ...): the helper (argument 2) must be a function, got %s")
          :format(type(fn)), 2)
  end
  local args = table.pack(...)
  local pe = core.pe().name
  local pname = pe .. "." .. tostring(name)
  -- where the kernel spawned it, for a helper that starts too late
  local info = debug.getinfo(2, "Sl")
  local where = info and info.currentline > 0 and (info.short_src .. ":" .. info.currentline .. ": ")
                or ""
  return sim:spawn(pname, function()
    -- false: the kernel has ended (a flag from the core, not an error)
    if not core.adopt(ctx, where) then
      error(("%stl.spawn: the kernel on PE '%s' ended before its helper '%s' (spawned here) "
             .. "started: a kernel must outlive its helpers (wait for what they produce)")
            :format(where, pe, pname), 0)
    end
    fn(table.unpack(args, 1, args.n))
    core.unadopt()
  end)
end

-- tl.load(t, off, n): n elements of this PE's shard of t from element off;
-- tl.store(t, off, h): handle h into this PE's shard of t at element off.
-- A tensor is anything with t:shard(rank) -> {addr=, n=, kind=, dtype=};
-- one that also has t:shard_place(rank) (kbsim.torch's) gives the four
-- values without making a table on every call. Both run once per chunk of
-- every rank, so they are in the core (lua/ltl.c: tload, tstore), with
-- the checks and messages they had here, blaming the kernel's line.
tl.load = core.tload
tl.store = core.tstore
-- tl.shard_places(ranks, addrs, n, kind, dtype): a record of where each
-- rank's shard of a tensor is (ranks[k] at addrs[k]), for a tensor whose
-- shards never move. Kept as t.shard_places, tl.load and tl.store find the
-- place in it with no call to t:shard_place (kbsim.torch's tensors).
tl.shard_places = core.shard_places

-- A launch: one kernel per rank, with their start and end times.
local Run = {}
Run.__index = Run

function Run:times()
  return self.t
end

-- Max over ranks of kernel execution time, ns; nil until all have ended.
function Run:latency_ns()
  local worst = 0
  for _, r in ipairs(self.ranks) do
    local t = self.t[r]
    if not t then return nil end
    if t.exec_ns > worst then worst = t.exec_ns end
  end
  return worst
end

-- Names of kernels in traces (docs/trace.md); weak, so a name does not
-- keep a kernel alive.
local kernel_names = setmetatable({}, {__mode = "k"})

-- tl.name(kernel, name) -> kernel: the name its spans carry in a trace
-- (collectives name theirs after the algorithm). Without one, a kernel is
-- named by where it is defined, "file.lua:line".
function tl.name(kernel, name)
  if type(kernel) ~= "function" then
    error(("tl.name: a kernel function is expected, got %s"):format(type(kernel)), 2)
  end
  kernel_names[kernel] = tostring(name)
  return kernel
end

local function kernel_name(kernel)
  if kernel_names[kernel] then return kernel_names[kernel] end
  local info = debug.getinfo(kernel, "S")
  return info.short_src:match("[^/]*$") .. ":" .. info.linedefined
end

-- ---- tl.barrier: all PEs of the launch -----------------------------------

-- The launch each kernel thread belongs to.
local run_of = setmetatable({}, {__mode = "k"})
-- Per system and rank list: the barrier's channel prefix and what every PE
-- has seen, kept across launches so the barrier is reusable.
local barriers = setmetatable({}, {__mode = "k"})
local n_barriers = 0

local function barrier_rounds(n)
  local k, d = 0, 1
  while d < n do k, d = k + 1, d * 2 end
  return k
end

-- Wires a dissemination barrier over the launch's ranks the first time
-- (no simulated time: wiring is set-up), then reuses it.
local function barrier_of(run)
  local per = barriers[run.sys]
  if not per then per = {}; barriers[run.sys] = per end
  local key = table.concat(run.ranks, ",")
  local b = per[key]
  if not b then
    n_barriers = n_barriers + 1
    b = {prefix = "tl_barrier" .. n_barriers .. "_", seen = {}, epoch = {},
         rounds = barrier_rounds(#run.ranks)}
    local n = #run.ranks
    for k = 0, b.rounds - 1 do
      local d = 1 << k
      for i = 0, n - 1 do
        core.wire(run.sys, run.ranks[i + 1], b.prefix .. k, run.ranks[(i + d) % n + 1],
                  b.prefix .. k)
      end
    end
    per[key] = b
  end
  return b
end

-- Round k signals launch rank r + 2^k and waits for r - 2^k. Episode g
-- (this PE's g-th barrier) passes round k only once the round's count is
-- >= g; counts only grow, so a token left from an earlier episode can
-- never release a later one.
function tl.barrier()
  local run = run_of[coroutine.running()]
  if not run then error("tl.barrier called outside a kernel", 2) end
  local b = barrier_of(run)
  local me = core.program_id()
  local g = (b.epoch[me] or 0) + 1
  b.epoch[me] = g
  local seen = b.seen[me]
  if not seen then seen = {}; b.seen[me] = seen end
  for k = 0, b.rounds - 1 do
    local dir = b.prefix .. k
    core.send(dir, core.full(1, g, "f32"))
    while (seen[k] or 0) < g do
      local t = core.recv(dir, 1, "f32"):to_table()[1]
      if t > (seen[k] or 0) then seen[k] = t end
    end
  end
end

-- tl.launch(sys, ranks, kernel, ...): before sim:run(); kernel(...) runs
-- on every PE of ranks, as the thread process "<pe name>.kernel". With
-- --trace, each run is a span on its PE's row.
function tl.launch(sys, ranks, kernel, ...)
  if type(ranks) ~= "table" or #ranks == 0 then
    error("tl.launch: a non-empty list of ranks is expected", 2)
  end
  if type(kernel) ~= "function" then
    error("tl.launch: the kernel must be a function", 2)
  end
  local ok_sys, sim = pcall(core.sim_of, sys)
  if not ok_sys then
    error(("tl.launch: a system (kb.system) is expected, got %s"):format(type(sys)), 2)
  end
  local seen, names = {}, {}
  for i, r in ipairs(ranks) do
    if seen[r] then error(("tl.launch: rank %s listed twice"):format(tostring(r)), 2) end
    seen[r] = true
    local ok, pe = pcall(sys.pe, sys, r)
    if not ok then -- the caller's line, not this file's
      error(("tl.launch: ranks[%d]: %s"):format(i, tostring(pe):gsub("^bad argument #%d+ to '[^']*' %((.*)%)$", "%1")), 2)
    end
    names[i] = pe.name
  end
  local args = table.pack(...)
  local run = setmetatable({ranks = ranks, t = {}, sys = sys}, Run)
  local world = #ranks
  local kname = kernel_name(kernel)
  for i, r in ipairs(ranks) do
    local name = names[i]
    sim:trace_track(name) -- kernel rows first, in rank order
    sim:spawn(name .. ".kernel", function()
      core.bind(sys, r, i - 1, world)
      run_of[coroutine.running()] = run
      local t0 = sim:now()
      kernel(table.unpack(args, 1, args.n))
      core.unbind()
      local t1 = sim:now()
      sim:trace_span(name, "kernel", kname, t0, t1, {rank = i - 1, program_id = r})
      run.t[r] = {start_ns = t0, end_ns = t1, exec_ns = t1 - t0}
    end)
  end
  return run
end

return tl
