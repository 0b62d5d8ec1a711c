-- describe_ports.lua — sys:describe{ports = true}: the modules made so far
-- (units are made on first use, links and their nodes too), then every
-- PE's with units = true, every link with links = true; the Graphviz form;
-- a bad format. Decisions 0027, 0038.
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
kb.check(d:find("\nlinks made 0 of 8\n", 1, true), d)
-- a transfer through PE a's DMA makes a's units (and binds them), and the
-- two links of its route a -> sw -> b with their nodes: a.net, sw.net, b.net
sim:spawn("t", function() sys:dma(0, 1, 4096) end)
sim:run()
d = sys:describe{ports = true}
kb.check(d:find("\nlinks made 2 of 8\nmodules 11, ports 22, bindings 10\n", 1, true), d)
kb.check(d:find("\na.ipcq\n", 1, true) and not d:find("\nb.cpu\n", 1, true), d)
kb.check(d:find("\nsw.net\n  in    in    kb_flit_if 0..*  <- a->sw.out\n" ..
                "  out   out   kb_flit_if 0..*  -> sw->b.in\n", 1, true), d)
kb.check(d:find("\na->sw\n  in    in    kb_flit_if 0..1  <- a.net.out\n" ..
                "  out   out   kb_flit_if 1..1  -> sw.net.in\n", 1, true), d)
kb.check(not d:find("\nc.net\n", 1, true) and not d:find("\nsw->c\n", 1, true), d)
d = sys:describe{ports = true, units = true}
kb.check(d:find("modules 29, ports 58, bindings 28\n", 1, true), d)
kb.check(d:find("  out   buf   kb_mem_if  1..1  -> d.tcm.in\n", 1, true), d)
local g = sys:describe{format = "dot"}
kb.check(g:sub(1, 16) == "digraph kbsim {\n", g:sub(1, 40))
kb.check(count(g, " %-> ") == 28, "edges " .. count(g, " %-> "))
-- every link, and so every node
d = sys:describe{ports = true, links = true}
kb.check(d:find("\nlinks made 8 of 8\nmodules 37, ports 74, bindings 40\n", 1, true), d)
kb.check(d:find("\nsw.net\n  in    in    kb_flit_if 0..*  <- a->sw.out, b->sw.out, " ..
                "c->sw.out, d->sw.out\n", 1, true), d)
g = sys:describe{format = "dot"}
kb.check(count(g, " %-> ") == 40, "edges " .. count(g, " %-> "))
kb.check(g:find('"c->sw" [label="{c-\\>sw|{<p_in> in|<p_out> out}}"];', 1, true), g)
local ok, err = pcall(sys.describe, sys, {format = "svg"})
kb.check(not ok and err:find("format must be 'text' or 'dot', got 'svg'", 1, true), tostring(err))
-- the plain summary is unchanged
kb.check(sys:describe() == "graph: 5 nodes, 4 PEs, 8 links\n", sys:describe())
print("describe_ports ok")
