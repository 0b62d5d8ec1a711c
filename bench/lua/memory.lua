-- memory.lua — what a system and a collective take in memory (bench/memory.sh
-- runs it under /usr/bin/time and prints the peak RSS of each case)
--
--   kbsim bench/lua/memory.lua empty
--   kbsim bench/lua/memory.lua build SIPS            kb.system of SIPS SIPs, nothing run
--   kbsim bench/lua/memory.lua lrab SIPS N_ELEM [timing]
--   kbsim bench/lua/memory.lua ring N                 graph one-way ring of N PEs, ring all-reduce
--
-- SIPS is 6 (3x2), 24 (6x4), 96 (12x8), 384 (24x16) or 1024 (32x32), all torus_2d of
-- the default 4x4 cubes of 8 PEs. `lrab` runs the milestone all-reduce on
-- PE 0 of every cube (16 participants a SIP) with N_ELEM f16 elements a
-- participant, values written and checked exactly as in
-- scenarios/milestone_1h_ccl.lua; with `timing`, in timing-only mode.
-- `ring` builds a graph topology, a one-way ring of N PEs (each credit goes
-- N-1 links back round, so every PE routes to every other), and runs
-- ring_allreduce on all N, 256 f32 elements a rank, timing only.
-- Prints one line of counts; the memory is the caller's to measure.
local kb = require("kbsim")

local GRIDS = {[6] = {3, 2}, [24] = {6, 4}, [96] = {12, 8}, [384] = {24, 16}, [1024] = {32, 32}}

local function usage()
  io.stderr:write("usage: kbsim memory.lua empty | build SIPS | lrab SIPS N_ELEM [timing] | ring N\n"
    .. "  SIPS: 6, 24, 96, 384 or 1024\n")
  os.exit(2)
end

local function topology(sips)
  local g = GRIDS[sips]
  if not g then usage() end
  return {sips = {count = sips, topology = "torus_2d", w = g[1], h = g[2]}}
end

local mode, sips = arg[1], math.tointeger(tonumber(arg[2] or ""))

if mode == "empty" then
  local sim <close> = kb.sim{guard = false}
  print("empty")
elseif mode == "build" and sips then
  local sim <close> = kb.sim{guard = false}
  local sys = kb.system(sim, topology(sips))
  local c = sys:counts()
  print(("build sips=%d pes=%d nodes=%d links=%d"):format(c.sips, c.pes, c.nodes, c.links))
elseif mode == "lrab" and sips then
  local n_elem = math.tointeger(tonumber(arg[3] or ""))
  if not n_elem or n_elem < 1 or (arg[4] and arg[4] ~= "timing") then usage() end
  local timing = arg[4] == "timing"
  local T = require("kbsim.torch")
  local tl = require("kbsim.tl")
  local torch = T.init{topology = topology(sips), timing_only = timing}
  local D = torch.distributed
  D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = "lrab", dtype = "f16"}}}
  local ranks = D.get_ranks()
  local n = #ranks
  local t = torch.zeros({1, n * n_elem}, {dtype = "f16"})
  local base = tl.vec_affine(n_elem, 0.25, 0):mod(2)
  local offset_sum = 0
  if not timing then
    for k, r in ipairs(ranks) do
      t:shard_write_vec(r, base:copy():add((k - 1) % 4))
      offset_sum = offset_sum + (k - 1) % 4
    end
  end
  local rep = D.all_reduce(t, {check = false})
  local check = "skipped"
  if not timing then
    local want = base:copy():scale(n):add(offset_sum)
    check = "passed"
    for _, r in ipairs(ranks) do
      if t:shard_vec(r):max_abs_diff(want) ~= 0 then check = "failed" end
    end
  end
  print(("lrab sips=%d participants=%d n_elem=%d latency_ns=%.1f check=%s"):format(
    sips, n, n_elem, rep.latency_ns, check))
  if check == "failed" then os.exit(1) end
elseif mode == "ring" and sips and sips >= 2 then
  local n = sips
  local g = {nodes = {}, links = {}}
  for i = 0, n - 1 do g.nodes[i + 1] = {name = "p" .. i, pe = true} end
  for i = 0, n - 1 do
    g.links[i + 1] = {from = "p" .. i, to = "p" .. ((i + 1) % n), bandwidth_gbps = 128, latency_ns = 100}
  end
  local T = require("kbsim.torch")
  local tl = require("kbsim.tl")
  local ccl = require("kbsim.ccl")
  local torch = T.init{topology = g, timing_only = true, guard = false}
  local ranks = {}
  for i = 0, n - 1 do ranks[i + 1] = i end
  local t = torch.zeros({1, n * 256}, {dtype = "f32", ranks = ranks})
  local algo = ccl.get("ring_allreduce")
  local a = algo.args(n, 256, {dtype = "f32"})
  algo.wire(torch.sys, ranks, a)
  local run = tl.launch(torch.sys, ranks, algo.kernel, a, t, t)
  torch.sim:run()
  print(("ring pes=%d latency_ns=%.1f"):format(n, run:latency_ns()))
else
  usage()
end
