-- calibrate.lua — fits chosen topology.yaml settings to measured collective latencies
-- with Levenberg–Marquardt, and writes the fitted values (with 95 % confidence
-- intervals), the error before and after, a figure and a topology.yaml overlay
--
--   kbsim [-j N] [--topology FILE] [--set K=V] scenarios/calibrate.lua measured=FILE
--         [fit=KEY,KEY] [sizes=B,B] [algorithm=lrab] [dtype=f16]
--   kbsim scenarios/calibrate.lua truth=KEY:VALUE,KEY:VALUE ...   (recover known values)
--
-- measured: our CSV (collective,algorithm,dtype,bytes_per_pe,measured_ns), a
-- references CSV (scenarios/refs/ccl_references.csv: its lines are sampled at
-- `sizes`), PARAM output, or DMA probes (case,copies,bytes,measured_ns:
-- scenarios/refs/probe_original.csv, the original's published latencies).
-- exclude_misfits=yes fits again without the points the first fit leaves
-- above misfit, and says for each why (decision 0040). With truth=, the "measurements" are simulated at
-- those values on the same system first, and the fit, started from the
-- configured values, must find them again within 1 %. docs/calibrate.md.
local kb = require("kbsim")
local results = require("kbsim.results")
local cal = require("kbsim.calibrate")

local P = kb.params({
  measured = {default = "", type = "string", help = "the measurements' file (CSV or PARAM)"},
  fit = {default = {"ucie.port_overhead_ns", "ucie.gbps_per_connection"}, type = "string",
         list = true, help = "the topology.yaml settings to fit (floating-point ones)"},
  truth = {default = "", type = "string",
           help = "KEY:VALUE,... : simulate the measurements at these values, then recover them"},
  sizes = {default = {4096, 32768, 262144}, type = "bytes", list = true, min = 2,
           help = "bytes per PE of the truth= points and of a reference line's samples"},
  collective = {default = "all_reduce", type = "string",
                choices = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"},
                help = "the collective of truth= points and of PARAM rows"},
  algorithm = {default = "lrab", type = "string",
               help = "the ccl algorithm of truth= points, references and PARAM rows"},
  dtype = {default = "f16", type = "string", choices = {"f16", "bf16", "f32"},
           help = "element type of truth= points, references and PARAM rows"},
  references = {default = {"all"}, type = "string", list = true,
                help = "with a references CSV: the names to fit (default all)"},
  max_iter = {default = 30, type = "integer", min = 1, help = "Levenberg–Marquardt iterations"},
  misfit = {default = 0.10, type = "number", min = 0,
            help = "a point whose relative error after the fit exceeds this is reported"},
  exclude_misfits = {default = false, type = "boolean",
                     help = "fit again without the points the first fit leaves above misfit"},
  target = {default = 0.10, type = "number", min = 0,
            help = "the MAPE after the fit the run reports as reached or not"},
}, {about = "fit topology.yaml settings to measured collective latencies",
    check = function(p)
      if (p.measured == "") == (p.truth == "") then
        return "give measured=FILE, or truth=KEY:VALUE,... for a recovery run (one of them)"
      end
    end})

if kb.options.shard or kb.options.merge then
  io.stderr:write("calibrate: --shard and --merge do not apply: each fit step needs the last\n")
  os.exit(2)
end

-- the settings to fit: floating-point keys of the system built from
-- configs/topology.yaml, --topology and --set, with their ranges
local base_sim <close> = kb.sim{trace = false}
local base = kb.system(base_sim)
local keys, init, ranges = {}, {}, {}
for _, k in ipairs(P.fit) do
  local ok, v, r = pcall(base.config, base, k)
  if not ok then
    io.stderr:write(("calibrate: fit: %s\n"):format(tostring(v):gsub("^sys:config: ", "")))
    os.exit(2)
  end
  if r.type ~= "number" then
    io.stderr:write(("calibrate: fit: '%s' is a%s %s setting; only floating-point settings can be "
      .. "fitted (sweep the others)\n"):format(k, r.type == "integer" and "n" or "", r.type))
    os.exit(2)
  end
  if init[k] then
    io.stderr:write(("calibrate: fit: '%s' is given twice\n"):format(k))
    os.exit(2)
  end
  keys[#keys + 1], init[k], ranges[k] = k, v, r
end

-- the measurements
local points, truth
if P.truth ~= "" then
  truth = {}
  for item in P.truth:gmatch("[^,]+") do
    local k, v = item:match("^([%w_.]+):(.+)$")
    v = tonumber(v)
    if not k or not v then
      io.stderr:write(("calibrate: truth: '%s' is not KEY:NUMBER\n"):format(item))
      os.exit(2)
    end
    if not init[k] then
      io.stderr:write(("calibrate: truth: '%s' is not one of the fitted settings (fit=%s)\n")
        :format(k, table.concat(keys, ",")))
      os.exit(2)
    end
    local r = ranges[k]
    if (r.min and (v < r.min or (r.above and v == r.min))) or (r.max and v > r.max) then
      io.stderr:write(("calibrate: truth: %s = %s is outside its range (%s%s..%s)\n"):format(
        k, v, r.above and "above " or "", r.min or "", r.max or ""))
      os.exit(2)
    end
    truth[k] = v
  end
  for _, k in ipairs(keys) do
    if not truth[k] then
      io.stderr:write(("calibrate: truth: no value for '%s'\n"):format(k))
      os.exit(2)
    end
  end
  points = cal.simulate_points{collective = P.collective, algorithm = P.algorithm,
                               dtype = P.dtype, sizes = P.sizes, values = truth}
else
  local err
  points, err = cal.read(P.measured, {algorithm = P.algorithm, dtype = P.dtype,
                                      line_sizes = P.sizes, collective = P.collective,
                                      names = P.references[1] ~= "all" and P.references or nil})
  if not points then
    io.stderr:write(("calibrate: %s\n"):format(err))
    os.exit(2)
  end
  err = cal.check_points(points, base, P.measured)
  if err then
    io.stderr:write(("calibrate: %s\n"):format(err))
    os.exit(2)
  end
end

local fit = cal.fit_excluding{points = points, keys = keys, init = init, ranges = ranges,
                              max_iter = P.max_iter, misfit = P.misfit,
                              exclude_misfits = P.exclude_misfits}
local probes = points[1].copies ~= nil

-- ---- outputs -----------------------------------------------------------
local out = kb.outdir()
local prows = {}
for _, k in ipairs(keys) do
  local r = ranges[k]
  prows[#prows + 1] = {key = k, status = fit.status, initial = fit.init[k], fitted = fit.values[k],
    ci95 = fit.ci and (fit.ci[k] or "undetermined") or "", truth = truth and truth[k] or "",
    min = r.min or "", max = r.max or "", meaning = r.doc or ""}
end
local pcsv = results.csv(out .. "/fit.csv", prows,
  {"key", "status", "initial", "fitted", "ci95", "truth", "min", "max", "meaning"})
local long = {}
for i, p in ipairs(fit.points) do
  p.point = i
  p.excluded = p.excluded or false
  p.why = p.why or ""
  for _, s in ipairs({{"measured", p.measured_ns}, {"before", p.before_ns}, {"after", p.after_ns}}) do
    long[#long + 1] = {bytes_per_pe = p.bytes_per_pe, series = s[1], ns = s[2],
                       collective = p.collective, point = i}
  end
end
local mcsv = results.csv(out .. "/points.csv", fit.points, {"point", "label", "collective",
  "algorithm", "dtype", "bytes_per_pe", "measured_ns", "before_ns", "after_ns", "err_before",
  "err_after", "fitted", "excluded", "why"})
local lcsv = results.csv(out .. "/points_long.csv", long,
  {"point", "bytes_per_pe", "collective", "series", "ns"})
-- DMA probes are cases of one size: latency against the case's number
local fig = probes and results.figure{name = "calibration", csv = lcsv, x = "point", y = "ns",
  series = "series", title = "measured, model before and after the fit, per case (points.csv)",
  xlabel = "case (points.csv)", ylabel = "latency (ns)", logy = 10}
  or results.figure{name = "calibration", csv = lcsv, x = "bytes_per_pe", y = "ns",
  series = "series", title = "measured, model before and after the fit",
  xlabel = "bytes per PE", ylabel = "latency (ns)", logx = 2, logy = 10}
local entries = {
  {path = pcsv, about = "one row per fitted setting: the fit's status (fitted, refused, not converged: "
    .. "a refused or unconverged value is where the search stopped, not an answer), its initial and fitted value, the 95 % "
    .. "confidence half-width (Student's t, from (JᵀJ)⁻¹ and the residual variance), the "
    .. "truth of a recovery run, its physical range and meaning"},
  {path = mcsv, about = "one row per measured point: measured, simulated before and after the "
    .. "fit (ns), their relative errors, and whether the fit reaches it within misfit"},
  {path = lcsv, about = "the same latencies in long form for the figure"},
  {figure = fig, about = "the model's latency before and after the fit against the measurements"},
}
if fit.status == "fitted" then
  -- the overlay: the fitted values as a topology.yaml laid over the
  -- configured one (kbsim --topology calibrated.yaml ...)
  local lines = {"# calibrated.yaml — written by scenarios/calibrate.lua: the fitted settings",
                 "# (lay over configs/topology.yaml with --topology, or merge by hand)"}
  local tree = cal.overlay(fit.values)
  local function emit(t, indent)
    local names = {}
    for k in pairs(t) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do
      if type(t[k]) == "table" then
        lines[#lines + 1] = indent .. k .. ":"
        emit(t[k], indent .. "  ")
      else
        lines[#lines + 1] = ("%s%s: %.10g"):format(indent, k, t[k])
      end
    end
  end
  emit(tree, "")
  local f = assert(io.open(out .. "/calibrated.yaml", "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
  entries[#entries + 1] = {path = out .. "/calibrated.yaml",
                           about = "the fitted settings as a topology.yaml overlay"}
end
results.index(out, entries, "Calibration")

-- ---- report ------------------------------------------------------------
print(("%-30s %14s %14s %14s %14s"):format("setting", "initial", "fitted", "ci95 (±)",
                                          truth and "truth" or ""))
for _, r in ipairs(prows) do
  print(("%-30s %14.6g %14.6g %14s %14s"):format(r.key, r.initial, r.fitted,
    type(r.ci95) == "number" and ("%.3g"):format(r.ci95) or r.ci95 == "" and "-" or r.ci95,
    truth and ("%.6g"):format(r.truth) or ""))
end
if not fit.ci then print(("confidence intervals: none (%s)"):format(fit.ci_why)) end
print(("%-22s %8s %14s %14s %14s %9s %9s"):format(probes and "case" or "collective", "bytes",
  "measured_ns", "before_ns", "after_ns", "err_bef", "err_aft"))
for _, p in ipairs(fit.points) do
  print(("%-22s %8d %14.1f %14.1f %14.1f %8.2f%% %8.2f%%%s"):format(
    probes and p.label or p.collective, p.bytes_per_pe, p.measured_ns, p.before_ns, p.after_ns,
    100 * p.err_before, 100 * p.err_after,
    p.excluded and "  excluded" or p.fitted and "" or "  not fitted"))
end
if fit.first then
  print(("first fit on all %d points: %s, MAPE %.2f%% at %s; fitted again after setting aside "
    .. "%d point%s above %.0f%%, the worst first"):format(#fit.points, fit.first.status, 100 * fit.first.mape_after,
    cal.format_values(fit.first.values, keys), fit.excluded, fit.excluded == 1 and "" or "s",
    100 * P.misfit))
  print(("MAPE %.2f%% -> %.2f%% on the %d points fitted (%.2f%% on all %d), GMAE %.4g -> %.4g; "
    .. "%d iterations, %d simulations"):format(100 * fit.mape_before, 100 * fit.mape_after,
    #fit.points - fit.excluded, 100 * fit.mape_all_after, #fit.points, fit.gmae_before,
    fit.gmae_after, fit.iterations, fit.simulations))
else
  print(("MAPE %.2f%% -> %.2f%%, GMAE %.4g -> %.4g; %d iterations, %d simulations"):format(
    100 * fit.mape_before, 100 * fit.mape_after, fit.gmae_before, fit.gmae_after, fit.iterations,
    fit.simulations))
end
if fit.exclusion_why then print("no second fit: " .. fit.exclusion_why) end
local unfit = {}
for _, p in ipairs(fit.points) do
  if not p.fitted then
    unfit[#unfit + 1] = p
    print(("%s %s (%.1f%%): %s"):format(p.excluded and "excluded" or "not fitted", p.label,
      100 * p.err_after, p.why ~= "" and p.why or "?"))
  end
end
if #unfit > 0 then
  print(("not fitted within %.0f%%: %d point%s — with only %s free, the model's curve cannot pass "
    .. "through them; another setting, or the model's structure, differs there"):format(
    100 * P.misfit, #unfit, #unfit == 1 and "" or "s", table.concat(keys, ", ")))
end
if fit.status == "fitted" then
  local all = fit.mape_all_after or fit.mape_after
  if fit.mape_after <= P.target and not fit.excluded then
    print(("target MAPE <= %.0f%%: reached on all points with physical values"):format(
      100 * P.target))
  elseif fit.mape_after <= P.target then
    print(("target MAPE <= %.0f%%: reached with physical values on the %d points the model's "
      .. "structure allows (%.2f%%); %d set aside (%.2f%% on all): the lines 'excluded' say "
      .. "why"):format(100 * P.target, #fit.points - (fit.excluded or 0), 100 * fit.mape_after,
      fit.excluded or 0, 100 * all))
  else
    print(("target MAPE <= %.0f%%: NOT reached (%.2f%%) with physical values"):format(
      100 * P.target, 100 * fit.mape_after))
  end
end
local recovered = truth and true
if truth then
  for _, k in ipairs(keys) do
    local rel = math.abs(fit.values[k] - truth[k]) / math.abs(truth[k])
    recovered = recovered and rel <= 0.01
    kb.check(rel <= 0.01, ("%s: fitted %.6g, truth %.6g (%.2f%% off, more than 1%%)"):format(k,
      fit.values[k], truth[k], 100 * rel))
  end
end
if fit.status ~= "fitted" then
  io.stderr:write(("calibrate: %s: %s\n"):format(fit.status, fit.why))
  print(("calibrate: %s; results in %s/index.md"):format(fit.status, out))
  os.exit(1)
end
print(("calibrate: fitted %d setting%s to %d points%s; results in %s/index.md"):format(#keys,
  #keys == 1 and "" or "s", #fit.points,
  recovered and ", truth recovered within 1%" or truth and ", truth NOT recovered" or "", out))
