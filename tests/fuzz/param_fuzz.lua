-- param_fuzz.lua — mutated PARAM COMMS-RES results files through kbsim.param_results and
-- perfmodel.fit: each must give rows a reader can use (every column it needs, as finite
-- numbers) or nil and "FILE:LINE: problem", never raise from inside the library or crash.
--
--   kbsim -o OUT tests/fuzz/param_fuzz.lua [seed=N] [cases=N] [base=FILE]
--
-- The seed fixes the mutants; tests/fuzz/README.md says how to run it for longer.
local kb = require("kbsim")
local pr = require("kbsim.param_results")
local pm = require("kbsim.perfmodel")
local fz = dofile(arg[0]:gsub("[^/]*$", "") .. "mutate.lua")

local SEED, CASES = 1, 500
local BASE = arg[0]:gsub("[^/]*$", "") .. "../cli/data/param_comms.txt"
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(.*)$")
  if k == "seed" and math.tointeger(tonumber(v)) then SEED = math.tointeger(tonumber(v))
  elseif k == "cases" and math.tointeger(tonumber(v)) then CASES = math.tointeger(tonumber(v))
  elseif k == "base" then BASE = v
  else error(("param_fuzz: bad argument '%s' (seed=N, cases=N, base=FILE)"):format(a), 0) end
end

local base = assert(io.open(BASE, "rb")):read("a")
local rng = fz.rng(SEED)
local TOKENS = {"COMMS-RES", "COMMS-RES-all_reduce", "COMMS-RES-QUANT", "COMMS-RES-", "size",
                "(B)", "collective", "line", "latency", "p50", "busbw(gb/s)", "algbw(gb/s)",
                "total-size", "tflops"}

local function finite(v)
  return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge
end

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

local dir = kb.outdir()
local read_ok, rejected = 0, 0
for case = 1, CASES do
  local text = fz.mutate(rng, base, TOKENS)
  local name = ("case%d.txt"):format(case)
  local ok, rows, msg = pcall(pr.parse, text, name)
  if not ok then
    error(("param_fuzz: seed %d case %d: parse raised: %s"):format(SEED, case, tostring(rows)), 0)
  end
  if rows then
    check_rows(rows, ("param_fuzz: seed %d case %d"):format(SEED, case))
    read_ok = read_ok + 1
  elseif type(msg) ~= "string" or not msg:find("^" .. name:gsub("%.", "%%.") .. ":%d+: ") then
    error(("param_fuzz: seed %d case %d: message without file:line: %s"):format(SEED, case,
      tostring(msg)), 0)
  else
    rejected = rejected + 1
  end
  if case % 10 == 0 then -- the same through a file
    local path = dir .. "/" .. name
    local f = assert(io.open(path, "wb"))
    f:write(text)
    f:close()
    local ok2, rows2, msg2 = pcall(pr.read, path)
    if not ok2 or (rows == nil) ~= (rows2 == nil)
        or (rows2 == nil and not msg2:find(path, 1, true)) then
      error(("param_fuzz: seed %d case %d: read of %s: %s"):format(SEED, case, path,
        tostring(ok2 and msg2 or rows2)), 0)
    end
    os.remove(path)
  end
end
print(("param_fuzz ok: seed %d, %d files: %d read, %d refused with file:line"):format(
  SEED, CASES, read_ok, rejected))
