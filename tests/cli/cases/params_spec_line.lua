-- A bad kb.params declaration is reported at the script's own line.
local kb = require("kbsim")
kb.params({n = {default = 0, type = "integer", min = 1, help = "a count"}})
