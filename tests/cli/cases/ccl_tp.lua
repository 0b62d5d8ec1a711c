-- ccl_tp.lua — Megatron-style tensor parallel layers and a 2-layer MLP against host matmuls
local kb = require("kbsim")
local T = require("kbsim.torch")

local WS, M, IN, HID, OUT = 4, 2, 8, 16, 4
local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}}}
local D = torch.distributed
D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = "ring_allreduce",
  algorithms = {ring_allreduce = {world_size = WS}}}}}
local tp = require("kbsim.tp").new(torch)
tp.initialize_model_parallel(WS)
kb.check(tp.get_tensor_model_parallel_world_size() == WS, "tp world size")
kb.check(tp.get_tensor_model_parallel_rank() == 0, "tp rank outside spawn")

-- small integers: exact in f32 and in the f32 accumulation of PE_GEMM
local function w1(i, j) return (i + 2 * j) % 5 - 2 end
local function w2(i, j) return (3 * i + j) % 7 - 3 end
local function xv(i, j) return (i * IN + j) % 4 end

local fc1 = tp.ColumnParallelLinear(IN, HID, {dtype = "f32", init = w1})
local fc2 = tp.RowParallelLinear(HID, OUT, {dtype = "f32", init = w2})
local x = torch.zeros({M, IN}, {dtype = "f32", placement = "replicate", ranks = D.get_ranks()})
local xs = {}
for i = 0, M - 1 do
  for j = 0, IN - 1 do xs[i * IN + j + 1] = xv(i, j) end
end
x:copy_(torch.from_table(xs, {dtype = "f32"}))

local h = fc1:forward(x, M)
local per = HID // WS
for r = 0, WS - 1 do
  local got = h:shard_table(r)
  for i = 0, M - 1 do
    for j = 0, per - 1 do
      local want = 0
      for k = 0, IN - 1 do want = want + xv(i, k) * w1(k, r * per + j) end
      if got[i * per + j + 1] ~= want then
        kb.check(false, ("column: rank %d (%d,%d) = %s, want %d"):format(r, i, j, got[i * per + j + 1], want))
      end
    end
  end
end

local y = fc2:forward(h, M)
kb.check(fc2.all_reduce.check == "passed", "row layer all-reduce check")
local first = y:shard_table(0)
for r = 0, WS - 1 do
  local got = y:shard_table(r)
  for i = 0, M - 1 do
    for j = 0, OUT - 1 do
      -- the MLP without activation: y = (x W1) W2 over the full matrices
      local want = 0
      for q = 0, HID - 1 do
        local hq = 0
        for k = 0, IN - 1 do hq = hq + xv(i, k) * w1(k, q) end
        want = want + hq * w2(q, j)
      end
      if got[i * OUT + j + 1] ~= want then
        kb.check(false, ("row: rank %d (%d,%d) = %s, want %d"):format(r, i, j, got[i * OUT + j + 1], want))
      end
      kb.check(got[i * OUT + j + 1] == first[i * OUT + j + 1], "ranks identical after all-reduce")
    end
  end
end
print(("tp mlp: column gemm %.1f ns, row gemm %.1f ns, all-reduce %.1f ns"):format(fc1.last_ns,
  fc2.gemm_ns, fc2.all_reduce.latency_ns))
print("ccl_tp ok")
