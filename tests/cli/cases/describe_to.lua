-- describe_to.lua FILE — sys:describe{..., to = file} writes the listing to the file (what
-- kbsim --describe does with io.stdout) and returns the file; a bad 'to' is refused
local kb = require("kbsim")
local sys = kb.system(kb.sim())
local f = assert(io.open(arg[1], "w"))
local r = sys:describe{ports = true, units = true, links = true, to = f}
kb.check(r == f, "returns the file")
f:close()
local ok, err = pcall(sys.describe, sys, {ports = true, to = "out.txt"})
kb.check(not ok and err:find("sys:describe: 'to' must be an open file (io.stdout, io.open(name, 'w')), got string", 1, true), tostring(err))
ok, err = pcall(sys.describe, sys, {ports = true, to = f})
kb.check(not ok and err:find("'to' must be an open file", 1, true), tostring(err))
