-- refs_fuzz.lua — mutated references CSVs (scenarios/refs/ccl_references.csv) through
-- kbsim.references: each must give references a figure can draw (names unique and printable,
-- numbers finite, sizes positive) or nil and "FILE:LINE: problem", never raise from inside the
-- reader or crash.
--
--   kbsim -o OUT tests/fuzz/refs_fuzz.lua [seed=N] [cases=N] [base=FILE]
--
-- The seed fixes the mutants; tests/fuzz/README.md says how to run it for longer.
local kb = require("kbsim")
local refs_csv = require("kbsim.references")
local fz = dofile(arg[0]:gsub("[^/]*$", "") .. "mutate.lua")

local SEED, CASES = 1, 1000
local BASE = arg[0]:gsub("[^/]*$", "") .. "../../scenarios/refs/ccl_references.csv"
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(.*)$")
  if k == "seed" and math.tointeger(tonumber(v)) then SEED = math.tointeger(tonumber(v))
  elseif k == "cases" and math.tointeger(tonumber(v)) then CASES = math.tointeger(tonumber(v))
  elseif k == "base" then BASE = v
  else error(("refs_fuzz: bad argument '%s' (seed=N, cases=N, base=FILE)"):format(a), 0) end
end

local base = assert(io.open(BASE, "rb")):read("a")
local rng = fz.rng(SEED)
local TOKENS = {"point", "line", "curve", "name", "kind", "bytes_per_pe", "latency_ns",
                "intercept_ns", "slope_ns", "slope_bits", "fsim_single_device", "analytic_1346ns",
                refs_csv.HEADER}

local function finite(v)
  return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge
end

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

local dir = kb.outdir()
local read_ok, rejected = 0, 0
for case = 1, CASES do
  local text = fz.mutate(rng, base, TOKENS)
  local name = ("case%d.csv"):format(case)
  local ok, refs, msg = pcall(refs_csv.parse, text, name)
  local where = ("refs_fuzz: seed %d case %d"):format(SEED, case)
  if not ok then error(("%s: parse raised: %s"):format(where, tostring(refs)), 0) end
  if refs then
    check(refs, where)
    read_ok = read_ok + 1
  elseif type(msg) ~= "string" or not msg:find("^" .. name:gsub("%.", "%%.") .. ":%d+: ") then
    error(("%s: message without file:line: %s"):format(where, tostring(msg)), 0)
  else
    rejected = rejected + 1
  end
  if case % 10 == 0 then -- the same through a file
    local path = dir .. "/" .. name
    local f = assert(io.open(path, "wb"))
    f:write(text)
    f:close()
    local ok2, refs2, msg2 = pcall(refs_csv.read, path)
    if not ok2 or (refs == nil) ~= (refs2 == nil)
        or (refs2 == nil and not msg2:find(path, 1, true)) then
      error(("%s: read of %s: %s"):format(where, path, tostring(ok2 and msg2 or refs2)), 0)
    end
    os.remove(path)
  end
end
print(("refs_fuzz ok: seed %d, %d files: %d read, %d refused with file:line"):format(
  SEED, CASES, read_ok, rejected))
