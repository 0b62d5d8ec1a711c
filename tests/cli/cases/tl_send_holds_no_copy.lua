-- tl_send_holds_no_copy.lua — a kernel blocked in tl.send holds its
-- handle's pages by reference, not a host copy of its bytes (decision
-- 0056): 16 senders each send a 2 MiB tile to a receiver that takes it
-- only much later, so every sender waits for credits with its message in
-- flight; the probe reads the resident size then. A host copy a sender
-- (the old way) would add 16 x 2 MiB to the 16 x 2 MiB of the tiles. The
-- receivers then check every value.
local kb = require("kbsim")
local tl = require("kbsim.tl")

local function rss_bytes()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("n", "n")
  f:close()
  return resident * 4096
end

local PAIRS, N = 16, 1 << 20 -- 2 MiB of f16 a tile
local MiB = 1 << 20
local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 2}}})
local ranks = {}
for i = 0, PAIRS - 1 do
  ranks[#ranks + 1] = i -- senders: PEs 0..15
  ranks[#ranks + 1] = PAIRS + i -- receivers: PEs 16..31
  tl.wire(sys, i, "E", PAIRS + i, "W")
end

local ok = {}
tl.launch(sys, ranks, function()
  local r = tl.rank()
  if r % 2 == 0 then
    tl.send("E", tl.full(N, r // 2 + 1, "f16"))
  else
    kb.wait(1e6) -- the senders are blocked for credits until now
    local t = tl.recv("W", N, "f16"):to_table()
    local good = true
    for j = 1, N do good = good and t[j] == r // 2 + 1 end
    ok[#ok + 1] = good
  end
end)
local before, blocked = rss_bytes(), nil
sim:spawn("probe", function()
  kb.wait(5e5)
  blocked = rss_bytes()
end)
sim:run()

kb.check(#ok == PAIRS, ("%d receives"):format(#ok))
for i = 1, #ok do kb.check(ok[i], ("receive %d: wrong values"):format(i)) end
local grown = blocked - before
kb.check(grown < (PAIRS * 2 + 20) * MiB,
         ("blocked senders hold %.0f MiB (their tiles are %d MiB)"):format(grown / MiB, PAIRS * 2))
print("tl_send_holds_no_copy ok")
