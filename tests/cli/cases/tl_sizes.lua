-- tl_sizes.lua — sizes whose products or sums pass 64 bits are refused with the function's
-- own name (tl.dot's m*k wrapped to the operand's size and the GEMM read far outside it)
local kb = require("kbsim")
local tl = require("kbsim.tl")

local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}})

local function expect_error(what, pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  kb.check(not ok, what .. ": no error")
  kb.check(not ok and tostring(err):find(pattern, 1, true),
           what .. ": unexpected error " .. tostring(err))
end

local BIG = (1 << 62) + 1 -- 4 * BIG wraps to 4
local MAXI, MINI = math.maxinteger, math.mininteger
local addr = tl.alloc(sys, 0, "hbm", 64)
local tensor = {}
function tensor:shard() return {addr = addr, n = 16, kind = "hbm", dtype = "f32"} end
local huge_len = setmetatable({}, {__len = function() return 1 << 62 end,
                                   __index = function() return 1 end})

tl.launch(sys, {0}, function()
  local a, b = tl.full(4, 1, "f32"), tl.full(4, 1, "f32")
  expect_error("dot k", "shapes do not fit", tl.dot, a, b, 4, 4, BIG)
  expect_error("dot m", "shapes do not fit", tl.dot, a, b, BIG, 1, 4)
  expect_error("dot float", "shapes do not fit", tl.dot, a, b, 4, 4, 2^62 + 1)
  local w = tl.full(1 << 20, 1, "f16")
  expect_error("dot result", "too large", tl.dot, w, w, 1 << 20, 1 << 20, 1)
  expect_error("gemm_tile offset", "outside a handle of 4", tl.gemm_tile, nil, a, MAXI, b, 0,
               2, 2, 1)
  expect_error("fetch mininteger", "outside a handle of 4", tl.fetch, a, MINI)
  expect_error("fetch maxinteger", "outside a handle of 4", tl.fetch, a, 1, MAXI)
  expect_error("load", "outside the shard of 16", tl.load, tensor, MAXI, 1)
  expect_error("store", "outside the shard of 16", tl.store, tensor, MAXI, a)
  -- tl.load / tl.store errors name the caller's line (not a tail call: that frame would
  -- be gone), with either kind of tensor
  local placed = {shard = tensor.shard}
  function placed:shard_place() return addr, 16, "hbm", "f32" end
  for _, t in ipairs({tensor, placed}) do
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() local x = tl.load(t, 15, 2); return x end)
    kb.check(not ok and tostring(err):find("tl_sizes.lua:" .. line .. ": tl.load: elements [15, 15+2) "
                                           .. "are outside the shard of 16", 1, true),
             "load error position: " .. tostring(err))
    line = debug.getinfo(1, "l").currentline + 1
    ok, err = pcall(function() tl.store(t, 13, a); return 1 end)
    kb.check(not ok and tostring(err):find("tl_sizes.lua:" .. line .. ": tl.store: elements [13, 13+4) "
                                           .. "are outside the shard of 16", 1, true),
             "store error position: " .. tostring(err))
    line = debug.getinfo(1, "l").currentline + 1
    ok, err = pcall(function() local x = tl.load(7); return x end)
    kb.check(not ok and tostring(err):find("tl_sizes.lua:" .. line .. ": tl.load: a tensor is "
                                           .. "expected, got number", 1, true),
             "load tensor error position: " .. tostring(err))
    line = debug.getinfo(1, "l").currentline + 1
    ok, err = pcall(function() tl.store(t, 0, tl.full(4, 1, "f16")); return 1 end)
    kb.check(not ok and tostring(err):find("tl_sizes.lua:" .. line .. ": tl.store: a f16 handle "
                                           .. "into a f32 tensor", 1, true),
             "store dtype error position: " .. tostring(err))
    local h = tl.load(t, 12, 4)
    tl.store(t, 0, h)
    kb.check(#h == 4 and h.dtype == "f32", "load and store in range")
  end
  -- called by name (through pcall, Lua names a function by where it finds it in a module)
  expect_error("zeros", "bad argument #1 to 'zeros' (element count must be from 1 to 2147483647)",
               function() return tl.zeros(1e12, "f32") end)
  expect_error("zeros dtype", "bad argument #2 to 'zeros' (unknown dtype",
               function() return tl.zeros(4, "f64") end)
  kb.check(tl.zeros(3, "f16"):to_table()[3] == 0, "zeros still makes zeros")
end)
sim:run()

expect_error("host_write __len", "too many values", tl.host_write, sys, 0, addr, "f32", huge_len)
expect_error("vec_from __len", "size out of range", tl.vec_from, huge_len)
expect_error("vec slice", "outside a vec of 4", function() return tl.vec_new(4):slice(MAXI, 2) end)
expect_error("vec set", "outside a vec of 4", function()
  return tl.vec_new(4):set(MAXI, tl.vec_new(2))
end)
expect_error("vec tile", "size out of range", function() return tl.vec_new(4):tile(BIG, 4, 1, 1) end)
expect_error("vec_matmul", "size out of range", tl.vec_matmul, tl.vec_new(4), tl.vec_new(4), BIG,
             4, 1)
print("tl_sizes ok")
