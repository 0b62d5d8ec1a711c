-- The 150-deep string.gsub nesting in a sweep point: it runs, and a point
-- nesting past Lua's limit fails with an ordinary error while the sweep
-- keeps its other points and writes their rows.
local kb = require("kbsim")
local results = require("kbsim.results")

local rows, summary = kb.sweep{name = "nesting", points = {{depth = 150}, {depth = 400}, {depth = 20}},
  run = function(p)
    local function nest(n)
      if n == 0 then return "x" end
      return (string.gsub("a", "a", function() return nest(n - 1) end))
    end
    local sim <close> = kb.sim{}
    local got
    sim:spawn("nester", function() got = nest(p.depth) end)
    sim:run()
    return {depth = p.depth, got = got}
  end}
assert(#rows == 2 and rows[1].depth == 150 and rows[2].depth == 20 and rows[1].got == "x")
assert(summary.failed == 1 and summary.points[2].error:find("C stack overflow", 1, true))
results.csv(kb.outdir() .. "/nesting.csv", rows, {"depth", "got"})
print("c_nesting_sweep rows ok")
