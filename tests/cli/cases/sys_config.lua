-- sys:config(key): a built system's topology.yaml setting and its range.
local kb = require("kbsim")
local sim <close> = kb.sim{trace = false}
local sys = kb.system(sim, {ucie = {port_overhead_ns = 9.5}, sips = {count = 3}})
local v, r = sys:config("ucie.port_overhead_ns")
assert(v == 9.5 and r.type == "number" and r.min == 0 and r.above == false and r.max == 1e9, "ns key")
assert(r.doc == "per port, ns", r.doc)
v, r = sys:config("sips.count")
assert(v == 3 and math.type(v) == "integer" and r.type == "integer", "int key")
v, r = sys:config("pe.tcm.capacity")
assert(v == 16 * 1024 * 1024 and r.type == "bytes", "bytes key")
v, r = sys:config("ipcq.buffer_kind")
assert(v == "tcm" and r.type == "choice" and r.min == nil, "enum key")
for _, bad in ipairs({"ucie", "ucie.bogus", "", "ucie.", ".ucie"}) do
  local ok, err = pcall(sys.config, sys, bad)
  assert(not ok and err:find("is not a key of topology.yaml", 1, true), bad .. ": " .. tostring(err))
end
print("sys_config ok")
