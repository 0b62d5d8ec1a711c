-- kbsim/ccl/lib/grid.lua — logical grids of ranks for the topology-aware collectives
--
-- A grid is a list of dimension sizes {d1, d2, ...}; launch index i has
-- coordinates c1 = i % d1, c2 = (i // d1) % d2, ... (the first dimension
-- varies fastest, as a torus graph built x-fastest numbers its PEs).
-- Not an algorithm: the registry only finds names without a dot.
local M = {}

-- The most square factorisation of n into two sizes, {w, h} with w >= h.
function M.balanced2(n)
  local h = math.floor(math.sqrt(n))
  while h > 1 and n % h ~= 0 do h = h - 1 end
  return {n // h, h}
end

-- dims checked against the world size; `who` names the algorithm.
function M.check_dims(who, dims, world_size)
  if type(dims) ~= "table" or #dims == 0 then
    error(("'%s': dims must be a list of dimension sizes, got %s"):format(who, tostring(dims)), 0)
  end
  local p = 1
  for i, d in ipairs(dims) do
    if math.type(d) ~= "integer" or d < 1 then
      error(("'%s': dims[%d] must be an integer >= 1, got %s"):format(who, i, tostring(d)), 0)
    end
    p = p * d
  end
  if p ~= world_size then
    local s = {}
    for i, d in ipairs(dims) do s[i] = tostring(d) end
    error(("'%s': dims %s hold %d ranks, the world size is %d"):format(who,
      table.concat(s, "x"), p, world_size), 0)
  end
  local copy = {}
  for i, d in ipairs(dims) do copy[i] = d end
  return copy
end

function M.coords(i, dims)
  local c = {}
  for k, d in ipairs(dims) do c[k] = i % d; i = i // d end
  return c
end

function M.index(c, dims)
  local i, stride = 0, 1
  for k, d in ipairs(dims) do i = i + c[k] * stride; stride = stride * d end
  return i
end

-- The snake (boustrophedon) order of a grid: a list of launch indices in
-- which consecutive entries differ by one step in one dimension. Built
-- outermost dimension first: each layer is the order of the layers
-- below, reversed on every odd layer. When the outermost dimension has an
-- even size the last entry is (0, ..., 0, d-1), one wrap-around link from
-- the first on a torus: the order is then a Hamiltonian cycle.
function M.snake(dims)
  local function rec(k)
    if k == 0 then return {{}} end
    local sub, out = rec(k - 1), {}
    for z = 0, dims[k] - 1 do
      local first, last, step = 1, #sub, 1
      if z % 2 == 1 then first, last, step = #sub, 1, -1 end
      for j = first, last, step do
        local c = {table.unpack(sub[j])}
        c[k] = z
        out[#out + 1] = c
      end
    end
    return out
  end
  local order = {}
  for t, c in ipairs(rec(#dims)) do order[t] = M.index(c, dims) end
  return order
end

-- Element range of piece q when n elements are cut into p pieces whose
-- sizes differ by at most one: [off(q), off(q) + len(q)).
function M.pieces(n, p)
  local function off(q) return q * n // p end
  local function len(q) return off(q + 1) - off(q) end
  return off, len
end

return M
