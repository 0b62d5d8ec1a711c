-- results_gp_quoting.lua — a figure's strings cannot break out of their gnuplot quotes
-- (a newline in a title ended the string's line, and the rest ran as a gnuplot command)
local kb = require("kbsim")
local results = require("kbsim.results")

local out = kb.outdir()
local csv = results.csv(out .. "/q.csv", {{x = 1, y = 2}, {x = 2, y = 3}}, {"x", "y"})
local fig = results.figure{name = "q", csv = csv, x = "x", y = "y",
  title = 'two\nsystem "touch ' .. out .. '/pwned"\r\1', xlabel = 'a "quoted" \\ label\tx',
  refs = {{title = "line\nprint 1", fn = "x"}}}
kb.check(fig ~= nil, "figure made")
local f = assert(io.open(out .. "/q.gp"))
local gp = f:read("a")
f:close()
kb.check(not gp:find("\n%s*system") and not gp:find("\n%s*print"), "no line starts a command")
kb.check(gp:find('set title "two\\nsystem \\"touch ', 1, true), "newline and quotes escaped in the title")
kb.check(gp:find('set xlabel "a \\"quoted\\" \\\\ label\\tx"', 1, true), "quote, backslash and tab escaped")
local p = io.open(out .. "/pwned")
kb.check(p == nil, "gnuplot ran no command from a title")
if p then p:close() end
print("results_gp_quoting ok")
