-- graph_system_keys.lua — a graph system takes the PE settings of a grid
-- system (pe, ipcq, clock_ghz, flit_bytes), from the --topology graph file
-- (graph_pe.yaml: 2 GHz, 64 KiB TCM, rings of 4 x 16 KiB, 64 B flits) and
-- from a Lua table, with the same effect as on a grid
local kb = require("kbsim")
local tl = require("kbsim.tl")

local function fails(want, f, ...)
  local ok, msg = pcall(f, ...)
  kb.check(not ok and tostring(msg):find(want, 1, true) ~= nil,
    ("expected an error with %q, got %s"):format(want, ok and "success" or tostring(msg)))
end

local keys = {clock_ghz = 2, pe = {tcm = {capacity = 65536}},
              ipcq = {n_slots = 4, slot_size = 16384}}
local grid = kb.system(kb.sim(), {sips = {count = 1}, clock_ghz = keys.clock_ghz,
                                  pe = keys.pe, ipcq = keys.ipcq})
local plain = kb.system(kb.sim(), {sips = {count = 1}})
local file = kb.system(kb.sim()) -- the --topology graph
local tab = kb.system(kb.sim(), {clock_ghz = keys.clock_ghz, pe = keys.pe, ipcq = keys.ipcq,
  nodes = {{name = "x", pe = true}, {name = "y", pe = true}},
  links = {{from = "x", to = "y", bandwidth_gbps = 64, bidirectional = true}}})

-- the clock: a GEMM takes half the time of the default 1 GHz
local t_plain = tl.gemm_time(plain, 64, 64, 64, 0)
for name, sys in pairs{grid = grid, file = file, table = tab} do
  local t = tl.gemm_time(sys, 64, 64, 64, 0)
  kb.check(t * 2 == t_plain, ("%s: gemm %d ps at 2 GHz, %d at 1 GHz"):format(name, t, t_plain))
  -- the TCM: 64 KiB
  fails("beyond the 65536 bytes of tcm", sys.tcm_write, sys, 0, 65535, "xy")
  -- the rings: 4 x 16 KiB fill a 64 KiB TCM; the first wire takes rank 1's
  tl.wire(sys, 0, "E", 1, "W")
  fails("tcm of '" .. sys:pe(1).name .. "' is full: 65536 bytes", tl.wire, sys, 1, "E", 0, "W")
end
-- the default TCM takes both rings
tl.wire(plain, 0, "E", 1, "W")
tl.wire(plain, 1, "E", 0, "W")

-- flit_bytes: graph_pe.yaml's 64 B flits, not the default 256 B (graph4's
-- 144 ns path of 4096 B, test_graph_topology.c, becomes 141 ns)
kb.check(file:path(0, 3).latency_ns(4096) == 141, "64 B flits: " .. file:path(0, 3).latency_ns(4096))

-- the grid's own keys are not a graph's, and the PE keys are checked
local line = debug.getinfo(1, "l").currentline + 1
local ok, e = pcall(kb.system, kb.sim(), {cube = {corners = 2}, clock_ghz = 1e-300,
  nodes = {{name = "x", pe = true}}, links = {}})
kb.check(not ok and e:find(("graph_system_keys.lua:%d: cube: 'cube' describes the AHBM grid, "
  .. "not a graph"):format(line), 1, true), tostring(e))
kb.check(e:find(("graph_system_keys.lua:%d: clock_ghz: expected a value >= 0.001 and <= 1000"
  .. ", got 1e-300"):format(line), 1, true), tostring(e))
print("graph_system_keys ok")
