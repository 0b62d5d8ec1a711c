-- param_results.lua — reader of PARAM comms benchmark results (the COMMS-RES table)
--
-- PARAM's comms.py prints one header line "\tCOMMS-RES" followed by column
-- names, then one line per message size "\tCOMMS-RES-<collective>" followed by
-- right-aligned numbers. Everything else in the file (log lines, rank
-- prefixes) is ignored, so a captured stdout can be read as it is.
-- See docs/perfmodel.md for the columns and units.
local M = {}

-- Header words as PARAM spells them -> our field names. "size (B)" splits
-- into two words; "(B)" is dropped.
local HEADER_NAMES = {
  ["size"] = "size",
  ["total-size"] = "size",
  ["nelementsperrank"] = "nelems",
  ["num-elements"] = "nelems",
  ["nelementspairperrank"] = "nelems_pair",
  ["latency(us):p50"] = "p50",
  ["p50"] = "p50",
  ["p75"] = "p75",
  ["p95"] = "p95",
  ["min"] = "min",
  ["max"] = "max",
  ["algbw(gb/s)"] = "algbw",
  ["busbw(gb/s)"] = "busbw",
  ["tflops"] = "tflops",
}

-- The layout comms.py prints for a (non-pair, non-quantised) collective;
-- used when the file has no header line. The TFlops column is optional.
local DEFAULT_COLUMNS = { "size", "nelems", "p50", "p75", "p95", "min", "max", "algbw", "busbw" }

local LATENCY_FIELDS = { p50 = true, p75 = true, p95 = true, min = true, max = true }

local function words(s)
  local t = {}
  for w in s:gmatch("%S+") do t[#t + 1] = w end
  return t
end

local function trim(s)
  return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

-- Fields a row sets itself, which no column may take.
local RESERVED = { collective = true, line = true, latency = true }

-- Column names from the text after "COMMS-RES" on a header line, or nil
-- and what is wrong with them: a column twice or a reserved name, or one
-- that readers need (size, the latency percentile, algbw, busbw) missing.
local function header_columns(rest, latency_field)
  local cols, seen = {}, {}
  for _, w in ipairs(words(rest)) do
    local lw = w:lower()
    if lw ~= "(b)" then
      local c = HEADER_NAMES[lw] or lw
      if RESERVED[c] then return nil, ("column '%s' has a reserved name"):format(w) end
      if seen[c] then return nil, ("column '%s' appears twice"):format(w) end
      seen[c] = true
      cols[#cols + 1] = c
    end
  end
  for _, need in ipairs({ "size", latency_field, "algbw", "busbw" }) do
    if not seen[need] then return nil, ("no '%s' column"):format(need) end
  end
  return cols
end

local function indexof(list, v)
  for i, x in ipairs(list) do if x == v then return i end end
end

local function finite_number(w)
  local v = tonumber(w)
  if v == nil or v ~= v or v == math.huge or v == -math.huge then return nil end
  return v
end

-- The latency column opts picks; a bad opts is the caller's caller's error.
local function latency_field_of(opts)
  if opts ~= nil and type(opts) ~= "table" then
    error(("param_results: options must be a table, got %s"):format(type(opts)), 3)
  end
  local field = opts and opts.latency or "p50"
  if not LATENCY_FIELDS[field] then
    error(("unknown latency column '%s' (want p50, p75, p95, min or max)"):format(
      tostring(field)), 3)
  end
  return field
end

-- Parses results text. `name` is used in messages (the file name).
-- opts.latency picks the percentile copied into row.latency ("p50" default).
-- Returns rows (in file order) or nil and "NAME:LINE: malformed COMMS-RES row: ROW".
function M.parse(text, name, opts)
  if type(text) ~= "string" then
    error(("param_results.parse: the results text must be a string, got %s"):format(type(text)), 2)
  end
  local latency_field = latency_field_of(opts)
  name = tostring(name or "results")
  local rows, cols = {}, nil
  local lineno = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    lineno = lineno + 1
    line = line:gsub("\r$", "")
    local at = line:find("COMMS-RES", 1, true)
    -- Quantised runs print a different table (COMMS-RES-QUANT); not read.
    if at and not line:find("COMMS-RES-QUANT", at, true) then
      local tag, rest = line:sub(at):match("^COMMS%-RES(%S*)(.*)$")
      local collective = tag:match("^%-(.+)$")
      local w = words(rest)
      local function malformed()
        return nil, ("%s:%d: malformed COMMS-RES row: %s"):format(name, lineno, trim(line))
      end
      if collective == nil and (#w == 0 or finite_number(w[1]) == nil) then
        if tag ~= "" then return malformed() end
        local why
        cols, why = header_columns(rest, latency_field)
        if not cols then
          return nil, ("%s:%d: bad COMMS-RES header: %s"):format(name, lineno, why)
        end
      else
        local use = cols or DEFAULT_COLUMNS
        -- Without a header the TFlops column may trail the default layout.
        local ok_count = #w == #use or (cols == nil and #w == #use + 1)
        if not ok_count then return malformed() end
        local row = { collective = collective, line = lineno }
        for i, word in ipairs(w) do
          local v = finite_number(word)
          if v == nil then return malformed() end
          row[use[i] or "tflops"] = v
        end
        if row.size == nil or row.size <= 0 then return malformed() end
        row.latency = row[latency_field]
        -- a time or bandwidth of 0 or less is no measurement (and has no log axis)
        for _, f in ipairs({ latency_field, "algbw", "busbw" }) do
          if row[f] <= 0 then
            return nil, ("%s:%d: COMMS-RES row: %s must be positive, got %s"):format(
              name, lineno, f, w[indexof(use, f)])
          end
        end
        rows[#rows + 1] = row
      end
    end
  end
  return rows
end

-- Reads a results file; returns rows or nil and a message (see parse).
function M.read(path, opts)
  if type(path) ~= "string" then
    error(("param_results.read: a file name is expected, got %s"):format(type(path)), 2)
  end
  latency_field_of(opts)
  local f, err = io.open(path, "rb")
  if not f then return nil, ("cannot open PARAM results '%s': %s"):format(path, err) end
  local text, rerr = f:read("a")
  f:close()
  if not text then return nil, ("cannot read PARAM results '%s': %s"):format(path, rerr) end
  return M.parse(text, path, opts)
end

-- The names of the collectives in rows, in order of first appearance.
local function check_rows(rows, what)
  if type(rows) ~= "table" then
    error(("param_results.%s: rows from parse or read are expected, got %s"):format(
      what, type(rows)), 3)
  end
end

function M.collectives(rows)
  check_rows(rows, "collectives")
  local seen, list = {}, {}
  for _, r in ipairs(rows) do
    local c = r.collective or ""
    if not seen[c] then seen[c] = true; list[#list + 1] = c end
  end
  return list
end

-- The rows of one collective (all rows if it is nil), sorted by size:
-- the point list perfmodel.fit takes.
function M.series(rows, collective)
  check_rows(rows, "series")
  local out = {}
  for _, r in ipairs(rows) do
    if collective == nil or r.collective == collective then out[#out + 1] = r end
  end
  table.sort(out, function(a, b) return a.size < b.size end)
  return out
end

return M
