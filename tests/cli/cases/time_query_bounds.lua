-- time_query_bounds.lua — tl.gemm_time and tl.math_time refuse sizes whose
-- closed forms cannot be computed (pe_gemm.h kb_gemm_time_fits, pe_math.h
-- kb_math_time_fits) instead of returning 0 or a negative time
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sim = kb.sim()
local sys = kb.system(sim)

local function fails(want, f, ...)
  local ok, msg = pcall(f, ...)
  kb.check(not ok and tostring(msg):find(want, 1, true) ~= nil,
    ("expected an error with %q, got %s"):format(want, ok and tostring(msg) or tostring(msg)))
end

fails("tl.gemm_time: 1000000000 x 1000000000 x 1000000000 is past what a simulation can time",
  tl.gemm_time, sys, 1000000000, 1000000000, 1000000000)
fails("(M*N*K <= 2^48)", tl.gemm_time, sys, math.maxinteger, 2, 2)
local ps = tl.gemm_time(sys, 65536, 65536, 65536) -- 2^48 itself is allowed
kb.check(ps > 0, "2^48: " .. tostring(ps))
kb.check(tl.gemm_time(sys, 64, 64, 64) > 0, "a small GEMM")

fails("tl.math_time: add over 2199023255553 elements is past what a simulation can time",
  tl.math_time, sys, "add", (1 << 41) + 1, "f32")
fails("(n <= 2^40)", tl.math_time, sys, "exp", math.maxinteger, "f16")
kb.check(tl.math_time(sys, "add", 1 << 40, "f32") > 0, "2^40 is allowed")
print("time_query_bounds ok")
