-- Command-line options reach the script as kb.options and arg.
local kb = require("kbsim")
local o = kb.options
kb.check(o.out == "results/x", "out " .. tostring(o.out))
kb.check(o.jobs == 3, "jobs")
kb.check(o.set["sips.count"] == "4" and o.set["ccl.algorithm"] == "x=y", "set")
kb.check(o.topology == "topo.yaml", "topology")
kb.check(o.quiet == true, "quiet")
kb.check(arg[0] == "options.lua" and arg[1] == "one" and arg[2] == "-two" and #arg == 2, "arg table")
kb.check(select("#", ...) == 2 and select(2, ...) == "-two", "script varargs")
kb.check(kb.version == "0.1.0", "version")
local t0 = kb.clock()
kb.check(type(t0) == "number" and kb.clock() >= t0, "clock is monotonic")
print("options ok")
