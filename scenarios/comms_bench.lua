-- comms_bench.lua — PARAM / nccl-tests style collective benchmark: a size sweep per collective, the sigmoid performance-model fit and the α-β / LogGP predictions beside the simulation
--
--   kbsim [-j N] [--topology FILE] [--set K=V] scenarios/comms_bench.lua
--         [collectives=all_reduce,all_gather,...] [min=4] [max=64MiB] [ws=8]
--         [algorithm=ring_rs_ag_allreduce] [check_max=1MiB] [param=FILE]
--
-- Simulated mode (default): for every collective and every size 4 B x 2^k
-- from min to max, one kb.sweep point builds the system, a process group of
-- ranks 0..ws-1 and runs the collective once. Sizes follow PARAM's size (B)
-- column: the buffer per rank for all_reduce and broadcast, the gathered
-- output for all_gather, the input for reduce_scatter and all_to_all. Sizes
-- up to check_max write known f32 inputs and check every rank's output on
-- host vectors; larger ones run on a timing-only system (no payload bytes
-- move, so a point needs no copy of the data) with check=false.
--
-- PARAM mode (param=FILE): the rows of a PARAM COMMS-RES results file take
-- the place of the simulation; the same tables, figures and fit follow.
--
-- Writes to the output folder (-o, default out/comms_bench); index.md lists
-- every file with a line on how to read it (docs/comms_bench.md).
local kb = require("kbsim")
local results = require("kbsim.results")
local pm = require("kbsim.perfmodel")
local pr = require("kbsim.param_results")
local an = require("kbsim.analytic")

-- ---- parameters (script arguments: key=value) ----------------------------

local KNOWN = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"}

local function usage_error(fmt, ...)
  io.stderr:write("comms_bench: ", fmt:format(...), "\n")
  os.exit(2)
end

local opt = kb.params({
  collectives = {default = KNOWN, type = "string", list = true, choices = KNOWN,
                 help = "collectives to run"},
  min = {default = 4, type = "bytes", min = 1, help = "smallest size"},
  max = {default = 64 * 1024 * 1024, type = "bytes", min = 1, help = "largest size"},
  ws = {default = 8, type = "integer", min = 2, help = "ranks"},
  algorithm = {default = "ring_rs_ag_allreduce", type = "string",
               help = "all-reduce algorithm (ccl.yaml's names)"},
  check_max = {default = 1024 * 1024, type = "bytes", min = 1,
               help = "sizes up to this one check their outputs; larger ones are timing-only"},
  param = {default = "", type = "string",
           help = "a PARAM COMMS-RES results file to read instead of simulating"},
}, {about = "PARAM / nccl-tests style collective benchmark, performance-model fit, predictions",
    check = function(p)
      if p.min > p.max then return ("min %d B is above max %d B"):format(p.min, p.max) end
      if p.param ~= "" and kb.options.topology then
        return ("--topology %s is not used with param=: the rows are measured, not simulated")
          :format(kb.options.topology)
      end
    end})
if opt.param == "" then opt.param = nil end

local ELT = 4 -- f32: every partial sum of the small integer inputs below is exact

-- ---- one simulated point ---------------------------------------------------

-- Working set in TCM per PE (the algorithms free what they have used,
-- tests/cli/cases/ccl_working_set.lua): the bandwidth-optimal all-reduce
-- loads its whole tile and holds a chunk or two beside it, the others
-- hold up to three tiles; the N-way collectives hold a few chunks of size/N.
-- Sizes of many MiB outgrow the 16 MiB default. Capacity is not a timing
-- parameter; raising it lets the sweep reach PARAM's sizes.
local function tcm_needed(p)
  local live = p.size
  if p.collective == "all_reduce" then
    live = p.algorithm == "ring_rs_ag_allreduce" and p.size + 2 * (p.size // p.ws) or 3 * p.size
  end
  return live + (1 << 20)
end

-- Runs in its own Lua state (kb.sweep): everything comes from p or require.
local function bench_point(p)
  local T = require("kbsim.torch")
  local tl = require("kbsim.tl")
  if p.tcm_capacity then kb.options.set["pe.tcm.capacity"] = tostring(p.tcm_capacity) end
  local torch = T.init{timing_only = not p.checked}
  local D = torch.distributed
  D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = p.algorithm, dtype = "f32",
    algorithms = {[p.algorithm] = {world_size = p.ws}}}}}
  local ranks = D.get_ranks()
  local N = #ranks
  local n = p.size // ELT -- elements of the buffer PARAM's size counts
  local C = n // N        -- chunk per rank for the N-way collectives
  local o = {check = false} -- checks are ours, on host vectors
  -- inputs: element i of rank k is (i mod 64) + 100 k (+1 for broadcast's
  -- source so that zeros elsewhere cannot pass); sums stay exact in f32
  local function input(len, k) return tl.vec_affine(len, 1, 0):mod(64):add(100 * k) end
  local rep, worst = nil, 0
  local function expect(t, r, want)
    local e = t:shard_vec(r):slice(0, #want):max_abs_diff(want)
    if e > worst then worst = e end
  end
  if p.collective == "all_reduce" then
    local t = torch.zeros({1, N * n})
    if p.checked then for k, r in ipairs(ranks) do t:shard_write_vec(r, input(n, k - 1)) end end
    rep = D.all_reduce(t, o)
    if p.checked then
      local want = tl.vec_affine(n, 1, 0):mod(64):scale(N):add(100 * N * (N - 1) / 2)
      for _, r in ipairs(ranks) do expect(t, r, want) end
    end
  elseif p.collective == "all_gather" then
    local inp, out = torch.zeros({1, N * C}), torch.zeros({1, N * N * C})
    if p.checked then for k, r in ipairs(ranks) do inp:shard_write_vec(r, input(C, k - 1)) end end
    rep = D.all_gather(out, inp, o)
    if p.checked then
      local want = tl.vec_new(N * C)
      for k = 1, N do want:set((k - 1) * C, input(C, k - 1)) end
      for _, r in ipairs(ranks) do expect(out, r, want) end
    end
  elseif p.collective == "reduce_scatter" then
    local inp, out = torch.zeros({1, N * N * C}), torch.zeros({1, N * C})
    if p.checked then
      for k, r in ipairs(ranks) do inp:shard_write_vec(r, input(N * C, k - 1)) end
    end
    rep = D.reduce_scatter(out, inp, o)
    if p.checked then
      local sum = tl.vec_affine(N * C, 1, 0):mod(64):scale(N):add(100 * N * (N - 1) / 2)
      for k, r in ipairs(ranks) do expect(out, r, sum:slice((k - 1) * C, C)) end
    end
  elseif p.collective == "all_to_all" then
    local inp, out = torch.zeros({1, N * N * C}), torch.zeros({1, N * N * C})
    local src = {}
    if p.checked then
      for k, r in ipairs(ranks) do
        src[k] = input(N * C, k - 1)
        inp:shard_write_vec(r, src[k])
      end
    end
    rep = D.all_to_all(out, inp, o)
    if p.checked then
      for j, r in ipairs(ranks) do
        local want = tl.vec_new(N * C)
        for i = 1, N do want:set((i - 1) * C, src[i]:slice((j - 1) * C, C)) end
        expect(out, r, want)
      end
    end
  else -- broadcast from launch index 0
    local t = torch.zeros({1, N * n})
    local v = p.checked and input(n, 0):add(1) -- a timing-only point needs no values
    if p.checked then t:shard_write_vec(ranks[1], v) end
    rep = D.broadcast(t, 0, o)
    if p.checked then for _, r in ipairs(ranks) do expect(t, r, v) end end
  end
  return {
    collective = p.collective, algorithm = rep.algorithm, world_size = N, size = rep.bytes,
    elements_per_rank = rep.bytes // ELT, latency_ns = rep.latency_ns,
    latency_us = rep.latency_ns / 1000, algbw_gbps = rep.algbw_gbps, busbw_gbps = rep.busbw_gbps,
    check = p.checked and (worst == 0 and "passed" or "failed") or "skipped",
    max_err = worst, timing_only = not p.checked,
  }
end

-- ---- analytic α-β and LogGP predictions from the system's links ----------

-- Link parameters of the ring the collectives run on, read off the
-- system's closed-form path times (a wormhole route: head latency plus
-- bytes at the bottleneck bandwidth): α = one hop's zero-byte latency plus
-- the 16-byte credit's flight back (the sender waits for it), averaged
-- over the ring's hops; bw from the slope between 0 and 1 MiB. γ is the
-- vector unit's time per byte for the reductions. LogGP takes L = α − 2o
-- with o one PE_CPU dispatch (a send and a receive call), G = 1/bw.
local function ring_links(ws, algorithm)
  local sim <close> = kb.sim{trace = false} -- path queries only: --trace goes to a point
  local sys = kb.system(sim)
  local T = require("kbsim.torch")
  local torch = T.new(sim, sys)
  torch.distributed.init_process_group{backend = "ahbm", config = {ccl = {algorithm = algorithm,
    algorithms = {[algorithm] = {world_size = ws}}}}}
  local ranks = torch.distributed.get_ranks()
  local n, alpha, beta = #ranks, 0, 0
  local MiB = 1 << 20
  for i = 1, n do
    local a, b = ranks[i], ranks[i % n + 1]
    local fwd, back = sys:path(a, b), sys:path(b, a)
    local t0 = fwd.latency_ns(0)
    alpha = alpha + t0 + back.latency_ns(16)
    beta = beta + (fwd.latency_ns(MiB) - t0) / MiB
  end
  alpha, beta = alpha / n, beta / n
  local set = kb.options.set
  local clock = tonumber(set.clock_ghz or "1") or 1
  local vec = tonumber(set["pe.math.vector_bytes_per_cycle"] or "128") or 128
  local o = (tonumber(set["pe.cpu.dispatch_cycles"] or "4") or 4) / clock
  local gamma = 1 / (vec * clock)
  return {
    n = n, alpha = alpha, bw = 1 / beta, beta = beta, gamma = gamma,
    hockney = {alpha = alpha, beta = beta, gamma = gamma},
    loggp = {L = math.max(alpha - 2 * o, 0), o = o, g = 0, G = beta, gamma = gamma},
  }
end

-- The formula of analytic.lua for the algorithm a collective runs.
local FORMULA = {
  all_reduce = {ring_rs_ag_allreduce = "ring_allreduce_bw", ring_allreduce = "ring_allreduce",
                tree_allreduce = "tree_allreduce"},
  all_gather = "all_gather", reduce_scatter = "reduce_scatter", all_to_all = "all_to_all",
  broadcast = "broadcast_ring",
}

local function formula_for(collective, algorithm)
  local f = FORMULA[collective]
  if type(f) == "table" then f = f[algorithm] end
  return f
end

-- ---- the rows: simulated or read from PARAM --------------------------------

local rows, mode, world, sweep_summary, links = {}, nil, nil, nil, nil
local t_start = kb.clock()
if opt.param then
  mode = "param"
  local prow, err = pr.read(opt.param)
  -- a bad file is bad input, said in one line as other parameters are (exit 2, no traceback)
  if not prow then io.stderr:write(("comms_bench: %s\n"):format(err)); os.exit(2) end
  local wanted = {}
  for _, c in ipairs(opt.collectives) do wanted[c] = true end
  for _, c in ipairs(pr.collectives(prow)) do
    if wanted[c] or opt.collectives == KNOWN then
      for _, r in ipairs(pr.series(prow, c)) do
        rows[#rows + 1] = {collective = c, algorithm = "measured", world_size = "",
          size = r.size, elements_per_rank = r.nelems, latency_ns = r.latency * 1000,
          latency_us = r.latency, algbw_gbps = r.algbw, busbw_gbps = r.busbw,
          check = "measured", max_err = 0, timing_only = false}
      end
    end
  end
  if #rows == 0 then
    io.stderr:write(("comms_bench: %s: no COMMS-RES rows of %s\n"):format(opt.param,
      table.concat(opt.collectives, ", ")))
    os.exit(2)
  end
else
  mode = "simulated"
  -- The algorithm against the world size and topology, once, before any
  -- point runs (else every point would fail with the same message).
  local ok, got = pcall(ring_links, opt.ws, opt.algorithm)
  if not ok then usage_error("%s", tostring(got)) end
  links = got
  local points, skipped = {}, {}
  for _, c in ipairs(opt.collectives) do
    local size = 4
    while size <= opt.max do
      if size >= opt.min then
        -- the N-way collectives need at least one element per rank
        local split = c == "all_gather" or c == "reduce_scatter" or c == "all_to_all"
          or (c == "all_reduce" and opt.algorithm == "ring_rs_ag_allreduce")
        if split and size < opt.ws * ELT then
          skipped[#skipped + 1] = ("%s %d B"):format(c, size)
        else
          local p = {collective = c, size = size, ws = opt.ws, algorithm = opt.algorithm,
                     checked = size <= opt.check_max}
          if not kb.options.set["pe.tcm.capacity"] and tcm_needed(p) > 16 * 1024 * 1024 then
            local cap = 16 * 1024 * 1024
            while cap < tcm_needed(p) do cap = cap * 2 end
            p.tcm_capacity = cap
          end
          points[#points + 1] = p
        end
      end
      size = size * 2
    end
  end
  if #points == 0 then -- every size skipped: an empty run that said "all checks passed"
    usage_error("no size to run: every size from %d B to %d B is below one f32 element per "
      .. "rank on %d ranks (%d B); raise max", opt.min, opt.max, opt.ws, opt.ws * ELT)
  end
  if #skipped > 0 then
    print(("%d sizes below one f32 element per rank on %d ranks are not run: %s")
      :format(#skipped, opt.ws, table.concat(skipped, ", ")))
  end
  local summary
  rows, summary = kb.sweep{name = "comms", points = points, run = bench_point}
  sweep_summary = summary
  for _, r in ipairs(rows) do
    kb.check(r.check ~= "failed", ("%s %d B: outputs differ from the reference (max error %g)")
      :format(r.collective, r.size, r.max_err))
  end
end
local t_sweep = kb.clock() - t_start

-- ---- tables -----------------------------------------------------------------

local COLUMNS = {"collective", "algorithm", "world_size", "size", "elements_per_rank",
                 "latency_us", "algbw_gbps", "busbw_gbps", "check", "timing_only"}
local out = kb.outdir()
local bench_csv = results.csv(out .. "/comms_bench.csv", rows, COLUMNS)
local entries = {{path = bench_csv, about = ("one row per collective and size (%s): size is "
  .. "PARAM's size (B) per rank, latency the slowest rank in µs, algbw = size / latency, busbw = "
  .. "algbw x the nccl-tests factor; check passed / skipped (timing-only sizes) / measured")
  :format(mode)}}

local by_coll, order = {}, {}
for _, r in ipairs(rows) do
  if not by_coll[r.collective] then
    by_coll[r.collective] = {}
    order[#order + 1] = r.collective
  end
  table.insert(by_coll[r.collective], r)
end

-- ---- figures: latency and bandwidths against size ----------------------------

-- (none when no point finished: the failures are reported, kbsim exits 1)
if #rows > 0 then
  local lat_fig = results.figure{name = "latency", csv = bench_csv, x = "size",
    y = "latency_us", series = "collective", title = ("collective latency (%s)"):format(mode),
    xlabel = "message size per rank (bytes)", ylabel = "latency (µs)", logx = 2, logy = 10}
  entries[#entries + 1] = {figure = lat_fig, about = "latency against size, log-log, one line "
    .. "per collective: flat while per-message overheads dominate, then linear in size."}
end

local bw_rows = {}
for _, c in ipairs(order) do
  for _, r in ipairs(by_coll[c]) do
    bw_rows[#bw_rows + 1] = {collective = c, metric = "algbw", line = c .. " algbw", size = r.size,
                             gbps = r.algbw_gbps}
    bw_rows[#bw_rows + 1] = {collective = c, metric = "busbw", line = c .. " busbw", size = r.size,
                             gbps = r.busbw_gbps}
  end
end
local bw_csv = results.csv(out .. "/bandwidth.csv", bw_rows,
  {"collective", "metric", "line", "size", "gbps"})
entries[#entries + 1] = {path = bw_csv, about = "the bandwidths in long form (one row per "
  .. "collective, metric and size) for the bandwidth figure"}
if #bw_rows > 0 then
  local bw_fig = results.figure{name = "bandwidth", csv = bw_csv, x = "size", y = "gbps",
    series = "line", title = ("algorithm and bus bandwidth (%s)"):format(mode),
    xlabel = "message size per rank (bytes)", ylabel = "bandwidth (GB/s)", logx = 2, logy = 10}
  entries[#entries + 1] = {figure = bw_fig, about = "algbw and busbw against size, log-log: "
    .. "they rise with size and level off at what the links sustain; busbw is comparable "
    .. "across collectives."}
end

-- ---- the sigmoid performance model per collective ------------------------------

local fit_rows, pred_rows, hist_rows = {}, {}, {}
local console_fit = {}
for _, c in ipairs(order) do
  local series = by_coll[c]
  local pts = {}
  for _, r in ipairs(series) do
    pts[#pts + 1] = {size = r.size, latency = r.latency_us, busbw = r.busbw_gbps}
  end
  -- the factor that turns algbw into busbw: nccl-tests' for our own runs,
  -- the file's own ratio for measured rows (their rank count is not known)
  local factor = mode == "param" and series[1].busbw_gbps / series[1].algbw_gbps
    or pm.busbw_factor(c, series[1].world_size)
  local model, err, partial = pm.fit(pts, {factor = factor, collective = c})
  local fr = {collective = c, points = #pts, status = model and "fitted" or err}
  local m = model or partial
  for _, k in ipairs({"ln_p", "sats_p", "overhead", "max_bw"}) do fr[k] = m[k] end
  local fig_rows = {}
  if model then
    fr.L, fr.x0, fr.k, fr.b, fr.iterations = model.L, model.x0, model.k, model.b, model.iterations
    local errs = {}
    for _, r in ipairs(series) do
      local pred = pm.predict(model, r.size)
      local e = pm.abs_err(pred, r.latency_us)
      errs[#errs + 1] = e
      pred_rows[#pred_rows + 1] = {collective = c, size = r.size, latency_us = r.latency_us,
                                   predicted_us = pred, abs_err = e}
      fig_rows[#fig_rows + 1] = {size = r.size, line = "sigmoid model", latency_us = pred}
    end
    fr.gmae = pm.gmae(errs)
    local h = pm.histogram(errs)
    for i, n in ipairs(h.counts) do
      hist_rows[#hist_rows + 1] = {collective = c, bin = ("%g-%g %%"):format(h.edges[i],
        h.edges[i + 1]), count = n}
    end
    hist_rows[#hist_rows + 1] = {collective = c, bin = (">%g %%"):format(h.edges[#h.edges]),
                                 count = h.over}
    assert(pm.save(model, out .. "/fit_" .. c .. ".lua"))
    console_fit[#console_fit + 1] = ("%-15s GMAE %6.2f %%  ln_p %g sats_p %g overhead %.3f µs "
      .. "max_bw %.2f GB/s\n%s"):format(c, 100 * fr.gmae, model.ln_p, model.sats_p,
      model.overhead, model.max_bw, pm.histogram_text(h))
  else
    console_fit[#console_fit + 1] = ("%-15s not fitted: %s (the data are kept)"):format(c, err)
  end
  fit_rows[#fit_rows + 1] = fr
  for _, r in ipairs(series) do
    fig_rows[#fig_rows + 1] = {size = r.size, line = "data", latency_us = r.latency_us}
  end
  local fcsv = results.csv(out .. "/fit_" .. c .. ".csv", fig_rows, {"size", "line", "latency_us"})
  local refs = {}
  if m.ln_p then
    refs[1] = {title = "turning points (ln_p, sats_p)", points = {{2 ^ m.ln_p, m.overhead},
      {2 ^ m.sats_p, model and pm.predict(model, 2 ^ m.sats_p) or m.overhead}}}
  end
  local ffig = results.figure{name = "fit_" .. c, csv = fcsv, x = "size", y = "latency_us",
    series = "line", title = c .. ": data and sigmoid bandwidth model"
      .. (model and "" or " (not fitted)"),
    xlabel = "message size per rank (bytes)", ylabel = "latency (µs)", logx = 2, logy = 10,
    refs = refs}
  entries[#entries + 1] = {figure = ffig, about = c .. ": the data and the three-region "
    .. "prediction of the fitted sigmoid; the black points mark the linearity and saturation "
    .. "turning points (below ln_p the time is the overhead, above sats_p size / max_bw)."}
end
local FIT_COLUMNS = {"collective", "points", "status", "ln_p", "sats_p", "overhead", "max_bw",
                     "L", "x0", "k", "b", "iterations", "gmae"}
entries[#entries + 1] = {path = results.csv(out .. "/fit.csv", fit_rows, FIT_COLUMNS),
  about = "the fitted model per collective: turning points (log2 bytes), overhead (µs), max_bw "
    .. "(GB/s), sigmoid L, x0, k, b of log10(busbw) against log2(size), GMAE of the prediction; "
    .. "fit_COLLECTIVE.lua holds the parameters for perfmodel.load"}
if #pred_rows > 0 then
  entries[#entries + 1] = {path = results.csv(out .. "/prediction.csv", pred_rows,
    {"collective", "size", "latency_us", "predicted_us", "abs_err"}),
    about = "the model's prediction at every size and its relative error |pred - data| / data"}
  entries[#entries + 1] = {path = results.csv(out .. "/error_histogram.csv", hist_rows,
    {"collective", "bin", "count"}), about = "how many sizes fall in each error bin (percent)"}
end

-- ---- analytic predictions beside the simulation ---------------------------------

local analytic_rows, console_an = {}, {}
if mode == "simulated" then
  local gm_rows = {}
  for _, c in ipairs(order) do
    local f = formula_for(c, opt.algorithm)
    if f then
      local e_ab, e_lg = {}, {}
      for _, r in ipairs(by_coll[c]) do
        local ab = an.hockney[f](links.n, r.size, links.hockney)
        local lg = an.loggp[f](links.n, r.size, links.loggp)
        local ea, el = pm.abs_err(ab, r.latency_ns), pm.abs_err(lg, r.latency_ns)
        e_ab[#e_ab + 1], e_lg[#e_lg + 1] = ea, el
        analytic_rows[#analytic_rows + 1] = {collective = c, formula = f, size = r.size,
          simulated_us = r.latency_us, alpha_beta_us = ab / 1000, loggp_us = lg / 1000,
          alpha_beta_err = ea, loggp_err = el}
      end
      gm_rows[#gm_rows + 1] = {collective = c, formula = f, gmae_alpha_beta = pm.gmae(e_ab),
                               gmae_loggp = pm.gmae(e_lg)}
      console_an[#console_an + 1] = ("%-15s %-18s GMAE alpha-beta %7.2f %%  LogGP %7.2f %%")
        :format(c, f, 100 * pm.gmae(e_ab), 100 * pm.gmae(e_lg))
    else
      console_an[#console_an + 1] = ("%-15s no closed form for algorithm '%s'"):format(c,
        opt.algorithm)
    end
  end
  local acsv = results.csv(out .. "/analytic.csv", analytic_rows, {"collective", "formula", "size",
    "simulated_us", "alpha_beta_us", "loggp_us", "alpha_beta_err", "loggp_err"})
  entries[#entries + 1] = {path = acsv, about = ("α-β (Hockney) and LogGP costs of each "
    .. "algorithm (lua/kbsim/analytic.lua) beside the simulated latency, with relative errors; "
    .. "ring links: α %.2f ns (hop + credit back), bw %.2f GB/s, γ %.4f ns/B, LogGP o %.1f ns")
    :format(links.alpha, links.bw, links.gamma, links.loggp.o)}
  entries[#entries + 1] = {path = results.csv(out .. "/analytic_gmae.csv", gm_rows,
    {"collective", "formula", "gmae_alpha_beta", "gmae_loggp"}),
    about = "GMAE of the analytic costs against the simulation, per collective"}
  local refs = {}
  for _, c in ipairs(order) do
    if formula_for(c, opt.algorithm) then
      refs[#refs + 1] = {title = c .. " alpha-beta", y = "alpha_beta_us", series_value = c}
    end
  end
  if #analytic_rows > 0 then -- none when no collective's algorithm has a closed form
    local afig = results.figure{name = "analytic", csv = acsv, x = "size", y = "simulated_us",
      series = "collective", title = "simulated latency and alpha-beta prediction",
      xlabel = "message size per rank (bytes)", ylabel = "latency (µs)", logx = 2, logy = 10,
      refs = refs}
    entries[#entries + 1] = {figure = afig, about = "simulated latency (coloured) and the "
      .. "Hockney prediction (black, dashed) per collective; the gap at small sizes is the "
      .. "per-call work the closed forms leave out (dispatch, DMA, slot setup)."}
  end
end

results.index(out, entries, "Communication benchmark (" .. mode .. ")")

-- ---- console --------------------------------------------------------------------

print(("%-15s %12s %12s %12s %10s %10s  %s"):format("collective", "size (B)", "elems/rank",
  "latency(us)", "algbw", "busbw", "check"))
for _, r in ipairs(rows) do
  print(("%-15s %12d %12d %12.3f %10.3f %10.3f  %s"):format(r.collective, r.size,
    r.elements_per_rank, r.latency_us, r.algbw_gbps, r.busbw_gbps, r.check))
end
print()
for _, s in ipairs(console_fit) do print(s) end
if #console_an > 0 then
  print()
  for _, s in ipairs(console_an) do print(s) end
end
-- simulated: what ran, failed and did not run (Ctrl-C); measured rows are
-- not checked, so PARAM mode says so instead of claiming checks passed
local count = mode == "param" and ("%d rows"):format(#rows) or results.ran(sweep_summary, "rows")
local verdict = mode == "param" and "measured data, not checked" or results.verdict{sweep_summary}
print(("%s: %s, %d collectives, %s; %s %.2f s wall; results in %s/index.md"):format(mode,
  count, #order, verdict,
  mode == "param" and "read in" or ("simulated with -j " .. kb.options.jobs .. " in"), t_sweep,
  out))
