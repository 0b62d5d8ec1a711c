-- lua_module.lua — kb.module: a Lua module's ports bound to C modules and
-- to another Lua module; calls through them (kb_dma_if, kb_mem_if, a Lua
-- export of kb_dma_if standing in front of the C DMA as an arbiter that
-- counts); thread and method processes named after the module; the
-- listing of sys:describe{ports = true}. Decision 0035.
local kb = require("kbsim")
local sim = kb.sim()
local sys = kb.system(sim, "graph4.yaml") -- a, b, c, d around sw; d's link slower

-- an arbiter in front of a's DMA: exports kb_dma_if, forwards to the C
-- DMA through its own OUT port, counts the copies and bytes it passed
local arb = kb.module(sys, "a.arb")
arb:out("dma", "kb_dma_if")
arb:bind("dma", "a.dma.in") -- a's units are made on this first use
local seen = {copies = 0, bytes = 0}
arb:export("kb_dma_if", {
  copy = function(self, src, dst, bytes, class)
    seen.copies = seen.copies + 1
    seen.bytes = seen.bytes + bytes
    return arb:peer("dma"):copy(src, dst, bytes, class)
  end,
  time = function(self, src, dst, bytes) return arb:peer("dma"):time(src, dst, bytes) end,
  node = function(self) return arb:peer("dma"):node() end,
})

-- a user of a DMA and of two memories, first through the arbiter
local user = kb.module(sys, "host.user")
local dma = user:out("dma", "kb_dma_if")
user:out("mem", "kb_mem_if", {min = 2, max = 2})
kb.check(tostring(dma) == "port 'host.user.dma' : kb_dma_if", tostring(dma))
dma:bind(arb:port("in"))
user:bind("mem", "a.tcm.in")
user:bind("mem", "c.tcm.in")
kb.check(user:port("mem"):count() == 2 and dma:count() == 1, "counts")
kb.check(user:port("mem"):type() == "kb_mem_if" and dma:name() == "host.user.dma", "names")
local ta, tc = user:peer("mem", 1), user:peer("mem", 2)
kb.check(user:peer("mem", 1) == ta, "a peer's interface is made once")
kb.check(tostring(ta) == "kb_mem_if of 'a.tcm.in'", tostring(ta))
kb.check(ta:node() == arb:peer("dma"):node() and tc:node() ~= ta:node(), "memory nodes")

-- contents through kb_mem_if (no time), an allocation
-- (allocated and freed first: a freed block reads as zeros, decision 0034)
local addr = ta:alloc(4096, 256)
kb.check(addr % 256 == 0, "aligned allocation")
ta:dealloc(addr)
ta:write(64, "through a port")
kb.check(ta:read(64, 14) == "through a port", "read back")

-- a thread process of the module copies a -> c through the arbiter; a
-- method process, sensitive to the module's event, records when it ran
local ev = user:event("copied")
local ran = {}
local p = user:method("watch", function(self)
  ran[#ran + 1] = {self:name(), sim:now()}
end, {sensitive = {ev}, dont_initialize = true})
kb.check(p:name() == "host.user.watch", p:name())
local took, closed
local t = user:thread("mover", function(self, bytes)
  local d = self:peer("dma")
  closed = d:time({mem = ta, addr = 64}, {mem = tc, addr = 0}, bytes)
  took = d:copy({mem = ta, addr = 64}, {mem = tc, addr = 0}, bytes)
  ev:notify()
  -- a timed access through kb_mem_if: setup + bytes / bandwidth (TCM: 0 + 4096 / 512)
  local acc = tc:access(0, 4096, "read")
  kb.check(acc == 8, "TCM access " .. acc)
end, 4096)
kb.check(t:name() == "host.user.mover", t:name())
sim:run()
kb.check(seen.copies == 1 and seen.bytes == 4096, "the arbiter saw the copy")
kb.check(took == closed and closed > 0, ("copy %s ns, closed form %s"):format(took, closed))
kb.check(sys:tcm_read(2, 0, 14) == "through a port", "the bytes arrived at c")
kb.check(#ran == 1 and ran[1][1] == "host.user" and ran[1][2] == took, "method ran once")

-- the same copy straight through the C DMA gives the same time
local direct = kb.module(sys, "host.direct")
direct:out("dma", "kb_dma_if")
direct:out("mem", "kb_mem_if", {min = 0, max = 2})
direct:bind("dma", "a.dma.in")
direct:bind("mem", "a.tcm.in")
direct:bind("mem", "c.tcm.in")
local t2
direct:thread("mover", function(self)
  local m1, m2 = self:peer("mem", 1), self:peer("mem", 2)
  t2 = self:peer("dma"):copy({mem = m1, addr = 64}, {mem = m2, addr = 8192}, 4096)
end)
sim:run()
kb.check(t2 == took, "through the Lua arbiter or not: the same time")

-- kb.memory at the switch node, bound as a kb_mem_if peer and a copy end
local sram = kb.memory(sys, "sw", {kind = "sram", capacity = 65536, bandwidth_gbps = 256,
                                   setup_ns = 2})
kb.check(sram:port() == "sw.sram.in" and tostring(sram) == "memory 'sw.sram.in'", sram:port())
local ok, err = pcall(direct.bind, direct, "dma", "b.dma.in")
kb.check(not ok and err:find("accepts at most 1 binding and has 1", 1, true), err)
local sw = kb.module(sys, "sw.user")
sw:out("buf", "kb_mem_if")
sw:out("dma", "kb_dma_if")
sw:bind("buf", sram)
sw:bind("dma", "b.dma.in")
sw:thread("pull", function(self)
  sram:write(0, "in the switch")
  local t = self:peer("dma"):copy({mem = sram, addr = 0},
                                  {mem = user:peer("mem", 1), addr = 1024}, 13, "read")
  kb.check(t > 0, "copy from the switch memory")
end)
sim:run()
kb.check(sys:tcm_read(0, 1024, 13) == "in the switch", "the switch's bytes reached a")
kb.check(sram:stats().bytes_read == 13, "sram stats")

-- the listing names the Lua modules, their ports and both ends
local d = sys:describe{ports = true}
kb.check(d:find("\na.arb\n  out   dma   kb_dma_if  1..1  -> a.dma.in\n" ..
                "  in    in    kb_dma_if  0..*  <- host.user.dma\n", 1, true), d)
kb.check(d:find("\nhost.user\n  out   dma   kb_dma_if  1..1  -> a.arb.in\n" ..
                "  out   mem   kb_mem_if  2..2  -> a.tcm.in, c.tcm.in\n", 1, true), d)
kb.check(d:find("\nsw.sram\n  in    in    kb_mem_if  0..*  <- sw.user.buf\n", 1, true), d)
kb.check(d:find("  in    in    kb_dma_if  0..4  <- a.cpu.dma, a.ipcq.dma, a.arb.dma, " ..
                "host.direct.dma\n", 1, true), d)
local g = sys:describe{format = "dot"}
kb.check(g:find('"host.user":"p_dma" -> "a.arb":"p_in" [label="kb_dma_if"];', 1, true), g)
-- a module without an owner part: its ports are "NAME.PORT"
local solo = kb.module(sys, "solo")
kb.check(solo:out("x", "kb_dma_if", {min = 0}):name() == "solo.x", "owner-less name")
kb.check(tostring(solo) == "module 'solo' (1 ports)", tostring(solo))
print("lua_module ok")
