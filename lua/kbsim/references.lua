-- references.lua — reader of a references CSV: measured points and analytic lines that figures
-- draw next to simulated curves (scenarios/refs/ccl_references.csv is the one in use)
--
--   name,kind,bytes_per_pe,latency_ns,intercept_ns,slope_ns,slope_bits
--   kind "point": one measurement (bytes_per_pe, latency_ns), both positive
--   kind "line":  latency = intercept_ns + slope_ns * (bytes_per_pe * 8 / slope_bits)
--
-- The first line is that header; blank lines and lines starting with # are skipped. Every
-- problem is reported as "FILE:LINE: problem".
local M = {}

M.HEADER = "name,kind,bytes_per_pe,latency_ns,intercept_ns,slope_ns,slope_bits"

local function finite(v)
  return v == v and v ~= math.huge and v ~= -math.huge
end

-- The numeric fields of each kind: position, name, whether it must be positive.
local FIELDS = {
  point = {{3, "bytes_per_pe", true}, {4, "latency_ns", true}},
  line = {{5, "intercept_ns"}, {6, "slope_ns"}, {7, "slope_bits", true}},
}

local function number(text, what, positive)
  local v = tonumber(text)
  if not v then return nil, ("%s: '%s' is not a number"):format(what, text) end
  if not finite(v) then return nil, ("%s: '%s' is not a finite number"):format(what, text) end
  if positive and v <= 0 then return nil, ("%s must be positive, got '%s'"):format(what, text) end
  return v
end

-- One data line's fields into a reference, or nil and the problem.
local function reference(c)
  if #c ~= 7 then return nil, ("expected 7 fields, got %d"):format(#c) end
  local r = {name = c[1], kind = c[2]}
  if r.name == "" then return nil, "a reference needs a name" end
  if r.name:find("%c") then return nil, "a name must not hold control characters" end
  local fields = FIELDS[r.kind]
  if not fields then return nil, ("unknown kind '%s' (point, line)"):format(r.kind) end
  for _, f in ipairs(fields) do
    local v, err = number(c[f[1]], f[2], f[3])
    if v == nil then return nil, err end
    r[f[2]] = v
  end
  return r
end

-- Parses references text; `name` (the file) is used in messages. Returns the references in
-- file order, or nil and "NAME:LINE: problem".
function M.parse(text, name)
  if type(text) ~= "string" then
    error(("references.parse: the text must be a string, got %s"):format(type(text)), 2)
  end
  name = tostring(name or "references")
  local refs, seen, n = {}, {}, 0
  for line in text:gmatch("([^\n]*)\n?") do
    n = n + 1
    line = line:gsub("\r$", "")
    if n == 1 then
      if line ~= M.HEADER then
        return nil, ("%s:1: the header line must be '%s'%s"):format(name, M.HEADER,
          line == "" and " (empty file?)" or "")
      end
    elseif line:match("%S") and not line:match("^%s*#") then
      local c = {}
      for field in (line .. ","):gmatch("([^,]*),") do c[#c + 1] = field end
      local r, err = reference(c)
      if not r then return nil, ("%s:%d: %s"):format(name, n, err) end
      if seen[r.name] then
        return nil, ("%s:%d: reference '%s' is already defined on line %d"):format(name, n,
          r.name, seen[r.name])
      end
      seen[r.name] = n
      refs[#refs + 1] = r
    end
  end
  return refs
end

-- Reads a references file; returns the references or nil and a message.
function M.read(path)
  if type(path) ~= "string" then
    error(("references.read: a file name is expected, got %s"):format(type(path)), 2)
  end
  local f, err = io.open(path, "rb")
  -- io.open's message already names the file
  if not f then return nil, ("cannot read the references: %s"):format(err) end
  local text, rerr = f:read("a")
  f:close()
  if not text then return nil, ("%s: cannot read the references: %s"):format(path, rerr) end
  return M.parse(text, path)
end

return M
