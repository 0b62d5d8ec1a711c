-- perfmodel_fit.lua — turning points and the Levenberg–Marquardt sigmoid fit
local kb = require("kbsim")
local pm = require("kbsim.perfmodel")

local truth = { L = 1.9472268, x0 = 19.81699009, k = 0.55556443, b = 0.95523816 }

local function within(p, pct, what)
  for _, key in ipairs({ "L", "x0", "k", "b" }) do
    local rel = math.abs(p[key] - truth[key]) / math.abs(truth[key])
    kb.check(rel <= pct / 100, ("%s: %s = %.8g, want %.8g within %g %%"):format(
      what, key, p[key], truth[key], pct))
  end
end

-- Exact synthetic data: the fit recovers the parameters.
local xs, ys = {}, {}
for s = 12, 32 do
  xs[#xs + 1] = s
  ys[#ys + 1] = pm.sigmoid(truth, s)
end
local p, err = pm.fit_sigmoid(xs, ys)
kb.check(p ~= nil, err)
if p then
  within(p, 1, "exact data")
  within(p, 1e-4, "exact data (tight)")
  print(("exact: L %.7f x0 %.8f k %.8f b %.8f in %d iterations"):format(
    p.L, p.x0, p.k, p.b, p.iterations))
end

-- With ±0.5 % deterministic noise on the bandwidth.
local noisy = {}
for i, y in ipairs(ys) do noisy[i] = y + math.log(1 + 0.005 * math.sin(7.3 * i), 10) end
p, err = pm.fit_sigmoid(xs, noisy)
kb.check(p ~= nil, err)
if p then within(p, 1, "noisy data") end

-- Through fit(): a series whose busbw follows the sigmoid exactly.
local pts = {}
for s = 10, 34 do
  local size = 2 ^ s
  local bw = 10 ^ pm.sigmoid(truth, s)
  pts[#pts + 1] = { size = size, latency = size / bw / 1e3, busbw = bw }
end
-- Handed over shuffled: fit sorts by size.
pts[3], pts[20] = pts[20], pts[3]
local model, ferr = pm.fit(pts, { factor = 1.5, collective = "all_reduce" })
kb.check(model ~= nil, ferr)
if model then
  within(model, 1, "fit()")
  kb.check(model.ln_idx == 5 and model.ln_p == 14, ("ln %d / 2^%g, want 5 / 2^14"):format(
    model.ln_idx, model.ln_p))
  kb.check(model.sats_idx == 20 and model.sats_p == 29, ("sats %d / 2^%g, want 20 / 2^29"):format(
    model.sats_idx, model.sats_p))
  kb.check(model.factor == 1.5 and model.collective == "all_reduce", "options kept")
  print(("fit(): ln_p %g sats_p %g overhead %.6g max_bw %.6g"):format(
    model.ln_p, model.sats_p, model.overhead, model.max_bw))
end

-- Turning points of a hand-made series (1-based indices).
local lat = { 5, 5, 5, 5, 5, 5, 5.2, 6, 8, 12, 20, 36 }
local bw = { 1, 2, 4, 8, 16, 32, 50, 60, 80, 96, 99, 100 }
local hand = {}
for i = 1, #lat do hand[i] = { size = 2 ^ (i + 1), latency = lat[i], busbw = bw[i] } end
local tp = assert(pm.turning_points(hand))
-- Scanning from 0-based i = 5: |(8 − 5.2)/(2·6)| = 0.23 > 0.1 first at i = 7
-- → ln = 6; scanning down from 10: busbw 80 < 95 first at i = 8 → sats = 10.
kb.check(tp.ln_idx == 7, ("hand ln_idx %d, want 7"):format(tp.ln_idx))
kb.check(tp.sats_idx == 11, ("hand sats_idx %d, want 11"):format(tp.sats_idx))
kb.check(tp.ln_p == 8 and tp.sats_p == 12, ("hand ln_p %g sats_p %g, want 8 and 12"):format(
  tp.ln_p, tp.sats_p))
kb.check(tp.overhead == 5 and tp.max_bw == 100, "hand overhead 5, max_bw 100")
print(("hand: ln_idx %d sats_idx %d"):format(tp.ln_idx, tp.sats_idx))

-- Defaults: no latency knee → ln index 4 (0-based); no bandwidth dip →
-- saturation at the last point.
local flat = {}
for i = 1, 8 do flat[i] = { size = 2 ^ i, latency = 3, busbw = 10 } end
tp = assert(pm.turning_points(flat))
kb.check(tp.ln_idx == 5 and tp.sats_idx == 8, ("flat: ln_idx %d sats_idx %d, want 5 and 8"):format(
  tp.ln_idx, tp.sats_idx))

-- Bad data is reported, never raised.
local bad = { { size = 4, latency = 1, busbw = 1 }, { size = 8, latency = 0 / 0, busbw = 1 } }
local r, msg = pm.turning_points(bad)
kb.check(r == nil and msg:find("point 2: 'latency' must be a positive number", 1, true), msg)
r, msg = pm.turning_points({ { size = 4, latency = 1, busbw = 1 } })
kb.check(r == nil and msg == "need at least 6 points for the turning points, got 1", msg)
r, msg = pm.fit_sigmoid({ 1, 2, 3 }, { 1, 2, 3 })
kb.check(r == nil and msg == "need at least 4 points to fit the sigmoid, got 3", msg)
print("perfmodel_fit ok")
