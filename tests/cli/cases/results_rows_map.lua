-- results.csv given one row rather than a list of rows: refused (it wrote
-- the header alone)
local kb = require("kbsim")
local results = require("kbsim.results")
results.csv(kb.outdir() .. "/one.csv", {i = 1, t = 10}, {"i", "t"})
