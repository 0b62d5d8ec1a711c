-- lua_pool.lua — the Lua state's small-object pool (lua/lstate.c, decision 0033): objects of
-- every size class and beyond, grown, shrunk, freed and made again keep their contents, in
-- the main state and in sweep points (each a state of its own, closed when the point ends)
local kb = require("kbsim")

-- A sweep point runs in a state of its own: the work is one self-contained function.
local function run(p)
  local seed = p.seed
  local keep = {}
  for round = 1, 40 do
    local t = {}
    for i = 1, 300 do
      local n = (i * 7 + round + seed) % 70 -- 0..69 entries: tables of ~56 B to ~1.2 KB
      local x = {}
      for j = 1, n do x[j] = j * i + seed end
      local s = string.rep(string.char(65 + i % 26), (i * 13 + round) % 300) -- 0..299 B strings
      t[i] = {x = x, s = s, f = function() return i + n end}
    end
    for i = 1, 300, 3 do t[i] = nil end -- free some while others live
    collectgarbage()
    for i = 2, 300, 3 do
      local e = t[i]
      local n = (i * 7 + round + seed) % 70
      assert(#e.x == n and (n == 0 or e.x[n] == n * i + seed), "table contents")
      assert(#e.s == (i * 13 + round) % 300 and e.f() == i + n, "string and closure")
      for j = #e.x + 1, #e.x + 40 do e.x[j] = -j end -- grow in place of a freed block
      for j = #e.x, 11, -1 do e.x[j] = nil end        -- and shrink
      assert(#e.x <= 10, "shrunk")
    end
    keep[round % 5 + 1] = t
  end
  local total = 0
  for _, t in pairs(keep) do
    for _, e in pairs(t) do total = total + #e.x end
  end
  return {total = total}
end

local want = run({seed = 0}).total
kb.check(want > 0 and run({seed = 0}).total == want, "the same work gives the same result")
local rows = kb.sweep{name = "pool", points = {{seed = 1}, {seed = 2}, {seed = 3}, {seed = 1}},
                      run = run}
kb.check(#rows == 4 and rows[1].total == rows[4].total and rows[1].total > 0,
         "sweep points, each in a state of its own, agree")
print("lua_pool ok")
