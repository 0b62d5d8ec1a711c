-- system_transfer.lua — sys:transfer moves payload along the routed path in
-- the closed-form time; timing-only mode gives the same times, no payload
local kb = require("kbsim")

local function run(opts)
  local sim = kb.sim()
  local sys = kb.system(sim, nil, opts)
  local t = {}
  sys:tcm_write(0, 0, "payload!")
  sim:spawn("x", function()
    t.near = sys:transfer(0, 8, 4096)
    t.far = sys:transfer(0, 255, 100000, {src_addr = 0, dst_addr = 4096})
  end)
  sim:run()
  return t, sys:tcm_read(255, 4096, 8), sys:path(0, 255).latency_ns(100000)
end

local with, got, formula = run()
kb.check(with.near == 40.9, "near " .. with.near)
kb.check(with.far == formula, "far " .. with.far .. " vs " .. formula)
kb.check(got == "payload!", "payload moved")
local without, got2 = run({timing_only = true})
kb.check(without.near == with.near and without.far == with.far, "timing only: same times")
kb.check(got2 == string.rep("\0", 8), "timing only: no payload")
local ok, err = pcall(kb.system, kb.sim(), nil, {timing = true})
kb.check(not ok and err:find("unknown option 'timing'"), "bad option")
local sys = kb.system(kb.sim())
ok, err = pcall(sys.transfer, sys, 0, 1, 16)
kb.check(not ok and err:find("outside a thread process"), "transfer outside a process")
-- a negative address is named as an address, not as a byte count
for _, f in ipairs{"tcm_write", "tcm_read"} do
  ok, err = pcall(sys[f], sys, 0, -1, f == "tcm_write" and "x" or 1)
  kb.check(not ok and err:find("an address must be >= 0", 1, true), f .. " at -1: " .. tostring(err))
end
ok, err = pcall(sys.tcm_read, sys, 0, 0, -1)
kb.check(not ok and err:find("bytes must be >= 0", 1, true), "tcm_read of -1 bytes: " .. tostring(err))
print("system_transfer ok")
