-- kbsim/ccl/lib/multiring.lua — bandwidth-optimal all-reduce over the rings of a grid
--
-- The tile is cut into P = N pieces. Dimension by dimension (first to
-- last), every line of the grid along that dimension runs a ring
-- reduce-scatter on the pieces it still holds; a rank ends with the full
-- sum of one piece. The all-gather then runs the dimensions in reverse.
-- A chunk of a ring step is a set of m pieces, exchanged one piece at a
-- time (post the receive, send, wait, combine: the pattern of the flat
-- ring, deadlock-free for any tile size), since the kernel language has
-- no way to split or join a tile. Every rank sends 2(N − 1) messages of
-- S/N bytes in all, as the flat bandwidth-optimal ring does, but each
-- goes one hop along one dimension. With one dimension this is the ring reduce-scatter and
-- all-gather of ring_rs_ag_allreduce, in whatever ring order is given.
--
-- Cost (Hockney, α and β of one neighbour hop, S bytes, N = Π d_i,
-- m_i = N / (d_1 ... d_i) pieces per chunk at dimension i):
--   T = Σ_i 2(d_i − 1)·m_i·(α + (S/N)β) + Σ_i (d_i − 1)·m_i·(S/N)γ
--     = 2(N − 1)(α + (S/N)β) + (N − 1)(S/N)γ
-- (analytic.lua: hockney.torus_allreduce).
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")
local grid = require("kbsim.ccl.lib.grid")

local M = {}

-- A: {n_elem, dtype, op, dims, pos = {[launch index] = grid index},
-- at = {[grid index] = launch index}, name}
function M.wire(sys, ranks, a)
  for i = 0, #ranks - 1 do
    local c = grid.coords(a.pos[i], a.dims)
    for k, d in ipairs(a.dims) do
      if d > 1 then
        local nc = {table.unpack(c)}
        nc[k] = (c[k] + 1) % d
        local j = a.at[grid.index(nc, a.dims)]
        tl.wire(sys, ranks[i + 1], a.tag .. k .. "+", ranks[j + 1], a.tag .. k .. "-")
      end
    end
  end
end

function M.kernel(a, input, output)
  local dims, dt, N = a.dims, a.dtype, a.world_size
  local off, len = grid.pieces(a.n_elem, N)
  local me = grid.coords(a.pos[tl.rank()], dims)
  -- piece q's "digits" are the grid coordinates of q
  local digits = {}
  for q = 0, N - 1 do digits[q] = grid.coords(q, dims) end
  -- the pieces whose digits below level k are this rank's and whose digit k is v
  local function chunk(k, v)
    local list = {}
    for q = 0, N - 1 do
      local dq = digits[q]
      local ok = dq[k] == v
      for j = 1, k - 1 do
        if dq[j] ~= me[j] then ok = false; break end
      end
      if ok then list[#list + 1] = q end
    end
    return list
  end
  local P = {}
  for q = 0, N - 1 do P[q] = tl.load(input, off(q), len(q)) end
  for k, d in ipairs(dims) do
    local p, tx, rx = me[k], a.tag .. k .. "+", a.tag .. k .. "-"
    for s = 0, d - 2 do
      local outs, ins = chunk(k, (p - s - 1) % d), chunk(k, (p - s - 2) % d)
      for j, q in ipairs(ins) do
        local o = outs[j]
        -- P[o] is freed once sent: the all-gather brings its full sum back
        local got = tl.sendrecv(tx, P[o], rx, len(q), dt, true)
        P[o] = nil
        local sum = ccl.combine(a.op, P[q], got)
        tl.free(P[q], got)
        P[q] = sum
      end
    end
  end
  for k = #dims, 1, -1 do
    local d, p, tx, rx = dims[k], me[k], a.tag .. k .. "+", a.tag .. k .. "-"
    for s = 0, d - 2 do
      local outs, ins = chunk(k, (p - s) % d), chunk(k, (p - s - 1) % d)
      for j, q in ipairs(ins) do
        P[q] = tl.sendrecv(tx, P[outs[j]], rx, len(q), dt)
      end
    end
  end
  for q = 0, N - 1 do tl.store(output, off(q), P[q]) end
end

-- The args of a multi-ring algorithm: dims and the grid position of
-- every launch index (order[t] = launch index at grid index t - 1).
function M.args(name, world_size, n_elem, opts, dims, order, tag)
  if n_elem < world_size then
    error(("'%s' needs at least one element per rank: n_elem %d < world size %d")
      :format(name, n_elem, world_size), 0)
  end
  local pos, at = {}, {}
  for t, i in ipairs(order) do pos[i] = t - 1; at[t - 1] = i end
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, op = opts.op,
          dims = dims, pos = pos, at = at, tag = tag}
end

return M
