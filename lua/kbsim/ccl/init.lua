-- kbsim/ccl/init.lua — the collective registry: algorithms by name, as ccl.yaml names them
--
-- An algorithm is lua/kbsim/ccl/NAME.lua (found on package.path, so a
-- new file needs no registration) or a table given to register(). Each
-- has the contract of docs/kernel_api.md: name, collective, args, wire,
-- kernel, and optionally ranks(topology, world_size).
local M = {}

-- The algorithms that ship with kbsim, for messages listing known names.
local BUILTIN = {
  "all_gather", "all_to_all", "all_to_allv", "auto", "barrier", "broadcast", "dbtree_allreduce",
  "gather", "hier_allreduce", "lrab", "mesh_allreduce", "reduce", "reduce_scatter",
  "rhd_all_gather", "rhd_allreduce", "rhd_reduce_scatter", "ring_allreduce",
  "ring_rs_ag_allreduce", "scatter", "snake_ring_allreduce", "torus_allreduce",
  "tree_allreduce",
}

local registered = {}

local COLLECTIVES = {
  all_reduce = true, all_gather = true, reduce_scatter = true, all_to_all = true,
  all_to_allv = true, broadcast = true, barrier = true, reduce = true, gather = true,
  scatter = true,
}

local function validate(name, algo)
  if type(algo) ~= "table" then
    error(("algorithm '%s' is not a table"):format(name), 0)
  end
  for _, k in ipairs({"args", "wire", "kernel"}) do
    if type(algo[k]) ~= "function" then
      error(("algorithm '%s' has no function '%s'"):format(name, k), 0)
    end
  end
  if not COLLECTIVES[algo.collective] then
    error(("algorithm '%s': unknown collective '%s'"):format(name, tostring(algo.collective)), 0)
  end
  if algo.ranks ~= nil and type(algo.ranks) ~= "function" then
    error(("algorithm '%s': 'ranks' must be a function"):format(name), 0)
  end
  require("kbsim.tl").name(algo.kernel, name) -- its spans in a trace
  return algo
end

-- Adds (or replaces) an algorithm under algo.name.
function M.register(algo)
  if type(algo) ~= "table" or type(algo.name) ~= "string" or algo.name == "" then
    error("ccl.register needs a table with a name", 2)
  end
  registered[algo.name] = validate(algo.name, algo)
  return algo
end

-- Every known name, sorted: the built-in ones and the registered ones.
function M.known()
  local set, list = {}, {}
  for _, n in ipairs(BUILTIN) do set[n] = true end
  for n in pairs(registered) do set[n] = true end
  for n in pairs(set) do list[#list + 1] = n end
  table.sort(list)
  return list
end

-- The algorithm called `name`, or nil and a message. `where` ("file:line:col")
-- says where the name was written.
function M.find(name, where)
  if registered[name] then return registered[name] end
  if type(name) == "string" and name:match("^[%w_]+$") and name ~= "init" then
    local path = package.searchpath("kbsim.ccl." .. name, package.path)
    if path then
      local algo = validate(name, require("kbsim.ccl." .. name))
      registered[name] = algo
      return algo
    end
  end
  local msg = ("unknown algorithm '%s' (known: %s)"):format(tostring(name),
    table.concat(M.known(), ", "))
  if where then msg = where .. ": " .. msg end
  return nil, msg
end

-- The reduction of all_reduce kernels that take opts.op: x + y for "sum"
-- (and nil), elementwise tl.maximum / tl.minimum for "max" / "min", on
-- PE_MATH as the sum is. combiner(op) is that function, for a kernel to
-- look up once rather than every step (tl.add is what x + y calls); an
-- unknown op still raises only when the function is first called.
local COMBINE = {}
function M.combiner(op)
  local f = COMBINE[op or "sum"]
  if f then return f end
  if not next(COMBINE) then
    local tl = require("kbsim.tl")
    COMBINE.sum, COMBINE.max, COMBINE.min = tl.add, tl.maximum, tl.minimum
    return M.combiner(op)
  end
  return function()
    error(("unknown reduction '%s' (sum, max, min)"):format(tostring(op)), 0)
  end
end
function M.combine(op, x, y)
  return M.combiner(op)(x, y)
end

-- The root of a rooted collective (reduce, gather, scatter): opts.root, a
-- launch index in 0..world_size-1, default 0; otherwise an error naming
-- the algorithm.
function M.root(name, world_size, opts)
  local root = opts.root or 0
  if math.type(root) ~= "integer" or root < 0 or root >= world_size then
    error(("'%s': root rank %s is not in 0..%d"):format(name, tostring(root), world_size - 1), 0)
  end
  return root
end

-- The wiring of a one-way ring, for an algorithm's `wire`: launch index
-- i's E sends into index i+1's W (the algorithm's args are not needed).
function M.wire_ring(sys, ranks)
  require("kbsim.tl").wire_ring(sys, ranks)
end

-- As find, raising the message.
function M.get(name, where)
  local algo, msg = M.find(name, where)
  if not algo then error(msg, 0) end
  return algo
end

return M
