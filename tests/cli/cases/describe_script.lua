-- describe_script.lua — for kbsim --describe SCRIPT (tests/cli/describe.sh):
-- two systems, the first with a Lua module bound to a C DMA, a TCM and a
-- placed math unit, closed by the script; the second left open
local kb = require("kbsim")
local sim = kb.sim()
local sys = kb.system(sim, "graph4.yaml")
local vu = kb.unit(sys, "sw", "math")
local m = kb.module(sys, "sw.filter")
m:out("dma", "kb_dma_if")
m:out("mem", "kb_mem_if")
m:out("math", "kb_math_if")
m:bind("dma", "a.dma.in")
m:bind("mem", "b.tcm.in")
m:bind("math", vu:port())
local took
m:thread("run", function(self) _, took = self:peer("math"):run("add", "f32", {1, 2}, {3, 4}) end)
sim:run()
print("the script ran: add took " .. took .. " ns")
sys:close()
local sim2 = kb.sim()
local sys2 = kb.system(sim2, "graph4.yaml")
local m2 = kb.module(sys2, "c.probe")
m2:out("cpu", "kb_cpu_if")
m2:bind("cpu", "c.cpu.in")
