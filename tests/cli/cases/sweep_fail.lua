-- kb.sweep: a failing point is recorded with file:line, the others finish
-- and keep their rows, and kbsim exits 1 with a summary.
local kb = require("kbsim")
local results = require("kbsim.results")

local points = {}
for i = 1, 6 do points[i] = {i = i} end
local rows, summary = kb.sweep{name = "latency", points = points, run = function(p)
  local sim <close> = kb.sim{}
  sim:spawn("w", function() kb.wait(p.i) end)
  sim:run()
  if p.i == 4 then error("deliberate failure in point " .. p.i) end
  return {i = p.i, t = sim:now()}
end}

local ok = #rows == 5 and summary.done == 5 and summary.failed == 1
for k, i in ipairs{1, 2, 3, 5, 6} do ok = ok and rows[k].i == i and rows[k].t == i end
ok = ok and summary.points[4].status == "failed" and
     summary.points[4].error:find("sweep_fail.lua:12: deliberate failure in point 4", 1, true)
results.csv(kb.outdir() .. "/latency.csv", rows, {"i", "t"})
if ok then print("sweep_fail rows ok") end
