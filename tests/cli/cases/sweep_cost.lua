-- kb.sweep{cost = f}: the dearest points are handed out first (ties in
-- input order); rows stay in input order. With -j 1 the points run one
-- after another, so the order they log is the order they were handed out.
local kb = require("kbsim")
local log = kb.outdir() .. "/order.txt"
os.remove(log)
local costs = {3, 9, 1, 9, 5}
local points = {}
for i, c in ipairs(costs) do points[i] = {i = i, c = c, log = log} end
local rows = kb.sweep{name = "costed", points = points, cache = false,
  cost = function(p) return p.c end,
  run = function(p)
    local f = assert(io.open(p.log, "a"))
    f:write(p.i, " ")
    f:close()
    return {i = p.i}
  end}
local f = assert(io.open(log))
local order = f:read("a")
f:close()
kb.check(order == "2 4 5 1 3 ", "dispatch order by cost: " .. order)
for i, r in ipairs(rows) do kb.check(r.i == i, "row " .. i .. " in input order") end
-- a cost that is not a number names the point
local ok, err = pcall(kb.sweep, {name = "bad", points = points, cache = false,
  cost = function(p) return p.i == 4 and "dear" or 1 end, run = function(p) return {} end})
kb.check(not ok and err:find("cost of point 4 must be a number, got string", 1, true), tostring(err))
ok, err = pcall(kb.sweep, {name = "bad2", points = points, cache = false, cost = 3,
  run = function(p) return {} end})
kb.check(not ok and err:find("'cost' must be a function of a point", 1, true), tostring(err))
print("sweep_cost ok")
