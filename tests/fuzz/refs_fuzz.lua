-- refs_fuzz.lua — mutated references CSVs (scenarios/refs/ccl_references.csv) through
-- kbsim.references: each must give references a figure can draw (names unique and printable,
-- numbers finite, sizes positive) or nil and "FILE:LINE: problem", never raise from inside the
-- reader or crash.
--
--   kbsim -o OUT tests/fuzz/refs_fuzz.lua [seed=N] [cases=N] [base=FILE]
--
-- The seed fixes the mutants; tests/fuzz/README.md says how to run it for longer.
local refs_csv = require("kbsim.references")
local here = arg[0]:gsub("[^/]*$", "")
local fz = dofile(here .. "mutate.lua")

local finite = fz.finite

local function check(refs, where)
  local seen = {}
  for i, r in ipairs(refs) do
    local function bad(what) error(("%s: reference %d: %s"):format(where, i, what), 0) end
    if type(r.name) ~= "string" or r.name == "" or r.name:find("%c") then bad("name") end
    if seen[r.name] then bad("name twice") end
    seen[r.name] = true
    if r.kind == "point" then
      if not (finite(r.bytes_per_pe) and r.bytes_per_pe > 0) then bad("bytes_per_pe") end
      if not (finite(r.latency_ns) and r.latency_ns > 0) then bad("latency_ns") end
    elseif r.kind == "line" then
      if not (finite(r.intercept_ns) and finite(r.slope_ns)) then bad("intercept or slope") end
      if not (finite(r.slope_bits) and r.slope_bits > 0) then bad("slope_bits") end
      -- what milestone_1h_ccl makes of it: a gnuplot function of x
      local _ = ("%.10g + %.10g * (x * 8 / %.10g)"):format(r.intercept_ns, r.slope_ns,
                                                          r.slope_bits)
    else
      bad("kind " .. tostring(r.kind))
    end
  end
end

fz.drive({
  name = "refs_fuzz",
  base = here .. "../../scenarios/refs/ccl_references.csv",
  tokens = {"point", "line", "curve", "name", "kind", "bytes_per_pe", "latency_ns",
            "intercept_ns", "slope_ns", "slope_bits", "fsim_single_device", "analytic_1346ns",
            refs_csv.HEADER},
  parse = refs_csv.parse,
  read = refs_csv.read,
  check = check,
}, arg)
