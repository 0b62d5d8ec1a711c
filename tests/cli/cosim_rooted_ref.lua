-- cosim_rooted_ref.lua — reduce, gather and scatter of lua/kbsim/ccl/ launched
-- from Lua in one process (no server, sim:run): their simulated times are
-- the reference of tests/cli/cosim_test.py's case rooted.
--   kbsim cosim_rooted_ref.lua collective=reduce|gather|scatter ranks=N n=ELEMS root=R [op=OP]
--   kbsim cosim_rooted_ref.lua kernels=FILE collective=KERNEL ranks=N n=ELEMS [scale=X]
--     (a kernel of a --kernels file, with the arguments kbsim serve gives it)
--   [group=R,R,...]: the PEs, in launch order (default 0..N-1); exec_ns.R by PE
local kb = require("kbsim")
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")
local torch = require("kbsim.torch")
local a = {}
for _, s in ipairs{...} do
  local k, v = s:match("^([%w_]+)=(.*)$")
  a[k] = v
end
local N, n, root = tonumber(a.ranks), tonumber(a.n), tonumber(a.root)
local sim = kb.sim{}
local sys = kb.system(sim)
local cfg = kb.ccl_config(nil)
sys:set_ipcq{buffer_kind = cfg.buffer_kind, backpressure = cfg.backpressure}
local ranks = {} -- group=R,R,...: the PEs in launch order (default 0..N-1)
for r = 0, N - 1 do ranks[r + 1] = r end
if a.group then
  ranks = {}
  for x in a.group:gmatch("%d+") do ranks[#ranks + 1] = tonumber(x) end
end
-- per rank n elements (scatter's input, gather's output: N x n)
local function tensor(elems)
  local shards = {}
  for _, r in ipairs(ranks) do
    local kind = sys:pe(r).hbm and "hbm" or "tcm"
    shards[r] = {rank = r, addr = tl.alloc(sys, r, kind, elems * 4), n = elems, kind = kind,
                 dtype = "f32"}
  end
  return {shard = function(_, r) return shards[r] end}
end
local c = a.collective
local input = tensor(c == "scatter" and N * n or n)
local output = c == "reduce" and input or tensor(c == "gather" and N * n or n)
local algo, args
if a.kernels then
  local k = dofile(a.kernels)[c]
  algo = type(k) == "function" and {kernel = k, wire = function() end}
    or {kernel = k.kernel, wire = k.wire or function() end}
  algo.name = c
  args = {world_size = N, n_elem = n, dtype = "f32", scale = tonumber(a.scale)}
  output = tensor(n)
else
  algo = ccl.get(c)
  args = algo.args(N, n, {dtype = "f32", root = root, op = a.op})
end
torch.wire_once({sys = sys, wired = {}}, algo, ranks, args)
local run = tl.launch(sys, ranks, algo.kernel, args, input, output)
sim:run()
print(("latency_ns=%.17g"):format(run:latency_ns()))
for r, t in pairs(run:times()) do print(("exec_ns.%d=%.17g"):format(r, t.exec_ns)) end
