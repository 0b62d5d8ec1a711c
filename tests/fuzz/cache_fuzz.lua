-- cache_fuzz.lua — mutated kb.sweep cache entries (OUT/cache/SWEEP/KEY.json) read back by a
-- sweep run with --fast: kbsim must never crash or raise; a file that is no valid entry is
-- ignored with a warning and its point runs again (its row then is the point's own), a valid
-- one is reused (its row a plain table), and every point ends done.
--
--   kbsim -o OUT tests/fuzz/cache_fuzz.lua [seed=N] [cases=N]
--
-- The seed fixes the mutants; tests/fuzz/README.md says how to run it for longer.
local kb = require("kbsim")
local here = arg[0]:gsub("[^/]*$", "")
local fz = dofile(here .. "mutate.lua")

local seed, cases = 1, 300
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(.*)$")
  if k == "seed" and math.tointeger(tonumber(v)) then seed = math.tointeger(tonumber(v))
  elseif k == "cases" and math.tointeger(tonumber(v)) then cases = math.tointeger(tonumber(v))
  else error(("cache_fuzz: bad argument '%s' (seed=N, cases=N)"):format(a), 0) end
end

-- Points whose parameters and rows hold what JSON has to get right: nesting, lists, escapes,
-- integers and floats at their limits, booleans.
local points = {}
for i = 1, 4 do
  points[i] = {i = i, x = i / 3, name = ("p\"\\%d\t\1é"):format(i),
               nest = {list = {i, i + 0.5, "s", true}, deep = {{{{i}}}}}}
end
local function run(p)
  return {i = p.i, third = p.x, big = math.maxinteger - p.i, tiny = 5e-324 * p.i,
          neg = -1e300 / p.i, name = p.name, ok = p.i % 2 == 0, list = p.nest.list,
          deep = p.nest.deep, empty = {}}
end

local function same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then
    return a == b and math.type(a) == math.type(b)
  end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

local function sweep()
  local ok, rows, summary = pcall(kb.sweep, {name = "fz", points = points, run = run, jobs = 1})
  return ok, rows, summary
end

-- the entries as written by a first run (not --fast: any left by an earlier run are rewritten)
kb.options.fast = false
local ok, base_rows, summary = sweep()
kb.options.fast = true
assert(ok and summary.done == #points and summary.reused == 0, "cache_fuzz: first sweep failed")
local dir = kb.outdir() .. "/cache/fz"
local files = {}
for i = 1, #points do
  -- the entry of point i: the file whose "point" is i
  local p = io.popen("grep -l '\"point\": " .. i .. ",' " .. dir .. "/*.json")
  local path = p:read("l")
  p:close()
  assert(path, "cache_fuzz: no cache entry for point " .. i)
  local f = assert(io.open(path, "rb"))
  files[i] = {path = path, text = f:read("a")}
  f:close()
end
ok, _, summary = sweep()
assert(ok and summary.reused == #points, "cache_fuzz: the entries are not reused as written")

local TOKENS = {"{", "}", "[", "]", ":", ",", "null", "true", "false", "\"\"", "\"kbsim\"",
                "\"0.1.0\"", "\"row\"", "\"params\"", "\"key\"", "\"point\"", "\"sweep\"",
                "\"fz\"", "1e999", "-0", "0.1", "\"\\u0000\"", "\"\\ud800\"", "\"\\uDFFF\"",
                "\"\\x\"", "\"\\", "18446744073709551616", "-9223372036854775808",
                string.rep("[", 300), string.rep("{\"a\":", 300), string.rep("]", 300)}

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local r = fz.rng(seed)
local reused, rerun = 0, 0
for case = 1, cases do
  local where = ("cache_fuzz: seed %d case %d"):format(seed, case)
  local victims, texts = {}, {}
  for _ = 1, r.below(2) do
    local i = r.below(#points)
    victims[#victims + 1] = i
    local text = fz.mutate(r, files[i].text, TOKENS)
    local k = r.below(40)
    if k == 1 then text = ""
    elseif k == 2 then text = string.rep("[", 100000)
    elseif k == 3 then text = files[i].text:gsub("\"row\": {", "\"row\": " .. string.rep("[", 5000), 1)
    end
    texts[i] = text
    write(files[i].path, text)
  end
  local ok2, rows, sum = sweep()
  -- on failure, the mutants are kept beside the cache for a look
  local function fail(fmt, ...)
    for i, text in pairs(texts) do write(("%s/case%d_point%d.json"):format(kb.outdir(), case, i), text) end
    error(where .. ": " .. fmt:format(...) .. " (mutants in " .. kb.outdir() .. ")", 0)
  end
  if not ok2 then fail("kb.sweep raised: %s", tostring(rows)) end
  if sum.done ~= #points or sum.failed ~= 0 then
    fail("%d of %d points done, %d failed", sum.done, #points, sum.failed)
  end
  if #rows ~= #points then fail("%d rows for %d points", #rows, #points) end
  for i, pt in ipairs(sum.points) do
    if type(pt.row) ~= "table" then fail("point %d has no row (reused: %s)", i, tostring(pt.reused)) end
    local intact = texts[i] == nil or texts[i] == files[i].text
    if pt.reused then reused = reused + (texts[i] and 1 or 0) else rerun = rerun + 1 end
    -- a point that ran again, or whose entry is as written, gives its own row
    if (not pt.reused or intact) and not same(pt.row, base_rows[i]) then
      fail("point %d: a row other than the point's own", i)
    end
  end
  for _, i in ipairs(victims) do write(files[i].path, files[i].text) end
end
print(("cache_fuzz ok: seed %d, %d cases: %d mutated entries reused, %d points ran again")
  :format(seed, cases, reused, rerun))
