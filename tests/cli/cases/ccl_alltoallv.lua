-- ccl_alltoallv.lua — all-to-all with even and uneven splits, broadcast from a non-zero source
local kb = require("kbsim")
local T = require("kbsim.torch")

local n = 5
local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}}}
local D = torch.distributed
D.init_process_group{backend = "ahbm",
  config = {ccl = {algorithm = "ring_allreduce", dtype = "f32",
                   algorithms = {ring_allreduce = {world_size = n}}}}}

-- even: chunk j of rank i (value 1000 i + 10 j + e) lands as chunk i of rank j
local C = 3
local inp = torch.zeros({1, n * n * C}, {dtype = "f32"})
local v = {}
for i = 0, n - 1 do
  for j = 0, n - 1 do
    for e = 0, C - 1 do v[(i * n + j) * C + e + 1] = 1000 * i + 10 * j + e end
  end
end
inp:copy_(torch.from_table(v, {dtype = "f32"}))
local out = torch.zeros({1, n * n * C}, {dtype = "f32"})
local rep = D.all_to_all(out, inp)
kb.check(rep.check == "passed", "all_to_all: host check " .. rep.check)
for j = 0, n - 1 do
  local s = out:shard_table(j)
  for i = 0, n - 1 do
    for e = 0, C - 1 do
      local want = 1000 * i + 10 * j + e
      if s[i * C + e + 1] ~= want then
        kb.check(false, ("all_to_all: rank %d chunk %d[%d] = %s, want %d"):format(j, i, e,
          tostring(s[i * C + e + 1]), want))
      end
    end
  end
end
print(("all_to_all  n=%d C=%d %10.1f ns busbw %.2f GB/s"):format(n, C, rep.latency_ns, rep.busbw_gbps))

-- uneven: rank i sends (i + 2 j) % 4 elements to rank j (some zero)
local split = {}
for i = 1, n do
  split[i] = {}
  for j = 1, n do split[i][j] = ((i - 1) + 2 * (j - 1)) % 4 end
end
local recv = {}
for j = 1, n do
  recv[j] = {}
  for i = 1, n do recv[j][i] = split[i][j] end
end
local cap = n * 4
local vin = torch.zeros({1, n * cap}, {dtype = "f32"})
local w = {}
for i = 0, n - 1 do
  local o = 0
  for j = 0, n - 1 do
    for e = 0, split[i + 1][j + 1] - 1 do
      w[i * cap + o + 1] = 1000 * i + 10 * j + e
      o = o + 1
    end
  end
  for k = o, cap - 1 do w[i * cap + k + 1] = -1 end
end
vin:copy_(torch.from_table(w, {dtype = "f32"}))
local vout = torch.zeros({1, n * cap}, {dtype = "f32"})
rep = D.all_to_allv(vout, vin, recv, split)
kb.check(rep.check == "passed", "all_to_allv: host check " .. rep.check)
for j = 0, n - 1 do
  local s, o = vout:shard_table(j), 0
  for i = 0, n - 1 do
    for e = 0, split[i + 1][j + 1] - 1 do
      o = o + 1
      if s[o] ~= 1000 * i + 10 * j + e then
        kb.check(false, ("all_to_allv: rank %d element %d = %s, want %d"):format(j, o - 1,
          tostring(s[o]), 1000 * i + 10 * j + e))
      end
    end
  end
end
print(("all_to_allv n=%d uneven %10.1f ns"):format(n, rep.latency_ns))

-- a transposed split that does not match is refused
local bad = {}
for j = 1, n do bad[j] = {} for i = 1, n do bad[j][i] = recv[j][i] end end
bad[2][3] = bad[2][3] + 1
local ok, err = pcall(D.all_to_allv, vout, vin, bad, split)
kb.check(not ok and tostring(err):find("out_splits%[1%]%[2%]"), "mismatched splits: " .. tostring(err))

-- broadcast from rank 3, in 4 pipelined chunks
local b = torch.zeros({1, n * 8}, {dtype = "f32"})
local bv = {}
for k = 1, n * 8 do bv[k] = k end
b:copy_(torch.from_table(bv, {dtype = "f32"}))
rep = D.broadcast(b, 3, {chunks = 4})
kb.check(rep.check == "passed", "broadcast: host check " .. rep.check)
for r = 0, n - 1 do
  local s = b:shard_table(r)
  for k = 1, 8 do
    if s[k] ~= 24 + k then kb.check(false, ("broadcast: rank %d element %d = %s"):format(r, k, s[k])) end
  end
end
print(("broadcast   n=%d src=3 %10.1f ns"):format(n, rep.latency_ns))
print("ccl_alltoallv ok")
