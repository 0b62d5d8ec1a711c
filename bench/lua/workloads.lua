-- workloads.lua — peer-benchmark workloads W1–W3 (bench/WORKLOADS.md) with Lua thread processes
--
--   kbsim bench/lua/workloads.lua timed|pingpong|ring P K
--
-- Prints the same one line as kbsim-bench, with peer=kbsim-lua, and exits 1
-- if events, sim_end_ns or the ring token differ from the expected values.
-- 64 KiB stacks: a process body is one Lua function calling kb.wait or a
-- fifo method, a few Lua/C frames deep.
local kb = require("kbsim")

local function usage()
  io.stderr:write("usage: kbsim workloads.lua timed|pingpong|ring P K\n")
  os.exit(2)
end

local w, P, K = arg[1], math.tointeger(tonumber(arg[2] or "")), math.tointeger(tonumber(arg[3] or ""))
if not (w and P and K) or P <= 0 or K < 0 then usage() end

local sim = kb.sim{stack_size = 64 * 1024}
local events = 0
local exp_events, exp_end = P * K, nil
local final_token, bad_values = nil, 0

-- Processes and fifos are created before the clock starts.
if w == "timed" then
  local function proc()
    for _ = 1, K do
      kb.wait(10)
      events = events + 1
    end
  end
  for i = 0, P - 1 do sim:spawn("timed" .. i, proc) end
  exp_end = 10 * K
elseif w == "pingpong" then
  if P % 2 ~= 0 then
    io.stderr:write(string.format("pingpong: P must be even, got %d\n", P))
    os.exit(2)
  end
  local function a(a2b, b2a)
    for k = 0, K - 1 do
      a2b:write(k)
      local v = b2a:read()
      events = events + 1
      if v ~= k then bad_values = bad_values + 1 end
    end
  end
  local function b(a2b, b2a)
    for _ = 1, K do
      local v = a2b:read()
      events = events + 1
      b2a:write(v)
    end
  end
  for i = 0, P // 2 - 1 do
    local a2b, b2a = sim:fifo("a2b" .. i, 1), sim:fifo("b2a" .. i, 1)
    sim:spawn("A" .. i, a, a2b, b2a)
    sim:spawn("B" .. i, b, a2b, b2a)
  end
  exp_end = 0
elseif w == "ring" then
  if K % P ~= 0 then
    io.stderr:write(string.format("ring: K must be a multiple of P, got K=%d P=%d\n", K, P))
    os.exit(2)
  end
  local fifos = {}
  for i = 0, P - 1 do fifos[i] = sim:fifo("ring" .. i, 1) end
  local laps = K // P
  local function node(i)
    local inp, out = fifos[i], fifos[(i + 1) % P]
    local tok = 0
    for r = 0, laps - 1 do
      if not (i == 0 and r == 0) then tok = inp:read() end
      kb.wait(1)
      events = events + 1
      out:write(tok + 1)
    end
    if i == 0 then final_token = inp:read() end
  end
  for i = 0, P - 1 do sim:spawn("node" .. i, node, i) end
  exp_events, exp_end = K, K
else
  usage()
end

local t0 = kb.clock()
sim:run()
local wall = kb.clock() - t0

local end_ns = math.tointeger(sim:now())
print(string.format("workload=%s peer=kbsim-lua P=%d K=%d events=%d sim_end_ns=%d wall_s=%.6f rate=%.0f",
  w, P, K, events, end_ns, wall, wall > 0 and events / wall or 0))

local ok = true
local function expect(cond, ...)
  if not cond then
    io.stderr:write(string.format(...), "\n")
    ok = false
  end
end
expect(events == exp_events, "%s: events %d, expected %d", w, events, exp_events)
expect(end_ns == exp_end, "%s: sim_end_ns %d, expected %d", w, end_ns, exp_end)
if w == "ring" then
  expect(final_token == K, "ring: final token %s, expected %d", tostring(final_token), K)
end
expect(bad_values == 0, "pingpong: %d reads returned a wrong value", bad_values)
if not ok then os.exit(1) end
