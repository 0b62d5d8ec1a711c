-- tl_barrier.lua — tl.barrier: nobody leaves before the last arrives; reusable back to back
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 1}}})
local ranks = {0, 1, 2, 3, 4, 5, 6}            -- 7 PEs: rounds of 1, 2 and 4
local arrive, leave = {}, {}
tl.launch(sys, ranks, function()
  local me = tl.rank()
  for ep = 1, 3 do
    -- a different PE is last each time, by hundreds of ns
    kb.wait(((me + ep) % 7) * 100)
    arrive[ep] = arrive[ep] or {}
    leave[ep] = leave[ep] or {}
    arrive[ep][me] = kb.now()
    tl.barrier()
    leave[ep][me] = kb.now()
  end
end)
kb.check(sim:run() == "done", "the run ends")
for ep = 1, 3 do
  local last, first_out = 0, math.huge
  for me = 0, 6 do
    last = math.max(last, arrive[ep][me])
    first_out = math.min(first_out, leave[ep][me])
  end
  kb.check(first_out >= last, ("episode %d: a PE left at %g ns, before the last arrived at %g ns")
    :format(ep, first_out, last))
  kb.check(first_out < last + 1000, ("episode %d: the barrier takes under 1 us"):format(ep))
end
print("tl_barrier ok")
