-- Credit-mode link spans in a --trace file (docs/trace.md), through the
-- binary. Run with --trace FILE, then again with `check FILE`.
--  run: PE 0 -> PE 1 (two links, d = 1 ns a flit, no latency or router
--       overhead), 4 flits, buffer_flits 1, credit_ns 3: flit k starts on
--       the first link at 4k ns (it waits for flit k-1's credit: 1 ns on
--       the second link, then 3 back) and on the second at 4k + 1, so the
--       spans, head start to tail end, are [0, 13) and [1, 14) ns. Then,
--       in the same simulation from 100 ns, PE 0 and PE 2 each send 4 KiB
--       to PE 1: both hold a VC of the link down to PE 1 at once
--       (6 VCs, 2 a class), so its spans lie on two VC rows and overlap.
local kb = require("kbsim")

if arg[1] ~= "check" then
  local sim <close> = kb.sim{}
  local sys = kb.system(sim, {fabric = {flow_control = "credit", buffer_flits = 1, credit_ns = 3}})
  local h = sys:inject{src = {0}, dst = {1}, t_ns = {0}, bytes = 1024}
  local h2 = sys:inject{src = {0, 2}, dst = {1, 1}, t_ns = {100, 100}, bytes = 4096}
  sim:run()
  print(("flow_trace run: %g ns, %d delivered"):format(h:results().latency_ns[1],
    h2:results().delivered))
  return
end

local f = assert(io.open(arg[2], "rb"))
local text = f:read("a")
f:close()
local rows, spans = {}, {}
for line in text:gmatch("[^\n]+") do
  local tid, name = line:match('"ph":"M".-"tid":(%d+).-"name":"thread_name".-"name":"([^"]+)"')
  if tid then rows[tid] = name end
end
for line in text:gmatch("[^\n]+") do
  if line:find('"ph":"X"', 1, true) and line:find('"cat":"link"', 1, true) then
    local tid, ts, dur, name = line:match('"tid":(%d+),"ts":([%d.]+),"dur":([%d.]+),"cat":"link","name":"([^"]+)"')
    kb.check(tid ~= nil, "a link span: " .. line)
    spans[#spans + 1] = {row = rows[tid], ts = tonumber(ts) * 1000, dur = tonumber(dur) * 1000,
                         name = name, vc = tonumber(line:match('"vc":(%d+)'))}
  end
end
local function near(a, b) return math.abs(a - b) < 1e-6 end
local first = {}
for _, s in ipairs(spans) do
  if s.name == "1024 B" then first[#first + 1] = s end
end
kb.check(#first == 2, ("2 spans of the 1024 B message, got %d"):format(#first))
table.sort(first, function(a, b) return a.ts < b.ts end)
kb.check(first[1].row:match("%.pe0%->.*%.r0%.vc0$") and near(first[1].ts, 0) and
  near(first[1].dur, 13), ("first link: %s [%g, +%g)"):format(first[1].row, first[1].ts, first[1].dur))
kb.check(first[2].row:match("%.r0%->.*%.pe1%.vc0$") and near(first[2].ts, 1) and
  near(first[2].dur, 13), ("second link: %s [%g, +%g)"):format(first[2].row, first[2].ts, first[2].dur))
-- the link down to PE 1: the two 4 KiB messages on two VC rows, overlapping
local down = {}
for _, s in ipairs(spans) do
  if s.name == "4096 B" and s.row:match("%.r0%->.*%.pe1%.vc%d+$") then down[#down + 1] = s end
end
kb.check(#down == 2 and down[1].row ~= down[2].row,
  ("two 4096 B spans on two VC rows of the link to PE 1, got %d"):format(#down))
local a, b = down[1], down[2]
kb.check(a.ts < b.ts + b.dur and b.ts < a.ts + a.dur, "the two passes overlap (flits interleave)")
print(("flow_trace: %d link spans; %s [%g, %g) ns; %s and %s overlap"):format(#spans, first[1].row,
  first[1].ts, first[1].ts + first[1].dur, a.row, b.row))
print("flow_trace ok")
