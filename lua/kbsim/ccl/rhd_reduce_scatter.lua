-- rhd_reduce_scatter.lua — reduce-scatter by recursive halving, any rank count
--
-- Input N·C elements per rank, output C: rank d ends with the sum of
-- every rank's chunk d. Chunk d is owned by the core rank of d (a folded
-- rank's chunk by its odd partner, which hands it over at the end).
-- Cost (Hockney, S = N·C·bytes input per rank, p = 2^⌊log2 N⌋):
--   log2(p)·α·(N/p... per message) — exactly, counted per message:
--   Σ_b (chunks sent at bit b)(α + Cβ + Cγ)
--   + N(α + C(β + γ)) + (α + Cβ)        (N > p: fold in, hand back;
--                                        a bound: the fold streams, see
--                                        hockney.rhd_reduce_scatter_exact)
-- which for N = p is (N − 1)(α + (S/N)(β + γ)) in messages of one chunk
-- (analytic.lua: hockney.rhd_reduce_scatter).
local rhd = require("kbsim.ccl.lib.rhd")

local NAME = "rhd_reduce_scatter"

local function args(world_size, n_elem, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, op = opts.op}
end

local function kernel(a, input, output)
  local tl = require("kbsim.tl")
  local N, C = a.world_size, a.n_elem
  local pl = rhd.plan(N)
  local r = tl.rank()
  local function len() return C end
  local all = rhd.range(N)
  local P = {}
  for d = 0, N - 1 do P[d] = tl.load(input, d * C, C) end
  local j = pl.core(r)
  if not j then
    rhd.send_list(all, P, true)
    rhd.recv_list({r}, P, len, a, false)
  else
    if r < 2 * pl.ex then rhd.recv_list(all, P, len, a, true) end
    local owner = {}
    for d = 0, N - 1 do owner[d] = pl.owner_of(d) end
    rhd.halving(pl, j, P, owner, N, len, a)
    if r < 2 * pl.ex then rhd.send_list({r - 1}, P, true) end
  end
  tl.store(output, 0, P[r])
end

return {
  name = NAME,
  collective = "reduce_scatter",
  args = args,
  wire = rhd.wire,
  kernel = kernel,
}
