-- tl_scratch_idle.lua — a kernel between calls holds no host buffers: each
-- call frees its operand and result snapshots when it returns (every kernel
-- thread kept ~3 payloads for its whole life, which at system scale was
-- ~96 KB a participant of lrab). The kernels' calls are staggered in
-- simulated time, so one call at a time holds buffers; the probe reads the
-- resident size while all kernels sit idle, their handles still in TCM.
local kb = require("kbsim")
local tl = require("kbsim.tl")

local function rss_bytes()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("n", "n")
  f:close()
  return resident * 4096
end

local KERNELS, N = 16, 1 << 20 -- 4 MiB of f32 a handle
local MiB = 1 << 20
local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 1}}})
local ranks = {}
for r = 0, KERNELS - 1 do ranks[#ranks + 1] = r end

local sums = {}
tl.launch(sys, ranks, function()
  local r = tl.rank()
  kb.wait(1e6 * (r + 1)) -- one kernel in a call at a time
  local a = tl.full(N, 1, "f32") -- a result buffer of 4 MiB
  sums[r + 1] = tl.sum(a):to_table()[1] -- an operand and a result of 4 MiB each
  kb.wait(1e9) -- idle, a still in TCM
end)
local before, idle = rss_bytes(), nil
sim:spawn("probe", function()
  kb.wait(1e8)
  idle = rss_bytes()
end)
sim:run()

for r = 1, KERNELS do kb.check(sums[r] == N, ("kernel %d: sum %s"):format(r, sums[r])) end
-- the handles' TCM is KERNELS * 4 MiB; scratch kept for the threads' life
-- would add KERNELS * 8 MiB more
local grown = idle - before
kb.check(grown < (KERNELS * 4 + 48) * MiB,
         ("idle kernels hold %.0f MiB (their TCM is %d MiB)"):format(grown / MiB, KERNELS * 4))
print("tl_scratch_idle ok")
