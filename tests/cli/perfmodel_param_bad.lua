-- perfmodel_param_bad.lua — a malformed COMMS-RES row stops the scenario with file:line and the row
local pr = require("kbsim.param_results")
local rows, err = pr.read("data/param_malformed.txt")
if not rows then error(err, 0) end
print("not reached")
