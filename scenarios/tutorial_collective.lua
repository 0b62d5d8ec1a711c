-- tutorial_collective.lua — docs/tutorial_collective.md: a new collective written from scratch, named in a ccl.yaml and run
--
--   kbsim scenarios/tutorial_collective.lua
--
-- The algorithm: a chain all-reduce. Rank 0 sends its tile east; every
-- rank adds its own and passes the partial sum on; the last rank holds
-- the total and sends it back west along the chain.
local kb = require("kbsim")
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")
local T = require("kbsim.torch")
kb.params({}, {about = "the collective tutorial (docs/tutorial_collective.md)",
               grid_only = "the tutorial sets its own SIP and cube grid over the file's keys"})

-- 1. The algorithm: a table with the contract of docs/kernel_api.md.
local chain_allreduce = {
  name = "chain_allreduce",
  collective = "all_reduce",

  -- What every kernel needs to know, computed once on the host.
  args = function(world_size, n_elem, opts)
    return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype}
  end,

  -- Channels between neighbours, both ways: i's "E" sends into i+1's
  -- "W", and i+1's "W" sends back into i's "E".
  wire = function(sys, ranks)
    for i = 1, #ranks - 1 do
      tl.wire(sys, ranks[i], "E", ranks[i + 1], "W")
      tl.wire(sys, ranks[i + 1], "W", ranks[i], "E")
    end
  end,

  -- Runs on every PE; tl.rank() is its place in the chain.
  kernel = function(a, input, output)
    local n, r, last = a.n_elem, tl.rank(), a.world_size - 1
    local acc = tl.load(input, 0, n)
    if r > 0 then acc = acc + tl.recv("W", n, a.dtype) end -- partial sum from the west
    if r < last then
      tl.send("E", acc)
      acc = tl.recv("E", n, a.dtype) -- the total, on its way back
    end
    if r > 0 then tl.send("W", acc) end
    tl.store(output, 0, acc)
  end,
}
ccl.register(chain_allreduce)

-- 2. A ccl.yaml that selects it, for 6 ranks.
local cfg = kb.outdir() .. "/ccl.yaml"
local f = assert(io.open(cfg, "w"))
f:write([[
ccl:
  algorithm: chain_allreduce
  n_elem: 256
  dtype: f32
  algorithms:
    chain_allreduce: {world_size: 6}
]])
f:close()

-- 3. Run it: one SIP of 2x2 cubes, the tensor sharded over the 6 ranks.
local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 2}}}}
local D = torch.distributed
D.init_process_group{backend = "ahbm", config = cfg}
local ws, n = D.get_world_size(), D.get_config().n_elem
local t = torch.zeros({1, ws * n}, {dtype = "f32"})
local v = {}
for r = 0, ws - 1 do
  for i = 0, n - 1 do v[r * n + i + 1] = i + 100 * r end
end
t:copy_(torch.from_table(v, {dtype = "f32"}))
local rep = D.all_reduce(t)

-- 4. Check the values (rank r's element i: ws*i + 100*ws*(ws-1)/2) and report.
local got, bad = t:to_table(), 0
for r = 0, ws - 1 do
  for i = 0, n - 1 do
    if got[r * n + i + 1] ~= ws * i + 100 * ws * (ws - 1) // 2 then bad = bad + 1 end
  end
end
kb.check(bad == 0, ("%d elements wrong"):format(bad))
kb.check(rep.check == "passed", "host check " .. rep.check)
print(("%s on %d ranks, %d B each: %.1f ns, algbw %.2f GB/s, busbw %.2f GB/s, check %s")
  :format(rep.algorithm, rep.world_size, rep.bytes, rep.latency_ns, rep.algbw_gbps,
    rep.busbw_gbps, rep.check))
for r = 0, ws - 1 do
  print(("  rank %d: %.1f ns"):format(r, rep.per_rank_ns[D.get_ranks()[r + 1]]))
end
