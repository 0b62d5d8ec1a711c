-- torch_errors.lua — misuse of kbsim.torch and tl.launch is refused with a message naming the caller's line
local kb = require("kbsim")
local T = require("kbsim.torch")
local tl = require("kbsim.tl")

local function fails(want, f, ...)
  local ok, msg = pcall(f, ...)
  kb.check(not ok and tostring(msg):find(want, 1, true) ~= nil,
    ("expected an error with %q, got %s"):format(want, ok and "success" or tostring(msg)))
end

local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}}}
local D = torch.distributed
fails("torch.distributed.all_reduce: call init_process_group first", D.all_reduce, torch.zeros({1, 64}))
D.init_process_group{backend = "ahbm",
  config = {ccl = {algorithm = "ring_allreduce", algorithms = {ring_allreduce = {world_size = 4}}}}}

fails("torch.zeros: 63 columns do not split evenly over 4 ranks", torch.zeros, {1, 63})
fails("torch.zeros: dimension 2 must be a positive integer, got -5", torch.zeros, {1, -5})
fails("all_reduce: tensor must be a tensor", D.all_reduce, "x")

-- a tensor of another simulation's system would be read and written at
-- its addresses in this one: refused, with the line of the call
local other = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}}}
local line = debug.getinfo(1, "l").currentline + 1
local ok, msg = pcall(function() return D.all_reduce(other.zeros({1, 64})) end)
kb.check(not ok and msg == ("torch_errors.lua:%d: all_reduce: tensor belongs to another system "
  .. "than the process group's"):format(line), "another system's tensor: " .. tostring(msg))
local inp, out = torch.zeros({1, 32}), other.zeros({1, 128})
fails("all_gather: output belongs to another system", D.all_gather, out, inp)

-- a tensor on other ranks than the group's
local few = torch.zeros({1, 4}, {ranks = {4, 5, 6, 7}})
fails("all_reduce: tensor has no shard on rank 0 of the process group", D.all_reduce, few)

-- options with a typo are refused by name
fails("torch.init: unknown option 'timing_onyl' (topology, timing_only, guard, stack_size)", T.init, {timing_onyl = true})
fails("init_process_group: unknown option 'confg' (backend, config)", D.init_process_group,
  {backend = "ahbm", confg = {}})
fails("torch.zeros: unknown option 'dtpye' (dtype, placement, ranks, memory)", torch.zeros, {1, 8},
  {dtpye = "f16"})

-- host access to shards: a rank without one, and a value that is not a host vector
local host = torch.zeros({1, 16})
line = debug.getinfo(1, "l").currentline + 1
ok, msg = pcall(function() local v = host:shard_table(99); return v end)
kb.check(not ok and msg == ("torch_errors.lua:%d: tensor has no shard on rank 99"):format(line),
  "shard_table of a rank without a shard: " .. tostring(msg))
fails("shard_write_vec: a host vector (tl.vec_new, tl.vec_from, ...) is expected, got string",
  host.shard_write_vec, host, 0, "x")
fails("torch.zeros: no PE of rank 999 (ranks 0..7)", torch.zeros, {1, 8}, {ranks = {999}})
-- shard_vec(rank, into): read into a host vector of the shard's length, returned
local shard_n = #host:shard_vec(0)
host:shard_write_vec(1, tl.vec_affine(shard_n, 2, 1))
local into = tl.vec_new(shard_n, 7)
local back = host:shard_vec(1, into)
kb.check(rawequal(back, into) and into:max_abs_diff(tl.vec_affine(shard_n, 2, 1)) == 0,
  "shard_vec into a vector")
kb.check(host:shard_vec(0, into):max_abs() == 0, "shard_vec into, the zeros of rank 0")
fails("shard_vec: 'into' has 3 elements, the shard " .. shard_n, host.shard_vec, host, 0,
  tl.vec_new(3))
fails("shard_vec: 'into' must be a host vector (tl.vec_new, ...), got table", host.shard_vec,
  host, 0, {})

-- the same PE twice in one launch
fails("tl.launch: rank 1 listed twice", tl.launch, torch.sys, {0, 1, 1}, function() end)
fails("tl.launch: the kernel must be a function", tl.launch, torch.sys, {0}, 5)
fails("tl.launch: a non-empty list of ranks is expected", tl.launch, torch.sys, {}, function() end)

-- what was refused left the group usable
local t = torch.zeros({1, 8 * 4})
local rep = D.all_reduce(t)
kb.check(rep.check == "passed", "all_reduce after the errors: " .. tostring(rep.check))
print("torch_errors ok")
