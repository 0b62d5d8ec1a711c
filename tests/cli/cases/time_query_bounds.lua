-- time_query_bounds.lua — tl.gemm_time, tl.math_time and tl.copy_time refuse
-- sizes whose closed forms cannot be computed (pe_gemm.h kb_gemm_time_fits,
-- pe_math.h kb_math_time_fits, a copy past the memory) instead of returning
-- 0 or a negative time
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

fails("bytes must be positive", tl.copy_time, sys, 0)
fails("tl.copy_time: 1125899906842624 bytes are more than sip0.cube0.pe0's hbm (2147483648 bytes)",
  tl.copy_time, sys, 1 << 50)
fails("invalid option 'dram'", tl.copy_time, sys, 64, "dram")
-- a copy's closed form grows with its size, and the default memory is HBM
local c1, c2 = tl.copy_time(sys, 64), tl.copy_time(sys, 1 << 20)
kb.check(c1 > 0 and c2 > c1 and tl.copy_time(sys, 64, "hbm", "hbm") == c1, "copy times")
print("time_query_bounds ok")
