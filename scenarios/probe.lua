-- probe.lua — PE-to-PE DMA latencies and contention on the default system,
-- beside the original model's measurements (docs/probe.md explains each row)
--   kbsim scenarios/probe.lua [bytes=16384]      (kbsim scenarios/probe.lua --help)
local kb = require("kbsim")

local bytes = kb.params({
  bytes = {default = 16384, type = "bytes", min = 1, help = "bytes a copy"},
}, {about = "PE-to-PE DMA latencies and contention beside the original model's measurements",
    grid_only = "the probe's cases name SIPs, cubes and PEs of a grid system"}).bytes

-- Runs copies that start together (a list of {src, dst} ranks, TCM to TCM,
-- each by its source PE's DMA) in a fresh system; returns the time the
-- last one ends and the closed form of the first one alone.
local function probe(pairs_)
  local sim = kb.sim()
  local sys = kb.system(sim)
  local last, formula = 0, nil
  for i, p in ipairs(pairs_) do
    sim:spawn("copy" .. i, function()
      local t, f = sys:dma(p[1], p[2], bytes, {dst_addr = i * bytes})
      formula = formula or f
      if t > last then last = t end
    end)
  end
  sim:run()
  return last, formula, sys
end

local sys = kb.system(kb.sim())
local n = sys:counts()
local cubes_per_sip, pes_per_cube = n.cubes // n.sips, n.pes // n.cubes
-- the cases are the original's: PEs 0..7 of a cube, cubes 0..15 of a 4x4
-- SIP, a second SIP
if n.sips < 2 or cubes_per_sip ~= 16 or pes_per_cube < 8 then
  io.stderr:write(("probe: the cases need 2 or more SIPs of 16 cubes (4x4) with 8 or more PEs "
    .. "each; this system has %d SIPs of %d cubes with %d PEs\n"):format(n.sips, cubes_per_sip,
    pes_per_cube))
  os.exit(2)
end
local function rank(name)
  -- "sipS.cubeC.peP" -> (S × cubes_per_sip + C) × pes_per_cube + P
  local s, c, p = name:match("^sip(%d+)%.cube(%d+)%.pe(%d+)$")
  return (tonumber(s) * cubes_per_sip + tonumber(c)) * pes_per_cube + tonumber(p)
end
local function hops(a, b) return sys:path(rank(a), rank(b)).hops end

local rows = {}
local function row(case, pairs_, original, route)
  local t, f = probe(pairs_)
  rows[#rows + 1] = {case = case, ns = t, formula = f, original = original, route = route}
end

local function copy(a, b) return {{rank(a), rank(b)}} end
row("local (same corner)", copy("sip0.cube0.pe0", "sip0.cube0.pe1"), 77,
    hops("sip0.cube0.pe0", "sip0.cube0.pe1"))
row("same cube, far corner", copy("sip0.cube0.pe0", "sip0.cube0.pe7"), nil,
    hops("sip0.cube0.pe0", "sip0.cube0.pe7"))
row("worst other cube", copy("sip0.cube0.pe0", "sip0.cube15.pe7"), 573,
    hops("sip0.cube0.pe0", "sip0.cube15.pe7"))
row("other SIP, next cube", copy("sip0.cube3.pe0", "sip1.cube0.pe0"), 409,
    hops("sip0.cube3.pe0", "sip1.cube0.pe0"))
row("other SIP, same cube", copy("sip0.cube0.pe0", "sip1.cube0.pe0"), nil,
    hops("sip0.cube0.pe0", "sip1.cube0.pe0"))
-- n PEs of one cube write into one target PE at the same time
local target = rank("sip0.cube0.pe0")
for n, original in ipairs({82, 158, 230}) do
  local p = {}
  for i = 1, n do p[i] = {target + i, target} end
  row(string.format("%d into one", n), p, original, nil)
end
-- the 8 PEs of cube 0 each write to the same PE of cube 1: all cross
-- cube 0's E port, one UCIe link
local p = {}
for i = 0, 7 do p[#p + 1] = {rank("sip0.cube0.pe" .. i), rank("sip0.cube1.pe" .. i)} end
row("8 over one UCIe port", p, 963, nil)

print(string.format("PE-to-PE DMA, TCM to TCM, %d bytes a copy (%s)", bytes,
  kb.options.topology and ("topology " .. kb.options.topology) or "default topology"))
print(string.format("%-24s %5s %10s %12s %12s", "case", "hops", "kbsim_ns", "formula_ns",
                    "original_ns"))
for _, r in ipairs(rows) do
  print(string.format("%-24s %5s %10.1f %12.1f %12s", r.case, r.route or "-", r.ns, r.formula,
                      r.original and string.format("%d", r.original) or "-"))
end

-- self-checks: a lone copy takes its closed form; n copies into one PE
-- serialise on its input link; the UCIe port is the bottleneck of 8
for _, r in ipairs(rows) do
  if r.case:find("^1 into") or not r.case:find("into") and not r.case:find("over") then
    kb.check(math.abs(r.ns - r.formula) < 1e-6, r.case .. ": lone copy = closed form")
  end
end
kb.check(rows[7].ns > rows[6].ns and rows[8].ns > rows[7].ns, "contention grows")
kb.check(rows[9].ns > rows[4].ns, "8 over one port take longer than one")
