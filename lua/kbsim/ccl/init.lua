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

-- The collectives that reduce (opts.op), the reductions an algorithm
-- accepts unless its `ops` lists fewer, and the element types.
local REDUCING = {all_reduce = true, reduce_scatter = true, reduce = true}
local OPS = {"sum", "max", "min"}
local DTYPES = {f16 = true, bf16 = true, f32 = true}
-- Collectives that move no elements, or may move none (every split 0).
local EMPTY_OK = {barrier = true, all_to_allv = true}

-- Whether algorithm `algo` reduces with op (nil: sum).
function M.accepts(algo, op)
  for _, o in ipairs(algo.ops or OPS) do
    if o == (op or "sum") then return true end
  end
  return false
end

-- What every algorithm's args would otherwise check (or forget) alike,
-- checked once here before its own args runs: the world size, the
-- element count, the options table, its dtype and reduction. The message
-- names the algorithm; level 3 is the line that called args (a script's,
-- or torch.lua's, which torch.distributed turns into its caller's).
local function check_args(name, algo, world_size, n_elem, opts)
  if math.type(world_size) ~= "integer" or world_size < 1 then
    error(("'%s': world size must be an integer >= 1, got %s"):format(name, tostring(world_size)), 3)
  end
  local min = EMPTY_OK[algo.collective] and 0 or 1
  if math.type(n_elem) ~= "integer" or n_elem < min then
    error(("'%s': element count must be an integer >= %d, got %s"):format(name, min,
      tostring(n_elem)), 3)
  end
  if type(opts) ~= "table" then
    error(("'%s': the options must be a table, got %s"):format(name, type(opts)), 3)
  end
  if opts.dtype ~= nil and not DTYPES[opts.dtype] then
    error(("'%s': unknown dtype '%s' (f16, bf16, f32)"):format(name, tostring(opts.dtype)), 3)
  end
  if REDUCING[algo.collective] and not M.accepts(algo, opts.op) then
    if algo.ops and #algo.ops == 1 then
      error(("'%s' reduces with %s only, not '%s'"):format(name, algo.ops[1],
        tostring(opts.op)), 3)
    end
    error(("'%s': unknown reduction '%s' (accepted: %s)"):format(name, tostring(opts.op),
      table.concat(algo.ops or OPS, ", ")), 3)
  end
end

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
  if algo.ops ~= nil then
    local ok = type(algo.ops) == "table" and #algo.ops > 0
    for _, o in ipairs(ok and algo.ops or {}) do
      local known = false
      for _, k in ipairs(OPS) do known = known or o == k end
      ok = ok and known
    end
    if not ok then
      error(("algorithm '%s': 'ops' must be a non-empty list of %s"):format(name,
        table.concat(OPS, ", ")), 0)
    end
  end
  require("kbsim.tl").name(algo.kernel, name) -- its spans in a trace
  -- the registry hands out a copy whose args checks first (a table given
  -- to register() or a module's own table is left as it is)
  local own = algo.args
  local w = {}
  for k, v in pairs(algo) do w[k] = v end
  w.args = function(world_size, n_elem, opts)
    check_args(name, algo, world_size, n_elem, opts)
    -- the algorithm's own refusals (error level 0) at the caller's line too
    local ok, a = pcall(own, world_size, n_elem, opts)
    if not ok then
      if type(a) == "string" and not a:match("^%S+:%d+:") then error(a, 2) end
      error(a, 0)
    end
    return a
  end
  return w
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
-- look up once rather than every step (tl.add is what x + y calls). The
-- registry's args has refused an unknown op before any kernel runs; one
-- that gets here anyway (args called around the registry) raises when
-- the function is first called.
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

-- The chunk count of a pipelined rooted collective (reduce, broadcast):
-- opts.chunks, an integer >= 1, default 1, at most n_elem (0 chunks when
-- there are no elements); otherwise an error naming the algorithm.
function M.chunks(name, n_elem, opts)
  local k = opts.chunks
  if k == nil then k = 1 end
  if math.type(k) ~= "integer" or k < 1 then
    error(("'%s': chunks must be an integer >= 1, got %s"):format(name, tostring(k)), 0)
  end
  return math.min(k, n_elem)
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
