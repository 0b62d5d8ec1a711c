-- A sweep whose points take a while (tests/cli/mpi.sh: a rank killed
-- under mpirun): each point sleeps `ms` milliseconds.
--   kbsim mpi_slow.lua [n=12] [ms=300]
local kb = require("kbsim")
local results = require("kbsim.results")
local P = kb.params({n = {default = 12, type = "integer", min = 1, help = "points"},
                     ms = {default = 300, type = "integer", min = 0, help = "sleep per point, ms"}},
  {about = "a slow sweep for the MPI fault tests"})
local pts = {}
for i = 1, P.n do pts[i] = {i = i, ms = P.ms} end
local rows = kb.sweep{name = "slow", points = pts, run = function(p)
  if p.ms > 0 then os.execute(("sleep %.3f"):format(p.ms / 1000)) end
  if os.getenv("KBSIM_TEST_FAIL") == tostring(p.i) then error("deliberate failure in point " .. p.i) end
  return {i = p.i, sq = p.i * p.i}
end}
results.csv(kb.outdir() .. "/slow.csv", rows, {"i", "sq"})
print(("mpi_slow: %d rows"):format(#rows))
