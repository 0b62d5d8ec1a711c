-- results.csv of rows with a hole: refused (the rows after the hole were
-- dropped without a word: #rows stopped short of them)
local kb = require("kbsim")
local results = require("kbsim.results")
local rows = {}
for i = 1, 3 do
  if i ~= 2 then rows[i] = {i = i, t = 10 * i} end -- point 2 gave no row
end
results.csv(kb.outdir() .. "/hole.csv", rows, {"i", "t"})
