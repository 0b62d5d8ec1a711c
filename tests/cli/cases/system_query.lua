-- system_query.lua — kb.system: counts, PEs, neighbours, paths and their
-- closed-form latency, on the default system and the 6-SIP shapes
local kb = require("kbsim")
local sim = kb.sim()
local sys = kb.system(sim)
local c = sys:counts()
kb.check(c.sips == 2 and c.cubes == 32 and c.pes == 256, "default shape")
-- 26 nodes and 58 links a cube, plus 112 UCIe links (see test_system.c)
kb.check(c.nodes == 832 and c.links == 1968, "default counts " .. c.nodes .. " " .. c.links)
local pe = sys:pe(43)
kb.check(pe.name == "sip0.cube5.pe3" and pe.sip == 0 and pe.cube == 5 and pe.local_pe == 3,
         "pe 43")
kb.check(pe.hbm == "sip0.cube5.pe3.hbm" and pe.sram == "sip0.cube5.sram", "pe memories")
kb.check(sys:neighbor(3, "E") == 11 and sys:neighbor(3, "S") == 35, "E, S")
kb.check(sys:neighbor(3, "N") == nil and sys:neighbor(3, "W") == nil, "edges")
kb.check(sys:neighbor(3, "global_E") == 131 and sys:neighbor(3, "global_N") == nil, "global")
local ok, err = pcall(sys.neighbor, sys, 3, "up")
kb.check(not ok and err:find("unknown direction 'up'"), "bad direction")
ok, err = pcall(sys.pe, sys, 256)
kb.check(not ok and err:find("no PE of rank 256"), "bad rank")

-- same corner, other cube (E then S), other SIP
local p = sys:path(0, 1)
kb.check(p.hops == 2 and table.concat(p.nodes, " ") ==
         "sip0.cube0.pe0 sip0.cube0.r0 sip0.cube0.pe1", "same corner")
p = sys:path(0, 40)
kb.check(p.hops == 10 and p.nodes[6] == "sip0.cube1.r3" and p.nodes[11] == "sip0.cube5.pe0",
         "other cube")
p = sys:path("sip0.cube3.pe0", "sip1.cube0.pe0")
kb.check(p.hops == 7 and p.links[5] == "sip0.cube3.ucie.E", "other SIP")
-- 4096 B to the E neighbour cube: head 1 + 3·1.85 + 16.5 + 1.85 + 1, body 15 × 1
p = sys:path(0, 8)
kb.check(math.abs(p.latency_ns(4096) - 40.9) < 1e-9, "closed form " .. p.latency_ns(4096))
kb.check(sys:path("sip0.cube0.pe0", "sip0.cube0.sram").hops == 4, "to the sram")
kb.check(sys:describe():find("256 PEs", 1, true), "describe")

local function counts(spec)
  local n = kb.system(kb.sim(), spec):counts()
  return n.nodes, n.links
end
local nodes, links = counts({sips = {count = 6}})
kb.check(nodes == 2496 and links == 5904, "ring 6")
nodes, links = counts({sips = {count = 6, topology = "torus_2d", w = 2, h = 3}})
kb.check(nodes == 2496 and links == 5952, "torus 2x3")
nodes, links = counts({sips = {count = 6, topology = "mesh_2d_no_wrap", w = 2, h = 3}})
kb.check(nodes == 2496 and links == 5912, "mesh 2x3 without wrap")
print("system_query ok")
