-- perfmodel.lua — PARAM-style communication performance model: turning points, sigmoid bandwidth fit, prediction, error statistics
--
-- Units follow PARAM: sizes in bytes, bandwidths in GB/s (1e9 B/s), times in
-- µs by default. bytes / (GB/s) = ns, so a bandwidth term is divided by 1000
-- to give µs; a model fitted with unit = "ns" keeps it in ns. The formulas
-- are in docs/perfmodel.md and HARDWARE_MODEL.md.
local M = {}
local lm = require("kbsim.lm")

-- Error histogram bin edges in percent (docs/perfmodel.md says which bin
-- takes a value on an edge).
M.HIST_EDGES = { 0, 5, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 150, 200, 300, 400 }

-- Keeps ln() finite for a perfect prediction and stops a few exact points
-- from dominating the geometric mean.
M.GMAE_EPS = 4e-4

-- Time units per ns, for the bytes ÷ GB/s terms.
local UNIT_SCALE = { us = 1e-3, ns = 1 }

local log, exp, abs, huge = math.log, math.exp, math.abs, math.huge

local function log2(x) return log(x, 2) end

local function finite(v)
  return type(v) == "number" and v == v and v ~= huge and v ~= -huge
end

-- nccl-tests bus-bandwidth factors: busbw = algbw · factor, so that busbw
-- of a correct implementation is comparable to the link bandwidth.
local FACTORS = {
  all_reduce = function(n) return 2 * (n - 1) / n end,
  all_gather = function(n) return (n - 1) / n end,
  reduce_scatter = function(n) return (n - 1) / n end,
  all_to_all = function(n) return (n - 1) / n end,
  broadcast = function() return 1 end,
  reduce = function() return 1 end,
}

-- The bus-bandwidth factor of a collective on n ranks.
function M.busbw_factor(collective, n)
  local f = FACTORS[collective]
  if f == nil then
    error(("unknown collective '%s'"):format(tostring(collective)), 2)
  end
  if math.type(n) ~= "integer" or n < 1 then
    error(("bad rank count '%s' (want an integer >= 1)"):format(tostring(n)), 2)
  end
  return f(n)
end

-- A copy of the points sorted by size, or nil and a message naming the
-- first bad point (by its position in the caller's list).
local function sorted_points(points)
  if type(points) ~= "table" then return nil, "points must be a table" end
  local pts = {}
  for i, p in ipairs(points) do
    for _, key in ipairs({ "size", "latency", "busbw" }) do
      local v = type(p) == "table" and p[key] or nil
      if not finite(v) or v <= 0 then
        return nil, ("point %d: '%s' must be a positive number, got %s"):format(
          i, key, tostring(v))
      end
    end
    pts[i] = p
  end
  table.sort(pts, function(a, b) return a.size < b.size end)
  return pts
end

-- Turning points of a sorted series (see M.turning_points).
local function turning(pts)
  local n = #pts
  if n < 6 then
    return nil, ("need at least 6 points for the turning points, got %d"):format(n)
  end
  local max_bw = 0
  for _, p in ipairs(pts) do
    if p.busbw > max_bw then max_bw = p.busbw end
  end
  -- Indices are 0-based here, exactly as the design text states them.
  local function bw(i) return pts[i + 1].busbw end
  local function lat(i) return pts[i + 1].latency end
  -- No point below 95 % of the peak: nothing saturates before the end.
  local sats = n - 1
  for i = n - 2, 0, -1 do
    if bw(i) < 0.95 * max_bw then
      sats = math.min(i + 2, n - 1)
      break
    end
  end
  local ln = 4
  for i = 5, n - 2 do
    if abs((lat(i + 1) - lat(i - 1)) / (2 * lat(i))) > 0.1 then
      ln = i - 1
      break
    end
  end
  return {
    ln_idx = ln + 1,
    sats_idx = sats + 1,
    ln_p = log2(pts[ln + 1].size),
    sats_p = log2(pts[sats + 1].size),
    overhead = lat(math.max(ln - 1, 0)),
    max_bw = max_bw,
  }
end

-- Turning points of a series of points {size=B, latency=t, busbw=GB/s}:
-- {ln_idx, sats_idx (1-based indices into the series sorted by size),
--  ln_p, sats_p (log2 of their sizes), overhead (a latency), max_bw}.
-- Returns nil and a message on bad or too few points.
function M.turning_points(points)
  local pts, err = sorted_points(points)
  if not pts then return nil, err end
  return turning(pts)
end

-- The sigmoid in log space: log10(busbw) as a function of s = log2(size).
local function sigmoid(L, x0, k, b, s)
  return L / (1 + exp(-k * (s - x0))) + b
end

M.sigmoid = function(p, s) return sigmoid(p.L, p.x0, p.k, p.b, s) end

-- Value and gradient with respect to (L, x0, k, b). σ(1−σ) is formed from σ
-- so that a saturated exponential gives 0, not inf/inf.
local function sigmoid_grad(p, s)
  local L, x0, k = p[1], p[2], p[3]
  local sg = 1 / (1 + exp(-k * (s - x0)))
  local d = sg * (1 - sg)
  return L * sg + p[4], sg, -L * d * k, L * d * (s - x0), 1
end

-- The sigmoid as a least-squares problem for kbsim.lm: residuals y − f
-- and the Jacobian of f.
local function sigmoid_problem(xs, ys)
  return {
    n = 4,
    linearize = function(p)
      local r, J = {}, {}
      for i = 1, #xs do
        local f, j1, j2, j3, j4 = sigmoid_grad(p, xs[i])
        r[i], J[i] = ys[i] - f, {j1, j2, j3, j4}
      end
      return r, J
    end,
    residuals = function(p)
      local r = {}
      for i = 1, #xs do r[i] = ys[i] - sigmoid(p[1], p[2], p[3], p[4], xs[i]) end
      return r
    end,
  }
end

-- A starting point read off the data: b and L from the range of y, x0 where
-- y crosses half way, k from the slope there (a logistic's slope at x0 is
-- L·k/4).
local function initial_guess(xs, ys)
  local ymin, ymax = huge, -huge
  for i = 1, #ys do
    if ys[i] < ymin then ymin = ys[i] end
    if ys[i] > ymax then ymax = ys[i] end
  end
  local L, b = ymax - ymin, ymin
  local half = (ymin + ymax) / 2
  local x0, k = (xs[1] + xs[#xs]) / 2, 1
  for i = 2, #xs do
    local ya, yb = ys[i - 1], ys[i]
    if (ya - half) * (yb - half) <= 0 and ya ~= yb then
      x0 = xs[i - 1] + (half - ya) / (yb - ya) * (xs[i] - xs[i - 1])
      local slope = (yb - ya) / (xs[i] - xs[i - 1])
      if L > 0 and finite(slope) and slope ~= 0 then
        k = 4 * slope / L
        k = (k < 0 and -1 or 1) * math.min(math.max(abs(k), 0.05), 5)
      end
      break
    end
  end
  return { L, x0, k, b }
end

local function params_table(p)
  return { L = p[1], x0 = p[2], k = p[3], b = p[4] }
end

-- Fits y = L/(1+exp(−k(x−x0))) + b by Levenberg–Marquardt with Marquardt's
-- diagonal scaling. opts: max_iter (200), xtol (1e-10, step relative to
-- |p|), ftol (1e-12, relative cost decrease), gtol (1e-12, |Jᵀr|∞),
-- init ({L=, x0=, k=, b=} instead of the guess from the data).
-- Returns {L, x0, k, b, cost, iterations} or nil, a message and
-- {L, x0, k, b, cost, iterations} of the last iterate.
function M.fit_sigmoid(xs, ys, opts)
  opts = opts or {}
  if type(xs) ~= "table" or type(ys) ~= "table" or #xs ~= #ys then
    return nil, "x and y must be tables of the same length"
  end
  if #xs < 4 then
    return nil, ("need at least 4 points to fit the sigmoid, got %d"):format(#xs)
  end
  for i = 1, #xs do
    if not finite(xs[i]) or not finite(ys[i]) then
      return nil, ("point %d is not a finite number"):format(i)
    end
  end
  local max_iter = opts.max_iter or 200
  local xtol, ftol, gtol = opts.xtol or 1e-10, opts.ftol or 1e-12, opts.gtol or 1e-12
  local p
  if opts.init then
    local q = opts.init
    p = { q.L, q.x0, q.k, q.b }
  else
    p = initial_guess(xs, ys)
  end
  local q, why, info = lm.minimize(sigmoid_problem(xs, ys), p,
    {max_iter = max_iter, xtol = xtol, ftol = ftol, gtol = gtol})
  if q then info = why end
  local result = params_table(q or info.p)
  result.cost, result.iterations = info.cost, info.iterations
  if not q then return nil, why, result end
  return result
end

local MODEL_NUMBERS = { "ln_p", "sats_p", "overhead", "max_bw", "L", "x0", "k", "b", "factor" }

-- Fits the model to a series of points {size=B, latency=µs, busbw=GB/s}.
-- opts: unit ("us" or "ns": the unit of the latencies), factor (busbw
-- factor stored for predict, default 1), collective (a name kept in the
-- model), and the fit_sigmoid options.
-- Returns the model, or nil, a message and the model without the sigmoid
-- (points, turning points, fit_error), so the data can still be shown.
function M.fit(points, opts)
  opts = opts or {}
  local unit = opts.unit or "us"
  if not UNIT_SCALE[unit] then
    error(("unknown time unit '%s' (want us or ns)"):format(tostring(unit)), 2)
  end
  local model = { unit = unit, factor = opts.factor or 1, collective = opts.collective }
  local pts, err = sorted_points(points)
  if not pts then return nil, err, model end
  model.points = pts
  local tp
  tp, err = turning(pts)
  if not tp then
    model.fit_error = err
    return nil, err, model
  end
  for key, v in pairs(tp) do model[key] = v end
  local xs, ys = {}, {}
  for i = tp.ln_idx, tp.sats_idx do
    xs[#xs + 1] = log2(pts[i].size)
    ys[#ys + 1] = log(pts[i].busbw, 10)
  end
  if #xs < 4 then
    err = ("need at least 4 points between the turning points (sizes 2^%g to 2^%g), got %d")
      :format(tp.ln_p, tp.sats_p, #xs)
    model.fit_error = err
    return nil, err, model
  end
  local p, last
  p, err, last = M.fit_sigmoid(xs, ys, opts)
  if not p then
    model.fit_error = err
    model.last_iterate = last
    return nil, err, model
  end
  model.L, model.x0, model.k, model.b = p.L, p.x0, p.k, p.b
  model.cost, model.iterations = p.cost, p.iterations
  return model
end

-- Predicted time of one collective of `size` bytes, in the model's unit.
-- factor defaults to the model's. s = log2(size):
--   s ≤ ln_p         overhead
--   s > sats_p       size·factor/max_bw + overhead
--   otherwise        size·factor/10^sigmoid(s)
function M.predict(model, size, factor)
  if type(model) ~= "table" or type(model.ln_p) ~= "number" then
    error(("perfmodel.predict: a model from perfmodel.fit or perfmodel.load is expected, got %s")
      :format(type(model)), 2)
  end
  if type(size) ~= "number" or not (size > 0) then
    error(("perfmodel.predict: size must be a positive number of bytes, got %s"):format(tostring(size)), 2)
  end
  local m = factor or model.factor or 1
  local scale = UNIT_SCALE[model.unit or "us"]
  local s = log2(size)
  if s <= model.ln_p then return model.overhead end
  if s > model.sats_p then return size * m / model.max_bw * scale + model.overhead end
  return size * m / 10 ^ sigmoid(model.L, model.x0, model.k, model.b, s) * scale
end

-- |pred − sim| / sim, for two numbers or element-wise for two lists.
function M.abs_err(pred, sim)
  if type(pred) == "number" then return abs(pred - sim) / sim end
  local out = {}
  for i = 1, #pred do out[i] = abs(pred[i] - sim[i]) / sim[i] end
  return out
end

-- Geometric mean absolute error exp(mean(ln(|e| + 4e−4))) of relative errors.
function M.gmae(errs)
  if #errs == 0 then return nil, "no errors to average" end
  local sum = 0
  for i = 1, #errs do sum = sum + log(abs(errs[i]) + M.GMAE_EPS) end
  return exp(sum / #errs)
end

-- Counts of relative errors (fractions: 0.05 is 5 %) per bin
-- [edge_i, edge_i+1) %, the last bin closed; |e| beyond the last edge is
-- counted in `over`. edges defaults to M.HIST_EDGES.
function M.histogram(errs, edges)
  edges = edges or M.HIST_EDGES
  local counts = {}
  for i = 1, #edges - 1 do counts[i] = 0 end
  local over, under = 0, 0
  for _, e in ipairs(errs) do
    local pct = abs(e) * 100
    if pct > edges[#edges] or pct ~= pct then
      over = over + 1
    elseif pct < edges[1] then
      under = under + 1
    else
      local bin = #edges - 1
      for i = 1, #edges - 1 do
        if pct < edges[i + 1] then bin = i; break end
      end
      counts[bin] = counts[bin] + 1
    end
  end
  return { edges = edges, counts = counts, over = over, under = under, n = #errs }
end

-- The histogram as text, one bin a line: "  5-10 %      3".
function M.histogram_text(h)
  local lines = {}
  for i, c in ipairs(h.counts) do
    local label = ("%g-%g %%"):format(h.edges[i], h.edges[i + 1])
    lines[#lines + 1] = ("%12s %6d"):format(label, c)
  end
  lines[#lines + 1] = ("%12s %6d"):format((">%g %%"):format(h.edges[#h.edges]), h.over)
  return table.concat(lines, "\n")
end

-- Writes the fitted parameters as a Lua table (loaded back by M.load).
-- Returns true or nil and a message.
function M.save(model, path)
  if model.L == nil then return nil, "model has no fitted sigmoid to save" end
  local lines = { "-- kbsim perfmodel parameters (lua/kbsim/perfmodel.lua)", "return {",
    "  version = 1,", ("  unit = %q,"):format(model.unit or "us") }
  if model.collective then
    lines[#lines + 1] = ("  collective = %q,"):format(model.collective)
  end
  for _, key in ipairs(MODEL_NUMBERS) do
    local v = model[key]
    if key == "factor" then v = v or 1 end
    lines[#lines + 1] = ("  %s = %.17g,"):format(key, v)
  end
  lines[#lines + 1] = "}"
  local f, err = io.open(path, "w")
  if not f then return nil, ("cannot write model '%s': %s"):format(path, err) end
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
  return true
end

-- The table a parameter file written by M.save holds, read as data (never
-- run: a file of code could loop forever or exhaust memory). Lines: comments,
-- "return {", "key = NUMBER," or "key = \"STRING\",", "}".
-- Returns the table or nil and "PATH:LINE: problem".
local function read_params(text, path)
  local t, opened, closed, lineno = {}, false, false, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    lineno = lineno + 1
    line = line:gsub("^%s+", ""):gsub("%s+$", "")
    local function bad(why) return nil, ("%s:%d: %s"):format(path, lineno, why) end
    if line == "" or line:find("^%-%-") then
      -- blank or comment
    elseif closed then
      return bad("text after the closing '}'")
    elseif not opened then
      if line ~= "return {" then return bad("not a perfmodel parameter file (want 'return {')") end
      opened = true
    elseif line == "}" then
      closed = true
    else
      local key, value = line:match("^([%a_][%w_]*)%s*=%s*(.-),?$")
      if not key then return bad("not a 'key = value,' line") end
      if t[key] ~= nil then return bad(("'%s' given twice"):format(key)) end
      local str = value:match('^"([^"\\%c]*)"$')
      if str then t[key] = str
      elseif value:find("^[-+%d.][%w.+-]*$") and tonumber(value) then t[key] = tonumber(value)
      else return bad(("'%s': not a number or a plain quoted string"):format(key)) end
    end
  end
  if not closed then return nil, ("'%s': not a perfmodel parameter table (no closing '}')"):format(path) end
  return t
end

-- Reads parameters written by M.save (as data; see read_params).
-- Returns a model for M.predict or nil and a message.
function M.load(path)
  local f, err = io.open(path, "r")
  if not f then return nil, ("cannot open model '%s': %s"):format(path, err) end
  local text, rerr = f:read("a")
  f:close()
  if not text then return nil, ("cannot read model '%s': %s"):format(path, rerr) end
  local t, perr = read_params(text, path)
  if not t then return nil, perr end
  if type(t) ~= "table" then return nil, ("'%s': not a perfmodel parameter table"):format(path) end
  for _, key in ipairs(MODEL_NUMBERS) do
    if not finite(t[key]) then
      return nil, ("'%s': missing or bad number '%s'"):format(path, key)
    end
  end
  if not UNIT_SCALE[t.unit] then
    return nil, ("'%s': unknown time unit '%s'"):format(path, tostring(t.unit))
  end
  local model = { unit = t.unit, collective = t.collective }
  for _, key in ipairs(MODEL_NUMBERS) do model[key] = t[key] end
  return model
end


-- Writes PREFIX.csv (data and model per point) and PREFIX.gp (gnuplot:
-- latency and busbw against size, log-log, turning points dashed) and, when
-- gnuplot is on PATH and opts.render is not false, renders PREFIX.svg
-- (PREFIX.png with opts.format = "png") in the background, as
-- results.figure does: gnuplot is started and figure returns at once; the
-- image appears whole when it is drawn (results.wait_figures() waits for
-- it; the run waits for it before it exits, and fails if gnuplot did).
-- Accepts a fitted model or the partial model of a failed fit (data only).
-- Returns {csv=, gp=, image=} (image nil if not rendered) or nil and a message.
function M.figure(model, prefix, opts)
  opts = opts or {}
  local pts = model.points
  if not pts or #pts == 0 then return nil, "model holds no data points to plot" end
  local fitted = model.L ~= nil
  local unit = model.unit or "us"
  local m = model.factor or 1
  local format = opts.format or "svg"
  local TERMINALS = {
    svg = "set terminal svg size 1100,450 dynamic enhanced",
    png = "set terminal pngcairo size 1100,450 enhanced",
  }
  if not TERMINALS[format] then
    return nil, ("unknown figure format '%s' (want svg or png)"):format(tostring(format))
  end
  local csv_path, gp_path = prefix .. ".csv", prefix .. ".gp"
  local img_path = prefix .. "." .. format
  local f, err = io.open(csv_path, "w")
  if not f then return nil, ("cannot write figure data '%s': %s"):format(csv_path, err) end
  f:write("size,log2_size,latency,busbw", fitted and ",pred_latency,pred_busbw" or "", "\n")
  for _, p in ipairs(pts) do
    f:write(("%.17g,%.17g,%.17g,%.17g"):format(p.size, log2(p.size), p.latency, p.busbw))
    if fitted then
      local t = M.predict(model, p.size)
      -- Effective bus bandwidth of the prediction, GB/s = bytes / ns.
      local bw = p.size * m / (t / UNIT_SCALE[unit])
      f:write((",%.17g,%.17g"):format(t, bw))
    end
    f:write("\n")
  end
  f:close()
  local title = opts.title or model.collective or "communication model"
  local gp = {
    "# " .. gp_path .. " — written by lua/kbsim/perfmodel.lua; run: gnuplot " .. gp_path,
    -- `out` (without extension): the background render draws into a
    -- temporary file renamed into place; `gnuplot PREFIX.gp` writes PREFIX
    ("if (!exists(\"out\")) out = %q"):format(prefix),
    TERMINALS[format],
    ("set output out.%q"):format("." .. format),
    "set datafile separator ','",
    "set key top left",
    "set grid",
    "set logscale x 2",
    "set logscale y 10",
    "set format x '2^{%L}'",
    "set xlabel 'message size (B)'",
    ("set multiplot layout 1,2 title %q"):format(title),
  }
  if model.ln_p then
    for _, e in ipairs({ model.ln_p, model.sats_p }) do
      gp[#gp + 1] = ("set arrow from first 2**%.17g, graph 0 to first 2**%.17g, graph 1 "
        .. "nohead dashtype 2 linecolor rgb 'dark-green'"):format(e, e)
    end
  end
  local data = ("%q"):format(csv_path)
  gp[#gp + 1] = ("set ylabel 'latency (%s)'"):format(unit == "us" and "µs" or "ns")
  gp[#gp + 1] = "plot " .. data .. " using 1:3 skip 1 with linespoints title 'data'"
    .. (fitted and (", '' using 1:5 skip 1 with lines linewidth 2 title 'model'") or "")
  gp[#gp + 1] = "set ylabel 'bus bandwidth (GB/s)'"
  gp[#gp + 1] = "plot " .. data .. " using 1:4 skip 1 with linespoints title 'data'"
    .. (fitted and (", '' using 1:6 skip 1 with lines linewidth 2 title 'model'") or "")
  gp[#gp + 1] = "unset multiplot"
  f, err = io.open(gp_path, "w")
  if not f then return nil, ("cannot write gnuplot script '%s': %s"):format(gp_path, err) end
  f:write(table.concat(gp, "\n"), "\n")
  f:close()
  local out = { csv = csv_path, gp = gp_path }
  local results = require("kbsim.results")
  if opts.render ~= false and results.have_gnuplot() then
    -- from here: the script names its files by the paths given
    local tmp = prefix .. ".tmp"
    require("kbsim")._render.start(prefix:match("[^/]*$"), ".", gp_path,
      {"-e", "out='" .. tmp:gsub("'", "''") .. "'"}, {tmp .. "." .. format}, {img_path})
    out.image = img_path
  end
  return out
end

return M
