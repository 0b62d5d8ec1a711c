-- kb.sweep and SIGTERM (a batch system ending the job, `kill PID`): point 3
-- sends SIGTERM to kbsim; as with Ctrl-C the points before it keep their
-- rows and the script goes on to write them, a later sweep runs no point,
-- and kbsim exits 143 (128 + SIGTERM) after the script. Run with -j 1.
local kb = require("kbsim")
local results = require("kbsim.results")
local ctrl_c = require("ctrl_c")

local points = {}
for i = 1, 6 do points[i] = {i = i} end
local rows, summary = kb.sweep{name = "term", points = points, run = function(p)
  if p.i == 3 then ctrl_c("TERM") end
  return {i = p.i}
end}
local csv = kb.outdir() .. "/term.csv"
results.csv(csv, rows, {"i"})
local f = assert(io.open(csv))
local text = f:read("a")
f:close()
kb.check(text == "i\n1\n2\n", "the finished rows are written: " .. text)
local later, s2 = kb.sweep{name = "later", points = {{i = 1}}, run = function(p) return p end}
kb.check(#later == 0 and s2.not_run == 1 and s2.interrupted, "a later sweep runs no point")
print(("term: rows=%d done=%d not_run=%d interrupted=%s stopped_by=%s"):format(
  #rows, summary.done, summary.not_run, tostring(summary.interrupted), summary.stopped_by))
-- the verdict says what stopped it (it said "stopped by Ctrl-C" after a SIGTERM)
print("verdict: " .. results.verdict({summary, s2}))
