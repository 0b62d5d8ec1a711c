-- A file a script names that cannot be read is said at the script's line
-- (under pcall, the line of the pcall),
-- not as the file alone: missing, or a folder; kb.system and kb.ccl_config.
local kb = require("kbsim")
local sim = kb.sim{}
local function says(want, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error")
  err = tostring(err)
  assert(err:find(want, 1, true), ("expected %q in %q"):format(want, err))
end
says("system_file_unreadable.lua:7: kb.system: cannot open 'no_such_topology.yaml': No such file or directory",
     kb.system, sim, "no_such_topology.yaml")
says("system_file_unreadable.lua:7: kb.system: cannot open '.': it is a folder", kb.system, sim, ".")
says("system_file_unreadable.lua:7: kb.ccl_config: cannot open 'no_such_ccl.yaml': No such file or directory",
     kb.ccl_config, "no_such_ccl.yaml")
-- uncaught, it ends the run with exit 2 and the same words
kb.system(sim, "no_such_topology.yaml")
