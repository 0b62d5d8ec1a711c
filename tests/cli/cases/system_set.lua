-- system_set.lua — --set reaches the default system; ccl keys pass the check
local kb = require("kbsim")
local c = kb.system(kb.sim()):counts()
kb.check(c.sips == 4 and c.pes == 512, "sips.count=4 " .. c.sips)
kb.check(kb.options.set["ccl.n_elem"] == "64", "ccl key kept")
print("system_set ok")
