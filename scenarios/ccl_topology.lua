-- ccl_topology.lua — all-reduce algorithms on 2-D and 3-D torus graphs: rank order against topology-aware orders, and what `auto` picks
--
--   kbsim scenarios/ccl_topology.lua [tori=torus_4x4x4] [sizes=256,64KiB]   (-o DIR)
--
-- Every PE of a torus graph (x fastest: PE i at x = i % dx, ...) links to
-- its neighbours in every dimension, both ways, with wrap-around. Link:
-- 512 GB/s (a 4-connection UCIe port of 128 GB/s each) and 16 ns (two
-- UCIe port overheads of 8 ns), as configs/topology.yaml's SIP links.
-- Each point all-reduces f32 tiles of one size with one algorithm and
-- checks the sums; the CSV keeps the latency, the bus bandwidth and the
-- algorithm's Hockney estimate with α, β measured on the routes it uses
-- (the estimate auto.lua compares). docs/collectives.md reads the output.
local kb = require("kbsim")
local results = require("kbsim.results")

local ALL_TORI = {torus_8x8 = {8, 8}, torus_4x4x4 = {4, 4, 4}}
local P = kb.params({
  tori = {default = {"torus_8x8", "torus_4x4x4"}, type = "string", list = true,
          choices = {"torus_8x8", "torus_4x4x4"}, help = "the torus graphs to run"},
  sizes = {default = {256, 4096, 16384, 65536, 262144, 1048576}, type = "bytes", list = true,
           min = 4, help = "bytes per rank (f32: a multiple of 4)"},
}, {about = "all-reduce algorithms on 2-D and 3-D torus graphs, and what auto picks",
     refuse_topology = "the scenario builds its own torus graphs (links of 512 GB/s, 16 ns)"})
local TORI = {}
for _, name in ipairs(P.tori) do TORI[#TORI + 1] = {name = name, dims = ALL_TORI[name]} end
local ALGS = {"ring_rs_ag_allreduce", "snake_ring_allreduce", "torus_allreduce", "rhd_allreduce",
              "tree_allreduce", "dbtree_allreduce", "auto"}
local SIZES = P.sizes

local points = {}
for _, t in ipairs(TORI) do
  for _, alg in ipairs(ALGS) do
    for _, bytes in ipairs(SIZES) do
      points[#points + 1] = {topo = t.name, dims = t.dims, algorithm = alg, bytes = bytes}
    end
  end
end

local rows = kb.sweep{name = "ccl_topology", points = points, run = function(p)
  local T = require("kbsim.torch")
  local grid = require("kbsim.ccl.lib.grid")
  local N = 1
  for _, d in ipairs(p.dims) do N = N * d end
  local g = {nodes = {}, links = {}}
  for i = 0, N - 1 do g.nodes[i + 1] = {name = "p" .. i, pe = true} end
  for i = 0, N - 1 do
    local c = grid.coords(i, p.dims)
    for k, d in ipairs(p.dims) do
      if d > 2 or (d == 2 and c[k] == 0) then -- a pair of 2 links once
        local nc = {table.unpack(c)}
        nc[k] = (c[k] + 1) % d
        g.links[#g.links + 1] = {from = "p" .. i, to = "p" .. grid.index(nc, p.dims),
          bandwidth_gbps = 512, latency_ns = 16, bidirectional = true}
      end
    end
  end
  local torch = T.init{topology = g, timing_only = p.bytes > 65536}
  torch.distributed.init_process_group{config = {ccl = {algorithm = p.algorithm, dtype = "f32"}}}
  local n = p.bytes // 4
  local t = torch.zeros({1, N * n}, {dtype = "f32"})
  local rep = torch.distributed.all_reduce(t, {dims = p.dims, check = p.bytes <= 65536})
  kb.check(rep.check ~= "failed", ("%s %s %d B: sums wrong"):format(p.topo, p.algorithm, p.bytes))
  return {topology = p.topo, algorithm = p.algorithm, bytes = p.bytes,
          latency_ns = rep.latency_ns, busbw_gbps = rep.busbw_gbps, check = rep.check,
          chosen = rep.chosen or ""}
end}

local out = kb.outdir()
local csv = results.csv(out .. "/ccl_topology.csv", rows,
  {"topology", "algorithm", "bytes", "latency_ns", "busbw_gbps", "check", "chosen"})
local entries = {{path = csv, about = "one row per torus, algorithm and size: latency (ns), bus "
  .. "bandwidth (GB/s), the value check (skipped above 64 KiB: timing only) and, for auto, "
  .. "the algorithm it chose"}}

-- the console table: latency per algorithm, one column per size
local by = {}
for _, r in ipairs(rows) do by[r.topology .. " " .. r.algorithm .. " " .. r.bytes] = r end
for _, t in ipairs(TORI) do
  local hdr = {("%-22s"):format(t.name)}
  for _, b in ipairs(SIZES) do hdr[#hdr + 1] = ("%12s"):format(b .. " B") end
  print(table.concat(hdr))
  for _, alg in ipairs(ALGS) do
    local line = {("%-22s"):format(alg)}
    for _, b in ipairs(SIZES) do
      local r = by[t.name .. " " .. alg .. " " .. b]
      line[#line + 1] = r and ("%12.1f"):format(r.latency_ns) or ("%12s"):format("-")
    end
    print(table.concat(line))
  end
  local chose = {}
  for _, b in ipairs(SIZES) do
    local r = by[t.name .. " auto " .. b]
    chose[#chose + 1] = r and (b .. " B: " .. r.chosen) or (b .. " B: -")
  end
  print("auto chose  " .. table.concat(chose, ", "))
  -- what auto ran against the fastest algorithm measured, per size
  local ratios = {}
  for _, b in ipairs(SIZES) do
    local au, best = by[t.name .. " auto " .. b], math.huge
    for _, alg in ipairs(ALGS) do
      local r = by[t.name .. " " .. alg .. " " .. b]
      if alg ~= "auto" and r and r.latency_ns < best then best = r.latency_ns end
    end
    if au and best < math.huge then
      ratios[#ratios + 1] = ("%.3f"):format(au.latency_ns / best)
      kb.check(au.latency_ns <= 1.10 * best, ("%s %d B: auto took %.1f ns, the fastest %.1f ns")
        :format(t.name, b, au.latency_ns, best))
    end
  end
  print("auto / fastest measured: " .. table.concat(ratios, ", "))
  local ring = by[t.name .. " ring_rs_ag_allreduce 1048576"]
  local snake = by[t.name .. " snake_ring_allreduce 1048576"]
  if ring and snake then
    print(("rank-order ring / snake ring at 1 MiB: %.2f"):format(ring.latency_ns / snake.latency_ns))
  end
  print("")
  local sub = {}
  for _, r in ipairs(rows) do if r.topology == t.name then sub[#sub + 1] = r end end
  local tcsv = results.csv(out .. "/" .. t.name .. ".csv", sub,
    {"algorithm", "bytes", "latency_ns", "busbw_gbps"})
  if #sub > 0 then
    local fig = results.figure{name = t.name, csv = tcsv, x = "bytes", y = "latency_ns",
      series = "algorithm", title = "all-reduce on a " .. t.name:gsub("_", " "),
      xlabel = "bytes per rank", ylabel = "latency (ns)", logx = 2, logy = 10}
    entries[#entries + 1] = {figure = fig, about = "latency against size on the "
      .. t.name .. ", one line per algorithm"}
  end
end
results.index(out, entries)
