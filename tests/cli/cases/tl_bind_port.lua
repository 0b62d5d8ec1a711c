-- tl_bind_port.lua — a kernel's ops go through its PE's CPU ports (decision
-- 0045): PE 0's math port bound to a math unit of the script's own
-- (kb.unit), PE 0 and PE 1's ipcq ports to IPCQ units of their own; the
-- kernels compute the same values in the same times, and the PEs' own
-- units see none of it. With argument "unbound": a kernel whose dma port
-- was left unbound fails naming the PE and the port (exit 2).
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sim = kb.sim()
local sys = kb.system(sim, "graph4.yaml") -- a, b, c, d around sw
local a, b = sys:pe(0).name, sys:pe(1).name

if arg[1] == "unbound" then
  tl.bind_port(sys, 0, "dma", false)
  local x = tl.alloc(sys, 0, "tcm", 64)
  local t = {shard = function() return {addr = x, n = 16, kind = "tcm", dtype = "f32"} end}
  tl.launch(sys, {0}, function() tl.load(t, 0, 16) end)
  sim:run()
  return
end

-- refusals, each naming what is wrong
local function fails(pat, ...)
  local ok, e = pcall(tl.bind_port, sys, ...)
  kb.check(not ok and tostring(e):find(pat, 1, true), "expected '" .. pat .. "', got " .. tostring(e))
end
fails("no port 'nowhere.in'", 0, "math", "nowhere.in")
fails("invalid option 'fpu'", 0, "fpu", "x.math.in")
local mm = kb.unit(sys, "sw", "gemm")
fails("interface types differ", 0, "math", mm:port())
local lm = kb.module(sys, "sw.lua")
lm:export("kb_math_if", {run = function() end, time = function() end, params = function() end})
fails("is a Lua module's export", 0, "math", "sw.lua.in")

local vu = kb.unit(sys, "sw", "math")
tl.bind_port(sys, 0, "math", vu:port())
fails("is bound already", 0, "math", vu:port())
-- IPCQs of the kernels' own, sending with PE c's and d's DMAs, rings in
-- their TCMs (binding to a PE's export makes that PE's units: not a's, b's)
local c, d = sys:pe(2).name, sys:pe(3).name
local qa = kb.unit(sys, c .. ".k", "ipcq", {dma = c .. ".dma.in", buf = c .. ".tcm.in"})
local qb = kb.unit(sys, d .. ".k", "ipcq", {dma = d .. ".dma.in", buf = d .. ".tcm.in"})
qa:wire("E", qb, "W")
qb:wire("E", qa, "W")
tl.bind_port(sys, 0, "ipcq", qa:port())
tl.bind_port(sys, 1, "ipcq", qb:port())

local N = 64
local t_math, got = {}, {}
tl.launch(sys, {0, 1}, function()
  local r = tl.rank()
  local h = tl.full(N, r + 1, "f32")
  local t0 = kb.now()
  local y = tl.fma(h, 2, h) -- 3 (r + 1)
  t_math[r] = kb.now() - t0
  got[r] = {sum = tl.sum(y):to_table()[1]}
  -- a ring step through the IPCQ units (tl.sendrecv: by direction index)
  local z = tl.sendrecv("E", y, "W", N, "f32")
  got[r].ring = z:to_table()[1]
  -- and by name (tl.send / tl.recv_async)
  local f = tl.recv_async("W", N, "f32")
  tl.send("E", h)
  got[r].async = tl.wait(f):to_table()[1]
end)
kb.check(sim:run() == "done", "run ends")
for r = 0, 1 do
  kb.check(got[r].sum == 3 * (r + 1) * N, "sum on rank " .. r .. ": " .. tostring(got[r].sum))
  -- fma of 64 f32 = 256 B at 128 B a cycle, after the 4-cycle dispatch
  kb.check(math.abs(t_math[r] - 6) < 1e-9, "fma time on rank " .. r .. ": " .. t_math[r])
  local other = 1 - r
  kb.check(got[r].ring == 3 * (other + 1), "ring value on rank " .. r)
  kb.check(got[r].async == other + 1, "async value on rank " .. r)
end
local s0, s1 = tl.pe_stats(sys, 0), tl.pe_stats(sys, 1)
kb.check(s0.math_ops == 0, "PE 0's own math unit did nothing, got " .. s0.math_ops)
kb.check(s1.math_ops > 0, "PE 1's own math unit ran its kernel's ops")
kb.check(not tl.wired(sys, 0, "E", true) and not tl.wired(sys, 1, "W", false),
         "the PEs' own IPCQs are not wired")
-- the units are bound: the PE's own math export is free, PE 0's CPU is bound to sw.math
local desc = sys:describe{ports = true}
kb.check(desc:find("-> sw.math.in", 1, true) and desc:find("-> " .. c .. ".k.ipcq.in", 1, true),
         "describe lists the bindings")
fails("has its units bound already", 0, "gemm", mm:port())
print("tl_bind_port ok")
