-- Per-hop adaptive routing (fabric.routing adaptive_hop, credit mode;
-- docs/components/noc.md), through the binary: two flows that xy puts on
-- one UCIe link and adaptive_hop separates.
--   A: rank 2 (cube 0, NE corner) sends 64 KiB to rank 8 (cube 1) at 0 ns,
--      over cube 0's E port: r2 -> r5 -> UCIe E;
--   B: rank 0 (cube 0, NW corner) sends 4 KiB to rank 42 (cube 5, one cube
--      E and one S) at 10 ns.
-- One VC a class (vcs = the classes: 3 for xy, 4 for adaptive_hop), so B
-- cannot pass A on a VC of its own. Under xy B follows A over UCIe E and
-- waits for its tail. Under adaptive_hop B's head, at r1 where the legs to
-- the E and S exits part, finds the E way occupied (A holds UCIe E) and
-- takes r1 -> r4 toward S; from there its hops are those of the yx route
-- (S into cube 4, E into cube 5), which no other message uses, so B
-- arrives in the yx route's closed form exactly: 64.8 ns (the xy route's
-- is 61.1 ns). A is alone on its route either way: its closed form.
local kb = require("kbsim")

local function near(a, b) return math.abs(a - b) < 1e-6 end

local function run(routing, vcs)
  local sim <close> = kb.sim{}
  local sys = kb.system(sim, {fabric = {flow_control = "credit", routing = routing, vcs = vcs}})
  local ha = sys:inject{src = {2}, dst = {8}, t_ns = {0}, bytes = 65536}
  local hb = sys:inject{src = {0}, dst = {42}, t_ns = {10}, bytes = 4096}
  sim:run()
  local ra, rb = ha:results(), hb:results()
  kb.check(ra.delivered == 1 and rb.delivered == 1, routing .. ": both delivered")
  return ra.latency_ns[1], rb.latency_ns[1], sys:path(2, 8).latency_ns(65536)
end

local yx_closed = (function()
  local sim <close> = kb.sim{}
  return kb.system(sim, {fabric = {flow_control = "credit", routing = "yx"}}):path(0, 42).latency_ns(4096)
end)()
local a_xy, b_xy, a_closed = run("xy", 3)
local a_ah, b_ah = run("adaptive_hop", 4)
kb.check(near(yx_closed, 64.8), ("yx closed form %g, want 64.8"):format(yx_closed))
kb.check(near(a_xy, a_closed) and near(a_ah, a_closed),
  ("A: xy %g, adaptive_hop %g ns, closed form %g"):format(a_xy, a_ah, a_closed))
kb.check(b_xy > a_closed, ("B under xy %g ns: behind A (%g)"):format(b_xy, a_closed))
kb.check(near(b_ah, yx_closed), ("B under adaptive_hop %g ns, want the yx route's %g"):format(
  b_ah, yx_closed))
print(("flow_adaptive_hop: A %.1f ns; B xy %.1f ns, adaptive_hop %.1f ns"):format(a_ah, b_xy, b_ah))
print("flow_adaptive_hop ok")
