-- tl_send_snapshot.lua — a send carries the bytes its handle held when
-- tl.send (tl.sendrecv, at its send) was called, even when a helper of the
-- same kernel writes the handle in place (tl.accumulate) while the send is
-- still blocked for credits and most of its bytes have not left: the send
-- holds the handle's pages by reference (decision 0056) and the write
-- copies the page it touches. Messages are 16 slots long (a ring of 2), in
-- a page-aligned tile and an unaligned one; received with tl.recv,
-- tl.recv_async and tl.sendrecv; with values and timing-only.
local kb = require("kbsim")
local tl = require("kbsim.tl")

local function run(timing_only)
  local sim = kb.sim{}
  local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 1}},
                              ipcq = {slot_size = 4096, n_slots = 2}},
                        {timing_only = timing_only})
  tl.wire(sys, 0, "E", 4, "W")
  tl.wire(sys, 4, "E", 0, "W")
  local N = 16 * 2048 -- f16: 64 KiB, 16 slots
  local got = {}
  tl.launch(sys, {0, 4}, function()
    local r = tl.rank()
    if r == 0 then
      local pad = tl.full(32, 0, "f16") -- the next tile starts 64 bytes on: unaligned
      for k, step in ipairs{"send", "sendrecv", "send"} do
        local a = tl.full(N, k, "f16")
        local done = false
        tl.spawn("writer" .. k, function()
          kb.wait(5) -- the send has filled the ring and waits for credits
          tl.accumulate(a, tl.full(N, 100, "f16"))
          done = true
        end)
        if step == "send" then
          tl.send("E", a)
        else
          local b = tl.sendrecv("E", a, "W", 8, "f16")
          got.back = not timing_only and b:to_table()[8] or 0
        end
        kb.check(done, "the writer ran while the send was blocked")
        got["after" .. k] = not timing_only and a:to_table()[N] or 0
        if k == 1 then tl.free(pad) end -- the third tile lands page-aligned
      end
    else
      -- each message waits in the ring (the sender blocks for credits)
      -- until the writer is done
      kb.wait(5000)
      local h1 = tl.recv("W", N, "f16")
      kb.wait(5000)
      local f = tl.recv_async("W", N, "f16")
      tl.send("E", tl.full(8, 7, "f16"))
      local h2 = tl.wait(f)
      kb.wait(5000)
      local h3 = tl.recv("W", N, "f16")
      if not timing_only then
        for k, h in ipairs{h1, h2, h3} do
          local t = h:to_table()
          local ok = true
          for j = 1, N do ok = ok and t[j] == k end
          got[k] = ok
        end
      end
    end
  end)
  sim:run()
  return got, sim:now()
end

local got, t_values = run(false)
for k = 1, 3 do
  kb.check(got[k], ("message %d: the receiver sees the bytes as they were at the send"):format(k))
  kb.check(got["after" .. k] == k + 100, ("message %d: the sender's handle was written (%s)")
    :format(k, tostring(got["after" .. k])))
end
kb.check(got.back == 7, "the sendrecv's own receive")
local _, t_timing = run(true)
kb.check(t_values == t_timing, ("the same times with and without values (%s, %s)")
  :format(t_values, t_timing))
print("tl_send_snapshot ok")
