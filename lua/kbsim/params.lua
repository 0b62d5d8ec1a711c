-- params.lua — a scenario's own parameters: `kbsim SCRIPT.lua key=value ...`
--
--   local p = kb.params({
--     bytes = {default = 16384, type = "bytes", help = "bytes a copy"},
--     sizes = {default = {8, 64}, type = "integer", list = true, min = 1, help = "..."},
--   }, {about = "one line on the script", check = function(p) ... end})
--
-- Reads the script arguments (the global `arg`, arg[1..n]) once: every one
-- is KEY=VALUE with KEY a declared parameter. Values are converted to the
-- declared type and checked; an unknown key is refused with the nearest
-- known one; `--help` (or `-h`, `help`) prints the parameters with their
-- defaults and exits 0. A bad argument prints "SCRIPT: MESSAGE" and a hint
-- and exits 2. The result holds every parameter, given or default.
--
-- Entry fields: default (required; a list for list = true), type
-- ("integer", "number", "bytes", "string", "boolean"), help (required),
-- list (comma-separated values), min (integer, number, bytes), choices (a
-- list of the allowed strings). Options: about (a line for --help), check
-- (function(p) -> nil or a message, for rules across parameters),
-- refuse_topology (a reason: --topology is refused), grid_only (a reason:
-- a graph --topology is refused; the script's systems need a grid).
-- See docs/cli.md ("Script parameters") and docs/lua_api.md.
local M = {}

local TYPES = {integer = true, number = true, bytes = true, string = true, boolean = true}
local UNITS = {[""] = 1, B = 1, KiB = 1024, MiB = 1024 ^ 2, GiB = 1024 ^ 3}
local BOOLEANS = {["true"] = true, yes = true, ["1"] = true, on = true,
                  ["false"] = false, no = false, ["0"] = false, off = false}

local function script_name()
  local path = arg and arg[0] or "script"
  return (path:match("([^/]*)$"):gsub("%.lua$", ""))
end

-- Ends the run: "SCRIPT: MESSAGE" on stderr, exit 2.
local function refuse(fmt, ...)
  io.stderr:write(("%s: %s\n"):format(script_name(), fmt:format(...)))
  os.exit(2)
end

-- The same for a bad argument, with where to find the parameters.
local function bad_argument(fmt, ...)
  io.stderr:write(("%s: %s (parameters: kbsim %s --help)\n"):format(script_name(),
    fmt:format(...), arg and arg[0] or "SCRIPT"))
  os.exit(2)
end

-- Edit distance between two keys (for "nearest").
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = {[0] = i}
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

-- The name closest to key; with `typo_only`, only one close enough to be
-- a typo (the config reader's rule: at most max(2, #key / 3) edits).
local function nearest(key, names, typo_only)
  local best, best_d = nil, math.huge
  for _, n in ipairs(names) do
    local d = distance(key, n)
    if d < best_d then best, best_d = n, d end
  end
  if not typo_only or best_d <= math.max(2, #key // 3) then return best end
end

-- One value of type `e.type` from text s, or nil and why.
local function convert(e, s)
  -- tonumber took "8 " as 8 while "no " was not a boolean: white space
  -- around a value is refused for every type, as a --set value's is
  local space = s:match("^%s") and "starts" or s:match("%s$") and "ends"
  if space then return nil, ("%s with white space (remove it)"):format(space) end
  local v
  if e.type == "integer" then
    v = math.tointeger(tonumber(s))
    if not v then return nil, "is not an integer" end
  elseif e.type == "number" then
    v = tonumber(s)
    if not v then return nil, "is not a number" end
    -- "1e999" is inf: a window or a time of inf ran its points forever
    if v ~= v or v == math.huge or v == -math.huge then return nil, "is not a finite number" end
  elseif e.type == "bytes" then
    local num, unit = s:match("^(%d+)(%a*)$")
    local mul = UNITS[unit or ""]
    v = num and mul and math.tointeger(tonumber(num) * mul)
    if not v then return nil, "is not a size in bytes (e.g. 4096, 64KiB, 64MiB)" end
  elseif e.type == "boolean" then
    v = BOOLEANS[s]
    if v == nil then return nil, "is not yes or no" end
  else
    v = s
  end
  if e.min and v < e.min then return nil, ("is below %s"):format(e.min) end
  if e.choices then
    for _, c in ipairs(e.choices) do if c == v then return v end end
    return nil, ("is not one of %s (nearest: %s)"):format(table.concat(e.choices, ", "),
                                                        nearest(tostring(v), e.choices))
  end
  return v
end

-- A value as it would be written after KEY= (sizes with their unit).
local function show(v, e)
  if type(v) == "table" then
    local t = {}
    for i, x in ipairs(v) do t[i] = show(x, e) end
    return table.concat(t, ",")
  end
  if type(v) == "boolean" then return v and "yes" or "no" end
  if e.type == "bytes" then
    for _, u in ipairs({"GiB", "MiB", "KiB"}) do
      if v >= UNITS[u] and v % UNITS[u] == 0 then return ("%d%s"):format(v // UNITS[u], u) end
    end
  end
  return tostring(v)
end

local function type_text(e)
  local t = e.type == "bytes" and "a size: 4096, 64KiB, 1MiB" or e.type
  if e.choices then t = table.concat(e.choices, "|") end
  return e.list and (t .. ", comma-separated") or t
end

local function help(spec, names, opts)
  local out = {("usage: kbsim [options] %s [key=value ...]"):format(arg and arg[0] or "SCRIPT")}
  if opts.about then out[#out + 1] = opts.about end
  out[#out + 1] = ""
  out[#out + 1] = #names > 0 and "parameters (KEY=DEFAULT):" or "parameters: none"
  for _, n in ipairs(names) do
    local e = spec[n]
    out[#out + 1] = ("  %s=%s"):format(n, show(e.default, e))
    out[#out + 1] = ("      %s (%s)"):format(e.help, type_text(e))
  end
  out[#out + 1] = ""
  if opts.refuse_topology then
    out[#out + 1] = "--topology is refused: " .. opts.refuse_topology
  elseif opts.grid_only then
    out[#out + 1] = "--topology: grid files only; " .. opts.grid_only
  else
    out[#out + 1] = "--topology: the systems are built from it"
  end
  io.stdout:write(table.concat(out, "\n"), "\n")
  os.exit(0)
end

-- Why a declared default does not fit its entry, or nil.
local LUA_TYPE = {integer = "number", number = "number", bytes = "number", string = "string",
                  boolean = "boolean"}
local function default_problem(e, d)
  if type(d) ~= LUA_TYPE[e.type] or (e.type ~= "number" and type(d) == "number" and
                                     not math.tointeger(d)) then
    return "is not of type " .. e.type
  end
  if e.min ~= nil and d < e.min then return ("is below min %s"):format(e.min) end
  if e.choices then
    for _, c in ipairs(e.choices) do if c == d then return nil end end
    return "is not one of the choices"
  end
end

-- What a parameter's table and the options may hold: anything else is a
-- typo (`choice =`, `mni =`) that would otherwise be ignored.
local FIELDS = {"choices", "default", "help", "list", "min", "type"}
local OPTIONS = {"about", "check", "grid_only", "refuse_topology"}

-- (the one check of a table's keys, lua/lkbsim.c lkb_check_keys_as)
local check_keys = require("kbsim")._check_keys

-- A declaration error is the script's bug: raised at its kb.params line.
local function check_spec(spec, names)
  for _, n in ipairs(names) do
    local e = spec[n]
    if not n:match("^[%a_][%w_]*$") then
      error(("kb.params: bad parameter name '%s'"):format(n), 4)
    end
    if type(e) ~= "table" or type(e.help) ~= "string" or e.default == nil then
      error(("kb.params: parameter '%s' needs a default and a help line"):format(n), 4)
    end
    check_keys(e, FIELDS, ("kb.params: parameter '%s'"):format(n), "field", "fields: ", 4)
    if not TYPES[e.type] then
      error(("kb.params: parameter '%s': unknown type '%s'"):format(n, tostring(e.type)), 4)
    end
    local numeric = e.type == "integer" or e.type == "number" or e.type == "bytes"
    if e.min ~= nil and (not numeric or type(e.min) ~= "number") then
      error(("kb.params: parameter '%s': min needs a number and a numeric type"):format(n), 4)
    end
    if e.choices ~= nil and (e.type ~= "string" or type(e.choices) ~= "table" or #e.choices == 0) then
      error(("kb.params: parameter '%s': choices needs a list of strings and type string"):format(n), 4)
    end
    local defaults = e.default
    if e.list then
      if type(defaults) ~= "table" or #defaults == 0 then
        error(("kb.params: parameter '%s': a list's default is a non-empty list"):format(n), 4)
      end
    else
      defaults = {defaults}
    end
    for _, d in ipairs(defaults) do
      local why = default_problem(e, d)
      if why then
        error(("kb.params: parameter '%s': default %s %s"):format(n, tostring(d), why), 4)
      end
    end
  end
end

-- --topology against the script's declared use of it.
local function check_topology(opts)
  local kb = require("kbsim")
  local file = kb.options.topology
  if not file then return end
  if opts.refuse_topology then
    refuse("--topology %s is not used: %s", file, opts.refuse_topology)
  end
  if opts.grid_only then
    local sim <close> = kb.sim{trace = false}
    if kb.system(sim):counts().sips == 0 then
      refuse("--topology %s is a graph: %s", file, opts.grid_only)
    end
  end
end

function M.params(spec, opts)
  opts = opts or {}
  if type(spec) ~= "table" then error("kb.params: expected a table of parameters", 3) end
  if type(opts) ~= "table" then error("kb.params: the options must be a table", 3) end
  check_keys(opts, OPTIONS, "kb.params", "option", "options: ", 3)
  local names = {}
  for n in pairs(spec) do
    if type(n) ~= "string" then
      error(("kb.params: parameter names are strings, got the %s %s"):format(type(n), tostring(n)), 3)
    end
    names[#names + 1] = n
  end
  table.sort(names)
  check_spec(spec, names)
  local p = {}
  for _, n in ipairs(names) do p[n] = spec[n].default end
  for i = 1, arg and #arg or 0 do
    local a = arg[i]
    if a == "--help" or a == "-h" or a == "help" then help(spec, names, opts) end
  end
  for i = 1, arg and #arg or 0 do
    local a = arg[i]
    local k, s = a:match("^([^=]+)=(.*)$")
    if not k then
      if #names == 0 then
        bad_argument("argument '%s': this script takes no parameters", a)
      end
      bad_argument("argument '%s' is not key=value (known keys: %s)", a, table.concat(names, ", "))
    end
    local e = spec[k]
    if not e then
      local near = nearest(k, names, true)
      bad_argument("unknown parameter '%s'%s", k, near and (" (nearest: " .. near .. ")") or
        #names == 0 and " (this script takes none)" or
        (" (known: %s)"):format(table.concat(names, ", ")))
    end
    if e.list then
      local l = {}
      if s ~= "" and (s:find(",,", 1, true) or s:sub(1, 1) == "," or s:sub(-1) == ",") then
        bad_argument("%s: '%s' has an empty item", k, s)
      end
      for x in s:gmatch("[^,]+") do
        local v, why = convert(e, x)
        if v == nil then bad_argument("%s: '%s' %s", k, x, why) end
        l[#l + 1] = v
      end
      if #l == 0 then bad_argument("%s: empty list", k) end
      p[k] = l
    else
      local v, why = convert(e, s)
      if v == nil then bad_argument("%s: '%s' %s", k, s, why) end
      p[k] = v
    end
  end
  if opts.check then
    local msg = opts.check(p)
    if msg then refuse("%s", msg) end
  end
  check_topology(opts)
  return p
end

return M
