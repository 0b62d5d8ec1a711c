-- lua_module_bad_input.lua — odd and wrong input to kb.unit, kb.memory and
-- the C interfaces' wrappers (lua/lmodule_ifs.c): each gives a message
-- naming the problem, and a refused kb.unit leaves nothing behind that
-- would stop the simulation from running.
local kb = require("kbsim")
local sim = kb.sim()
local sys = kb.system(sim, "graph4.yaml")

local function fails(want, f, ...)
  local ok, err = pcall(f, ...)
  kb.check(not ok and tostring(err):find(want, 1, true), ("want '%s', got %s"):format(want, tostring(err)))
end

-- a C unit binds to C exports only: a Lua module's export has no C struct
local fake = kb.module(sys, "sw.fake")
local impl = {}
for _, f in ipairs{"read", "write", "access", "alloc", "dealloc", "node"} do
  impl[f] = function() return 0 end
end
fake:export("kb_mem_if", impl)
fails("kb.unit: buf: 'sw.fake.in' is a Lua module's port; a C unit binds to C exports only",
      kb.unit, sys, "b.k", "ipcq", {dma = "b.dma.in", buf = "sw.fake.in"})
-- a refused target is refused before the unit is made
fails("kb.unit: dma: 'a.tcm.in' is not a kb_dma_if export (it is an IN kb_mem_if port)",
      kb.unit, sys, "a.k", "ipcq", {dma = "a.tcm.in", buf = "a.tcm.in"})
fails("kb.unit: buf: 'c.dma.in' is not a kb_mem_if export (it is an IN kb_dma_if port)",
      kb.unit, sys, "c.k", "ipcq", {dma = "c.dma.in", buf = "c.dma.in"})
local full = kb.memory(sys, "sw", {capacity = 4096})
fails("kb.memory: 'kind' must be tcm, sram or hbm, got ddr", kb.memory, sys, "a", {kind = "ddr"})
fails("kb.memory: 'kind' must be tcm, sram or hbm, got table", kb.memory, sys, "a", {kind = {}})
-- nothing half-made: the simulation still runs (no unbound a.k.ipcq.dma)
local vu = kb.unit(sys, "sw", "math")
local mm = kb.unit(sys, "sw", "gemm")
local k = kb.module(sys, "a.k")
k:out("math", "kb_math_if")
k:out("gemm", "kb_gemm_if")
k:bind("math", vu:port())
k:bind("gemm", mm:port())
local bad = {}
k:thread("t", function(self)
  local g = self:peer("gemm")
  bad.dtype = {pcall(g.run, g, 1, 1, 1, {1}, {1}, {dtype = "xx"})}
  bad.c_dtype = {pcall(g.run, g, 1, 1, 1, {1}, {1}, {c_dtype = 5})}
  bad.C = {pcall(function() return g:run(2, 2, 1, {1, 1}, {1, 1}, {accumulate = true, C = {1}}) end)}
  bad.ok = g:run(1, 1, 1, {3}, {4}, {dtype = "f16"})[1]
end)
sim:run()
kb.check(not bad.dtype[1] and bad.dtype[2]:find("gemm:run: 'dtype' must be f16, bf16 or f32, got xx", 1, true),
         tostring(bad.dtype[2]))
kb.check(not bad.c_dtype[1] and bad.c_dtype[2]:find("'c_dtype' must be f16, bf16 or f32, got 5", 1, true),
         tostring(bad.c_dtype[2]))
-- the options table is argument 6 (M, N, K, A, B, options)
kb.check(not bad.C[1] and bad.C[2]:find("bad argument #6 to 'run' (C must have 4 numbers, has 1)", 1, true),
         tostring(bad.C[2]))
kb.check(bad.ok == 12, "gemm after the refusals")

-- gemm:time of sizes whose cycle count does not fit 64 bits
local g = k:peer("gemm")
kb.check(g:time(64, 64, 64) > 0, "a sane size")
fails("gemm:time: M*N*K = ", g.time, g, math.maxinteger, math.maxinteger, 2)
fails("is more than 2^48", g.time, g, 1000000000, 1000000000, 1000000000)
kb.check(g:time(65536, 65536, 65536) > 0, "2^48 is allowed")
-- a module's options and types are checked
fails("m:method: unknown option 'sens' (sensitive, dont_initialize)", k.method, k, "mm",
      function() end, {sens = {}})
fails("an interface type is not empty", k.out, k, "p", "")
fails("an interface type is not empty", k.export, k, "", {})

-- handles outlive their simulation: printing one reads nothing it freed
local port = k:port("math")
kb.check(tostring(port) == "port 'a.k.math' : kb_math_if", tostring(port))
sys:close()
kb.check(tostring(port) == "port of a closed system", tostring(port))
sim:close()
kb.check(tostring(full) == "memory of a closed system", tostring(full))
kb.check(tostring(vu) == "math unit of a closed system", tostring(vu))
fails("attempt to use a closed", vu.port, vu)
print("lua_module_bad_input ok")
