-- perfmodel_noconv.lua — a fit that cannot converge says so and keeps the data
local kb = require("kbsim")
local pm = require("kbsim.perfmodel")

local truth = { L = 1.9472268, x0 = 19.81699009, k = 0.55556443, b = 0.95523816 }
local pts = {}
for s = 10, 34 do
  local bw = 10 ^ pm.sigmoid(truth, s)
  pts[#pts + 1] = { size = 2 ^ s, latency = 2 ^ s / bw / 1e3, busbw = bw }
end
-- Three iterations from a far-off start are not enough.
local model, err, partial = pm.fit(pts, { max_iter = 3, init = { L = 0.1, x0 = 40, k = 3, b = 0 } })
kb.check(model == nil, "fit reported as failed")
print(err)
kb.check(err:match("^fit did not converge after 3 iterations %(cost [%d.e+-]+%)$"), err)
kb.check(partial and #partial.points == #pts, "data kept")
kb.check(partial.ln_p == 14 and partial.sats_p == 29, "turning points kept")
kb.check(partial.fit_error == err and partial.last_iterate.iterations == 3, "last iterate kept")
kb.check(partial.L == nil, "no sigmoid in the partial model")
local _, serr = pm.save(partial, os.tmpname())
kb.check(serr == "model has no fitted sigmoid to save", serr)

-- The data alone can still be drawn.
local prefix = os.tmpname()
local fig = assert(pm.figure(partial, prefix, { render = false }))
local f = assert(io.open(fig.csv))
local header = f:read("l")
local n = 0
for _ in f:lines() do n = n + 1 end
f:close()
kb.check(header == "size,log2_size,latency,busbw", header)
kb.check(n == #pts, ("%d data rows, want %d"):format(n, #pts))
os.remove(fig.csv); os.remove(fig.gp); os.remove(prefix)

-- A series that is all noise: either a fit or a message, never an error.
local junk = {}
for i = 1, 12 do
  junk[i] = { size = 2 ^ i, latency = 1 + (i * 37 % 11), busbw = 1 + (i * 53 % 7) }
end
local ok, m2, e2 = pcall(pm.fit, junk)
kb.check(ok and (m2 ~= nil or type(e2) == "string"), "noise fitted or reported")
print("perfmodel_noconv ok")
