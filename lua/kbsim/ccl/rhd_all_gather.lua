-- rhd_all_gather.lua — all-gather by recursive doubling, any rank count
--
-- Input C elements per rank, output N·C in rank order. A folded rank
-- hands its chunk to its odd partner first and takes the whole result
-- back at the end. Cost (Hockney, S = N·C·bytes output, p = 2^⌊log2 N⌋),
-- counted per message of one chunk:
--   (N − 1)(α + (S/N)β)                  for N = p
--   + (α + (S/N)β) + (N − 1)(α + (S/N)β) for N > p (fold in, hand back;
--                                        a bound: hockney.rhd_all_gather_exact)
-- (analytic.lua: hockney.rhd_all_gather).
local rhd = require("kbsim.ccl.lib.rhd")

local NAME = "rhd_all_gather"

local function args(world_size, n_elem, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype}
end

local function kernel(a, input, output)
  local tl = require("kbsim.tl")
  local N, C = a.world_size, a.n_elem
  local pl = rhd.plan(N)
  local r = tl.rank()
  local function len() return C end
  local P = {[r] = tl.load(input, 0, C)}
  local j = pl.core(r)
  if not j then
    rhd.send_list({r}, P, false)
    local rest = {}
    for d = 0, N - 1 do if d ~= r then rest[#rest + 1] = d end end
    rhd.recv_list(rest, P, len, a, false)
  else
    if r < 2 * pl.ex then rhd.recv_list({r - 1}, P, len, a, false) end
    local owner = {}
    for d = 0, N - 1 do owner[d] = pl.owner_of(d) end
    rhd.doubling(pl, j, P, owner, N, len, a)
    if r < 2 * pl.ex then
      local rest = {}
      for d = 0, N - 1 do if d ~= r - 1 then rest[#rest + 1] = d end end
      rhd.send_list(rest, P, false)
    end
  end
  for d = 0, N - 1 do tl.store(output, d * C, P[d]) end
end

return {
  name = NAME,
  collective = "all_gather",
  args = args,
  wire = rhd.wire,
  kernel = kernel,
}
