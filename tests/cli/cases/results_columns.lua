-- results.csv's columns (and results.figure's fields): an empty list or a name listed twice is refused
-- (they wrote blank lines or a header with a repeated name); a column that
-- no row has is written empty with a warning (a misspelt key, as
-- "latency" for "latency_ns", gave an empty column silently).
local kb = require("kbsim")
local results = require("kbsim.results")
local rows = {{bytes = 8, latency_ns = 100}, {bytes = 16, latency_ns = 120}}
local out = kb.outdir()
local ok, err = pcall(results.csv, out .. "/none.csv", rows, {})
kb.check(not ok and err:find("results.csv: 'none.csv': columns must be a non-empty list of column names", 1, true),
         "no columns: " .. tostring(err))
ok, err = pcall(results.csv, out .. "/twice.csv", rows, {"bytes", "bytes"})
kb.check(not ok and err:find("results.csv: 'twice.csv': column 'bytes' is listed twice", 1, true),
         "a column twice: " .. tostring(err))
ok, err = pcall(results.csv, out .. "/num.csv", rows, {"bytes", 2})
kb.check(not ok and err:find("column 2 is a number, not a name", 1, true), "a number: " .. tostring(err))
-- the misspelt one: written (empty), and said on stderr (the test looks for it)
local path = results.csv(out .. "/typo.csv", rows, {"bytes", "latency"})
local f = assert(io.open(path))
kb.check(f:read("a") == "bytes,latency\n8,\n16,\n", "the file is written as before")
f:close()
-- no warning for a column some rows have
results.csv(out .. "/some.csv", {{bytes = 8}, {bytes = 16, latency_ns = 1}}, {"bytes", "latency_ns"})
-- results.figure likewise: a misspelt field is refused, not ignored; so is an empty name
ok, err = pcall(results.figure, {name = "lat", csv = path, x = "bytes", y = "latency", ylable = "ns"})
kb.check(not ok and err:find("results.figure: unknown field 'ylable' (fields: csv, logx, logy, name, "
         .. "refs, series, title, x, xlabel, y, ylabel)", 1, true), "figure field: " .. tostring(err))
ok, err = pcall(results.figure, {name = "", csv = path, x = "bytes", y = "latency"})
kb.check(not ok and err:find("results.figure: bad name ''", 1, true), "empty name: " .. tostring(err))
print("results_columns ok")
