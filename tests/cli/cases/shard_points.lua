-- Two sweeps for --shard / --merge (tests/cli/shard.sh): the second
-- sweep's points are built from the first sweep's rows.
--   kbsim [--shard I/N | --merge] shard_points.lua [n=7]
local kb = require("kbsim")
local results = require("kbsim.results")
local P = kb.params({n = {default = 7, type = "integer", min = 1, help = "points of each sweep"}},
  {about = "two dependent sweeps for the --shard tests"})

local pts = {}
for i = 1, P.n do pts[i] = {i = i} end
local rows = kb.sweep{name = "squares", points = pts, run = function(p)
  if os.getenv("KBSIM_TEST_FAIL") == tostring(p.i) then error("deliberate failure in point " .. p.i) end
  return {i = p.i, sq = p.i * p.i}
end}
results.csv(kb.outdir() .. "/squares.csv", rows, {"i", "sq"})

local pts2 = {}
for _, r in ipairs(rows) do pts2[#pts2 + 1] = {sq = r.sq} end
local rows2 = kb.sweep{name = "cubes", points = pts2, run = function(p)
  return {sq = p.sq, x3 = p.sq * 3}
end}
results.csv(kb.outdir() .. "/cubes.csv", rows2, {"sq", "x3"})

-- a sweep without a cache runs whole in every process
local rows3 = kb.sweep{name = "uncached", points = pts, cache = false, run = function(p)
  return {i = p.i}
end}
print(("shard_points: %d squares, %d cubes, %d uncached"):format(#rows, #rows2, #rows3))
