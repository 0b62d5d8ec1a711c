-- kbsim.results: a folder that cannot be written is an error naming it.
local results = require("kbsim.results")
results.csv("/proc/kbsim-no-such-folder/latency.csv", {{a = 1}}, {"a"})
print("not reached")
