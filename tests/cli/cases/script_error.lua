-- A runtime error in the main chunk: file:line, traceback, exit 2.
local kb = require("kbsim")
kb.no_such_function()
