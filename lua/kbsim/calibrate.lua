-- calibrate.lua — fits topology.yaml settings to measured collective latencies: the
-- model runs every measured point, Levenberg–Marquardt (kbsim.lm) moves the chosen
-- settings until the simulated latencies match, within the settings' physical ranges
--
--   local cal = require("kbsim.calibrate")
--   local points = assert(cal.read("measured.csv"))
--   local fit = cal.fit{points = points, keys = {"ucie.port_overhead_ns"}}
--
-- Measurements (docs/calibrate.md): a CSV with the header M.HEADER, one point a line,
--   collective,algorithm,dtype,bytes_per_pe,measured_ns
-- or a references CSV (kbsim.references: points, and lines sampled at opts.line_sizes),
-- or PARAM COMMS-RES output (kbsim.param_results, µs), or DMA probes with the header
-- M.PROBE_HEADER, one case a line,
--   case,copies,bytes,measured_ns
-- where copies is "SRC>DST SRC>DST ..." (PE names, e.g. sip0.cube0.pe0>sip0.cube0.pe1):
-- copies of `bytes` each, TCM to TCM by the source PE's DMA, all started together;
-- the latency is when the last one ends. Blank lines and # comments are
-- skipped. Every problem is "FILE:LINE: problem".
local lm = require("kbsim.lm")

local M = {}

M.HEADER = "collective,algorithm,dtype,bytes_per_pe,measured_ns"
M.PROBE_HEADER = "case,copies,bytes,measured_ns"
M.COLLECTIVES = {all_reduce = true, all_gather = true, reduce_scatter = true,
                 all_to_all = true, broadcast = true}
local DTYPE_BYTES = {f16 = 2, bf16 = 2, f32 = 4}

local function finite(v)
  return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge
end

-- One measured point, checked; nil and why.
local function point(collective, algorithm, dtype, bytes, ns, label)
  if not M.COLLECTIVES[collective] then
    return nil, ("unknown collective '%s' (all_reduce, all_gather, reduce_scatter, all_to_all, "
      .. "broadcast)"):format(collective)
  end
  if not algorithm:match("^[%w_]+$") then return nil, ("bad algorithm name '%s'"):format(algorithm) end
  if not DTYPE_BYTES[dtype] then return nil, ("unknown dtype '%s' (f16, bf16, f32)"):format(dtype) end
  bytes = math.tointeger(tonumber(bytes))
  if not bytes or bytes <= 0 then return nil, "bytes_per_pe must be a positive integer" end
  if bytes % DTYPE_BYTES[dtype] ~= 0 then
    return nil, ("bytes_per_pe %d is not a whole number of %s elements"):format(bytes, dtype)
  end
  ns = tonumber(ns)
  if not finite(ns) or ns <= 0 then return nil, "measured_ns must be a positive number" end
  return {collective = collective, algorithm = algorithm, dtype = dtype, bytes = bytes,
          measured_ns = ns, label = label}
end

-- One DMA probe case, checked; nil and why.
local function probe_point(case, copies, bytes, ns, label)
  if not case:match("^[%w_ ,()%-]+$") then return nil, ("bad case name '%s'"):format(case) end
  local list = {}
  for item in copies:gmatch("%S+") do
    local a, b = item:match("^([%w_.]+)>([%w_.]+)$")
    if not a then return nil, ("copy '%s' is not SRC>DST (PE names)"):format(item) end
    list[#list + 1] = {a, b}
  end
  if #list == 0 then return nil, "no copies" end
  bytes = math.tointeger(tonumber(bytes))
  if not bytes or bytes <= 0 then return nil, "bytes must be a positive integer" end
  ns = tonumber(ns)
  if not finite(ns) or ns <= 0 then return nil, "measured_ns must be a positive number" end
  return {collective = "dma", algorithm = "-", dtype = "-", bytes = bytes, copies = list,
          measured_ns = ns, label = label or case, case = case}
end

-- Our CSV: the header, then one point a line.
local function parse_points(text, name, probe)
  local pts, n = {}, 0
  local header, fields = probe and M.PROBE_HEADER or M.HEADER, probe and 4 or 5
  for line in text:gmatch("([^\n]*)\n?") do
    n = n + 1
    line = line:gsub("\r$", "")
    if n == 1 then
      if line ~= header then
        return nil, ("%s:1: expected the header '%s'"):format(name, header)
      end
    elseif line ~= "" and not line:match("^%s*#") then
      local c = {}
      for f in (line .. ","):gmatch("([^,]*),") do c[#c + 1] = f end
      if #c ~= fields then
        return nil, ("%s:%d: expected %d fields, got %d"):format(name, n, fields, #c)
      end
      local p, why
      if probe then
        p, why = probe_point(c[1], c[2], c[3], c[4])
      else
        p, why = point(c[1], c[2], c[3], c[4], c[5], ("%s:%d"):format(name, n))
      end
      if not p then return nil, ("%s:%d: %s"):format(name, n, why) end
      p.where = ("%s:%d"):format(name, n)
      pts[#pts + 1] = p
    end
  end
  if #pts == 0 then return nil, ("%s: no measured points"):format(name) end
  return pts
end

-- Reads measurements; opts: algorithm (for references and PARAM rows, default
-- "lrab"), dtype ("f16"), line_sizes (bytes per PE at which a reference
-- line is sampled), collective (PARAM rows to take, default all_reduce),
-- names (the references to take, by name; default all).
function M.read(path, opts)
  opts = opts or {}
  local f, err = io.open(path, "rb")
  if not f then return nil, ("cannot read the measurements: %s"):format(err) end
  local text, rerr = f:read("a")
  f:close()
  if not text then return nil, ("%s: cannot read the measurements: %s"):format(path, rerr) end
  local algorithm, dtype = opts.algorithm or "lrab", opts.dtype or "f16"
  local first = text:match("^([^\r\n]*)")
  local refs = require("kbsim.references")
  if first == refs.HEADER then
    local list, rerr = refs.parse(text, path)
    if not list then return nil, rerr end
    local pts, wanted, found = {}, nil, {}
    if opts.names and #opts.names > 0 then
      wanted = {}
      for _, nm in ipairs(opts.names) do wanted[nm] = true end
    end
    for _, r in ipairs(list) do
      found[r.name] = true
      if wanted and not wanted[r.name] then -- not chosen
      elseif r.kind == "point" then
        local p, why = point("all_reduce", algorithm, dtype, r.bytes_per_pe, r.latency_ns, r.name)
        if not p then return nil, ("%s: reference '%s': %s"):format(path, r.name, why) end
        pts[#pts + 1] = p
      else
        for _, b in ipairs(opts.line_sizes or {}) do
          local ns = r.intercept_ns + r.slope_ns * (b * 8 / r.slope_bits)
          local p, why = point("all_reduce", algorithm, dtype, b, ns, ("%s@%d"):format(r.name, b))
          if not p then return nil, ("%s: reference '%s': %s"):format(path, r.name, why) end
          pts[#pts + 1] = p
        end
      end
    end
    for _, nm in ipairs(opts.names or {}) do
      if not found[nm] then return nil, ("%s: no reference named '%s'"):format(path, nm) end
    end
    if #pts == 0 then return nil, ("%s: no measured points (a line needs line_sizes)"):format(path) end
    return pts
  elseif first == M.HEADER then
    return parse_points(text, path)
  elseif first == M.PROBE_HEADER then
    return parse_points(text, path, true)
  end
  -- PARAM output: sizes in bytes of each rank's buffer, latencies in µs
  local pr = require("kbsim.param_results")
  local rows, perr = pr.parse(text, path)
  if not rows then
    return nil, ("%s: neither '%s', a references CSV nor PARAM output (%s)"):format(
      path, M.HEADER, perr)
  end
  if #rows == 0 then
    return nil, ("%s: %s; the first line is none of the headers ('%s', '%s', '%s') and "
      .. "there are no PARAM COMMS-RES rows"):format(path, text == "" and "empty"
      or "not a measurements file", M.HEADER, M.PROBE_HEADER, refs.HEADER)
  end
  local want, pts = opts.collective or "all_reduce", {}
  for _, r in ipairs(pr.series(rows, want)) do
    local p, why = point(want, algorithm, dtype, r.size, r.latency * 1000,
                         ("%s %s B"):format(want, r.size))
    if not p then return nil, ("%s: %s"):format(path, why) end
    pts[#pts + 1] = p
  end
  if #pts == 0 then return nil, ("%s: no %s rows"):format(path, want) end
  return pts
end

-- Checks the points against the system they will run on (kbsim.system
-- sys), before any simulation: every algorithm is known; a probe's PEs
-- exist and its copies fit a TCM (copy i lands at i x bytes). Nil, or
-- "WHERE: problem" (WHERE the file and line of the point, or the file).
function M.check_points(points, sys, path)
  local ccl = require("kbsim.ccl")
  local names, cap
  for _, p in ipairs(points) do
    local where = p.where or path
    if p.copies then
      if not names then
        names, cap = {}, sys:config("pe.tcm.capacity")
        for r = 0, sys:counts().pes - 1 do names[sys:pe(r).name] = true end
      end
      for _, c in ipairs(p.copies) do
        for _, nm in ipairs(c) do
          if not names[nm] then return ("%s: the system has no PE '%s'"):format(where, nm) end
        end
      end
      if (#p.copies + 1) * p.bytes > cap then
        return ("%s: %d cop%s of %d bytes need %d bytes of TCM (copy i lands at i x bytes); a "
          .. "PE's TCM has %d"):format(where, #p.copies, #p.copies == 1 and "y" or "ies", p.bytes,
                                       (#p.copies + 1) * p.bytes, cap)
      end
    else
      local algo, why = ccl.find(p.algorithm)
      if not algo then return ("%s: %s"):format(where, why) end
      local n, ranks = p.bytes // DTYPE_BYTES[p.dtype], sys:counts().pes
      if p.collective == "all_to_all" and n % ranks ~= 0 then
        return ("%s: all_to_all: %d elements per rank do not split over %d ranks"):format(
          where, n, ranks)
      end
    end
  end
end

-- A nested topology table from dotted keys: {["ucie.port_overhead_ns"] = 9}
-- -> {ucie = {port_overhead_ns = 9}}.
function M.overlay(values)
  local t = {}
  for key, v in pairs(values) do
    local node, last = t, nil
    for part in key:gmatch("[^.]+") do
      if last then
        node[last] = node[last] or {}
        node = node[last]
      end
      last = part
    end
    node[last] = v
  end
  return t
end

-- Runs one point (in a sweep point's own state): {collective, algorithm,
-- dtype, bytes, values = {key = value}} -> {latency_ns} or {error}.
-- timing_only: the calibration needs times, not values.
function M.run_point(p)
  if p.copies then return M.run_probe(p) end
  local T = require("kbsim.torch")
  local ok, torch = pcall(T.init, {topology = M.overlay(p.values), timing_only = true})
  if not ok then return {error = tostring(torch)} end
  local D = torch.distributed
  D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = p.algorithm,
                                                          dtype = p.dtype}}}
  local N = #D.get_ranks()
  local n = p.bytes // DTYPE_BYTES[p.dtype]
  local o = {check = false}
  local z = function(len) return torch.zeros({1, len}, {dtype = p.dtype}) end
  local rep
  if p.collective == "all_reduce" then
    rep = D.all_reduce(z(N * n), o)
  elseif p.collective == "broadcast" then
    rep = D.broadcast(z(N * n), 0, o)
  elseif p.collective == "all_gather" then
    rep = D.all_gather(z(N * N * n), z(N * n), o)
  elseif p.collective == "reduce_scatter" then
    rep = D.reduce_scatter(z(N * n), z(N * N * n), o)
  else -- all_to_all: bytes is each rank's whole send buffer, N chunks
    if n % N ~= 0 then
      return {error = ("all_to_all: %d elements per rank do not split over %d ranks"):format(n, N)}
    end
    rep = D.all_to_all(z(N * n), z(N * n), o)
  end
  return {latency_ns = rep.latency_ns}
end

-- A DMA probe case (in a sweep point's own state): {copies = {{SRC, DST}},
-- bytes, values} -> {latency_ns} (the last copy's end) or {error}.
function M.run_probe(p)
  local kb = require("kbsim")
  local sim = kb.sim{trace = false}
  local ok, sys = pcall(kb.system, sim, M.overlay(p.values), {timing_only = true})
  if not ok then return {error = tostring(sys)} end
  local rank = {}
  for r = 0, sys:counts().pes - 1 do rank[sys:pe(r).name] = r end
  for _, c in ipairs(p.copies) do
    for _, nm in ipairs(c) do
      if not rank[nm] then
        sim:close()
        return {error = ("case '%s': the system has no PE '%s'"):format(p.case, nm)}
      end
    end
  end
  local last = 0
  for i, c in ipairs(p.copies) do
    sim:spawn("copy" .. i, function()
      local t = sys:dma(rank[c[1]], rank[c[2]], p.bytes, {dst_addr = i * p.bytes})
      if t > last then last = t end
    end)
  end
  sim:run()
  sim:close()
  return {latency_ns = last}
end

local function run_point(p) return require("kbsim.calibrate").run_point(p) end

-- Simulated latencies of every point at each set of values (one sweep):
-- sets[s] = {key = value}; returns lat[s][i] (nil where a point failed)
-- and the first error.
local function simulate(points, sets, name)
  local kb = require("kbsim")
  local sweep = {}
  for s, values in ipairs(sets) do
    for i, pt in ipairs(points) do
      sweep[#sweep + 1] = {collective = pt.collective, algorithm = pt.algorithm,
                           dtype = pt.dtype, bytes = pt.bytes, copies = pt.copies,
                           case = pt.case, values = values, set = s, i = i}
    end
  end
  local _, summary = kb.sweep{name = name, points = sweep, run = run_point}
  local lat, first, refused = {}, nil, nil
  for s = 1, #sets do lat[s] = {} end
  for j, st in ipairs(summary.points) do
    local q, row = sweep[j], st.row
    if st.status == "done" and row and row.latency_ns then
      lat[q.set][q.i] = row.latency_ns
    elseif st.status == "done" and row and row.error then
      refused = refused or row.error -- the system refused the values
    else
      first = first or st.error or st.status
    end
  end
  return lat, first, refused
end

-- Points "measured" by the model itself at known values (a recovery run):
-- o: collective, algorithm, dtype, sizes (bytes per PE), values ({key = v}).
function M.simulate_points(o)
  local pts = {}
  for _, b in ipairs(o.sizes) do
    local p, why = point(o.collective, o.algorithm, o.dtype, b, 1, ("%d B"):format(b))
    if not p then error(("calibrate: size %d: %s"):format(b, why), 2) end
    pts[#pts + 1] = p
  end
  local lat, err, refused = simulate(pts, {o.values}, "calibrate_truth")
  for i, p in ipairs(pts) do
    if not lat[1][i] then
      error(("calibrate: the truth point %s failed: %s"):format(p.label, tostring(refused or err)), 0)
    end
    p.measured_ns = lat[1][i]
  end
  return pts
end

-- v moved into a setting's range (an excluded minimum: just above it).
local function clip(v, r)
  if r.min and v <= r.min then
    if r.above then return r.min + math.max(math.abs(r.min), 1) * 1e-9 end
    if v < r.min then return r.min end
  end
  if r.max and v > r.max then return r.max end
  return v
end

local function mean_abs(errs)
  local s = 0
  for _, e in ipairs(errs) do s = s + math.abs(e) end
  return s / #errs
end

-- Fits `keys` (floating-point topology.yaml settings) to the points.
-- o: points, keys, init ({key = value}: the starting values), ranges
-- ({key = {min=, max=, above=}}), max_iter (30), step (relative
-- finite-difference step, 1e-2), misfit (0.10: a point's relative error
-- after the fit above this is reported as not fitted).
-- The residual of point i is (measured − simulated) / measured: every
-- point weighs by its relative error, whatever its size. A setting is kept
-- inside its range (a step past a bound stops on it); a fit that ends on a
-- bound while the data pull it further is refused (status "refused").
-- Returns {status = "fitted" | "refused" | "not converged", why, keys,
-- init, values, ci (95 % half-widths, or nil and ci_why), points (each with
-- measured_ns, before_ns, after_ns, err_before, err_after, fitted), mape_before,
-- mape_after, gmae_before, gmae_after, iterations, sweeps, simulations}.
function M.fit(o)
  local keys, points, ranges = o.keys, o.points, o.ranges
  local n, m = #keys, #points
  local step = o.step or 1e-2
  local sweeps, sims = 0, 0
  local function values_of(p)
    local v = {}
    for a, k in ipairs(keys) do v[k] = p[a] end
    return v
  end
  local function residuals_of(lat)
    local r = {}
    for i, pt in ipairs(points) do
      if not lat[i] then return nil end
      r[i] = (pt.measured_ns - lat[i]) / pt.measured_ns
    end
    return r
  end
  -- Latencies at each set of values; nil and why when the system refuses
  -- a set (a derived range, e.g. connections x gbps_per_connection).
  local function run(sets)
    sweeps, sims = sweeps + 1, sims + m * #sets
    local lat, err, refused = simulate(points, sets, "calibrate")
    if err then
      error(("calibrate: a point failed at %s: %s"):format(M.format_values(sets[1], keys),
        tostring(err)), 0)
    end
    if refused then return nil, refused end
    return lat
  end
  local first_lat, last_J
  local problem = {n = n}
  function problem.project(p)
    local q = {}
    for a = 1, n do q[a] = clip(p[a], ranges[keys[a]]) end
    return q
  end
  function problem.residuals(p)
    local lat = run({values_of(p)})
    return lat and residuals_of(lat[1]) -- refused values: a rejected step
  end
  function problem.linearize(p)
    local sets, h = {values_of(p)}, {}
    for a = 1, n do
      local r = ranges[keys[a]]
      h[a] = step * math.max(math.abs(p[a]), 1)
      if r.max and p[a] + h[a] > r.max then h[a] = -h[a] end -- step down from a top bound
      local q = {}
      for c = 1, n do q[c] = p[c] end
      q[a] = p[a] + h[a]
      sets[a + 1] = values_of(q)
    end
    local lat, refused = run(sets)
    if not lat then
      error(("calibrate: the system refuses values next to %s: %s"):format(
        M.format_values(sets[1], keys), refused), 0)
    end
    first_lat = first_lat or lat[1]
    local J = {}
    for i = 1, m do
      J[i] = {}
      -- f_i = simulated / measured, so r_i = 1 − f_i; J: ∂f_i/∂p_a
      for a = 1, n do J[i][a] = (lat[a + 1][i] - lat[1][i]) / h[a] / points[i].measured_ns end
    end
    last_J = J
    return residuals_of(lat[1]), J
  end
  local p0 = {}
  for a, k in ipairs(keys) do p0[a] = clip(o.init[k], ranges[k]) end
  local p, second, third = lm.minimize(problem, p0, {max_iter = o.max_iter or 30, xtol = 1e-7,
                                                      ftol = 1e-10, gtol = 1e-12})
  local res = {keys = keys, init = values_of(p0)}
  local info
  if p then
    res.status, info = "fitted", second
  else
    res.status, res.why, info = "not converged", second, third
    p = info.p
  end
  res.values, res.iterations = values_of(p), info.iterations
  -- a setting held on a bound while the data pull it across
  for a, k in ipairs(keys) do
    local r = ranges[k]
    local g = info.g[a] -- Jᵀr: the step direction of an undamped fit
    local at_min = r.min and p[a] <= clip(r.min, r) and g < 0
    local at_max = r.max and p[a] >= r.max and g > 0
    if at_min or at_max then
      res.status = "refused"
      res.why = ("the fit needs %s %s its physical range (%s %s): the model cannot match "
        .. "these points with the settings chosen; a setting left out is likely what differs"):format(
        k, at_min and "below" or "above", at_min and (r.above and "above" or "at least") or "at most",
        ("%.6g"):format(at_min and r.min or r.max))
    end
  end
  local ci, ci_why = lm.confidence(info, n)
  res.ci = ci and values_of(ci) or nil
  res.ci_why = ci_why
  -- before and after, point by point
  local misfit = o.misfit or 0.10
  local eb, ea = {}, {}
  res.points = {}
  for i, pt in ipairs(points) do
    local before, after = first_lat[i], pt.measured_ns * (1 - info.r[i])
    eb[i] = (before - pt.measured_ns) / pt.measured_ns
    ea[i] = (after - pt.measured_ns) / pt.measured_ns
    res.points[i] = {label = pt.label, collective = pt.collective, algorithm = pt.algorithm,
                     dtype = pt.dtype, bytes_per_pe = pt.bytes, measured_ns = pt.measured_ns,
                     before_ns = before, after_ns = after, err_before = eb[i], err_after = ea[i],
                     fitted = math.abs(ea[i]) <= misfit}
  end
  res.J = last_J
  local perf = require("kbsim.perfmodel")
  res.mape_before, res.mape_after = mean_abs(eb), mean_abs(ea)
  res.gmae_before, res.gmae_after = perf.gmae(eb), perf.gmae(ea)
  res.sweeps, res.simulations = sweeps, sims
  return res
end

-- Why a point is off by rel_err (simulated / measured − 1) at `values`:
-- from its row of a Jacobian (row[a] = ∂(simulated / measured)/∂ keys[a]),
-- the value each setting would need to fit this point alone (the others
-- held). Names the setting inside its physical range needing the least
-- relative change (or says none is). The other points hold the setting at
-- its fitted value, so a large change means this point and the rest
-- disagree on how the time grows with it: a difference of the model's
-- structure, not of a value.
function M.diagnose(keys, values, row, rel_err, ranges)
  if not row then return "no Jacobian: the fit took no step" end
  local best, best_rel, any
  for a, k in ipairs(keys) do
    if row[a] ~= 0 then
      any = true
      local v = values[k]
      local need = v - rel_err / row[a]
      local r = ranges[k] or {}
      local inside = not ((r.min and need < r.min) or (r.max and need > r.max))
      local rel = math.abs(need - v) / math.max(math.abs(v), 1e-9)
      if inside and (not best_rel or rel < best_rel) then
        best, best_rel = {k = k, v = v, need = need}, rel
      end
    end
  end
  if not any then
    return "no fitted setting moves this point: its time is set by parts of the model not fitted"
  end
  if not best then
    return "no fitted setting inside its physical range fits this point alone: the model's "
      .. "structure differs here"
  end
  return ("alone it would need %s = %.4g (fitted %.4g, %.2fx), while the other points hold it "
    .. "at %.4g: they disagree on how this case grows with it — a difference of the model's "
    .. "structure, not of a value"):format(best.k, best.need, best.v,
    best.need / (best.v ~= 0 and best.v or 1), best.v)
end

-- M.fit, and, with o.exclude_misfits, while a point is off by more than
-- misfit: the worst one set aside and the fit run again on the rest,
-- started from the last values (a point far off would otherwise bend the
-- fit for all the others). Stops when every remaining point fits, or when
-- no more than #keys would remain. The result is the last fit's, with:
-- points in the given order (before_ns at the initial values; the set-aside
-- ones simulated at the final values, excluded = true, why = M.diagnose
-- with their Jacobian row of the fit that still held them); mape_before
-- and gmae_before over all points; mape_after over the points kept and
-- mape_all_after over all; first = the first fit's status, values and
-- MAPE; excluded = how many were set aside. Without exclusions it is
-- M.fit's result.
function M.fit_excluding(o)
  local first = M.fit(o)
  for i, p in ipairs(first.points) do
    if not p.fitted then
      p.why = M.diagnose(o.keys, first.values, first.J and first.J[i], p.err_after, o.ranges)
    end
  end
  if not o.exclude_misfits or first.status == "refused" then return first end
  local kept = {}
  for i = 1, #o.points do kept[i] = i end
  local out, rows = {}, {}
  local res = first
  while true do
    local worst, worst_j
    for j, p in ipairs(res.points) do
      if not p.fitted and (not worst or math.abs(p.err_after) > math.abs(worst.err_after)) then
        worst, worst_j = p, j
      end
    end
    if not worst then break end
    if #kept - 1 <= #o.keys then
      first.exclusion_why = ("setting aside %s would leave %d points for %d settings"):format(
        worst.label, #kept - 1, #o.keys)
      break
    end
    local i = table.remove(kept, worst_j)
    out[#out + 1], rows[i] = i, res.J and res.J[worst_j]
    local o2 = {}
    for k, v in pairs(o) do o2[k] = v end
    o2.points, o2.init = {}, res.values
    for _, k in ipairs(kept) do o2.points[#o2.points + 1] = o.points[k] end
    local nxt = M.fit(o2)
    nxt.sweeps, nxt.simulations = nxt.sweeps + res.sweeps, nxt.simulations + res.simulations
    res = nxt
    if res.status == "refused" then break end
  end
  if #out == 0 then
    if first.exclusion_why then first.exclusion_why = "no second fit: " .. first.exclusion_why end
    return first
  end
  table.sort(out)
  local xpts = {}
  for _, i in ipairs(out) do xpts[#xpts + 1] = o.points[i] end
  local lat, err = simulate(xpts, {res.values}, "calibrate_excluded")
  if err then error(("calibrate: a set-aside point failed: %s"):format(tostring(err)), 0) end
  local merged, eall, ekept = {}, {}, {}
  for j, i in ipairs(kept) do
    local p = res.points[j]
    p.before_ns, p.err_before = first.points[i].before_ns, first.points[i].err_before
    if not p.fitted then
      p.why = M.diagnose(o.keys, res.values, res.J and res.J[j], p.err_after, o.ranges)
    end
    merged[i] = p
  end
  for j, i in ipairs(out) do
    local q = {}
    for k, v in pairs(first.points[i]) do q[k] = v end
    q.after_ns = lat[1][j]
    q.err_after = (q.after_ns - q.measured_ns) / q.measured_ns
    q.fitted, q.excluded = false, true
    q.why = M.diagnose(o.keys, res.values, rows[i], q.err_after, o.ranges)
    merged[i] = q
  end
  for i, p in ipairs(merged) do
    eall[i] = p.err_after
    if not p.excluded then ekept[#ekept + 1] = p.err_after end
  end
  res.points, res.init = merged, first.init
  res.mape_before, res.gmae_before = first.mape_before, first.gmae_before
  res.mape_after, res.mape_all_after = mean_abs(ekept), mean_abs(eall)
  res.gmae_after = require("kbsim.perfmodel").gmae(ekept)
  res.first = {status = first.status, values = first.values, mape_after = first.mape_after}
  res.simulations = res.simulations + #xpts
  res.excluded = #out
  res.exclusion_why = first.exclusion_why
  return res
end

function M.format_values(v, keys)
  local t = {}
  for _, k in ipairs(keys) do t[#t + 1] = ("%s=%.6g"):format(k, v[k]) end
  return table.concat(t, ", ")
end

return M
