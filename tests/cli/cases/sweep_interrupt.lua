-- kb.sweep and Ctrl-C: point 3 sends SIGINT to kbsim; the points before it
-- keep their rows (written to a CSV), the rest are "not run", and kbsim
-- exits 130 after the script ends. Run with -j 1.
local kb = require("kbsim")
local results = require("kbsim.results")
local ctrl_c = require("ctrl_c")

local points = {}
for i = 1, 6 do points[i] = {i = i} end
local rows, summary = kb.sweep{name = "intr", points = points, run = function(p)
  if p.i == 3 then ctrl_c() end
  return {i = p.i}
end}
results.csv(kb.outdir() .. "/intr.csv", rows, {"i"})
print(("intr: rows=%d done=%d not_run=%d interrupted=%s"):format(
  #rows, summary.done, summary.not_run, tostring(summary.interrupted)))
