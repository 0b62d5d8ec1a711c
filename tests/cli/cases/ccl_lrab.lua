-- ccl_lrab.lua — the hierarchical center-root all-reduce on 6 SIPs: ring_1d, torus_2d 2x3, mesh_2d_no_wrap 2x3
--
-- PE 0 of each of the 96 cubes takes part; goldens as HARDWARE_MODEL.md
-- (f32, in_r[i] = i + 100 r, out[i] = n i + 100 n(n-1)/2).
local kb = require("kbsim")
local T = require("kbsim.torch")

local C = 16

for _, sips in ipairs({
  {count = 6, topology = "ring_1d"},
  {count = 6, topology = "torus_2d", w = 2, h = 3},
  {count = 6, topology = "mesh_2d_no_wrap", w = 2, h = 3},
}) do
  local torch = T.init{topology = {sips = sips}}
  local D = torch.distributed
  D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = "lrab", dtype = "f32"}}}
  local n = D.get_world_size()
  local label = sips.topology .. (sips.w and (" " .. sips.w .. "x" .. sips.h) or " 6")
  kb.check(n == 96, label .. ": 96 cubes take part, got " .. n)
  local ranks = D.get_ranks()
  kb.check(ranks[2] == 8 and ranks[96] == 95 * 8, label .. ": PE 0 of every cube")
  local t = torch.zeros({1, n * C}, {dtype = "f32"})
  local v = {}
  for r = 0, n - 1 do
    for i = 0, C - 1 do v[r * C + i + 1] = i + 100 * r end
  end
  t:copy_(torch.from_table(v, {dtype = "f32"}))
  local rep = D.all_reduce(t)
  local base = 100 * n * (n - 1) // 2
  local bad = 0
  local got = t:to_table()
  for r = 0, n - 1 do
    for i = 0, C - 1 do
      if got[r * C + i + 1] ~= n * i + base then bad = bad + 1 end
    end
  end
  kb.check(rep.check == "passed", label .. ": host check " .. rep.check)
  kb.check(bad == 0, ("%s: %d elements wrong"):format(label, bad))
  print(("lrab %-20s %10.1f ns"):format(label, rep.latency_ns))
end
print("ccl_lrab ok")
