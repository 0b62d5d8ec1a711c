-- tl_ended_handles.lua — handles and receives kept past their kernel raise an error on every use,
-- never touch the kernel's released context (was a heap-use-after-free)
local kb = require("kbsim")
local tl = require("kbsim.tl")

local function system()
  local sim = kb.sim{}
  return sim, kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 1}}})
end

local function expect_error(what, fn, pattern)
  local ok, err = pcall(fn)
  kb.check(not ok, what .. ": no error")
  kb.check(not ok and tostring(err):find(pattern, 1, true),
           what .. ": unexpected error " .. tostring(err))
end

local ENDED = "handle of a kernel that has ended"
local tensor = {}

-- kernel 1 keeps a handle, a freed handle and a receive it never waits for; rank 1 drops a
-- second receive whose message arrives after the kernel has ended and the collector has run
local sim1, sys1 = system()
tl.wire(sys1, 0, "E", 1, "W")
local kept = {}
tl.launch(sys1, {0, 1}, function()
  if tl.rank() == 0 then
    kept.h = tl.full(16, 1.0, "f32")
    kept.freed = tl.full(4, 2.0, "f32")
    tl.free(kept.freed)
    kb.wait(100)
    tl.send("E", tl.full(4, 3.0, "f32"))
    tl.send("E", tl.full(4, 4.0, "f32"))
  else
    kept.future = tl.recv_async("W", 4, "f32")
    tl.recv_async("W", 4, "f32") -- dropped: its process still writes into it
  end
end)
sim1:spawn("collector", function() kb.wait(50); collectgarbage(); collectgarbage() end)
sim1:run()
local addr = tl.alloc(sys1, 0, "hbm", 64)
function tensor:shard() return {addr = addr, n = 16, kind = "hbm", dtype = "f32"} end
collectgarbage(); collectgarbage()

local h = kept.h
expect_error("tostring", function() return tostring(h) end, ENDED)
expect_error("#", function() return #h end, ENDED)
expect_error("h.n", function() return h.n end, ENDED)
expect_error("h.dtype", function() return h.dtype end, ENDED)
expect_error("h:to_table", function() return h:to_table() end, ENDED)
expect_error("h + 1", function() return h + 1 end, ENDED)
expect_error("1 - h", function() return 1 - h end, ENDED)
expect_error("h * h", function() return h * h end, ENDED)
expect_error("h / 2", function() return h / 2 end, ENDED)
expect_error("tostring(freed)", function() return tostring(kept.freed) end, ENDED)
expect_error("tl.free outside", function() tl.free(h) end, ENDED)
expect_error("tl.add outside", function() tl.add(h, h) end, ENDED)

-- kernel 2, on another system, hands the old handle and receive to every call taking one
local sim2, sys2 = system()
local calls = {
  add = function() return tl.add(h, 1) end,
  fma = function() return tl.fma(1, 2, h) end,
  sum = function() return tl.sum(h) end,
  store = function() return tl.store(tensor, 0, h) end,
  send = function() tl.wire(sys2, 0, "N", 1, "S"); return tl.send("N", h) end,
  dot = function() return tl.dot(h, h, 4, 4, 4) end,
  dot_b = function() return tl.dot(tl.full(16, 1, "f32"), h, 4, 4, 4) end,
  gemm_tile = function() return tl.gemm_tile(nil, h, 0, h, 0, 2, 2, 2) end,
  gemm_tile_acc = function()
    local a = tl.full(4, 1, "f32")
    return tl.gemm_tile(h, a, 0, a, 0, 2, 2, 2, true)
  end,
  fetch = function() return tl.fetch(h) end,
  accumulate = function() return tl.accumulate(h, h) end,
  cast = function() return tl.cast(h, "f16") end,
  free = function() return tl.free(h) end,
}
local names = {}
for name in pairs(calls) do names[#names + 1] = name end
table.sort(names)
local done = false
tl.launch(sys2, {0}, function()
  for _, name in ipairs(names) do
    expect_error("tl." .. name, calls[name], ENDED)
  end
  expect_error("tl.wait", function() return tl.wait(kept.future) end,
               "a receive of a kernel that has ended")
  done = true
end)
sim2:run()
kb.check(done, "kernel 2 ran to its end")

-- a collected kernel's context gives its record back to the next kernels (decision 0051):
-- every kernel of a later launch, whichever record it took, still sees the old handle as
-- ended, and its own handles as its own
local sim4, sys4 = system()
local ranks, seen = {}, 0
for r = 0, 15 do ranks[#ranks + 1] = r end
tl.launch(sys4, ranks, function()
  local mine = tl.full(16, 2.0, "f32")
  expect_error("tl.free of an old handle", function() tl.free(h) end, ENDED)
  expect_error("tl.add of an old handle", function() return tl.add(mine, h) end, ENDED)
  expect_error("#old", function() return #h end, ENDED)
  local sum = tl.add(mine, mine)
  kb.check(#sum == 16 and sum:to_table()[16] == 4.0, "a new kernel's own handles work")
  tl.free(mine, sum)
  seen = seen + 1
end)
sim4:run()
kb.check(seen == 16, "every kernel of the later launch ran")

-- a kernel that never ends (it waits for a message that never comes) and a closed system
local sim3, sys3 = system()
local stuck = {}
tl.wire(sys3, 0, "E", 1, "W")
tl.launch(sys3, {1}, function()
  stuck.h = tl.full(8, 1, "f32")
  tl.recv("W", 4, "f32")
end)
kb.check(not pcall(sim3.run, sim3), "the stuck kernel deadlocks")
kb.check(tostring(stuck.h):find("8 f32", 1, true), "a handle of a blocked kernel still prints")
sys3:close()
expect_error("closed system", function() return tostring(stuck.h) end, "closed system")
expect_error("closed system #", function() return #stuck.h end, "closed system")
print("tl_ended_handles ok")
