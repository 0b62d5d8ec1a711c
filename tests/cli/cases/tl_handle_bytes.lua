-- tl_handle_bytes.lua — what a live kernel handle costs in Lua's heap, counted: 64 bytes
-- (Lua's userdata header and a 32-byte handle, one cache line), so that the
-- kernels of a system-scale ring, which hold every chunk as a handle and find
-- each one cold when they run again, touch one line a handle (issue #12,
-- decision 0057). Lua's own count, the same in every build.
local kb = require("kbsim")
local tl = require("kbsim.tl")

local K, LIMIT = 2000, 64
local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}})
local per_handle
tl.launch(sys, {0}, function()
  local hs = {}
  for i = 1, K do hs[i] = false end
  -- once first, so that the thread's stack and the module's state have grown
  for i = 1, K do hs[i] = tl.full(4, 1.0, "f32") end
  for i = 1, K do tl.free(hs[i]); hs[i] = false end
  collectgarbage(); collectgarbage()
  local before = collectgarbage("count")
  for i = 1, K do hs[i] = tl.full(4, 1.0, "f32") end
  collectgarbage(); collectgarbage()
  per_handle = (collectgarbage("count") - before) * 1024 / K
  for i = 1, K do tl.free(hs[i]) end
end)
sim:run()
kb.check(per_handle, "the kernel did not run")
kb.check(per_handle <= LIMIT, ("%.1f bytes of Lua heap a live handle, more than %d"):format(
  per_handle, LIMIT))
print(("tl_handle_bytes ok: %.1f bytes a handle"):format(per_handle))
