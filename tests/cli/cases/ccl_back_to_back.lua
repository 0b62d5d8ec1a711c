-- ccl_back_to_back.lua — two collectives on the same buffers, and barriers reused: no stale signal may pass
--
-- The second all-reduce sums the first's results: n * (n i + base). The
-- barrier runs several episodes on the same IPCQ channels; its tokens
-- carry the episode number, so a leftover token cannot release a later one.
local kb = require("kbsim")
local T = require("kbsim.torch")

local C, n = 32, 8
for _, alg in ipairs({"ring_allreduce", "ring_rs_ag_allreduce", "tree_allreduce"}) do
  local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 2}}}}
  local D = torch.distributed
  D.init_process_group{backend = "ahbm",
    config = {ccl = {algorithm = alg, dtype = "f32", algorithms = {[alg] = {world_size = n}}}}}
  local t = torch.zeros({1, n * C}, {dtype = "f32"})
  local v = {}
  for r = 0, n - 1 do
    for i = 0, C - 1 do v[r * C + i + 1] = i + 100 * r end
  end
  t:copy_(torch.from_table(v, {dtype = "f32"}))
  local base = 100 * n * (n - 1) // 2
  local r1 = D.all_reduce(t)
  local b1 = D.barrier()
  local r2 = D.all_reduce(t)
  local b2 = D.barrier()
  local b3 = D.barrier()
  local got, bad = t:to_table(), 0
  for r = 0, n - 1 do
    for i = 0, C - 1 do
      if got[r * C + i + 1] ~= n * (n * i + base) then bad = bad + 1 end
    end
  end
  kb.check(r1.check == "passed" and r2.check == "passed", alg .. ": host checks")
  kb.check(bad == 0, ("%s: %d elements wrong after the second all-reduce"):format(alg, bad))
  -- the second run meets warm, already wired channels: same time
  kb.check(math.abs(r1.latency_ns - r2.latency_ns) < 1e-6,
    ("%s: latencies %g and %g differ"):format(alg, r1.latency_ns, r2.latency_ns))
  kb.check(b1.latency_ns > 0 and math.abs(b2.latency_ns - b3.latency_ns) < 1e-6,
    ("%s: barrier episodes %g %g %g ns"):format(alg, b1.latency_ns, b2.latency_ns, b3.latency_ns))
  print(("%-22s %10.1f ns, again %10.1f ns, barrier %6.1f ns"):format(alg, r1.latency_ns,
    r2.latency_ns, b2.latency_ns))
end

-- A stale token must not release a later episode: rank 3 sends one token
-- of episode 1 too many, which stays queued at rank 0; episode 2 then
-- runs without rank 3, so only that stale token could release rank 0.
do
  local tl = require("kbsim.tl")
  local ccl = require("kbsim.ccl")
  local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}}}
  local sim, sys = torch.sim, torch.sys
  local bar = ccl.get("barrier")
  local ranks = {0, 1, 2, 3}
  local state = {}
  local a1 = bar.args(4, 0, {epoch = 1, state = state})
  bar.wire(sys, ranks, a1)
  -- rank 3 enters episode 1 twice (a stale duplicate), the others once
  local extra = tl.launch(sys, {3}, function() tl.send("bar0", tl.full(1, 1, "f32")) end)
  sim:run()
  local run = tl.launch(sys, ranks, bar.kernel, a1)
  sim:run()
  kb.check(run:latency_ns() > 0, "episode 1 passes")
  -- episode 2 with rank 3 absent: rank 0 sees the stale epoch-1 token on
  -- bar0 and must keep waiting, so the run ends blocked
  local a2 = bar.args(4, 0, {epoch = 2, state = state})
  tl.launch(sys, {0, 1, 2}, bar.kernel, a2)
  local ok, err = pcall(sim.run, sim)
  -- without the epoch rank 0 would take the stale token, get rank 2's
  -- round-1 token and finish; with it, it is still waiting in round 0
  kb.check(not ok and tostring(err):find("deadlock", 1, true)
    and tostring(err):find("'sip0.cube0.pe0.kernel' waits on event 'sip0.cube0.pe0.ipcq.bar0.data'",
      1, true), "episode 2 must not pass on a stale token: " .. tostring(err))
  kb.check(extra ~= nil, "launch returned a run")
end
print("ccl_back_to_back ok")
