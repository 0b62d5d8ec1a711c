-- kb.sweep with --fast: unchanged points come from the cache; a changed
-- parameter runs again. KBSIM_TEST_BUMP=N changes the last point only
-- (--set or a script argument would change every point's key).
local kb = require("kbsim")

local bump = tonumber(os.getenv("KBSIM_TEST_BUMP") or "0")
local points = {}
for i = 1, 6 do points[i] = {n = i * 10} end
points[6].n = points[6].n + bump

local rows, summary = kb.sweep{name = "fast", points = points, run = function(p)
  local sim <close> = kb.sim{}
  sim:spawn("w", function() kb.wait(p.n) end)
  sim:run()
  return {n = p.n, end_ns = sim:now(), ratio = sim:now() / 3}
end}
for i, r in ipairs(rows) do
  kb.check(r.n == points[i].n and r.end_ns == points[i].n, "row " .. i)
  kb.check(math.type(r.n) == "integer" and math.type(r.end_ns) == "float",
           "number types survive the cache")
  kb.check(r.ratio == points[i].n / 3, "floats survive the cache exactly")
end
print(("fast: reused=%d simulated=%d"):format(summary.reused, summary.done - summary.reused))
