-- auto.lua — the all-reduce chooser: picks an algorithm by size and topology from closed forms
--
-- When the collective is wired (its system is known), every candidate's
-- Hockney cost (kbsim/analytic.lua) is evaluated with α and β measured
-- on the system's own routes between the ranks that algorithm talks
-- across (the worst pair: a rank-order ring on a torus pays its
-- multi-hop row ends, a snake ring does not), β scaled by how many of a
-- step's concurrent messages share the busiest link of a route, and the
-- cheapest runs.
-- α = route latency of 0 bytes + the 16-byte credit back; β = the
-- route's ns per byte; δ = the data's part of α (the route latency of 0
-- bytes; the rest is the credit's way back). Trees, Rabenseifner on N not
-- a power of two and hier_allreduce are costed by their exact forms
-- (decision 0069): the kernels played out under the IPCQ's rules, a
-- sender's one comm channel
-- serialising its copies (δ + Sβ each) and a fold streaming through the
-- ring's ipcq.n_slots slots. γ (ns per byte added) is one pass
-- through the PE's vector unit, 1 / (pe.math.vector_bytes_per_cycle ×
-- clock_ghz) as the system was built, or opts.gamma_ns_per_byte.
-- Beyond the link sharing within a step,
-- contention is not modelled. Candidates:
--   ring_allreduce, ring_rs_ag_allreduce, rhd_allreduce, tree_allreduce,
--   dbtree_allreduce                       always (when the size allows);
--   torus_allreduce, snake_ring_allreduce  when opts.dims gives the grid;
--   hier_allreduce                         when opts.groups is given or
--                                          every PE name marks a group,
--                                          and opts.op is sum.
-- The choice is in the report (`chosen`, `chosen_ns` the estimate) and,
-- unless -q, one log line on stderr per distinct choice.
local kb = require("kbsim")
local ccl = require("kbsim.ccl")
local an = require("kbsim.analytic")
local grid = require("kbsim.ccl.lib.grid")

local NAME = "auto"
local H = an.hockney
local DTYPE_BYTES = {f16 = 2, bf16 = 2, f32 = 4}
local RHD_EXACT_MAX = 16384
local HIER_EXACT_MAX = 16384
local logged = {}

local function args(world_size, n_elem, opts)
  if opts.dims then grid.check_dims(NAME, opts.dims, world_size) end
  if opts.groups then ccl.get("hier_allreduce").check_groups(opts.groups, world_size) end
  if opts.gamma_ns_per_byte ~= nil and (type(opts.gamma_ns_per_byte) ~= "number"
      or opts.gamma_ns_per_byte < 0) then
    error(("'%s': gamma_ns_per_byte must be a number >= 0, got %s"):format(NAME,
      tostring(opts.gamma_ns_per_byte)), 0)
  end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, opts = o}
end

-- α and β of a candidate: `steps` lists the sets of launch-index pairs
-- that talk at the same time (a ring step, a bit of the halving, a level
-- of a tree, a dimension). A step's α is its worst pair's; its β is the
-- worst pair's ns per byte times the number of the step's pairs whose
-- routes share that pair's busiest link (a rank-order ring on a torus, or
-- a tree whose two children reach their parent over one link, pays for
-- the sharing). The candidate's α and β are the means over its steps
-- (a tree's critical path crosses every level once); δ is the mean of the
-- steps' worst pairs' route latency (at most α).
local function measure(sys, ranks, steps, cache, gamma)
  local alpha, beta, delta = 0, 0, 0
  local B = 1 << 20
  local function route(a, b)
    local key = a .. ">" .. b
    local v = cache[key]
    if not v then
      local fwd, back = sys:path(a, b), sys:path(b, a)
      local l0 = fwd.latency_ns(0)
      v = {alpha = l0 + back.latency_ns(16), beta = (fwd.latency_ns(B) - l0) / B,
           delta = l0, links = fwd.links}
      cache[key] = v
    end
    return v
  end
  for _, step in ipairs(steps) do
    local load, routes = {}, {}
    for k, pr in ipairs(step) do
      local v = route(ranks[pr[1] + 1], ranks[pr[2] + 1])
      routes[k] = v
      for _, l in ipairs(v.links) do load[l] = (load[l] or 0) + 1 end
    end
    local sa, sb, sd = 0, 0, 0
    for _, v in ipairs(routes) do
      local share = 1
      for _, l in ipairs(v.links) do if load[l] > share then share = load[l] end end
      if v.alpha > sa then sa, sd = v.alpha, v.delta end
      if v.beta * share > sb then sb = v.beta * share end
    end
    alpha, beta, delta = alpha + sa, beta + sb, delta + sd
  end
  local n = math.max(#steps, 1)
  return {alpha = alpha / n, beta = beta / n, gamma = gamma, delta = math.min(delta, alpha) / n}
end

local function ring_pairs(order)
  local p = {}
  for t = 1, #order do p[t] = {order[t], order[t % #order + 1]} end
  return p
end

-- parent-child pairs of the heap-order tree on `members`, one step per
-- depth of the child (children of one depth send, or receive, at once)
local function heap_steps(members, steps)
  steps = steps or {}
  for c = 1, #members - 1 do
    local d, x = 0, c + 1
    while x > 1 do x, d = x // 2, d + 1 end
    steps[d] = steps[d] or {}
    table.insert(steps[d], {members[(c - 1) // 2 + 1], members[c + 1]})
  end
  return steps
end

local function list_of(steps)
  local out = {}
  for d = 1, #steps do out[d] = steps[d] end
  return out
end

-- {name=, ns=, opts=} for every candidate that can run here
local function candidates(sys, ranks, a)
  local N, o = #ranks, a.opts
  local S = a.n_elem * DTYPE_BYTES[a.dtype]
  -- γ: one pass of the bytes through the PE's vector unit, unless given
  local g = o.gamma_ns_per_byte
  if g == nil then
    g = 1 / (sys:config("pe.math.vector_bytes_per_cycle") * sys:config("clock_ghz"))
  end
  local cache = {}
  local slots = sys:config("ipcq.n_slots")
  local function link(p)
    local l = measure(sys, ranks, p, cache, g)
    l.slots = slots
    return l
  end
  local ident, mirror = {}, {}
  for i = 0, N - 1 do ident[i + 1] = i; mirror[i + 1] = N - 1 - i end
  local out = {}
  -- only candidates that reduce with opts.op (hier_allreduce: sum only)
  local function add(name, ns, extra)
    if ccl.accepts(ccl.get(name), o.op) then
      out[#out + 1] = {name = name, ns = ns, extra = extra}
    end
  end
  if N == 1 then add("ring_allreduce", 0); return out end
  local ring = link({ring_pairs(ident)})
  add("ring_allreduce", H.ring_allreduce(N, S, ring))
  if a.n_elem >= N then add("ring_rs_ag_allreduce", H.ring_allreduce_bw(N, S, ring)) end
  local p2 = 1
  while p2 * 2 <= N do p2 = p2 * 2 end
  if a.n_elem >= p2 then
    local steps = {}
    local rhd = require("kbsim.ccl.lib.rhd").plan(N)
    for b = 0, rhd.L - 1 do
      local st = {}
      for j = 0, p2 - 1 do st[#st + 1] = {rhd.real(j), rhd.real(j ~ (1 << b))} end
      steps[#steps + 1] = st
    end
    if rhd.ex > 0 then
      local st = {}
      for r = 0, 2 * rhd.ex - 1, 2 do st[#st + 1] = {r, r + 1} end
      steps[#steps + 1] = st
    end
    -- a power of two: the lockstep form is the schedule's; the schedule
    -- plays ~N·p messages (N·p <= RHD_EXACT_MAX: under ~0.2 s), beyond
    -- which the lockstep form stands as an upper bound
    local exact = p2 ~= N and N * p2 <= RHD_EXACT_MAX
    add("rhd_allreduce", exact and H.rhd_allreduce_exact(N, S, link(steps))
      or H.rhd_allreduce(N, S, link(steps)))
  end
  add("tree_allreduce", H.tree_allreduce_exact(N, S, link(list_of(heap_steps(ident)))))
  if a.n_elem >= 2 then
    local steps = heap_steps(mirror, heap_steps(ident))
    add("dbtree_allreduce", H.dbtree_allreduce_exact(N, S, link(list_of(steps))))
  end
  if o.dims and a.n_elem >= N then
    local dims = o.dims
    local steps = {}
    for k, d in ipairs(dims) do
      if d > 1 then
        local st = {}
        for i = 0, N - 1 do
          local c = grid.coords(i, dims)
          local nc = {table.unpack(c)}
          nc[k] = (c[k] + 1) % d
          st[#st + 1] = {i, grid.index(nc, dims)}
        end
        steps[#steps + 1] = st
      end
    end
    add("torus_allreduce", H.torus_allreduce(dims, S, link(steps)), {dims = dims})
    add("snake_ring_allreduce", H.ring_allreduce_bw(N, S, link({ring_pairs(grid.snake(dims))})),
      {dims = dims})
  end
  local groups = o.groups
  if not groups then
    local by, list = {}, {}
    for i, r in ipairs(ranks) do
      local key = sys:pe(r).name:match("^(.*)%.[^.]*$")
      if not key then list = nil; break end
      if not by[key] then by[key] = #list + 1; list[#list + 1] = {} end
      table.insert(list[by[key]], i - 1)
    end
    if list and #list > 1 and #list < N then groups = list end
  end
  if groups then
    local inner, leaders, m = {}, {}, 0
    for _, gl in ipairs(groups) do
      heap_steps(gl, inner)
      leaders[#leaders + 1] = gl[1]
      if #gl > m then m = #gl end
    end
    local lin = #inner > 0 and link(list_of(inner))
      or {alpha = 0, beta = 0, gamma = g, delta = 0, slots = slots}
    local lout = link({ring_pairs(leaders)})
    -- the schedule plays ~G² ring messages: exact up to G² = HIER_EXACT_MAX
    -- (~0.1 s), the serial-tree form beyond (within 2 % where measured)
    local sizes = {}
    for k, gl in ipairs(groups) do sizes[k] = #gl end
    add("hier_allreduce", #groups * #groups <= HIER_EXACT_MAX
      and H.hier_allreduce_exact(sizes, S, lin, lout)
      or H.hier_allreduce_serial(#groups, m, S, lin, lout), {groups = groups})
  end
  return out
end

local function wire(sys, ranks, a)
  local list = candidates(sys, ranks, a)
  local best = list[1]
  for i = 2, #list do if list[i].ns < best.ns then best = list[i] end end
  local algo = ccl.get(best.name)
  local o = {}
  for k, v in pairs(a.opts) do o[k] = v end
  for k, v in pairs(best.extra or {}) do o[k] = v end
  o.algorithm = nil
  a.inner, a.inner_args = algo, algo.args(#ranks, a.n_elem, o)
  a.chosen, a.chosen_ns, a.candidates = best.name, best.ns, list
  algo.wire(sys, ranks, a.inner_args)
  local key = ("%s %d %d %s"):format(best.name, #ranks, a.n_elem, a.dtype)
  if not logged[key] and not kb.options.quiet then
    logged[key] = true
    local parts = {}
    for _, c in ipairs(list) do parts[#parts + 1] = ("%s %.1f"):format(c.name, c.ns) end
    io.stderr:write(("ccl auto: %d ranks, %d B: chose %s (estimates ns: %s)\n"):format(#ranks,
      a.n_elem * DTYPE_BYTES[a.dtype], best.name, table.concat(parts, ", ")))
  end
end

local function kernel(a, input, output)
  return a.inner.kernel(a.inner_args, input, output)
end

return {
  name = NAME,
  collective = "all_reduce",
  args = args,
  wire = wire,
  kernel = kernel,
}
