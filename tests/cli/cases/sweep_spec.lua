-- kb.sweep refuses a spec it would misread: a misspelt field (it was
-- ignored: `timout = 5` ran with no timeout), points that are not a list
-- (a hole ended the list early, silently dropping the points after it).
local kb = require("kbsim")
local function run() return {x = 1} end
local cases = {
  {{points = {{}}, run = run, timout = 5},
   "kb.sweep: unknown field 'timout' (fields: points, run, name, jobs, key_extra, cache, timeout, cost)"},
  {{points = {{}}, run = run, [1] = true}, "kb.sweep: unknown field '1'"},
  {{points = {[1] = {}, [3] = {}}, run = run},
   "kb.sweep: 'points' must be a list (keys 1 to n, no holes): it has 2 entries, 1 in sequence"},
  {{points = {a = {}}, run = run}, "kb.sweep: 'points' must be a list"},
}
for i, c in ipairs(cases) do
  local ok, err = pcall(kb.sweep, c[1])
  kb.check(not ok and tostring(err):find(c[2], 1, true), ("case %d: %s"):format(i, tostring(err)))
end
-- every documented field is still taken
local rows, s = kb.sweep{points = {{}, {}}, run = run, name = "all_fields", jobs = 1,
                         key_extra = 1, cache = false, timeout = 5, cost = function() return 1 end}
kb.check(#rows == 2 and s.done == 2, "a spec with every field runs")
print("sweep_spec ok")
