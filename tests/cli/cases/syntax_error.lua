-- A syntax error is reported with file:line and exit status 2.
local kb = require("kbsim")
local x = 1
local y = = 2
