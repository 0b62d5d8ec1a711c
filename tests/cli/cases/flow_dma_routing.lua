-- PE_DMA copies follow fabric.routing (docs/components/noc.md), through
-- the kbsim binary. Rank 0 (cube 0, NW corner) to rank 42 (cube 5, one
-- cube E and one S): the xy route leaves cube 0 by its E port, the yx
-- route by its S port, with different legs inside the cubes, so the two
-- closed forms differ.
--  1. routing yx: an idle copy takes the yx closed form, not the xy one;
--  2. routing adaptive: rank 2 (cube 0, NE corner) streams 1 MiB to rank 8
--     (cube 1) over cube 0's E port, which the xy route of 0 -> 42 needs
--     and the yx route does not. A copy 0 -> 42 started 100 ns later
--     takes the yx route and its closed form exactly; under xy it waits
--     for the stream (a later end). Both flow-control modes; credit with
--     one VC a class, so the copy cannot pass the stream on a VC of its own.
--  3. sys:transfer (kb_system_transfer) chooses the same way.
local kb = require("kbsim")

local function near(a, b) return math.abs(a - b) < 1e-6 end

-- the copy 0 -> 42 of `bytes`, alone or behind the stream; its time and
-- the DMA's closed form
local function copy(fabric, bytes, behind)
  local sim <close> = kb.sim{}
  local sys = kb.system(sim, {fabric = fabric})
  local took, formula
  if behind then
    sim:spawn("stream", function() sys:dma(2, 8, 1 << 20) end)
  end
  sim:spawn("copy", function()
    if behind then kb.wait(100) end
    took, formula = sys:dma(0, 42, bytes)
  end)
  sim:run()
  return took, formula
end

local bytes = 4096
local xy_t, xy_f = copy({routing = "xy"}, bytes)
local yx_t, yx_f = copy({routing = "yx"}, bytes)
kb.check(near(xy_t, xy_f) and near(yx_t, yx_f),
  ("idle copies: xy %g (closed form %g), yx %g (%g) ns"):format(xy_t, xy_f, yx_t, yx_f))
kb.check(math.abs(xy_t - yx_t) > 1, ("xy %g and yx %g ns should differ"):format(xy_t, yx_t))
print(("flow_dma_routing idle: xy %.1f ns, yx %.1f ns"):format(xy_t, yx_t))

for _, fc in ipairs({"wormhole_unbounded", "credit"}) do
  local credit = fc == "credit"
  local t_xy = copy({flow_control = fc, routing = "xy", vcs = credit and 3 or nil}, bytes, true)
  local t_ad = copy({flow_control = fc, routing = "adaptive", vcs = credit and 6 or nil}, bytes,
    true)
  kb.check(t_xy > yx_t + 100, ("%s xy behind the stream: %g ns, want > %g"):format(
    fc, t_xy, yx_t + 100))
  kb.check(near(t_ad, yx_t), ("%s adaptive behind the stream: %g ns, want the yx closed form %g"):format(
    fc, t_ad, yx_t))
  print(("flow_dma_routing %s: behind the stream xy %.1f ns, adaptive %.1f ns"):format(
    fc, t_xy, t_ad))
end
-- sys:transfer (TCM to TCM over kb_system_transfer) makes the same choice:
-- behind the stream, adaptive takes the yx route's network time
local function xfer(routing)
  local sim <close> = kb.sim{}
  local sys = kb.system(sim, {fabric = {routing = routing}})
  local took
  sim:spawn("stream", function() sys:transfer(2, 8, 1 << 20) end)
  sim:spawn("copy", function()
    kb.wait(100)
    local t0 = sim:now()
    sys:transfer(0, 42, bytes)
    took = sim:now() - t0
  end)
  sim:run()
  return took
end
local yx_net = (function()
  local sim <close> = kb.sim{}
  local sys = kb.system(sim, {fabric = {routing = "yx"}})
  return sys:path(0, 42).latency_ns(bytes)
end)()
local tx_xy, tx_ad = xfer("xy"), xfer("adaptive")
kb.check(tx_xy > yx_net + 100 and near(tx_ad, yx_net), ("sys:transfer behind the stream: xy %g, "
  .. "adaptive %g ns, want adaptive = the yx route's %g"):format(tx_xy, tx_ad, yx_net))
print(("flow_dma_routing sys:transfer: behind the stream xy %.1f ns, adaptive %.1f ns"):format(
  tx_xy, tx_ad))
print("flow_dma_routing ok")
