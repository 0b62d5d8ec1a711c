-- param_fuzz.lua — mutated PARAM COMMS-RES results files through kbsim.param_results and
-- perfmodel.fit: each must give rows a reader can use (every column it needs, as finite
-- numbers) or nil and "FILE:LINE: problem", never raise from inside the library or crash.
--
--   kbsim -o OUT tests/fuzz/param_fuzz.lua [seed=N] [cases=N] [base=FILE]
--
-- The seed fixes the mutants; tests/fuzz/README.md says how to run it for longer.
local pr = require("kbsim.param_results")
local pm = require("kbsim.perfmodel")
local here = arg[0]:gsub("[^/]*$", "")
local fz = dofile(here .. "mutate.lua")

local finite = fz.finite

local function check_rows(rows, where)
  for i, r in ipairs(rows) do
    for _, k in ipairs({"size", "latency", "algbw", "busbw"}) do
      if not finite(r[k]) then
        error(("%s: row %d: '%s' is %s"):format(where, i, k, tostring(r[k])), 0)
      end
    end
    if not (r.size > 0) then error(("%s: row %d: size %s"):format(where, i, r.size), 0) end
    if r.collective ~= nil and type(r.collective) ~= "string" then
      error(("%s: row %d: collective is a %s"):format(where, i, type(r.collective)), 0)
    end
  end
  -- what perfmodel and comms_bench do with them
  for _, c in ipairs(pr.collectives(rows)) do
    local pts = {}
    for _, r in ipairs(pr.series(rows, c)) do
      pts[#pts + 1] = {size = r.size, latency = r.latency, busbw = r.busbw}
    end
    local ok, err = pcall(pm.fit, pts, {collective = c})
    if not ok then error(("%s: perfmodel.fit raised: %s"):format(where, tostring(err)), 0) end
  end
end

fz.drive({
  name = "param_fuzz",
  base = here .. "../cli/data/param_comms.txt",
  tokens = {"COMMS-RES", "COMMS-RES-all_reduce", "COMMS-RES-QUANT", "COMMS-RES-", "size", "(B)",
            "collective", "line", "latency", "p50", "busbw(gb/s)", "algbw(gb/s)", "total-size",
            "tflops"},
  parse = pr.parse,
  read = pr.read,
  check = check_rows,
}, arg)
