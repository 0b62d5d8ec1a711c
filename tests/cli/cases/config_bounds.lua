-- config_bounds.lua — extreme values in a kb.system table are refused at
-- the script line with the key's path; the extremes allowed give exact
-- times (no saturation)
local kb = require("kbsim")

local function refused(spec, wants)
  local line = debug.getinfo(1, "l").currentline + 1 -- kb.system's caller
  local ok, e = pcall(kb.system, kb.sim(), spec)
  kb.check(not ok, "accepted: " .. tostring(e))
  for _, want in ipairs(wants) do
    want = ("config_bounds.lua:%d: %s"):format(line, want)
    kb.check(tostring(e):find(want, 1, true), ("missing %q in %s"):format(want, tostring(e)))
  end
end

refused({clock_ghz = 1e-300, cube = {noc = {bandwidth_gbps = 1e-300}},
         pe = {hbm = {pseudo_channels = 1024}}, ipcq = {slot_size = 1 << 31}}, {
  "clock_ghz: expected a value >= 0.001 and <= 1000, got 1e-300",
  "cube.noc.bandwidth_gbps: expected a value >= 0.001 and <= 1000000, "
    .. "got 1e-300",
  "pe.hbm.pseudo_channels: expected a value >= 1 and <= 64, got 1024",
  "ipcq.slot_size: expected a value >= 1 and <= 1GiB, got 2147483648"})
refused({cube = {noc = {ns_per_mm = 1e300, cube_mm = 1e300}}}, {
  "cube.noc.ns_per_mm: expected a value >= 0 and <= 1000000000, got 1e+300",
  "cube.noc.cube_mm: expected a value >= 0.001 and <= 1000, got 1e+300"})
refused({cube = {noc = {ns_per_mm = 1e7, cube_mm = 1000}}}, {
  "cube.noc.cube_mm: the NoC hop latency ns_per_mm x cube_mm / 2 = 5e+09 ns is above 1e+09 ns "
    .. "(cube.noc.ns_per_mm is 10000000 at config_bounds.lua:"})
refused({ucie = {connections = 64, gbps_per_connection = 1e5}},
  {"ucie.connections: the UCIe port bandwidth connections x gbps_per_connection = "
    .. "6.4e+06 GB/s is above 1e+06 GB/s (ucie.gbps_per_connection is 100000 at "
    .. "config_bounds.lua:"})
refused({sips = {count = 4096}, sip = {cube_mesh = {w = 64, h = 64}}},
  {"sips.count: 134217728 PEs (sips.count x cube_mesh w x h x corners x pes_per_corner = "
    .. "4096 x 64x64 x 4 x 2) is more than 16777216"})
refused({nodes = {{name = "a", pe = true}, {name = "b"}},
         links = {{from = "a", to = "b", bandwidth_gbps = 1e-300, latency_ns = 1e300}}}, {
  "links[1].bandwidth_gbps: expected a value >= 0.001 and <= 1000000",
  "links[1].latency_ns: expected a value >= 0 and <= 1000000000, got 1e+300"})

-- a table that contains itself: the message keeps the path's ends and says why
local cyc = {}
cyc.sips = cyc
refused(cyc, {"sips.sips.sips.sips.sips.sips.sips.sips.sips.sips. ... .sips.sips.sips.sips.sips."
  .. "sips.sips.sips.sips.sips: nested deeper than 64 levels (a cycle?)"})
-- NaN reads as nan, not as the C library's -nan
refused({sips = {count = 0/0}}, {"sips.count: expected an integer, got 'nan'"})

-- the slowest link and the longest wire allowed: 1 TiB over 0.001 GB/s
-- takes 2^40 x 1000 ns, exactly, plus the latency
local sys = kb.system(kb.sim(), {nodes = {{name = "a", pe = true}, {name = "b", pe = true}},
  links = {{from = "a", to = "b", bandwidth_gbps = 0.001, latency_ns = 1e9}}})
local t = sys:path(0, 1).latency_ns(1 << 40)
kb.check(t == (1 << 40) * 1000 + 1e9, ("1 TiB at 0.001 GB/s: %.17g ns"):format(t))
print("config_bounds ok")
