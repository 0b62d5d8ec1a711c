-- milestone_1h_gemm.lua — the 1H GEMM milestone: GEMM shapes x operand stagings
-- through a five-stage tile pipeline on one PE, with per-stage and per-engine
-- busy times, occupancy, achieved against peak FLOP/s, and a host check
--
--   kbsim scenarios/milestone_1h_gemm.lua [shapes=64,512,32x3072x32,...]
--                                         [stagings=ref_ref,load_ref,load_load]
--                                         [depth=2] [accumulate=math|gemm]
--
-- A shape is MxKxN: C (M×N) = A (M×K) · B (K×N); a single number n is the
-- square n×n×n. depth is the capacity of the fifos between stages (2: double
-- buffering). accumulate says where the sum over K's depth tiles happens:
-- math (the default: PE_MATH adds each f32 partial) or gemm (the MAC array
-- accumulates in place, PE_MATH only does the epilogue). Writes to the output folder (-o, default out/milestone_1h_gemm):
--   gemm.csv      one row per shape and staging: window, per-stage busy and
--                 occupancy, achieved and peak TFLOP/s, the check
--   engines.csv   per-engine busy time and occupancy (tidy: one row per engine)
--   gemm.json     every row of both, with the parameters
--   window.gp, occupancy.gp, flops.gp (and .svg/.png with gnuplot), index.md
-- The pipeline and its formulas are described in docs/milestone_gemm.md.
-- Every point compares C with a host matmul; a failed check makes kbsim exit 1.
local kb = require("kbsim")
local results = require("kbsim.results")

-- ---- parameters (script arguments: key=value) --------------------------

local P = kb.params({
  shapes = {default = {"64", "128", "256", "512", "32x3072x32", "64x4096x64", "32x8192x32",
                       "128x2048x128"}, type = "string", list = true,
            help = "GEMM shapes: n (n x n x n) or MxKxN"},
  stagings = {default = {"ref_ref", "load_ref", "load_load"}, type = "string", list = true,
              choices = {"ref_ref", "load_ref", "load_load"}, help = "operand stagings"},
  depth = {default = 2, type = "integer", min = 1, help = "fifo capacity between stages"},
  accumulate = {default = "math", type = "string", choices = {"math", "gemm"},
                help = "where the sum over K's tiles happens"},
}, {about = "the 1H GEMM milestone: GEMM shapes x operand stagings through the tile pipeline",
    grid_only = "the operands are staged from the PE's HBM, and a graph's PEs have none"})
local SHAPES, STAGINGS, DEPTH, ACCUMULATE = P.shapes, P.stagings, P.depth, P.accumulate

-- Inputs are multiples of 1/8 in [-0.5, 1.5] (exact in f16) with a positive
-- mean, so C's values reach the thousands and its rounding to f16 is
-- exercised; every product is a multiple of 1/64 below 2.25 and every partial
-- sum over K <= 8192 below 2^15: 21 bits, exact in f32. The only error left
-- is C's rounding to f16, at most half an ulp: a relative 2^-11.
local TOLERANCE = 2 ^ -11

local function usage(msg)
  io.stderr:write("milestone_1h_gemm: " .. msg .. "\n")
  os.exit(2)
end

-- "n" -> n, n, n; "MxKxN" -> M, K, N
local function parse_shape(s)
  local n = math.tointeger(tonumber(s))
  if n then
    if n < 1 then usage(("shape '%s': sizes must be positive"):format(s)) end
    return {label = ("%dx%dx%d"):format(n, n, n), M = n, K = n, N = n}
  end
  local m, k, nn = s:match("^(%d+)x(%d+)x(%d+)$")
  m, k, nn = math.tointeger(tonumber(m)), math.tointeger(tonumber(k)), math.tointeger(tonumber(nn))
  if not (m and k and nn) or m < 1 or k < 1 or nn < 1 then
    usage(("shape '%s' is not n or MxKxN with positive integers"):format(s))
  end
  if k > 8192 then usage(("shape '%s': K above 8192 breaks the exact f32 sums of the check"):format(s)) end
  return {label = s, M = m, K = k, N = nn}
end

local shapes = {}
for _, s in ipairs(SHAPES) do shapes[#shapes + 1] = parse_shape(s) end

local STAGES = {"dma_in", "fetch", "gemm", "math", "dma_wb"}
local ENGINES = {"pe_cpu", "pe_dma_read", "pe_dma_write", "tcm", "hbm", "pe_gemm", "pe_math"}

-- ---- one point: one shape, one staging, one PE ---------------------------

-- Runs in its own Lua state (kb.sweep): everything it needs is required
-- here or passed in p.
local function gemm_point(p)
  local tl = require("kbsim.tl")
  local sim <close> = kb.sim{}
  local sys = kb.system(sim)
  local RANK = 0
  local M, K, N = p.M, p.K, p.N
  local st0 = tl.pe_stats(sys, RANK)
  local TM, TN, TK = st0.gemm_tile_m, st0.gemm_tile_n, st0.gemm_tile_k
  local DISPATCH = st0.cpu_dispatch_ps

  -- Inputs, and the reference computed before the run from the same values.
  local a = tl.vec_affine(M * K, 7, 3):mod(17):add(-4):scale(1 / 8):round("f16")
  local b = tl.vec_affine(K * N, 5, 1):mod(13):add(-3):scale(1 / 8):round("f16")
  local want = tl.vec_matmul(a, b, M, K, N):tile(M, N, TM, TN)

  -- In HBM, A, B and C are kept tile by tile (vec:tile), so each tile is one
  -- contiguous DMA: A in TM×TK tiles, B in TK×TN, C in TM×TN.
  local function place(v, rows, cols, tr, tc)
    local addr = tl.alloc(sys, RANK, "hbm", rows * cols * 2)
    if v then v:tile(rows, cols, tr, tc):write(sys, RANK, addr, "f16", "hbm") end
    return {addr = addr, n = rows * cols,
            shard = function(self) return {addr = self.addr, n = self.n, kind = "hbm", dtype = "f16"} end}
  end
  local At, Bt, Ct = place(a, M, K, TM, TK), place(b, K, N, TK, TN), place(nil, M, N, TM, TN)

  -- Tile (ti, tj) of a rows×cols matrix in tr×tc tiles: its element offset
  -- (ti·tr·cols + h·tj·tc, h the height of its tile row), height and width.
  local function tile(ti, tj, rows, cols, tr, tc)
    local h, w = math.min(tr, rows - ti * tr), math.min(tc, cols - tj * tc)
    return ti * tr * cols + h * tj * tc, h, w
  end
  local nI, nJ, nK = (M + TM - 1) // TM, (N + TN - 1) // TN, (K + TK - 1) // TK

  -- Bookkeeping in integer ps: each stage's unit time (an op's time minus
  -- its PE_CPU dispatch, which is a fixed wait), ops, first start, last end.
  local busy, ops, first, last = {}, {}, {}, {}
  for s = 1, #STAGES do busy[s], ops[s] = 0, 0 end
  local function op(s, f, ...)
    local t0 = sim:now_ps()
    local r = f(...)
    local t1 = sim:now_ps()
    busy[s] = busy[s] + (t1 - t0 - DISPATCH)
    ops[s] = ops[s] + 1
    if not first[s] then first[s] = t0 end
    last[s] = t1
    return r
  end

  -- Tile descriptors until the end marker (false) of the stage before.
  local function each(q) return function() return q:read() or nil end end

  local staging = p.staging
  local kernel = function()
    local q = {}
    for s = 1, 4 do q[s] = sim:fifo("q" .. s, p.depth) end
    local done = sim:fifo("done", 1)
    -- DMA_IN: operands HBM -> TCM; whole matrices first where staged so.
    tl.spawn("dma_in", function()
      local Aall = staging ~= "ref_ref" and op(1, tl.load, At, 0, M * K) or nil
      local Ball = staging == "load_load" and op(1, tl.load, Bt, 0, K * N) or nil
      for i = 0, nI - 1 do
        for j = 0, nJ - 1 do
          for kk = 0, nK - 1 do
            local aoff, tm, tk = tile(i, kk, M, K, TM, TK)
            local boff, _, tn = tile(kk, j, K, N, TK, TN)
            local d = {i = i, j = j, kk = kk, tm = tm, tn = tn, tk = tk, last = kk == nK - 1}
            if Aall then d.a, d.a_off = Aall, aoff
            else d.a, d.a_off, d.free_a = op(1, tl.load, At, aoff, tm * tk), 0, true end
            if Ball then d.b, d.b_off = Ball, boff
            else d.b, d.b_off, d.free_b = op(1, tl.load, Bt, boff, tk * tn), 0, true end
            q[1]:write(d)
          end
        end
      end
      q[1]:write(false)
    end)
    -- FETCH: the tile's operand bytes from TCM into the engine's buffers.
    tl.spawn("fetch", function()
      for d in each(q[1]) do
        op(2, tl.fetch, d.a, d.a_off, d.tm * d.tk)
        op(2, tl.fetch, d.b, d.b_off, d.tk * d.tn)
        q[2]:write(d)
      end
      q[2]:write(false)
    end)
    -- GEMM: one depth tile's partial product, f32, on PE_GEMM (or, with
    -- accumulate=gemm, added in place to the C tile's running sum).
    local in_gemm = p.accumulate == "gemm"
    tl.spawn("gemm", function()
      local acc
      for d in each(q[2]) do
        if in_gemm then
          acc = op(3, tl.gemm_tile, d.kk > 0 and acc or nil, d.a, d.a_off, d.b, d.b_off, d.tm,
                   d.tn, d.tk, d.kk > 0)
          d.p = acc
        else
          d.p = op(3, tl.gemm_tile, nil, d.a, d.a_off, d.b, d.b_off, d.tm, d.tn, d.tk)
        end
        if d.free_a then tl.free(d.a) end
        if d.free_b then tl.free(d.b) end
        d.a, d.b = nil, nil
        if not in_gemm or d.last then q[3]:write(d) end
      end
      q[3]:write(false)
    end)
    -- MATH: K accumulation of the partials (f32), then the epilogue: C's
    -- tile rounded to f16.
    tl.spawn("math", function()
      local acc
      for d in each(q[3]) do
        if d.kk == 0 or in_gemm then acc = d.p
        else
          op(4, tl.accumulate, acc, d.p)
          tl.free(d.p)
        end
        d.p = nil
        if d.last then
          d.out = op(4, tl.cast, acc, "f16")
          tl.free(acc)
          q[4]:write(d)
        end
      end
      q[4]:write(false)
    end)
    -- DMA_WB: C's tile TCM -> HBM.
    tl.spawn("dma_wb", function()
      for d in each(q[4]) do
        local coff = tile(d.i, d.j, M, N, TM, TN)
        op(5, tl.store, Ct, coff, d.out)
        tl.free(d.out)
      end
      done:write(true)
    end)
    done:read() -- the kernel outlives its stages: their handles are its own
  end
  tl.launch(sys, {RANK}, kernel)
  local status = sim:run()
  if status ~= "done" then error(("%s %s: the run ended '%s'"):format(p.label, staging, status)) end

  local got = tl.vec_read(sys, RANK, Ct.addr, "f16", M * N, "hbm")
  local max_rel = got:max_rel_diff(want)

  local t_first, t_last = math.huge, 0
  for s = 1, #STAGES do
    if first[s] and first[s] < t_first then t_first = first[s] end
    if last[s] and last[s] > t_last then t_last = last[s] end
  end
  local window_ps = t_last - t_first
  local st = tl.pe_stats(sys, RANK)
  local gemm_ps, gemm_cycles, gemm_tiles = tl.gemm_time(sys, M, N, K, RANK)
  local flops = 2 * M * N * K
  local row = {
    shape = p.label, staging = staging, M = M, N = N, K = K, tiles = nI * nJ * nK,
    window_ps = window_ps, window_ns = window_ps / 1000,
    gemm_closed_ps = gemm_ps, gemm_closed_cycles = gemm_cycles, gemm_closed_tiles = gemm_tiles,
    achieved_tflops = flops / (window_ps / 1000) / 1000,
    peak_tflops = st.gemm_peak_flops / 1e12,
    max_rel_err = max_rel, check = max_rel <= p.tolerance and "passed" or "failed",
    stages = {}, engines = {},
  }
  row.efficiency = row.achieved_tflops / row.peak_tflops
  for s, name in ipairs(STAGES) do
    row.stages[name] = {busy_ps = busy[s], ops = ops[s], first_ps = first[s] or 0,
                        last_ps = last[s] or 0, occupancy = busy[s] / window_ps}
  end
  -- Memories count busy time per channel: occupancy is over all channels.
  local eng = {
    pe_cpu = {st.cpu_busy_ps, 1}, pe_dma_read = {st.dma_read_busy_ps, 1},
    pe_dma_write = {st.dma_write_busy_ps, 1}, tcm = {st.tcm_busy_ps, st.tcm_channels},
    hbm = {st.hbm_busy_ps, st.hbm_channels}, pe_gemm = {st.gemm_busy_ps, 1},
    pe_math = {st.math_busy_ps, 1},
  }
  for name, e in pairs(eng) do
    row.engines[name] = {busy_ps = e[1], channels = e[2], occupancy = e[1] / (window_ps * e[2])}
  end
  row.gemm_engine_cycles, row.gemm_engine_tiles = st.gemm_cycles, st.gemm_tiles
  return row
end

-- ---- the sweep -----------------------------------------------------------

local points = {}
for _, sh in ipairs(shapes) do
  for _, st in ipairs(STAGINGS) do
    points[#points + 1] = {label = sh.label, M = sh.M, K = sh.K, N = sh.N, staging = st,
                           depth = DEPTH, tolerance = TOLERANCE, accumulate = ACCUMULATE}
  end
end
local t_sweep = kb.clock()
local rows, summary = kb.sweep{name = "gemm", points = points, run = gemm_point}
t_sweep = kb.clock() - t_sweep

local out, eout = {}, {}
for _, r in ipairs(rows) do
  kb.check(r.check == "passed", ("%s %s: C against the host matmul, max relative error %g "
    .. "(tolerance %g)"):format(r.shape, r.staging, r.max_rel_err, TOLERANCE))
  -- the GEMM stage holds PE_GEMM alone: its busy time is kb_gemm's closed form
  kb.check(r.stages.gemm.busy_ps == r.gemm_closed_ps, ("%s %s: GEMM stage busy %d ps, closed "
    .. "form %d ps"):format(r.shape, r.staging, r.stages.gemm.busy_ps, r.gemm_closed_ps))
  -- every tile of kb_gemm's tiling went through the engine, and nothing else
  kb.check(r.gemm_engine_cycles == r.gemm_closed_cycles and r.gemm_engine_tiles == r.gemm_closed_tiles,
    ("%s %s: PE_GEMM did %d cycles in %d tiles, closed form %d in %d"):format(r.shape, r.staging,
      r.gemm_engine_cycles, r.gemm_engine_tiles, r.gemm_closed_cycles, r.gemm_closed_tiles))
  local o = {shape = r.shape, staging = r.staging, M = r.M, N = r.N, K = r.K, tiles = r.tiles,
             window_ns = r.window_ns, gemm_closed_ns = r.gemm_closed_ps / 1000}
  for _, s in ipairs(STAGES) do
    o[s .. "_busy_ns"] = r.stages[s].busy_ps / 1000
    o[s .. "_occupancy"] = r.stages[s].occupancy
  end
  o.achieved_tflops, o.peak_tflops, o.efficiency = r.achieved_tflops, r.peak_tflops, r.efficiency
  o.max_rel_err, o.check = r.max_rel_err, r.check
  out[#out + 1] = o
  for _, e in ipairs(ENGINES) do
    local x = r.engines[e]
    eout[#eout + 1] = {shape = r.shape, staging = r.staging, engine = e, busy_ns = x.busy_ps / 1000,
                       channels = x.channels, occupancy = x.occupancy, window_ns = r.window_ns}
  end
end

local COLUMNS = {"shape", "staging", "M", "N", "K", "tiles", "window_ns", "gemm_closed_ns"}
for _, s in ipairs(STAGES) do COLUMNS[#COLUMNS + 1] = s .. "_busy_ns" end
for _, s in ipairs(STAGES) do COLUMNS[#COLUMNS + 1] = s .. "_occupancy" end
for _, c in ipairs{"achieved_tflops", "peak_tflops", "efficiency", "max_rel_err", "check"} do
  COLUMNS[#COLUMNS + 1] = c
end
local gemm_csv = results.csv(results.path("gemm.csv"), out, COLUMNS)
local engines_csv = results.csv(results.path("engines.csv"), eout,
  {"shape", "staging", "engine", "busy_ns", "channels", "occupancy", "window_ns"})
local gemm_json = results.json(results.path("gemm.json"), {
  scenario = "milestone_1h_gemm", kbsim = kb.version,
  parameters = {shapes = SHAPES, stagings = STAGINGS, depth = DEPTH, tolerance = TOLERANCE,
                accumulate = ACCUMULATE,
                stages = STAGES, engines = ENGINES},
  points = rows,
})

-- ---- figures: clustered bars, one cluster per shape ------------------------

local function gp_str(s) return '"' .. tostring(s):gsub('[\\"]', "\\%0") .. '"' end

-- bars{name=, title=, ylabel=, csv=, panels={{title=, cols={...}, rows={{label, v1, ...}}}},
--      logy=, hline={title=, value=}} -> a figure for results.index
local function bars(spec)
  local dir = kb.outdir()
  local blocks, plots = {}, {}
  for pi, panel in ipairs(spec.panels) do
    local lines = {("$d%d << EOD"):format(pi)}
    for _, r in ipairs(panel.rows) do
      local f = {gp_str(r[1])}
      for i = 2, #r do f[#f + 1] = ("%.10g"):format(r[i]) end
      lines[#lines + 1] = table.concat(f, " ")
    end
    lines[#lines + 1] = "EOD"
    blocks[#blocks + 1] = table.concat(lines, "\n")
    local parts = {}
    for ci, c in ipairs(panel.cols) do
      -- a reference column (the last, when panel.ref) is drawn gray and hatched
      local style = (panel.ref and ci == #panel.cols) and "lc rgb \"gray30\" fs pattern 4"
        or ("lc %d"):format(ci)
      parts[#parts + 1] = ("$d%d using %d:xtic(1) title %s %s"):format(pi, ci + 1, gp_str(c), style)
    end
    if spec.hline then
      parts[#parts + 1] = ("%.10g with lines lc rgb \"black\" dt 2 lw 2 title %s")
        :format(spec.hline.value, gp_str(spec.hline.title))
    end
    plots[#plots + 1] = (panel.title and ("set title %s\n"):format(gp_str(panel.title)) or "")
      .. "plot " .. table.concat(parts, ", ")
  end
  local multi = #spec.panels > 1
  local h = multi and 360 * #spec.panels or 500
  local body = {
    "set termoption noenhanced",
    "set style data histograms", "set style histogram clustered gap 1",
    "set style fill solid 0.85 border -1", "set boxwidth 0.9",
    "set xtics rotate by -30", "set grid ytics", "set key outside right top",
    ("set ylabel %s"):format(gp_str(spec.ylabel)),
    spec.logy and "set logscale y\nset format y \"%g\"" or "set yrange [0:*]",
    multi and ("set multiplot layout %d,1 title %s"):format(#spec.panels, gp_str(spec.title))
      or ("set title %s"):format(gp_str(spec.title)),
    table.concat(plots, "\n"),
    multi and "unset multiplot" or "",
  }
  local gp = table.concat({
    ("# %s.gp — %s (kbsim %s). Redraw: gnuplot %s.gp"):format(spec.name, spec.title, kb.version,
      spec.name),
    ("if (!exists(\"out\")) out = %s"):format(gp_str(spec.name)),
    table.concat(blocks, "\n"),
    ("set terminal svg size 1000,%d dynamic noenhanced font \"sans,11\" background \"white\""):format(h),
    "set output out.\".svg\"",
    table.concat(body, "\n"),
    "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {",
    ("  set terminal pngcairo size 1200,%d noenhanced font \"sans,10\""):format(math.floor(h * 1.2)),
    "} else {",
    ("  set terminal png size 1200,%d noenhanced"):format(math.floor(h * 1.2)),
    "}",
    "set output out.\".png\"",
    table.concat(body, "\n"),
    "set output", "",
  }, "\n")
  local gppath = dir .. "/" .. spec.name .. ".gp"
  local f = assert(io.open(gppath .. ".tmp", "w"))
  f:write(gp)
  f:close()
  assert(os.rename(gppath .. ".tmp", gppath))
  local fig = {name = spec.name, title = spec.title, csv = spec.csv, gp = gppath,
               svg = dir .. "/" .. spec.name .. ".svg", png = dir .. "/" .. spec.name .. ".png",
               rendered = false}
  return results.render(fig) -- in the background: the run waits for it at the end
end

-- rows of out for a shape and staging, in sweep order
local by = {}
for _, o in ipairs(out) do by[o.shape .. "/" .. o.staging] = o end
local labels = {}
for _, sh in ipairs(shapes) do labels[#labels + 1] = sh.label end

local function per_shape(field)
  local rs = {}
  for _, l in ipairs(labels) do
    local r = {l}
    for _, st in ipairs(STAGINGS) do
      local o = by[l .. "/" .. st]
      r[#r + 1] = o and o[field] or 0
    end
    rs[#rs + 1] = r
  end
  return rs
end

-- No figure when no point finished: nothing to draw (the failures are
-- reported and kbsim exits 1).
local wfig, ofig, ffig
if #out > 0 then
  local window_rows = per_shape("window_ns")
  local wcols = {}
  for _, st in ipairs(STAGINGS) do wcols[#wcols + 1] = st end
  -- the GEMM engine alone, a lower bound on every window
  wcols[#wcols + 1] = "PE_GEMM closed form"
  for i, l in ipairs(labels) do
    local o = by[l .. "/" .. STAGINGS[1]]
    window_rows[i][#window_rows[i] + 1] = o and o.gemm_closed_ns or 0
  end
  wfig = bars{name = "window", csv = gemm_csv, logy = true, ylabel = "composite window (ns)",
    title = "GEMM composite window per shape (MxKxN) and operand staging",
    panels = {{cols = wcols, rows = window_rows, ref = true}}}

  local opanels = {}
  for _, st in ipairs(STAGINGS) do
    local rs = {}
    for _, l in ipairs(labels) do
      local o = by[l .. "/" .. st]
      if o then
        local r = {l}
        for _, s in ipairs(STAGES) do r[#r + 1] = o[s .. "_occupancy"] end
        rs[#rs + 1] = r
      end
    end
    opanels[#opanels + 1] = {title = "staging " .. st, cols = STAGES, rows = rs}
  end
  ofig = bars{name = "occupancy", csv = gemm_csv, ylabel = "busy / window",
    title = "Stage occupancy per shape (MxKxN), one panel per staging", panels = opanels}

  local peak = out[1] and out[1].peak_tflops or 0
  ffig = bars{name = "flops", csv = gemm_csv, ylabel = "TFLOP/s",
    title = "Achieved GEMM throughput (2MNK / window) against the PE_GEMM peak",
    panels = {{cols = STAGINGS, rows = per_shape("achieved_tflops")}},
    hline = {title = ("PE_GEMM peak %.4g TFLOP/s"):format(peak), value = peak}}
end

local entries = {
  {path = gemm_csv, about = "one row per shape and staging: composite window (first stage start "
    .. "to last stage end), each stage's unit time (busy_ns, dispatch excluded) and busy / window, "
    .. "achieved = 2MNK / window against the PE_GEMM peak, and the check against the host matmul "
    .. "(max relative error, tolerance 2^-11 from C's rounding to f16)"},
  {path = engines_csv, about = "per engine (PE_CPU, PE_DMA read and write channels, TCM, HBM, "
    .. "PE_GEMM, PE_MATH): busy time from the unit's counters and busy / (window x channels)"},
  {path = gemm_json, about = "everything above in one file, with integer-ps times, op counts, "
    .. "each stage's first start and last end, and the parameters"},
}
if #out > 0 then
  entries[#entries + 1] = {figure = wfig, about = "bars per shape, one per staging (log y); the "
    .. "last bar is PE_GEMM's closed-form time, the floor no staging can beat."}
  entries[#entries + 1] = {figure = ofig, about = "for each staging, the share of the window "
    .. "each stage's unit was busy: the tallest bar is the bottleneck."}
  entries[#entries + 1] = {figure = ffig, about = "achieved TFLOP/s per shape and staging; the "
    .. "dashed line is the MAC array's peak (2 x 16 x 16 x 16 FLOP per cycle)."}
end
results.index(kb.outdir(), entries, "Milestone 1H: GEMM tile pipeline")

-- ---- the console table ---------------------------------------------------

print(("%-14s %-9s %12s %9s %9s %9s %9s %9s %8s %8s"):format("shape", "staging", "window_ns",
  "dma_in", "fetch", "gemm", "math", "dma_wb", "TFLOP/s", "eff"))
for _, o in ipairs(out) do
  print(("%-14s %-9s %12.1f %9.3f %9.3f %9.3f %9.3f %9.3f %8.3f %8.3f"):format(o.shape, o.staging,
    o.window_ns, o.dma_in_occupancy, o.fetch_occupancy, o.gemm_occupancy, o.math_occupancy,
    o.dma_wb_occupancy, o.achieved_tflops, o.efficiency))
end
print(("%s (sweep %.2f s wall), %s; results in %s/index.md"):format(
  results.ran(summary, "points"), t_sweep, results.verdict{summary}, kb.outdir()))
