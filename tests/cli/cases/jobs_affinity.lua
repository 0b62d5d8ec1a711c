-- The default -j is the number of CPUs kbsim may run on (run under
-- `taskset -c 0`, as an MPI rank bound to one core would be).
local kb = require("kbsim")
kb.check(kb.options.jobs == tonumber(arg[1]), ("jobs %s, want %s"):format(kb.options.jobs, arg[1]))
print("jobs_affinity ok")
