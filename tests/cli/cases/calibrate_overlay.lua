-- The overlay calibrate.lua writes is a topology.yaml kbsim reads with --topology.
local kb = require("kbsim")
local sim <close> = kb.sim{trace = false}
local sys = kb.system(sim)
print(("port_overhead_ns %.4f gbps_per_connection %.4f"):format(
  sys:config("ucie.port_overhead_ns"), sys:config("ucie.gbps_per_connection")))
