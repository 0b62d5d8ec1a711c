-- port_calls.lua — the host cost of a call through a Lua module's port
-- (decision 0035): N calls of the same question, "how long would this
-- copy take" (kb_dma_if time), asked
--   direct  : of a plain Lua function (the floor of any Lua call)
--   c_port  : through an OUT port bound to a PE's C DMA export (wrapper
--             checks, then the C struct's function: kb_dma_time)
--   lua_port: through an OUT port bound to a Lua module's export of
--             kb_dma_if (the proxy's pcall, then a Lua function that asks
--             the C DMA through its own port: c_port + the proxy)
-- and prints CPU ns per call (os.clock: user + sys of the process).
--   kbsim bench/lua/port_calls.lua [N]
local kb = require("kbsim")
local N = math.tointeger(tonumber(arg and arg[1]) or 1000000)
local sim = kb.sim()
local sys = kb.system(sim, {nodes = {{name = "a", pe = true}, {name = "b", pe = true}},
  links = {{from = "a", to = "b", bandwidth_gbps = 64, latency_ns = 5, bidirectional = true}}})
local arb = kb.module(sys, "a.arb")
arb:out("dma", "kb_dma_if")
arb:bind("dma", "a.dma.in")
local inner = arb:peer("dma")
arb:export("kb_dma_if", {
  copy = function(_, ...) return inner:copy(...) end,
  time = function(_, src, dst, bytes) return inner:time(src, dst, bytes) end,
  node = function() return inner:node() end,
})
local user = kb.module(sys, "host.user")
user:out("c", "kb_dma_if")
user:out("lua", "kb_dma_if")
user:out("mem", "kb_mem_if", {min = 2, max = 2})
user:bind("c", "a.dma.in")
user:bind("lua", arb:port("in"))
user:bind("mem", "a.tcm.in")
user:bind("mem", "b.tcm.in")
local src, dst = {mem = user:peer("mem", 1)}, {mem = user:peer("mem", 2)}
local c, l = user:peer("c"), user:peer("lua")
local expect = c:time(src, dst, 4096)
local function direct(_, s, d, bytes) return expect end

local function run(name, f, obj)
  local t0 = os.clock()
  local x
  for _ = 1, N do x = f(obj, src, dst, 4096) end
  local dt = os.clock() - t0
  assert(x == expect, name)
  return dt * 1e9 / N
end
local rows = {}
for _ = 1, 3 do -- three rounds, side by side; the median of each
  for _, k in ipairs({"direct", "c_port", "lua_port"}) do
    rows[k] = rows[k] or {}
    local f = k == "direct" and direct or k == "c_port" and c.time or l.time
    local o = k == "direct" and nil or k == "c_port" and c or l
    table.insert(rows[k], run(k, f, o))
  end
end
for _, k in ipairs({"direct", "c_port", "lua_port"}) do
  table.sort(rows[k])
  print(string.format("%-9s %8.1f ns/call (median of 3 x %d calls)", k, rows[k][2], N))
end
