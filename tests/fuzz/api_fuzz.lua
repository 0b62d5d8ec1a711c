-- api_fuzz.lua — random calls of the Lua-facing API (kb.*, tl.*, sys:*, the methods of every
-- kbsim object, operators on them) with random arguments, each inside pcall, from the host,
-- from kernels, from plain processes and from method processes. An error is the expected
-- outcome of most calls; a crash, an abort or a sanitizer report is a bug.
--
--   kbsim -o OUT tests/fuzz/api_fuzz.lua [seed=N] [calls=N] [verbose=1]
--
-- The same seed makes the same calls. tests/fuzz/README.md says how to run it for longer.
local kb = require("kbsim")
local tl = require("kbsim.tl")

local SEED, CALLS, VERBOSE = 1, 2000, false
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(.*)$")
  if k == "seed" and math.tointeger(tonumber(v)) then SEED = math.tointeger(tonumber(v))
  elseif k == "calls" and math.tointeger(tonumber(v)) then CALLS = math.tointeger(tonumber(v))
  elseif k == "verbose" then VERBOSE = v ~= "0"
  else error(("api_fuzz: bad argument '%s' (seed=N, calls=N, verbose=1)"):format(a), 0) end
end

-- ---- a seeded generator (xorshift64*), independent of math.random ------------------------

local state = SEED ~ 0x9E3779B97F4A7C15
if state == 0 then state = 1 end
local function next_u64()
  state = state ~ (state >> 12)
  state = state ~ (state << 25)
  state = state ~ (state >> 27)
  return state * 0x2545F4914F6CDD1D
end
local function below(n) -- 1 .. n
  return (next_u64() >> 1) % n + 1
end
local function pick(list) return list[below(#list)] end
local function chance(p) return below(1000) <= p * 1000 end

-- ---- values ---------------------------------------------------------------------------------

local NUMBERS = {0, 1, 2, 3, 4, 7, 8, 16, 64, 1024, -1, -7, 0.5, -0.5, 1e-300, 2^31 - 1, 2^31,
                 2^32, 2^53, 2^62, (1 << 62) + 1, math.maxinteger, math.mininteger, 1e12, 1e300,
                 -1e300, 0 / 0, math.huge, -math.huge, 3.7, 100.25}
local STRINGS = {"", "E", "W", "N", "S", "f32", "f16", "bf16", "f64", "tcm", "sram", "hbm",
                 "read", "write", "comm", "sum", "global_E", "x", "nan", "0x10", "1e999",
                 "%s%s%s%n", "kernel", "timing_only", "buffer_kind", "backpressure", "sleep",
                 "poll", "\0zero", string.rep("long", 4096), string.rep("\255", 300)}

local pool = {} -- objects the API returned (handles, sims, systems, futures, vecs, ...)
local POOL_MAX = 200
local function keep(v)
  local t = type(v)
  if t == "userdata" or t == "table" or t == "function" or t == "thread" then
    if #pool < POOL_MAX then pool[#pool + 1] = v else pool[below(POOL_MAX)] = v end
  end
end

local fuzz_fn -- forward: a function that makes random calls (given to spawn, launch, ...)

local function random_table(depth)
  local t = {}
  local n = below(4) - 1
  for _ = 1, n do
    local k = chance(0.5) and pick(STRINGS) or below(4)
    t[k] = depth > 0 and chance(0.3) and random_table(depth - 1) or pick(NUMBERS)
  end
  if chance(0.1) then
    setmetatable(t, {__len = function() return pick(NUMBERS) end,
                     __index = function() return pick(NUMBERS) end})
  end
  return t
end

local function random_value()
  local r = below(100)
  if r <= 8 then return nil
  elseif r <= 30 then return pick(NUMBERS)
  elseif r <= 48 then return pick(STRINGS)
  elseif r <= 52 then return chance(0.5)
  elseif r <= 60 then return random_table(2)
  elseif r <= 64 then
    return pick{function() end, function() error("fuzz error") end, fuzz_fn,
                function(...) return ... end}
  elseif r <= 67 then return coroutine.create(function() end)
  elseif #pool > 0 then return pick(pool)
  end
  return pick(NUMBERS)
end

-- ---- targets --------------------------------------------------------------------------------

-- Functions of the modules and the methods and metamethods of every kbsim type, by name,
-- sorted so that a seed always means the same calls.
local targets = {}
local function add_module(prefix, m)
  local names = {}
  for k, v in pairs(m) do
    if type(v) == "function" then names[#names + 1] = k end
  end
  table.sort(names)
  for _, k in ipairs(names) do targets[#targets + 1] = {prefix .. k, m[k]} end
end

-- a failed check is an exit status, not a crash; kb.params reads the script's own arguments
-- (seed=, calls=) and ends the run on those it was not told of, by design
local SKIP = {["kb.check"] = true, ["kb.params"] = true}

-- The methods of a kbsim type. Its metatable is hidden from scripts (getmetatable gives the
-- type name), so its metamethods are reached the way a script reaches them: by operators.
local function add_type(tname)
  local mt = debug.getregistry()[tname]
  if type(mt) == "table" and type(mt.__index) == "table" then
    add_module(tname .. ":", mt.__index)
  end
end

local function add_operators()
  local ops = {
    {"tostring", function(a) return tostring(a) end},
    {"#", function(a) return #a end},
    {"+", function(a, b) return a + b end},
    {"-", function(a, b) return a - b end},
    {"*", function(a, b) return a * b end},
    {"/", function(a, b) return a / b end},
    {"index", function(a, b) return a[b] end},
    {"newindex", function(a, b, c) a[b] = c end},
    {"call", function(a, ...) return a(...) end},
    {"..", function(a, b) return a .. b end},
    {"<", function(a, b) return a < b end},
    {"==", function(a, b) return a == b end},
    {"close", function(a) local x <close> = a end},
    {"getmetatable", function(a) return getmetatable(a) end},
    {"setmetatable", function(a, b) return setmetatable(a, b) end},
    {"collectgarbage", function() collectgarbage() end},
  }
  for _, op in ipairs(ops) do targets[#targets + 1] = {"op " .. op[1], op[2]} end
end

-- ---- the calls ------------------------------------------------------------------------------

local made, failed, budget = 0, 0, CALLS
local errors_seen = {}

local function one_call(where)
  if budget <= 0 then return end
  budget = budget - 1
  local t = pick(targets)
  if SKIP[t[1]] then return end
  local n = below(7) - 1
  local args = {}
  for i = 1, n do args[i] = random_value() end
  -- a method call now and then gets an object of a fitting type as self
  if (t[1]:find(":", 1, true) or t[1]:find("^op ")) and #pool > 0 and chance(0.6) then
    args[1] = pick(pool)
  end
  made = made + 1
  if VERBOSE then io.stderr:write(("[%d] %s %s (%d args)\n"):format(made, where, t[1], n)) end
  local res = table.pack(pcall(t[2], table.unpack(args, 1, n)))
  if res[1] then
    for i = 2, res.n do keep(res[i]) end
  else
    failed = failed + 1
    local msg = res[2]
    if type(msg) == "string" then errors_seen[msg:gsub("%d+", "N"):sub(1, 60)] = true end
  end
  if chance(0.02) then collectgarbage() end
end

fuzz_fn = function(...)
  for _ = 1, below(12) do one_call("process") end
  return ...
end

-- ---- rounds: a simulation, a system, kernels and processes making calls ---------------------

local CONFIGS = {
  {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 1}}},
  {sips = {count = 2, topology = "ring_1d"}, sip = {cube_mesh = {w = 1, h = 1}}},
}

local round = 0
while budget > 0 do
  round = round + 1
  local ok_sim, sim = pcall(kb.sim, {trace = false})
  assert(ok_sim, sim)
  keep(sim)
  local opts = chance(0.3) and {timing_only = true} or nil
  local ok_sys, sys = pcall(kb.system, sim, pick(CONFIGS), opts)
  assert(ok_sys, sys)
  keep(sys)
  if round == 1 then
    add_module("kb.", kb)
    add_module("tl.", tl)
    add_module("tlcore.", require("kbsim.tlcore")) -- bind, adopt, ...: a script can require it
    for _, tname in ipairs{"kbsim.sim", "kbsim.proc", "kbsim.event", "kbsim.fifo",
                           "kbsim.signal", "kbsim.system", "kbsim.handle", "kbsim.vec",
                           "kbsim.future"} do
      add_type(tname)
    end
    add_operators()
  end
  pcall(tl.wire, sys, 0, "E", 1, "W")
  pcall(tl.wire, sys, 1, "W", 0, "E")
  local n_pes = sys:counts().pes
  local ranks = {}
  for r = 0, math.min(n_pes, 4) - 1 do ranks[#ranks + 1] = r end
  pcall(tl.launch, sys, ranks, function()
    -- handles and receives to hand to the calls, kept past the kernel on purpose
    keep(tl.full(16, 1.0, "f32"))
    keep(tl.zeros(4, "f16"))
    if tl.rank() == 0 then pcall(tl.send, "E", tl.full(4, 2, "f32")) end
    if tl.rank() == 1 then keep(tl.recv_async("W", 4, "f32")) end
    for _ = 1, below(30) do one_call("kernel") end
  end)
  pcall(sim.spawn, sim, "fuzz.proc", function()
    for _ = 1, below(20) do one_call("process") end
  end)
  pcall(sim.method, sim, "fuzz.method", function()
    one_call("method")
  end)
  for _ = 1, below(10) do one_call("host before run") end
  pcall(sim.run, sim, chance(0.5) and 1e6 or nil)
  for _ = 1, below(20) do one_call("host after run") end
  if chance(0.3) then pcall(sim.close, sim) end
  collectgarbage()
end

local kinds = 0
for _ in pairs(errors_seen) do kinds = kinds + 1 end
print(("api_fuzz ok: seed %d, %d rounds, %d calls, %d raised errors (%d kinds)"):format(
  SEED, round, made, failed, kinds))
