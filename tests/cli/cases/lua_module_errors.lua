-- lua_module_errors.lua — a Lua module's binding errors, each naming both
-- ends as a C bind's do (mis-typed, over-bound on either side, wrong
-- direction, no such port), an unbound port at elaboration, a Lua error
-- inside an exported function (the port, the function and the script's
-- line, no crash), and misuses of the API. Decision 0035.
local kb = require("kbsim")

local function fails(pat, f, ...)
  local ok, err = pcall(f, ...)
  kb.check(not ok, "expected an error: " .. pat)
  kb.check(ok or err:find(pat, 1, true), ("'%s' not in: %s"):format(pat, tostring(err)))
  return err
end

local sim = kb.sim()
local sys = kb.system(sim, "graph4.yaml")
local m = kb.module(sys, "x.u")
m:out("dma", "kb_dma_if")

-- mis-typed: the engine's check, both ends named, the script's line first
local e = fails("cannot bind 'x.u.dma' (type 'kb_dma_if') to 'a.math.in' (type 'kb_math_if'): " ..
                "interface types differ", function() m:bind("dma", "a.math.in") end)
kb.check(e:find("^lua_module_errors.lua:%d+: "), e)
-- over-bound on the Lua side, then on the C side (a.math.in has its CPU)
m:bind("dma", "a.dma.in")
fails("cannot bind 'x.u.dma' to 'b.dma.in': 'x.u.dma' accepts at most 1 binding and has 1",
      m.bind, m, "dma", "b.dma.in")
m:out("math", "kb_math_if")
fails("cannot bind 'x.u.math' to 'a.math.in': 'a.math.in' accepts at most 1 binding and has 1",
      m.bind, m, "math", "a.math.in")
-- bound twice to one port
m:out("two", "kb_dma_if", {min = 0, max = 2})
m:bind("two", "b.dma.in")
fails("'x.u.two' is already bound to 'b.dma.in'", m.bind, m, "two", "b.dma.in")
-- an OUT port to an OUT port: the engine's direction check
fails("cannot bind 'x.u.two' (out) to 'a.cpu.dma' (out): directions must be out to in",
      m.bind, m, "two", "a.cpu.dma")
-- no such port, no such module port
fails("cannot bind 'x.u.dma' to 'zz.dma.in': the system has no port 'zz.dma.in'",
      m.bind, m, "dma", "zz.dma.in")
fails("module 'x.u' has no port 'nope'", m.port, m, "nope")
fails("a port 'x.u.dma' already exists", m.out, m, "dma", "kb_dma_if")
fails("bad port name 'a.b'", m.out, m, "a.b", "kb_dma_if")
fails("'max' must be an integer in 1..1000000", m.out, m, "big", "kb_dma_if", {max = 0})
fails("m:out: unknown option 'mni'", m.out, m, "typo", "kb_dma_if", {mni = 1})
fails("a module name is 'OWNER.UNIT'", kb.module, sys, "x..u")
-- an export is not bound from: its peers' OUT ports bind to it
local ex = m:export("kb_thing_if", {go = function() return 1 end})
fails("cannot bind 'x.u.in': only an OUT port of a Lua module binds", ex.bind, ex, "a.cpu.dma")
fails("'x.u.in' is an export: its peers call it", ex.peer, ex)
-- an export of a C interface implements what the C wrapper offers
fails("an export of 'kb_dma_if' implements what its C wrapper offers (copy, time, node); " ..
      "'time' is missing", kb.module(sys, "x.v").export, kb.module(sys, "x.w"), "kb_dma_if",
      {copy = function() end})
-- peers: none yet, past the count
fails("'x.u.math' is unbound", m.peer, m, "math")
fails("'x.u.two' has 1 binding, no peer 2", m.peer, m, "two", 2)
local g = kb.module(sys, "x.g")
g:out("cpu", "kb_cpu_if")
g:bind("cpu", "c.cpu.in")
kb.check(g:peer("cpu"):dispatch_time() == 4, "every C interface has a wrapper (0040)")
fails("cpu:dispatch", g:peer("cpu").dispatch, g:peer("cpu"))
-- a kb_dma_if peer has no kb_mem_if function; a copy end must be a memory
local d = m:peer("dma")
fails("'a.dma.in' (kb_dma_if) has no function 'read'", d.read, d, 0, 4)
fails("'mem' must be a kb_mem_if peer or a kbsim.memory", d.time, d, {mem = 1}, {mem = 2}, 4)
-- a copy outside a thread process; an address beyond the memory
m:out("mem", "kb_mem_if", {min = 0})
m:bind("mem", "a.tcm.in")
local tcm = m:peer("mem")
fails("dma:copy called outside a thread process", d.copy, d, {mem = tcm}, {mem = tcm, addr = 4096}, 64)
fails("read through 'a.tcm.in': read of 4 bytes at 0xfffffe is beyond the 16777216 bytes of " ..
      "tcm of 'a'", tcm.read, tcm, 16 * 1024 * 1024 - 2, 4)
fails("kb.memory: no node 'nowhere'", kb.memory, sys, "nowhere", {})
fails("kb.memory: 'capacity' must be a number in 1..", kb.memory, sys, "sw", {capacity = 0})

-- a Lua error inside an exported function: the caller's process fails,
-- the message names the export, the function and the script's line
local sim3 = kb.sim()
local sys3 = kb.system(sim3, "graph4.yaml")
local first = kb.module(sys3, "x.first")
first:export("kb_thing_if", {go = function() return 1 end})
local client = kb.module(sys3, "b.client")
client:out("net", "kb_thing_if")
client:bind("net", first:port("in"))
local th = kb.module(sys3, "x.t")
th:export("kb_thing_if", {
  go = function(self, n)
    if n > 2 then error("too many: " .. n) end
    return n * 10
  end,
}, {name = "svc"})
client:out("svc", "kb_thing_if")
client:bind("svc", "x.t.svc")
local got
client:thread("caller", function(self)
  got = self:peer("svc"):go(2)
  kb.check(self:peer("net"):go() == 1, "the first export")
  fails("'x.t.svc' (kb_thing_if) has no function 'stop'", function() return self:peer("svc"):stop() end)
  self:peer("svc"):go(3) -- raises
end)
local ok, err = pcall(sim3.run, sim3)
kb.check(got == 20, "a call that returns")
kb.check(not ok and err:find("process 'b.client.caller' failed: x.t.svc: go: " ..
                             "lua_module_errors.lua:89: too many: 3", 1, true), tostring(err))

-- unbound at elaboration: the first run of a fresh simulation lists every
-- port below its minimum, naming it, its direction and type
local sim2 = kb.sim()
local sys2 = kb.system(sim2, "graph4.yaml")
local lone = kb.module(sys2, "y.lone")
lone:out("dma", "kb_dma_if")
lone:out("mem", "kb_mem_if", {min = 2, max = 3})
lone:bind("mem", "a.tcm.in")
ok, err = pcall(sim2.run, sim2)
kb.check(not ok and err:find("port 'y.lone.dma' (out, type 'kb_dma_if') is unbound", 1, true),
         tostring(err))
kb.check(err:find("y.lone.mem", 1, true), "the port with one binding of two: " .. tostring(err))

-- another system's port or memory; a closed system
local mem2 = kb.memory(sys2, "sw", {})
fails("cannot bind 'x.u.two' to 'sw.sram.in': another system's memory", m.bind, m, "two", mem2)
fails("cannot bind 'x.u.two' to 'y.lone.dma': another system's port", m.bind, m, "two",
      lone:port("dma"))
sys2:close()
fails("attempt to use a closed system", lone.port, lone, "dma")
fails("attempt to use a closed system", mem2.read, mem2, 0, 4)
print("lua_module_errors ok")
