-- perfmodel_param.lua — reading PARAM COMMS-RES results and fitting them
local kb = require("kbsim")
local pr = require("kbsim.param_results")
local pm = require("kbsim.perfmodel")

local rows = assert(pr.read("data/param_comms.txt"))
kb.check(#rows == 20, ("%d rows, want 20"):format(#rows))
local r = rows[1]
kb.check(r.collective == "all_reduce" and r.size == 4096 and r.nelems == 1024 and r.line == 4,
  "first row: all_reduce 4096 B, 1024 elements, line 4")
kb.check(r.p50 == 4.8 and r.p75 == 4.9 and r.p95 == 5.1 and r.min == 4.7 and r.max == 5.2,
  "first row latencies")
kb.check(r.algbw == 0.847 and r.busbw == 1.271 and r.latency == r.p50, "first row bandwidths")
local last = rows[#rows]
kb.check(last.collective == "all_to_all" and last.size == 32768 and last.busbw == 4.209
  and last.line == 25, "last row")
local colls = pr.collectives(rows)
kb.check(#colls == 2 and colls[1] == "all_reduce" and colls[2] == "all_to_all", "collectives")
local ar = pr.series(rows, "all_reduce")
kb.check(#ar == 16 and ar[16].size == 134217728, "all_reduce series")
print(("read %d rows: %d all_reduce, %d all_to_all"):format(#rows, #ar,
  #pr.series(rows, "all_to_all")))

-- Another latency column on request.
local p95 = assert(pr.read("data/param_comms.txt", { latency = "p95" }))
kb.check(p95[1].latency == 5.1, "latency = p95")

-- The rows feed the model directly.
local model, err = pm.fit(ar, { factor = pm.busbw_factor("all_reduce", 4) })
kb.check(model ~= nil, err)
if model then
  local pred, sim = {}, {}
  for i, row in ipairs(ar) do
    pred[i] = pm.predict(model, row.size)
    sim[i] = row.latency
  end
  local g = pm.gmae(pm.abs_err(pred, sim))
  print(("fixture: ln_p %g sats_p %g overhead %g max_bw %g gmae %.2f %%"):format(
    model.ln_p, model.sats_p, model.overhead, model.max_bw, g * 100))
  kb.check(g < 0.05, ("gmae %.4f on the fixture"):format(g))
end

-- Without a header: the comms.py layout, TFlops column allowed; an old
-- line with no collective name; a log prefix before the tag.
local text = table.concat({
  "[1,0]<stdout>:\tCOMMS-RES-broadcast   1024   256   3.0   3.1   3.2   2.9   3.3   0.341   0.341   0.00000",
  "\tCOMMS-RES   2048   512   3.5   3.6   3.7   3.4   3.8   0.585   0.585",
  "\tCOMMS-RES-QUANT-all_reduce   1024   256   1.0   2.0   1.0   4.0",
}, "\n")
rows = assert(pr.parse(text, "inline"))
kb.check(#rows == 2 and rows[1].collective == "broadcast" and rows[1].tflops == 0
  and rows[2].collective == nil and rows[2].busbw == 0.585, "headerless rows")
local bad, msg = pr.parse("\tCOMMS-RES-all_reduce   1024   256   3.0", "short.txt")
kb.check(bad == nil and msg == "short.txt:1: malformed COMMS-RES row: COMMS-RES-all_reduce   1024   256   3.0", msg)
local _, oerr = pr.read("data/no_such_file.txt")
kb.check(oerr:find("cannot open PARAM results 'data/no_such_file.txt'", 1, true), oerr)
print("perfmodel_param ok")
