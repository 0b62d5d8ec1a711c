-- lua_module_units.lua — a Lua module calls kb_cpu_if, kb_math_if,
-- kb_gemm_if and kb_ipcq_if through its ports, from thread processes where
-- each call blocks in simulated time; values and times against each unit's
-- closed form (configs/topology.yaml: 1 GHz, dispatch 4 cycles, W = 128
-- bytes a cycle, T = 4, MAC 16x16x16, tile 32x64x32; pe_cpu.h, pe_math.c,
-- pe_gemm.h, pe_ipcq.c). A PE's own math, gemm and ipcq exports take one
-- binding (their CPU's), so kb.unit places units of the module's own; a
-- PE's CPU export is free. Decision 0040.
local kb = require("kbsim")
local sim = kb.sim()
local sys = kb.system(sim, "graph4.yaml") -- a, b, c, d around sw; 64 GB/s, 5 ns links

local vu = kb.unit(sys, "sw", "math")
local mm = kb.unit(sys, "sw", "gemm")
kb.check(vu:port() == "sw.math.in" and mm:port() == "sw.gemm.in", vu:port())
kb.check(tostring(vu) == "math unit 'sw.math.in'", tostring(vu))
-- an IPCQ of the module at a (a's DMA, rings in a's TCM), one at c
local qa = kb.unit(sys, "a.k", "ipcq", {dma = "a.dma.in", buf = "a.tcm.in"})
local qc = kb.unit(sys, "c.k", "ipcq", {dma = "c.dma.in", buf = "c.tcm.in"})
qa:wire("E", qc, "W")

local k = kb.module(sys, "a.k")
k:out("cpu", "kb_cpu_if")
k:out("math", "kb_math_if")
k:out("gemm", "kb_gemm_if")
k:out("q", "kb_ipcq_if")
k:out("dma", "kb_dma_if")
k:out("mem", "kb_mem_if", {min = 2, max = 2})
k:bind("cpu", "a.cpu.in")
k:bind("math", vu:port())
k:bind("gemm", "sw.gemm.in")
k:bind("q", qa:port())
k:bind("dma", "a.dma.in")
k:bind("mem", "a.tcm.in")
k:bind("mem", "c.tcm.in")
local r = kb.module(sys, "c.k")
r:out("q", "kb_ipcq_if")
r:bind("q", "c.k.ipcq.in")

kb.check(tostring(k:peer("math")) == "kb_math_if of 'sw.math.in'", tostring(k:peer("math")))
local mp = k:peer("math"):params()
kb.check(mp.vector_bytes_per_cycle == 128 and mp.clock_ghz == 1 and
         mp.transcendental_cycles == 4, "math params")
local gp = k:peer("gemm"):params()
kb.check(gp.mac.m == 16 and gp.mac.k == 16 and gp.tile.n == 64 and gp.clock_ghz == 1, "gemm params")
kb.check(k:peer("q"):wired("E", "tx") and not k:peer("q"):wired("E", "rx"), "wired tx")
kb.check(r:peer("q"):wired("W", "rx"), "wired rx")

-- closed forms, written out here
local function math_ns(n, bytes, c) return math.ceil(n * bytes / 128) * c end
local function gemm_ns(M, N, K)
  local cyc = 0
  for i = 0, M - 1, 32 do for j = 0, N - 1, 64 do for l = 0, K - 1, 32 do
    local tm, tn, tk = math.min(32, M - i), math.min(64, N - j), math.min(32, K - l)
    cyc = cyc + math.ceil(tm / 16) * math.ceil(tn / 16) * math.ceil(tk / 16)
  end end end
  return cyc
end

local M, N, K = 40, 70, 20
local A, B = {}, {}
for i = 0, M - 1 do for l = 0, K - 1 do A[i * K + l + 1] = i + l end end
for l = 0, K - 1 do for j = 0, N - 1 do B[l * N + j + 1] = l - j end end

local got = {}
k:thread("main", function(self)
  local t0 = sim:now()
  got.dispatch = self:peer("cpu"):dispatch()
  kb.check(sim:now() - t0 == 4, "dispatch blocks 4 ns")
  local a, b = {}, {}
  for i = 1, 100 do a[i], b[i] = i, 0.5 * i end
  local out, ns = self:peer("math"):run("add", "f32", a, b)
  got.add = ns
  for i = 1, 100 do kb.check(out[i] == 1.5 * i, "add " .. i) end
  local s, ns2 = self:peer("math"):run("sum", "f32", a)
  kb.check(#s == 1 and s[1] == 5050 and ns2 == math_ns(100, 4, 1), "sum " .. tostring(s[1]))
  local e, ns3 = self:peer("math"):run("exp", "f16", {0, 1, 2})
  kb.check(math.abs(e[2] - math.exp(1)) < 2e-3 and e[1] == 1, "exp")
  got.exp = ns3
  local none, ns4 = self:peer("math"):run("softmax", "bf16", 300) -- timing only
  got.softmax = ns4
  kb.check(none == nil and ns4 == self:peer("math"):time("softmax", 300, "bf16"), "softmax")
  local C, gns = self:peer("gemm"):run(M, N, K, A, B)
  got.gemm = gns
  for i = 0, M - 1 do for j = 0, N - 1 do
    local want = 0
    for l = 0, K - 1 do want = want + (i + l) * (l - j) end
    if C[i * N + j + 1] ~= want then kb.check(false, ("C[%d][%d] %s ~= %s"):format(i, j, C[i * N + j + 1], want)) end
  end end
  local C2 = self:peer("gemm"):run(M, N, K, A, B, {accumulate = true, C = C})
  kb.check(C2[1] == 2 * C[1] and C2[M * N] == 2 * C[M * N], "accumulate")
  got.send_at = sim:now()
  got.send = self:peer("q"):send("E", string.rep("x", 255) .. "!", {tag = 7, count = 64})
  got.tdma = self:peer("dma"):time({mem = self:peer("mem", 1)}, {mem = self:peer("mem", 2)}, 256)
  got.done = sim:now()
end)
r:thread("main", function(self)
  local q = self:peer("q")
  kb.check(q:probe("W") == false, "nothing yet")
  got.data, got.meta, got.recv = q:recv("W", 4096)
  got.recv_end = sim:now()
end)
sim:run()

kb.check(got.dispatch == 4, "dispatch " .. got.dispatch)
kb.check(got.add == math_ns(100, 4, 1) and got.add == 4, "add ns " .. got.add)
kb.check(got.exp == math_ns(3, 2, 4) and got.exp == 4, "exp ns " .. got.exp)
kb.check(got.softmax == math_ns(300, 2, 6) and got.softmax == 30, "softmax ns " .. got.softmax)
kb.check(got.gemm == gemm_ns(M, N, K) and got.gemm == 30, "gemm ns " .. got.gemm)
-- the run blocked: 4 + 4 + 4 + 4 + 30 + 30 + 30 (the accumulate)
kb.check(got.send_at == 106, "send at " .. got.send_at)
kb.check(got.send == 0 and got.done == got.send_at, "a send with credit returns at once")
-- the receiver: land = send + T_dma; read = 256 B / 512 GB/s from c's TCM;
-- credit = path c -> a of credit_bytes 16 (pe_ipcq.c)
local credit = sys:path("c", "a").latency_ns(16)
local want = got.send_at + got.tdma + 0.5 + credit
kb.check(math.abs(got.recv_end - want) < 1e-9,
         ("recv ended %s, closed form %s (T_dma %s, credit %s)"):format(got.recv_end, want,
                                                                      got.tdma, credit))
kb.check(got.recv == got.recv_end, "recv waited from 0")
kb.check(got.data == string.rep("x", 255) .. "!" and got.meta.tag == 7 and got.meta.count == 64,
         "data and meta")

-- a placed CPU: its own export, the same closed form
local cpu = kb.unit(sys, "sw", "cpu")
local u = kb.module(sys, "sw.user")
u:out("cpu", "kb_cpu_if")
u:bind("cpu", cpu:port())
local took
u:thread("t", function(self) took = self:peer("cpu"):dispatch() end)
sim:run()
kb.check(cpu:port() == "sw.cpu.in" and took == 4 and u:peer("cpu"):dispatch_time() == 4, "placed cpu")

-- errors: outside a thread process, bad arguments, misuse
local ok, err = pcall(function() return k:peer("math"):run("add", "f32", {1}, {2}) end)
kb.check(not ok and err:find("math:run", 1, true), err)
ok, err = pcall(function() return k:peer("math"):time("tanh", 4, "f32") end)
kb.check(not ok and err:find("unknown op 'tanh'", 1, true), err)
ok, err = pcall(function() return k:peer("gemm"):dispatch() end)
kb.check(not ok and err:find("'sw.gemm.in' (kb_gemm_if) has no function 'dispatch'", 1, true), err)
ok, err = pcall(function() return k:peer("cpu"):node() end)
kb.check(not ok and err:find("has no function 'node'", 1, true), err)
ok, err = pcall(kb.unit, sys, "sw", "math")
kb.check(not ok and err:find("'sw.math.in' already exists", 1, true), err)
ok, err = pcall(kb.unit, sys, "b.k", "ipcq")
kb.check(not ok and err:find("an ipcq needs", 1, true), err)
ok, err = pcall(kb.unit, sys, "b.k", "ipcq", {dma = "b.dma.in", buf = "nowhere.in"})
kb.check(not ok and err:find("buf: the system has no port 'nowhere.in'", 1, true), err)
ok, err = pcall(kb.unit, sys, "b.k", "fpu")
kb.check(not ok and err:find("invalid option 'fpu'", 1, true), err)
ok, err = pcall(vu.wire, vu, "E", qc, "W")
kb.check(not ok and err:find("joins two ipcq units", 1, true), err)
local bad = {}
k:thread("bad", function(self)
  bad[1] = {pcall(self:peer("gemm").run, self:peer("gemm"), 2, 2, 2, {1, 2, 3}, {1, 2, 3, 4})}
  bad[2] = {pcall(self:peer("math").run, self:peer("math"), "fma", "f32", {1}, {2})}
  bad[3] = {pcall(self:peer("q").recv, self:peer("q"), "nowhere", 16)}
end)
sim:run()
kb.check(not bad[1][1] and bad[1][2]:find("A must have 4 numbers, has 3", 1, true), tostring(bad[1][2]))
kb.check(not bad[2][1] and bad[2][2]:find("c must be an array of numbers", 1, true), tostring(bad[2][2]))
kb.check(not bad[3][1] and bad[3][2]:find("recv through 'a.k.ipcq.in'", 1, true), tostring(bad[3][2]))

-- a Lua export of kb_math_if implements what the C wrapper offers
local fake = kb.module(sys, "sw.fake")
ok, err = pcall(fake.export, fake, "kb_math_if", {run = function() end})
kb.check(not ok and err:find("'time' is missing", 1, true), err)
-- the listing shows the placed units and their bindings
local d = sys:describe{ports = true}
kb.check(d:find("\na.k\n  out   cpu   kb_cpu_if  1..1  -> a.cpu.in\n", 1, true), d)
kb.check(d:find("\na.k.ipcq\n", 1, true) and d:find("<- a.k.q", 1, true), d)
print("lua_module_units ok")
