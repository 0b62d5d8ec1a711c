-- Figures drawn in the background (lua/lrender.h; tests/cli/figures_background.sh):
-- six figures, `latency` drawn twice (the second waits for the first: same
-- files), optionally one gnuplot cannot draw (`broken`: an undefined
-- function) between them. After the first figure the script touches
-- `go`, which the test's slow gnuplot waits for: results.figure must
-- return before gnuplot has ended, and kbsim must wait for it at exit.
--   kbsim figures_background.lua [broken=0|1] [wait=0|1] [go=FILE]
local kb = require("kbsim")
local results = require("kbsim.results")
local P = kb.params({broken = {default = 0, type = "integer", min = 0, help = "draw a failing figure"},
                     wait = {default = 0, type = "integer", min = 0, help = "results.wait_figures at the end"},
                     go = {default = "", type = "string", help = "file to create once the first figure is started"}},
  {about = "figures drawn in the background"})
local out = kb.outdir()
local rows = {}
for _, topo in ipairs{"ring_1d", "torus_2d", "mesh_2d"} do
  for k = 0, 7 do
    local bytes = 1024 << k
    rows[#rows + 1] = {topology = topo, bytes = bytes, latency_ns = 1000 + bytes / (#topo - 4)}
  end
end
local csv = results.csv(out .. "/latency.csv", rows, {"topology", "bytes", "latency_ns"})
local figs = {}
local function figure(name, extra)
  local spec = {name = name, csv = csv, x = "bytes", y = "latency_ns", series = "topology",
                title = "figure " .. name, logx = 2}
  for k, v in pairs(extra or {}) do spec[k] = v end
  figs[#figs + 1] = results.figure(spec)
end
figure("latency")
-- the first figure's gnuplot (in the test) waits for this file
if P.go ~= "" then assert(io.open(P.go, "w")):close() end
figure("loglog", {logy = true})
if P.broken == 1 then
  figure("broken", {refs = {{title = "no such function", fn = "nosuchfunction(x)"}}})
end
figure("ref", {refs = {{title = "analytic", fn = "1000 + x/2.5"}}})
figure("points", {refs = {{title = "external", points = {{4096, 3000}, {65536, 30000}}}}})
figure("latency", {title = "latency again"})
local entries = {}
for _, f in ipairs(figs) do
  kb.check(f.rendered, "figure " .. f.name .. " is being rendered")
  entries[#entries + 1] = {figure = f, about = f.title}
end
results.index(out, entries, "figures in the background")
if P.wait == 1 then
  results.wait_figures()
  local svg = io.open(out .. "/loglog.svg")
  kb.check(svg ~= nil, "drawn once wait_figures returns")
  if svg then svg:close() end
end
print("figures started: " .. #figs)
