-- perfmodel_vector.lua — the HARDWARE_MODEL.md test vector of the three-region prediction
local kb = require("kbsim")
local pm = require("kbsim.perfmodel")

-- DRAM parameters of the design text; times in µs, sizes in B, GB/s.
local model = {
  ln_p = 16, sats_p = 30, max_bw = 816.953003, overhead = 4.83328223,
  L = 1.9472268, x0 = 19.81699009, k = 0.55556443, b = 0.95523816,
  factor = 1, unit = "us",
}

local function at(s) return ("%.4f"):format(pm.predict(model, 2 ^ s)) end
for _, case in ipairs({ { 20, "11.0229" }, { 24, "31.3235" }, { 31, "2633.4834" } }) do
  local got = at(case[1])
  print(("2^%d B: %s us"):format(case[1], got))
  kb.check(got == case[2], ("2^%d B: %s us, want %s"):format(case[1], got, case[2]))
end

-- The region edges: s ≤ ln_p is the overhead, sats_p itself is still on
-- the sigmoid, just above it the linear term plus overhead.
kb.check(pm.predict(model, 2 ^ 16) == model.overhead, "2^16 B is the overhead")
kb.check(pm.predict(model, 4) == model.overhead, "4 B is the overhead")
local s30 = 2 ^ 30 / 10 ^ pm.sigmoid(model, 30) / 1e3
kb.check(math.abs(pm.predict(model, 2 ^ 30) - s30) < 1e-9, "2^30 B is on the sigmoid")
local lin = 2 ^ 30.5 / model.max_bw / 1e3 + model.overhead
kb.check(math.abs(pm.predict(model, 2 ^ 30.5) - lin) < 1e-9, "2^30.5 B is linear")

-- The busbw factor scales the bandwidth terms only; ns keeps bytes/(GB/s).
kb.check(math.abs(pm.predict(model, 2 ^ 20, 1.5) - 1.5 * 11.02290) < 1e-4, "factor 1.5")
local ns = setmetatable({ unit = "ns" }, { __index = model })
kb.check(math.abs(pm.predict(ns, 2 ^ 24) - 31323.5) < 0.1, "ns unit")

-- nccl-tests factors.
local f = pm.busbw_factor
kb.check(f("all_reduce", 4) == 1.5, "all_reduce factor 2(n-1)/n")
kb.check(f("all_gather", 4) == 0.75 and f("reduce_scatter", 4) == 0.75
  and f("all_to_all", 4) == 0.75, "(n-1)/n factors")
kb.check(f("broadcast", 8) == 1 and f("reduce", 8) == 1, "broadcast and reduce factor 1")
local ok, err = pcall(f, "gossip", 4)
kb.check(not ok and err:find("unknown collective 'gossip'", 1, true), "unknown collective named")
print("perfmodel_vector ok")
