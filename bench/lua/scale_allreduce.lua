-- scale_allreduce.lua — one all-reduce at system scale, with the kernel's
-- counters (bench/scale.sh runs it under /usr/bin/time for CPU and RSS)
--
--   kbsim bench/lua/scale_allreduce.lua algorithm=lrab|ring sips=96 n_elem=1024 [values=yes] [guard=yes]
--
-- The system is torus_2d of SIPS SIPs (6 = 3x2, 24 = 6x4, 96 = 12x8,
-- 384 = 24x16, 1024 = 32x32) of the default 4x4 cubes of 8 PEs; the
-- participants are PE 0 of every cube (16 a SIP), N_ELEM f16 elements each.
--   lrab: the milestone all-reduce through torch.distributed, as in
--         scenarios/milestone_1h_ccl.lua (its own participants: PE 0 of
--         every cube);
--   ring: ring_allreduce (N-1 rounds of whole tiles) over the same PEs in
--         rank order, launched straight from the registry (the process
--         group would take ranks 0..N-1).
-- With values, participant k holds 1 at the elements j with (j + k) mod 16
-- = 0 and 0 elsewhere, participant 0 adds j mod 7 and the last j mod 5, so
-- element j sums to N/16 + j mod 7 + j mod 5 (N participants, a multiple
-- of 16): every partial sum, in any order, is an integer of at most 1034
-- at 1024 SIPs, exact in f16, and every participant's result is checked
-- exactly. (The milestone's pattern, multiples of 0.25 summing to ~1.9 N,
-- leaves f16's exact range past 128 participants: a ring, which adds in
-- order, then differs from the exact sum.) Without values the run is
-- timing only.
-- guard=no makes the simulation without stack guard pages (kb.sim{guard = false}).
--
-- Prints one line: the case, participants, the all-reduce's latency and the
-- simulated end time in ns, sim:stats() counters and the check; a wrong
-- value exits 1.
local kb = require("kbsim")
local GRIDS = {[6] = {3, 2}, [24] = {6, 4}, [96] = {12, 8}, [384] = {24, 16}, [1024] = {32, 32}}
local p = kb.params({
  algorithm = {default = "lrab", type = "string", choices = {"lrab", "ring"},
               help = "lrab (torch.distributed) or the flat ring (ring_allreduce)"},
  sips = {default = 6, type = "integer", min = 1, help = "SIPs: 6, 24, 96, 384 or 1024 (torus_2d)"},
  n_elem = {default = 1024, type = "integer", min = 1, help = "f16 elements a participant"},
  values = {default = true, type = "boolean", help = "write and check values (no: timing only)"},
  guard = {default = true, type = "boolean", help = "stack guard pages (kb.sim{guard = ...})"},
}, {about = "an all-reduce at system scale with the kernel's counters (bench/scale.sh)",
    refuse_topology = "the script builds its own torus_2d systems",
    check = function(q)
      if not GRIDS[q.sips] then return ("sips must be 6, 24, 96, 384 or 1024, got %d"):format(q.sips) end
    end})

local T = require("kbsim.torch")
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local g = GRIDS[p.sips]
local torch = T.init{topology = {sips = {count = p.sips, topology = "torus_2d", w = g[1], h = g[2]}},
                     timing_only = not p.values, guard = p.guard}
local n_elem = p.n_elem

local ranks
if p.algorithm == "lrab" then
  torch.distributed.init_process_group{backend = "ahbm",
    config = {ccl = {algorithm = "lrab", dtype = "f16"}}}
  ranks = torch.distributed.get_ranks()
else
  local c = torch.sys:counts()
  local ppc = c.pes // c.cubes
  ranks = {}
  for cube = 0, c.cubes - 1 do ranks[cube + 1] = cube * ppc end
end
local n = #ranks

local t = torch.zeros({1, n * n_elem}, {dtype = "f16", ranks = ranks})
local function mod_vec(m) return tl.vec_affine(n_elem, 1, 0):mod(m) end
if p.values then
  assert(n % 16 == 0, "participants are 16 a SIP")
  local ones = {} -- ones[m]: 1 where (j + m) mod 16 = 0
  for m = 0, 15 do
    local v = {}
    for j = 0, n_elem - 1 do v[j + 1] = (j + m) % 16 == 0 and 1 or 0 end
    ones[m] = tl.vec_from(v)
  end
  for k, r in ipairs(ranks) do
    local v = ones[(k - 1) % 16]
    if k == 1 then v = v:copy():add(mod_vec(7)) end
    if k == n then v = v:copy():add(mod_vec(5)) end
    t:shard_write_vec(r, v)
  end
end

local latency
if p.algorithm == "lrab" then
  latency = torch.distributed.all_reduce(t, {check = false}).latency_ns
else
  local algo = ccl.get("ring_allreduce")
  local a = algo.args(n, n_elem, {dtype = "f16"})
  algo.wire(torch.sys, ranks, a)
  local run = tl.launch(torch.sys, ranks, algo.kernel, a, t, t)
  torch.sim:run()
  latency = run:latency_ns()
end

local check = "skipped"
if p.values then
  local want = tl.vec_new(n_elem, n // 16):add(mod_vec(7)):add(mod_vec(5))
  check = "passed"
  local got = tl.vec_new(n_elem)
  for _, r in ipairs(ranks) do
    if t:shard_vec(r, got):max_abs_diff(want) ~= 0 then check = "failed" break end
  end
end

local st = torch.sim:stats()
print(("scale %s sips=%d participants=%d n_elem=%d latency_ns=%.3f end_ns=%.3f activations=%d "
  .. "timed_events=%d switches=%d check=%s"):format(p.algorithm, p.sips, n, n_elem, latency,
  torch.sim:now(), st.activations, st.timed_events, st.switches, check))
if check == "failed" then os.exit(1) end
