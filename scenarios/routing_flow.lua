-- routing_flow.lua — routing and flow control compared on the milestone
-- system: latency against offered load (the classic curve) and saturation
-- throughput under uniform random and all-to-all traffic
--
--   kbsim [-j N] [--topology FILE] [--set K=V] scenarios/routing_flow.lua
--         [modes=wormhole_unbounded/xy,credit/xy,...] [patterns=uniform,all_to_all]
--         [loads=2,4,...] [bytes=1024] [window_ns=400] [seed=1]
--
-- One kb.sweep point per (mode, pattern, offered load) builds the system
-- (configs/topology.yaml, --topology, --set, then the mode's fabric keys:
-- fabric.flow_control and fabric.routing) and lets every PE inject
-- messages of `bytes` for window_ns, open loop: Poisson arrivals at the
-- offered load (GB/s per PE), destinations uniformly random (not itself)
-- or, for all_to_all, every other PE in turn from a random start (PE i's
-- messages go to i + k mod N for k = k0 + 1, k0 + 2, ..., wrapping within
-- 1..N-1). The run continues
-- until every message has arrived. Per point: mean, median and 99th
-- percentile latency (from injection, source queueing included) of the
-- messages injected after the first quarter of the window (warm-up), and
-- the accepted throughput (bytes arriving per PE per ns between the end of
-- the warm-up and the end of the window). Saturation throughput of a mode and pattern: the
-- largest accepted throughput of its points.
--
-- Writes to the output folder (-o, default out/routing_flow): points.csv,
-- saturation.csv, latency_<pattern> and throughput_<pattern> figures,
-- index.md (docs/routing_flow.md).
local kb = require("kbsim")
local results = require("kbsim.results")

local MODES = {"wormhole_unbounded/xy", "credit/xy", "credit/yx", "credit/adaptive",
               "credit/adaptive_hop"}
local ALL_MODES = {"wormhole_unbounded/xy", "wormhole_unbounded/yx", "wormhole_unbounded/adaptive",
                   "credit/xy", "credit/yx", "credit/adaptive", "credit/adaptive_hop"}

local opt = kb.params({
  modes = {default = MODES, type = "string", list = true, choices = ALL_MODES,
           help = "flow_control/routing pairs to compare"},
  patterns = {default = {"uniform", "all_to_all"}, type = "string", list = true,
              choices = {"uniform", "all_to_all"}, help = "traffic patterns"},
  loads = {default = {2, 5, 10, 15, 20, 30, 45}, type = "number", list = true, min = 0.001,
           help = "offered loads, GB/s per PE"},
  bytes = {default = 1024, type = "bytes", min = 1, help = "message size"},
  window_ns = {default = 1000, type = "number", min = 1, help = "injection window, ns"},
  seed = {default = 1, type = "integer", min = 0, help = "random seed"},
}, {about = "latency against offered load per routing and flow-control mode",
     grid_only = "every point sets fabric.flow_control and fabric.routing over the file's grid"})

-- ---- one point -------------------------------------------------------------

local function run_point(p)
  local fc, routing = p.mode:match("^([^/]+)/(.+)$")
  local sim <close> = kb.sim{trace = false}
  local sys = kb.system(sim, {fabric = {flow_control = fc, routing = routing}})
  local n = sys:counts().pes
  -- Poisson arrivals per PE: exponential gaps of mean bytes / load ns
  math.randomseed(p.seed, p.load * 1000 + (p.pattern == "uniform" and 0 or 1))
  local mean_gap = p.bytes / p.load
  local msgs = {}
  for src = 0, n - 1 do
    local t, k = 0, math.random(0, n - 2) -- a random start in the round
    while true do
      t = t - mean_gap * math.log(1 - math.random())
      if t >= p.window_ns then break end
      local dst
      if p.pattern == "uniform" then
        dst = math.random(0, n - 2)
        if dst >= src then dst = dst + 1 end
      else
        k = k % (n - 1) + 1
        dst = (src + k) % n
      end
      msgs[#msgs + 1] = {t, src, dst}
    end
  end
  table.sort(msgs, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  local spec = {src = {}, dst = {}, t_ns = {}, bytes = p.bytes}
  for i, m in ipairs(msgs) do spec.t_ns[i], spec.src[i], spec.dst[i] = m[1], m[2], m[3] end
  local h = sys:inject(spec)
  sim:run()
  local r = h:results()
  kb.check(r.delivered == r.n, ("%d of %d messages delivered"):format(r.delivered, r.n))
  local lat, arrived = {}, 0
  local w0 = p.window_ns / 4
  for i, l in ipairs(r.latency_ns) do
    if spec.t_ns[i] >= w0 then lat[#lat + 1] = l end
    local at = spec.t_ns[i] + l
    if at >= w0 and at < p.window_ns then arrived = arrived + 1 end
  end
  table.sort(lat)
  local sum = 0
  for _, l in ipairs(lat) do sum = sum + l end
  local function pct(q) return #lat > 0 and lat[math.max(1, math.ceil(q * #lat))] or 0 end
  return {
    mode = p.mode, pattern = p.pattern, offered_gbps = p.load, messages = r.n,
    accepted_gbps = arrived * p.bytes / (p.window_ns - w0) / n,
    mean_latency_ns = #lat > 0 and sum / #lat or 0, p50_latency_ns = pct(0.5),
    p99_latency_ns = pct(0.99),
  }
end

-- ---- the sweep ---------------------------------------------------------------

local points = {}
for _, pattern in ipairs(opt.patterns) do
  for _, mode in ipairs(opt.modes) do
    for _, load in ipairs(opt.loads) do
      points[#points + 1] = {mode = mode, pattern = pattern, load = load, bytes = opt.bytes,
                             window_ns = opt.window_ns, seed = opt.seed}
    end
  end
end
local t0 = kb.clock()
local rows, summary = kb.sweep{name = "routing_flow", points = points, run = run_point}
local elapsed = kb.clock() - t0

local out = kb.outdir()
local entries = {}
local COLUMNS = {"mode", "pattern", "offered_gbps", "messages", "accepted_gbps",
                 "mean_latency_ns", "p50_latency_ns", "p99_latency_ns"}
local csv = results.csv(out .. "/points.csv", rows, COLUMNS)
entries[#entries + 1] = {path = csv, about = "one row per mode, pattern and offered load "
  .. "(GB/s per PE): messages injected, accepted throughput (GB/s per PE), latency from "
  .. "injection to the last byte (mean, median, 99th percentile; after a quarter-window "
  .. "warm-up), ns"}

local sat, by = {}, {}
for _, r in ipairs(rows) do
  local key = r.pattern .. " " .. r.mode
  local s = by[key]
  if not s then
    s = {pattern = r.pattern, mode = r.mode, saturation_gbps = 0, zero_load_latency_ns = nil}
    by[key] = s
    sat[#sat + 1] = s
  end
  if r.accepted_gbps > s.saturation_gbps then s.saturation_gbps = r.accepted_gbps end
  if not s.zero_load_latency_ns then s.zero_load_latency_ns = r.mean_latency_ns end
end
local sat_csv = results.csv(out .. "/saturation.csv", sat,
  {"pattern", "mode", "saturation_gbps", "zero_load_latency_ns"})
entries[#entries + 1] = {path = sat_csv, about = "per pattern and mode: saturation throughput "
  .. "(the largest accepted GB/s per PE of the sweep) and the mean latency at the lowest load"}

for _, pattern in ipairs(opt.patterns) do
  local prows = {}
  for _, r in ipairs(rows) do if r.pattern == pattern then prows[#prows + 1] = r end end
  if #prows > 0 then
    local pcsv = results.csv(out .. "/points_" .. pattern .. ".csv", prows, COLUMNS)
    local fig = results.figure{name = "latency_" .. pattern, csv = pcsv, x = "offered_gbps",
      y = "mean_latency_ns", series = "mode", logy = 10,
      title = ("latency against offered load, %s traffic"):format(pattern:gsub("_", " ")),
      xlabel = "offered load (GB/s per PE)", ylabel = "mean latency (ns)"}
    entries[#entries + 1] = {figure = fig, about = "the classic curve: flat at the zero-load "
      .. "latency, then rising without bound as the load nears the mode's saturation "
      .. "throughput (source queues grow)."}
    local tfig = results.figure{name = "throughput_" .. pattern, csv = pcsv, x = "offered_gbps",
      y = "accepted_gbps", series = "mode",
      title = ("accepted against offered load, %s traffic"):format(pattern:gsub("_", " ")),
      xlabel = "offered load (GB/s per PE)", ylabel = "accepted throughput (GB/s per PE)"}
    entries[#entries + 1] = {figure = tfig, about = "accepted follows offered up to "
      .. "saturation, then levels off at the saturation throughput."}
  end
end
results.index(out, entries, "Routing and flow control: latency against offered load")

print(("%-11s %-22s %9s %9s %10s %10s %10s"):format("pattern", "mode", "offered", "accepted",
  "mean(ns)", "p50(ns)", "p99(ns)"))
for _, r in ipairs(rows) do
  print(("%-11s %-22s %9.2f %9.2f %10.1f %10.1f %10.1f"):format(r.pattern, r.mode,
    r.offered_gbps, r.accepted_gbps, r.mean_latency_ns, r.p50_latency_ns, r.p99_latency_ns))
end
print()
for _, s in ipairs(sat) do
  print(("saturation %-11s %-22s %7.2f GB/s per PE (zero-load latency %.1f ns)"):format(
    s.pattern, s.mode, s.saturation_gbps, s.zero_load_latency_ns or 0))
end
print(("routing_flow: %s, %s; %.2f s wall with -j %d; results in %s/index.md"):format(
  results.ran(summary, "points"), results.verdict{summary}, elapsed, kb.options.jobs, out))
