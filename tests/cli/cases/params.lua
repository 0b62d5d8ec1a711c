-- kb.params: the script's key=value arguments, converted, checked, with
-- defaults for what is not given. Run as
--   kbsim params.lua n=3 sizes=8,64 big=64KiB ratio=0.5 algo=tree quick=no
local kb = require("kbsim")

local p = kb.params({
  n = {default = 1, type = "integer", min = 1, help = "a count"},
  sizes = {default = {4}, type = "integer", list = true, min = 1, help = "sizes"},
  big = {default = 4096, type = "bytes", help = "a size in bytes"},
  ratio = {default = 1, type = "number", help = "a ratio"},
  algo = {default = "ring", type = "string", choices = {"ring", "tree"}, help = "an algorithm"},
  quick = {default = true, type = "boolean", help = "a switch"},
  name = {default = "x", type = "string", help = "a name left at its default"},
}, {check = function(q) if q.n > 100 then return "n above 100" end end})

assert(p.n == 3 and math.type(p.n) == "integer", "n")
assert(#p.sizes == 2 and p.sizes[1] == 8 and p.sizes[2] == 64, "sizes")
assert(p.big == 65536 and math.type(p.big) == "integer", "big")
assert(p.ratio == 0.5, "ratio")
assert(p.algo == "tree", "algo")
assert(p.quick == false, "quick")
assert(p.name == "x", "name keeps its default")
print("params ok")
