-- describe_ports.lua — sys:describe{ports = true}: the modules made so far
-- (units are made on first use), then every PE's with units = true; the
-- Graphviz form; a bad format. Decision 0027.
local kb = require("kbsim")
local sim = kb.sim()
local sys = kb.system(sim, "graph4.yaml")
local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end
local d = sys:describe{ports = true}
kb.check(d:find("modules 0, ports 0, bindings 0\n", 1, true), "nothing made yet: " .. d)
-- a transfer through PE a's DMA makes a's units (and binds them)
sim:spawn("t", function() sys:dma(0, 1, 4096) end)
sim:run()
d = sys:describe{ports = true}
kb.check(d:find("modules 6, ports 12, bindings 6\n", 1, true), d)
kb.check(d:find("\na.ipcq\n", 1, true) and not d:find("\nb.cpu\n", 1, true), d)
d = sys:describe{ports = true, units = true}
kb.check(d:find("modules 24, ports 48, bindings 24\n", 1, true), d)
kb.check(d:find("  out   buf   kb_mem_if  1..1  -> d.tcm.in\n", 1, true), d)
local g = sys:describe{format = "dot"}
kb.check(g:sub(1, 16) == "digraph kbsim {\n", g:sub(1, 40))
kb.check(count(g, " %-> ") == 24, "edges " .. count(g, " %-> "))
local ok, err = pcall(sys.describe, sys, {format = "svg"})
kb.check(not ok and err:find("format must be 'text' or 'dot', got 'svg'", 1, true), tostring(err))
-- the plain summary is unchanged
kb.check(sys:describe() == "graph: 5 nodes, 4 PEs, 8 links\n", sys:describe())
print("describe_ports ok")
