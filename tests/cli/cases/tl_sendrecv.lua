-- tl_sendrecv.lua — tl.sendrecv is the ring step it stands for, to the
-- picosecond and the TCM address:
--     local f = tl.recv_async(rdir, n, dt); tl.send(sdir, h)
--     if release then tl.free(h) end; return tl.wait(f)
-- The same ring kernel runs both ways on two fresh systems (with values and
-- timing-only, slots shorter than the tile so that sends block, release on
-- and off); every rank's values, handle addresses, step times and unit
-- counters must agree. With a mode argument it is an error case instead.
local kb = require("kbsim")
local tl = require("kbsim.tl")

local N, n = 4, 1536 -- 3 KiB of f16: more than one 1 KiB slot
local mode = arg[1]

local function ring(step, timing_only)
  local sim = kb.sim{}
  local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 2}},
                              ipcq = {slot_size = 1024, n_slots = 2}},
                        {timing_only = timing_only})
  local ranks = {}
  for i = 1, N do ranks[i] = (i - 1) * 4 end -- PE 0 of each cube
  tl.wire_ring(sys, ranks)
  local log = {}
  tl.launch(sys, ranks, function()
    local r = tl.rank()
    local mine = {}
    log[r] = mine
    -- a released handle gives its TCM back before the received one takes
    -- its own: here the lowest free address, so the received handle's
    local first = tl.full(n, 0, "f16")
    local g0 = step("E", first, "W", n, "f16", true)
    mine[1] = ("0 %.3f %s"):format(sim:now(), tostring(g0))
    tl.free(g0)
    local acc = tl.full(n, r + 1, "f16")
    local cur = acc
    for s = 1, N - 1 do
      local release = cur ~= acc and s % 2 == 0 -- on and off
      local got = step("E", cur, "W", n, "f16", release)
      if cur ~= acc and not release then tl.free(cur) end
      local sum = acc + got
      tl.free(acc)
      acc, cur = sum, got
      mine[#mine + 1] = ("%s %.3f %s %s"):format(s, sim:now(), tostring(got), tostring(sum))
    end
    if not timing_only then mine[#mine + 1] = table.concat(acc:to_table(), ",", 1, 4) end
    local st, keys = tl.pe_stats(sys, tl.program_id()), {}
    for k in pairs(st) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do mine[#mine + 1] = k .. "=" .. tostring(st[k]) end
  end)
  sim:run()
  local lines = {}
  for r = 0, N - 1 do lines[#lines + 1] = r .. ": " .. table.concat(log[r], " | ") end
  return table.concat(lines, "\n")
end

local function by_parts(sdir, h, rdir, cnt, dt, release)
  local f = tl.recv_async(rdir, cnt, dt)
  tl.send(sdir, h)
  if release then tl.free(h) end
  return tl.wait(f)
end

if mode == "pending" then
  -- a deadlock with a step waiting on a receive nobody sends: its record
  -- and buffer are freed when the script ends (LeakSanitizer checks it in
  -- the ASan build)
  local sim = kb.sim{}
  local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}},
                        {timing_only = false})
  tl.wire_ring(sys, {0, 1})
  tl.launch(sys, {0}, function()
    tl.sendrecv("E", tl.full(4, 1, "f32"), "W", 4, "f32")
  end)
  local ok, err = pcall(sim.run, sim)
  kb.check(not ok and tostring(err):find("'sip0.cube0.pe0.kernel' waits on event "
                                         .. "'sip0.cube0.pe0.recv.W'", 1, true),
           "the step waits for its receive: " .. tostring(err))
  print("tl_sendrecv pending ok")
  return
end

if mode == "unwired" or mode == "mismatch" or mode == "freed" then
  local sim = kb.sim{}
  local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}})
  tl.wire_ring(sys, {0, 1})
  tl.launch(sys, {0, 1}, function()
    local h = tl.full(4, 1, "f32")
    if mode == "unwired" then
      tl.sendrecv("E", h, "N", 4, "f32")
    elseif mode == "mismatch" then
      tl.sendrecv("E", h, "W", tl.rank() == 0 and 4 or 8, "f32")
    else
      tl.free(h)
      tl.sendrecv("E", h, "W", 4, "f32")
    end
  end)
  sim:run()
  return
end

for _, timing_only in ipairs({false, true}) do
  local a, b = ring(by_parts, timing_only), ring(tl.sendrecv, timing_only)
  if a ~= b then
    error(("tl.sendrecv differs from its parts (timing_only %s):\n%s\n--- sendrecv:\n%s")
      :format(tostring(timing_only), a, b))
  end
  -- the sum of 1..N in every element, and steps that took time
  if not timing_only then assert(a:find("10.0,10.0,10.0,10.0", 1, true), a) end
  assert(not a:find(" 0.000 ", 1, true), a)
end
print("tl_sendrecv ok")
