-- Defaults: out/<script name>, not created until kb.outdir() asks for it.
local kb = require("kbsim")
local o = kb.options
kb.check(o.out == "out/default_options", "out " .. tostring(o.out))
kb.check(math.type(o.jobs) == "integer" and o.jobs >= 1, "jobs")
kb.check(next(o.set) == nil and o.topology == nil and o.quiet == false, "empty")
kb.check(io.open("out/default_options") == nil, "the default folder is not created unasked")
o.out = os.tmpname() .. ".d/sub"
local dir = kb.outdir()
kb.check(dir == o.out, "outdir returns the folder")
local f = io.open(dir .. "/probe.txt", "w")
kb.check(f ~= nil, "outdir created the folder")
f:close()
os.remove(dir .. "/probe.txt"); os.remove(dir); os.remove(dir:gsub("/sub$", ""))
print("default_options ok")
