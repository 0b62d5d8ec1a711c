-- ccl_buffer_kind.lua — ccl.yaml's buffer_kind and backpressure place the collectives' IPCQ rings
local kb = require("kbsim")
local T = require("kbsim.torch")
local tl = require("kbsim.tl")

local function run(kind, bp)
  local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 2}}}}
  local D = torch.distributed
  D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = "ring_allreduce",
    buffer_kind = kind, backpressure = bp, algorithms = {ring_allreduce = {world_size = 4}}}}}
  local t = torch.zeros({1, 4 * 256}, {dtype = "f16"})
  for k, r in ipairs(D.get_ranks()) do t:shard_write_vec(r, tl.vec_new(256, k)) end
  local rep = D.all_reduce(t)
  kb.check(rep.check == "passed", kind .. ": values")
  return rep.latency_ns, torch
end

local tcm = run("tcm", "sleep")
local sram = run("sram", "sleep")
local hbm, torch = run("hbm", "poll")
print(("tcm %.1f ns  sram %.1f ns  hbm(poll) %.1f ns"):format(tcm, sram, hbm))
kb.check(tcm < sram and tcm < hbm, "tcm slots are the fastest")
-- once the units exist, another buffer kind on the same system is refused
local ok, err = pcall(torch.sys.set_ipcq, torch.sys, {buffer_kind = "tcm", backpressure = "sleep"})
kb.check(not ok and err:find("already made with buffer_kind 'hbm' and backpressure 'poll'", 1, true),
         "changing the IPCQ of a used system is refused: " .. tostring(err))
-- the settings themselves, each refused by name
for _, c in ipairs{
  {{buffer_kind = "tcm", backpressure = "sleep", n_slots = 8},
   "sys:set_ipcq: unknown option 'n_slots' (buffer_kind, backpressure)"},
  {{backpressure = "sleep"}, "sys:set_ipcq: 'buffer_kind' must be one of tcm, sram, hbm, got nil"},
  {{buffer_kind = "tcm", backpressure = "spin"},
   "sys:set_ipcq: 'backpressure' must be one of sleep, poll, got spin"},
} do
  local ok2, e = pcall(torch.sys.set_ipcq, torch.sys, c[1])
  kb.check(not ok2 and tostring(e):find(c[2], 1, true), "set_ipcq: " .. tostring(e))
end
-- host access (tensors allocated and written first) makes no PE units, so
-- init_process_group can still choose the buffer kind
do
  local t2 = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 2}}}}
  local x = t2.zeros({1, 4 * 64}, {dtype = "f16", ranks = {0, 1, 2, 3}})
  x:shard_write_vec(0, tl.vec_new(64, 1))
  local D = t2.distributed
  D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = "ring_allreduce",
    buffer_kind = "sram", algorithms = {ring_allreduce = {world_size = 4}}}}}
  kb.check(D.all_reduce(x).check == "passed", "tensor made before init_process_group")
end
print("ccl_buffer_kind ok")
