-- Thread processes with kb.wait(ns) interleave in time order; at equal
-- times, the wake-up scheduled first runs first (b's wait for 30 ns was
-- scheduled at 15 ns, a's at 20 ns).
local kb = require("kbsim")
local sim = kb.sim{}
local log = {}
local function proc(tag, step, n)
  return function()
    for _ = 1, n do
      kb.wait(step)
      log[#log + 1] = ("%s@%g"):format(tag, kb.now())
    end
  end
end
sim:spawn("a", proc("a", 10, 3))
sim:spawn("b", proc("b", 15, 2))
sim:spawn("c", proc("c", 2.5, 2))
sim:spawn("z", function() kb.wait(0); log[#log + 1] = ("z@%g"):format(kb.now()) end)
kb.check(sim:run() == "done", "run is done")
local got = table.concat(log, " ")
local want = "z@0 c@2.5 c@5 a@10 b@15 a@20 b@30 a@30"
kb.check(got == want, ("order %q, want %q"):format(got, want))
kb.check(sim:now() == 30 and sim:now_ps() == 30000, "final time 30 ns")
-- sub-ns times round to whole picoseconds
local s2 = kb.sim{}
s2:spawn("p", function() kb.wait(0.0004); kb.wait(0.0016) end)
s2:run()
kb.check(s2:now_ps() == 2, ("0.0004+0.0016 ns is 2 ps, got %d"):format(s2:now_ps()))
-- run(until) stops early and resumes
local s3 = kb.sim{}
local t = {}
s3:spawn("p", function() for i = 1, 4 do kb.wait(10); t[i] = kb.now() end end)
kb.check(s3:run(25) == "until", "run(25) stops at the limit")
kb.check(#t == 2, "two steps before 25 ns")
kb.check(s3:run() == "done" and #t == 4 and t[4] == 40, "the rest after resuming")
print("wait_order ok")
