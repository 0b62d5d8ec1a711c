-- kb.sweep: six points, each a process waiting p.n ns; rows come back in
-- input order whatever finishes first, and go to a CSV.
local kb = require("kbsim")
local results = require("kbsim.results")

local points = {}
for i, n in ipairs{60, 10, 50, 20, 40, 30} do points[i] = {n = n, label = "p" .. i} end

local rows, summary = kb.sweep{name = "latency", points = points, run = function(p)
  -- Busy work that shrinks with n, so that with 2 jobs later points
  -- often finish first.
  local x = 0
  for i = 1, (70 - p.n) * 20000 do x = x + i % 7 end
  local sim <close> = kb.sim{}
  local t_end
  sim:spawn("waiter", function() kb.wait(p.n); t_end = kb.now() end)
  kb.check(sim:run() == "done", "simulation ran to its end")
  return {label = p.label, n = p.n, end_ns = t_end, spin = x > 0}
end}

kb.check(summary.total == 6 and summary.done == 6 and summary.failed == 0 and
         summary.not_run == 0, "summary counts")
kb.check(#rows == 6, "six rows")
for i, r in ipairs(rows) do
  kb.check(r.label == "p" .. i, ("row %d is point %d, got %s"):format(i, i, r.label))
  kb.check(r.end_ns == points[i].n, ("row %d ends at %s ns"):format(i, r.end_ns))
  kb.check(summary.points[i].status == "done", "point status")
end
results.csv(kb.outdir() .. "/latency.csv", rows, {"label", "n", "end_ns", "spin"})
print("sweep_rows ok")
