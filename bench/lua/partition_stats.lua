-- partition_stats.lua — what one large run split by SIPs would see:
-- lookahead, events and cross-partition messages per lookahead window,
-- and the speed-up they predict (docs/decisions/0020-parallel-simulation.md).
--
--   kbsim bench/lua/partition_stats.lua [sips=6] [topology=torus_2d] [w=2] [h=3]
--         [n_elem=1024] [cores=2,16,128] [sync_us=1,1,10] [msg_us=0.2,0.2,2]
--
-- Runs the milestone's hierarchical all-reduce (lrab, f16, n_elem per PE)
-- twice on the same system: once plain, timed (host seconds per event),
-- then with a monitor process that wakes every lookahead window and
-- counts the events of the window. Events are process activations (the
-- kernel's unit of work); the monitor's own are taken off. The link
-- counters (sys:links(), read only) give the messages that cross between
-- partitions, SIPs being given to partitions in contiguous blocks.
local kb = require("kbsim")
local P = kb.params({
  sips = {default = 6, type = "integer", min = 2, help = "SIPs"},
  topology = {default = "torus_2d", type = "string", help = "SIP topology"},
  w = {default = 2, type = "integer", min = 1, help = "SIP grid width"},
  h = {default = 3, type = "integer", min = 1, help = "SIP grid height"},
  n_elem = {default = 1024, type = "integer", min = 1, help = "f16 elements per PE"},
  cores = {default = {2, 16, 128}, type = "integer", list = true, min = 1,
           help = "core counts to predict the speed-up for"},
  sync_us = {default = {1, 1, 10}, type = "number", list = true, min = 0,
             help = "assumed cost of one window's synchronisation (barrier) per core count, us"},
  msg_us = {default = {0.2, 0.2, 2}, type = "number", list = true, min = 0,
            help = "assumed cost of one cross-partition message per core count, us"},
}, {about = "partition statistics for a parallel simulation by SIPs"})

-- One system; a first all-reduce wires and loads the kernels, the second
-- is timed, the third runs with the monitor (same work: the simulation is
-- deterministic, checked by its latency).
local T = require("kbsim.torch")
local tl = require("kbsim.tl")
local grid = P.topology ~= "ring_1d" and {P.w, P.h} or {}
local torch = T.init{topology = {sips = {count = P.sips, topology = P.topology, w = grid[1],
                                         h = grid[2]}}}
local D = torch.distributed
D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = "lrab", dtype = "f16",
  buffer_kind = "tcm"}}}
local ranks = D.get_ranks()
local tensor = torch.zeros({1, #ranks * P.n_elem}, {dtype = "f16"})
local base = tl.vec_affine(P.n_elem, 0.25, 0):mod(2)
for k, r in ipairs(ranks) do tensor:shard_write_vec(r, base:copy():add((k - 1) % 4)) end

local function all_reduce(monitor)
  local t0 = torch.sim:now()
  if monitor then monitor(torch.sim, t0) end
  local s0 = torch.sim:stats()
  local c0 = os.clock() -- CPU time of this process (one thread)
  local rep = D.all_reduce(tensor, {check = false})
  local host_s = os.clock() - c0
  local s1 = torch.sim:stats()
  return {latency_ns = rep.latency_ns, dur_ns = torch.sim:now() - t0, host_s = host_s,
          events = s1.activations - s0.activations}
end

all_reduce(nil)
local before = torch.sys:links()
local r1 = all_reduce(nil)
local function sip_of(node) return tonumber(node:match("^sip(%d+)%.")) end

-- the links' messages during the timed all-reduce
local links = torch.sys:links()
local seen = {}
for _, l in ipairs(before) do seen[l.name] = l.messages end
for _, l in ipairs(links) do l.messages = l.messages - (seen[l.name] or 0) end
local flit = 256
local lookahead_lat, lookahead = math.huge, math.huge
local cross_total = 0
for _, l in ipairs(links) do
  local a, b = sip_of(l.from), sip_of(l.to)
  if a and b and a ~= b then
    lookahead_lat = math.min(lookahead_lat, l.latency_ns)
    -- the earliest a head entering this link reaches the far side
    lookahead = math.min(lookahead, l.overhead_ns + flit / l.bw_gbps + l.latency_ns)
    cross_total = cross_total + l.messages
  end
end
assert(lookahead < math.huge, "no link between SIPs was used")
local counts = torch.sys:counts()
local n_sips = counts.sips

-- messages between partitions when n_part partitions hold contiguous SIP blocks
local function cross(n_part)
  local x = 0
  local function part(s) return math.floor(s * n_part / n_sips) end
  for _, l in ipairs(links) do
    local a, b = sip_of(l.from), sip_of(l.to)
    if a and b and part(a) ~= part(b) then x = x + l.messages end
  end
  return x
end
-- load of each partition, by proxy: the messages its links carried (every
-- link, inside SIPs too, counted where it starts); max / mean
local function imbalance(n_part)
  local load, total = {}, 0
  for _, l in ipairs(links) do
    local a = sip_of(l.from)
    if a then
      local p = math.floor(a * n_part / n_sips)
      load[p] = (load[p] or 0) + l.messages
      total = total + l.messages
    end
  end
  local max = 0
  for p = 0, n_part - 1 do max = math.max(max, load[p] or 0) end
  return total > 0 and max / (total / n_part) or 1
end

-- a monitor counts events per lookahead window up to run 1's end
local per_window = {}
local r2 = all_reduce(function(sim, t0)
  sim:spawn("partition_monitor", function()
    local last = sim:stats().activations
    while sim:now() < t0 + r1.dur_ns do
      kb.wait(lookahead)
      local a = sim:stats().activations
      per_window[#per_window + 1] = a - last - 1 -- its own activation
      last = a
    end
  end)
end)
-- the same simulation with the monitor: same latency, and the same events
-- but the monitor's own (one per window, one to start)
assert(math.abs(r2.latency_ns - r1.latency_ns) < 1e-3 and r2.events == r1.events + #per_window + 1,
  "the monitor changed the simulation")
local windows = #per_window
local nonempty, max_ev, sum = 0, 0, 0
for _, e in ipairs(per_window) do
  if e > 0 then nonempty = nonempty + 1 end
  if e > max_ev then max_ev = e end
  sum = sum + e
end
local t_ev_us = r1.host_s / r1.events * 1e6

print(("system: %d SIPs (%s %sx%s), %d cubes, %d PEs; all-reduce lrab f16, %d elements per PE")
  :format(n_sips, P.topology, grid[1] or n_sips, grid[2] or 1, counts.cubes, counts.pes, P.n_elem))
print(("simulated: %.0f ns; events (activations): %d; host: %.3f s, %.3f us per event")
  :format(r1.dur_ns, r1.events, r1.host_s, t_ev_us))
print(("lookahead: smallest inter-SIP link latency %.3f ns; with the head's overhead and one "
  .. "flit %.3f ns (used)"):format(lookahead_lat, lookahead))
print(("windows: %d of %.3f ns, %d with events (%.1f%%); events per window: mean %.1f, "
  .. "mean over non-empty %.1f, max %d"):format(windows, lookahead, nonempty,
  100 * nonempty / windows, sum / windows, sum / math.max(nonempty, 1), max_ev))
print(("inter-SIP messages: %d in all, %.2f per window, %.2f per non-empty window")
  :format(cross_total, cross_total / windows, cross_total / math.max(nonempty, 1)))
print("| cores | partitions | imbalance | cross msgs | per non-empty window | sync us | msg us | predicted speed-up |")
print("|---|---|---|---|---|---|---|---|")
for i, c in ipairs(P.cores) do
  local parts = math.min(c, n_sips)
  local x = cross(parts)
  local sync = P.sync_us[math.min(i, #P.sync_us)]
  local msg = P.msg_us[math.min(i, #P.msg_us)]
  -- sequential: every event; parallel: per non-empty window the busiest
  -- partition's share (events / partitions x the imbalance), one barrier, and
  -- the window's cross messages spread over the partitions
  local seq = sum * t_ev_us
  local imb = imbalance(parts)
  local par = sum / parts * imb * t_ev_us + nonempty * sync + x / parts * msg
  print(("| %d | %d | %.2f | %d | %.2f | %g | %g | %.2f |"):format(c, parts, imb, x,
    x / math.max(nonempty, 1), sync, msg, seq / par))
end
