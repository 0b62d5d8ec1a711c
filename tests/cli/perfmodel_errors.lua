-- perfmodel_errors.lua — abs error, GMAE and the error histogram on known errors
local kb = require("kbsim")
local pm = require("kbsim.perfmodel")

local e = pm.abs_err({ 110, 90, 100, 300 }, { 100, 100, 100, 200 })
kb.check(#e == 4 and math.abs(e[1] - 0.1) < 1e-12 and math.abs(e[2] - 0.1) < 1e-12
  and e[3] == 0 and e[4] == 0.5, "element-wise abs_err")
kb.check(pm.abs_err(105, 100) - 0.05 < 1e-12, "scalar abs_err")

-- exp(mean(ln(|e| + 4e-4))): equal errors give e + 4e-4 back.
local g = pm.gmae({ 0.1, 0.1, 0.1 })
kb.check(math.abs(g - 0.1004) < 1e-12, ("gmae of equal errors %.10g"):format(g))
g = pm.gmae({ 0.0996, 0.0096 })
-- sqrt(0.1 · 0.01) = 0.0316227766
kb.check(math.abs(g - math.sqrt(0.1 * 0.01)) < 1e-12, ("gmae %.10g"):format(g))
print(("gmae %.6f"):format(pm.gmae({ 0.02, 0.05, 0.3 })))
kb.check(pm.gmae({}) == nil, "gmae of nothing")

-- One error per bin, an edge goes up, 400 % is in the last bin, beyond is over.
local errs = { 0, 0.049, 0.05, 0.12, 0.17, 0.2, 0.27, 0.3, 0.45, 0.5, 0.7, 0.99,
  1.2, 1.5, 2.5, 4.0, 4.01, 10, -0.03 }
local h = pm.histogram(errs)
local want = { 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 }
kb.check(#h.counts == 15, "15 bins")
for i, w in ipairs(want) do
  kb.check(h.counts[i] == w, ("bin %g-%g %%: %d, want %d"):format(
    h.edges[i], h.edges[i + 1], h.counts[i], w))
end
kb.check(h.over == 2 and h.n == #errs, ("over %d, want 2"):format(h.over))
print(pm.histogram_text(h))

-- predict refuses what is not a model, or not a size, by name
local ok, err = pcall(pm.predict, nil, 4096)
kb.check(not ok and err:find("perfmodel.predict: a model from perfmodel.fit or perfmodel.load is "
  .. "expected, got nil", 1, true), "predict(nil): " .. tostring(err))
ok, err = pcall(pm.predict, {ln_p = 3, sats_p = 20, overhead = 1}, 0)
kb.check(not ok and err:find("size must be a positive number of bytes, got 0", 1, true),
  "predict(model, 0): " .. tostring(err))
print("perfmodel_errors ok")
