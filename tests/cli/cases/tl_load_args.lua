-- tl_load_args.lua — tl.load's offset and count: their defaults (the whole
-- shard, the rest of it from off), and anything but integers in range
-- refused with the shard's size, for a tensor with t:shard and one that
-- also has t:shard_place (the two ways tl.load asks for a place)
local kb = require("kbsim")
local tl = require("kbsim.tl")

local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}})

local N = 16
local addr = tl.alloc(sys, 0, "hbm", N * 4)
local vals = {}
for j = 1, N do vals[j] = 10 * j end -- element j - 1 holds 10 j
tl.host_write(sys, 0, addr, "f32", vals, "hbm")

local shard_only = {}
function shard_only:shard() return {addr = addr, n = N, kind = "hbm", dtype = "f32"} end
local placed = {shard = shard_only.shard}
local place_calls = 0
function placed:shard_place()
  place_calls = place_calls + 1
  return addr, N, "hbm", "f32"
end

local function expect_error(what, pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  kb.check(not ok, what .. ": no error")
  kb.check(not ok and tostring(err):find(pattern, 1, true),
           what .. ": unexpected error " .. tostring(err))
end

tl.launch(sys, {0}, function()
  for _, t in ipairs({shard_only, placed}) do
    -- (off, n) -> the elements loaded
    for _, c in ipairs({{nil, nil, 0, N}, {4, nil, 4, N - 4}, {nil, 3, 0, 3}, {5, 2, 5, 2},
                        {N - 1, nil, N - 1, 1}, {0, N, 0, N}}) do
      local off, n, want_off, want_n = c[1], c[2], c[3], c[4]
      local h = tl.load(t, off, n)
      kb.check(#h == want_n, ("load(%s, %s): %d elements, want %d"):format(
        tostring(off), tostring(n), #h, want_n))
      local got = h.to_table(h)
      for j = 1, want_n do
        kb.check(got[j] == 10 * (want_off + j), ("load(%s, %s)[%d] = %s"):format(
          tostring(off), tostring(n), j, tostring(got[j])))
      end
      tl.free(h)
    end
    local range = "outside the shard of " .. N
    expect_error("float offset", range, tl.load, t, 2.0, 3)
    expect_error("float count", range, tl.load, t, 1, 2.5)
    expect_error("string offset", range, tl.load, t, "1", 2)
    expect_error("string count", range, tl.load, t, 1, "2")
    -- no element to load: said so, not "elements [0, 0+0) are outside the shard"
    expect_error("zero count", "tl.load: a count of 0 elements (a load takes 1 to 14 elements "
                 .. "from offset 2 of the shard of 16)", tl.load, t, 2, 0)
    expect_error("negative offset", range, tl.load, t, -1, 2)
    expect_error("at the end", "tl.load: offset 16 is the end of the shard of 16 elements: "
                 .. "no element is left to load (offsets 0 to 15)", tl.load, t, N, nil)
    expect_error("past the end", range, tl.load, t, N + 1, nil)
    expect_error("too many", range, tl.load, t, 1, N)
    expect_error("float offset, no count", range, tl.load, t, 1.5)
  end
  local empty = {shard = function() return {addr = addr, n = 0, kind = "hbm", dtype = "f32"} end}
  expect_error("empty shard", "tl.load: this PE's shard of the tensor has 0 elements: nothing "
               .. "to load", tl.load, empty)
  expect_error("no tensor", "tl.load: a tensor is expected, got number", tl.load, 7)
  expect_error("no shard method", "tl.load: a tensor is expected, got table", tl.load,
               {shard_place = placed.shard_place})
end)
sim:run()
kb.check(place_calls == 16, "shard_place called once a tl.load: " .. place_calls)
print("tl_load_args ok")
