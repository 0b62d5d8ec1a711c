-- mutate.lua — a seeded generator, line/word/byte mutations of a text file and the loop of
-- the fuzz drivers of the file readers (param_fuzz.lua, refs_fuzz.lua)
local M = {}

-- xorshift64*: the same numbers for a seed on every machine, whatever math.random does.
function M.rng(seed)
  local state = seed ~ 0x9E3779B97F4A7C15
  if state == 0 then state = 1 end
  local r = {}
  function r.below(n) -- 1 .. n
    state = state ~ (state >> 12)
    state = state ~ (state << 25)
    state = state ~ (state >> 27)
    return ((state * 0x2545F4914F6CDD1D) >> 1) % n + 1
  end
  function r.pick(list) return list[r.below(#list)] end
  return r
end

-- A number that is neither NaN nor infinite.
function M.finite(v)
  return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge
end

-- Words any reader of numbers and names should survive.
M.WORDS = {"", "0", "-0", "-1", "1e999", "-1e999", "1e-400", "nan", "-nan", "inf", "-inf",
           "0x10", "0x", "1e", ".", "..", "+", "9223372036854775807", "9223372036854775808",
           "-9223372036854775809", string.rep("9", 400), "\0", "\r", "\t", ",", ",,", "#", "\"",
           "'", "%s%d", "\255\254", "point", "line", "é"}

local function lines_of(text)
  local t = {}
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do t[#t + 1] = l end
  return t
end

local function mutate_line(r, line, tokens)
  local k = r.below(6)
  if k <= 2 then -- a word or field replaced
    local parts, seps = {}, {}
    for w, sep in line:gmatch("([^%s,]*)([%s,]*)") do
      parts[#parts + 1] = w
      seps[#seps + 1] = sep
      if #parts > 64 then break end
    end
    if #parts == 0 then return line end
    parts[r.below(#parts)] = r.below(3) == 1 and r.pick(tokens) or r.pick(M.WORDS)
    local out = {}
    for i = 1, #parts do out[#out + 1] = parts[i] .. seps[i] end
    return table.concat(out)
  elseif k == 3 then -- cut short
    return line:sub(1, r.below(#line + 1) - 1)
  elseif k == 4 then -- a field added or a separator dropped
    return r.below(2) == 1 and line .. r.pick{" ", ",", "\t"} .. r.pick(M.WORDS)
      or (line:gsub(r.pick{" +", ",", "\t"}, "", 1))
  elseif k == 5 then -- random bytes in
    local at = r.below(#line + 1)
    local b = {}
    for i = 1, r.below(8) do b[i] = string.char(r.below(256) - 1) end
    return line:sub(1, at - 1) .. table.concat(b) .. line:sub(at)
  end
  return r.pick(tokens) .. " " .. line
end

-- text with 1..4 mutations: lines dropped, repeated, swapped or mutated; the whole cut short.
function M.mutate(r, text, tokens)
  local lines = lines_of(text)
  for _ = 1, r.below(4) do
    local k, i = r.below(10), r.below(#lines)
    if k == 1 and #lines > 1 then table.remove(lines, i)
    elseif k == 2 then table.insert(lines, i, lines[i])
    elseif k == 3 then local j = r.below(#lines); lines[i], lines[j] = lines[j], lines[i]
    elseif k == 4 then table.insert(lines, i, r.pick(tokens) .. " " .. r.pick(M.WORDS))
    else lines[i] = mutate_line(r, lines[i], tokens) end
  end
  local out = table.concat(lines, "\n")
  if r.below(20) == 1 then out = out:sub(1, r.below(#out + 1) - 1) end
  if r.below(20) == 1 then out = out:gsub("\n", "\r\n") end
  return out
end

-- The loop of a file-reader driver. spec: name (the driver, for messages and "NAME ok"), base
-- (the file mutated unless base=FILE is given), tokens (words of the format), parse(text,
-- name) and read(path) of the reader (results or nil and a message), check(results, where)
-- (raises on results no reader could use). Script arguments: seed=N, cases=N, base=FILE.
-- Each mutant is parsed; every tenth also goes through a file and read.
function M.drive(spec, args)
  local seed, cases, base_path = 1, 1000, spec.base
  for _, a in ipairs(args) do
    local k, v = a:match("^(%w+)=(.*)$")
    if k == "seed" and math.tointeger(tonumber(v)) then seed = math.tointeger(tonumber(v))
    elseif k == "cases" and math.tointeger(tonumber(v)) then cases = math.tointeger(tonumber(v))
    elseif k == "base" then base_path = v
    else
      error(("%s: bad argument '%s' (seed=N, cases=N, base=FILE)"):format(spec.name, a), 0)
    end
  end
  local base = assert(io.open(base_path, "rb")):read("a")
  local r = M.rng(seed)
  local dir = require("kbsim").outdir()
  local taken, refused = 0, 0
  for case = 1, cases do
    local text = M.mutate(r, base, spec.tokens)
    local name = ("case%d.txt"):format(case)
    local where = ("%s: seed %d case %d"):format(spec.name, seed, case)
    local ok, got, msg = pcall(spec.parse, text, name)
    if not ok then error(("%s: parse raised: %s"):format(where, tostring(got)), 0) end
    if got then
      spec.check(got, where)
      taken = taken + 1
    elseif type(msg) ~= "string" or not msg:find("^" .. name:gsub("%.", "%%.") .. ":%d+: ") then
      error(("%s: message without file:line: %s"):format(where, tostring(msg)), 0)
    else
      refused = refused + 1
    end
    if case % 10 == 0 then
      local path = dir .. "/" .. name
      local f = assert(io.open(path, "wb"))
      f:write(text)
      f:close()
      local ok2, got2, msg2 = pcall(spec.read, path)
      if not ok2 or (got == nil) ~= (got2 == nil)
          or (got2 == nil and not msg2:find(path, 1, true)) then
        error(("%s: read of %s: %s"):format(where, path, tostring(ok2 and msg2 or got2)), 0)
      end
      os.remove(path)
    end
  end
  print(("%s ok: seed %d, %d files: %d read, %d refused with file:line"):format(spec.name,
    seed, cases, taken, refused))
end

return M
