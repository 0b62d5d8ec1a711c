-- flow_deadlock.lua's traffic under per-hop adaptive routing
-- (fabric.routing adaptive_hop): one PE in each of the 8 cubes of the
-- cube grid's first row (a ring of cubes over the two SIPs) sends 64 KiB
-- four cubes east at once, one-flit buffers. With deadlock_avoidance
-- vc_classes and one VC a class (vcs 4: the three xy classes, the escape
-- network, and the adaptive class) every message arrives: the adaptive
-- class alone closes a cycle round the ring, the escape VCs break it.
-- With deadlock_avoidance none (one class, one VC) the same traffic
-- deadlocks: no message arrives. Argument: "vc_classes" or "none".
local kb = require("kbsim")
local mode = arg[1] or "vc_classes"
local sim = kb.sim{}
local fabric = {flow_control = "credit", routing = "adaptive_hop", buffer_flits = 1,
                deadlock_avoidance = mode, vcs = mode == "none" and 1 or 4}
local sys = kb.system(sim, {fabric = fabric})
local ppc = 8
local row = {}
for sip = 0, 1 do
  for c = 0, 3 do row[#row + 1] = (sip * 16 + c) * ppc end -- cube c of row 0, PE 0
end
local spec = {src = {}, dst = {}, t_ns = {}, bytes = 65536}
for i, src in ipairs(row) do
  spec.src[i], spec.dst[i], spec.t_ns[i] = src, row[(i - 1 + 4) % #row + 1], 0
end
local h = sys:inject(spec)
sim:run()
local r = h:results()
print(("flow_deadlock_hop %s: %d of %d delivered"):format(mode, r.delivered, r.n))
