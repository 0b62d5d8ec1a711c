-- results.lua — the results layer: tidy CSV, JSON, gnuplot figures and index.md
--
--   local results = require("kbsim.results")
--   results.csv(path, rows, columns [, opts])
--   results.json(path, value)
--   local fig = results.figure{name=, csv=, x=, y=, series=, ...}
--   results.index(outdir, entries [, title])
--
-- Every file is written to a temporary name and renamed, so a reader never
-- finds half a file under the real name. Errors name the caller's line and
-- the file or folder; they end the script (kbsim exits 2). See
-- docs/results.md.
local M = {}

local function kbsim_version()
  local ok, kb = pcall(require, "kbsim")
  return ok and kb.version or "?"
end

local function basename(path) return path:match("([^/]*)$") end
local function dirname(path) return path:match("^(.*)/[^/]*$") or "." end

-- Raises "results.FN: MESSAGE"; api() moves it to the caller's line.
local function fail(fn, fmt, ...)
  error(("results.%s: " .. fmt):format(fn, ...), 0)
end

-- A public function: an error anywhere inside is reported at the line of
-- the script that called it.
local function api(impl)
  return function(...)
    local r = table.pack(pcall(impl, ...))
    if not r[1] then error(r[2], 2) end
    return table.unpack(r, 2, r.n)
  end
end

-- Writes text to path through path.tmp and a rename.
local function write_atomic(fn, path, text)
  local tmp = path .. ".tmp"
  local f, err = io.open(tmp, "wb")
  if not f then
    local why = err and err:match(": ([^:]*)$") or tostring(err)
    fail(fn, "cannot write '%s' in folder '%s': %s", basename(path), dirname(path), why)
  end
  local ok, werr = f:write(text)
  local closed = f:close()
  local renamed, rerr = nil, nil
  if ok and closed then renamed, rerr = os.rename(tmp, path) end
  if not renamed then
    os.remove(tmp)
    fail(fn, "cannot write '%s' in folder '%s': %s", basename(path), dirname(path),
         tostring(werr or rerr or "write failed"))
  end
  return path
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

-- ---- CSV ---------------------------------------------------------------

-- Default float format: ten significant digits keep picoseconds in a
-- latency of up to 10 ms expressed in ns, and print 135.0 as 135.
M.float_format = "%.10g"

local function csv_field(v, fmt)
  local t = type(v)
  if v == nil then return "" end
  if t == "number" then
    if math.type(v) == "integer" then return ("%d"):format(v) end
    if v ~= v then return "nan" end
    if v == math.huge then return "inf" end
    if v == -math.huge then return "-inf" end
    return (fmt or M.float_format):format(v)
  end
  if t == "boolean" then return tostring(v) end
  if t ~= "string" then return nil end
  if v:find('[,"\r\n]') or v:find("^%s") or v:find("%s$") then
    return '"' .. v:gsub('"', '""') .. '"'
  end
  return v
end

-- Formats rows as tidy CSV text (used by results.csv; exported for tests
-- and for printing).
function M.csv_text(rows, columns, opts)
  opts = opts or {}
  local formats = opts.formats or {}
  if columns == nil then
    local seen = {}
    columns = {}
    for _, row in ipairs(rows) do
      for k in pairs(row) do
        if type(k) == "string" and not seen[k] then seen[k] = true; columns[#columns + 1] = k end
      end
    end
    table.sort(columns)
  elseif type(columns) ~= "table" or #columns == 0 then
    return nil, "columns must be a non-empty list of column names"
  else
    local seen = {}
    for i, c in ipairs(columns) do
      if type(c) ~= "string" then
        return nil, ("column %d is a %s, not a name"):format(i, type(c))
      end
      if seen[c] then return nil, ("column '%s' is listed twice"):format(c) end
      seen[c] = true
    end
  end
  -- rows is a list: a hole made #rows stop short (the rows after it were
  -- dropped without a word), and one row given as itself (a map) wrote
  -- the header alone
  local n = #rows
  local key, past -- the first (by name) non-integer key; the first row past a hole
  for k in pairs(rows) do
    if math.type(k) ~= "integer" then
      if key == nil or tostring(k) < key then key = tostring(k) end
    elseif (k < 1 or k > n) and (past == nil or k < past) then
      past = k
    end
  end
  if key then
    return nil, ("rows has the key '%s': it must be a list of rows (one row: {row})"):format(key)
  end
  if past then
    local hole = 1
    while rows[hole] ~= nil do hole = hole + 1 end
    return nil, ("row %d is nil but row %d is set: rows must be a list without holes")
      :format(hole, past)
  end
  local out = {}
  local head = {}
  for i, c in ipairs(columns) do head[i] = csv_field(c) end
  out[1] = table.concat(head, ",")
  for r = 1, #rows do
    local row = rows[r]
    if type(row) ~= "table" then
      return nil, ("row %d is a %s, not a table"):format(r, type(row))
    end
    local f = {}
    for i, c in ipairs(columns) do
      f[i] = csv_field(row[c], formats[c])
      if f[i] == nil then
        return nil, ("row %d column '%s' is a %s"):format(r, c, type(row[c]))
      end
    end
    out[#out + 1] = table.concat(f, ",")
  end
  out[#out + 1] = ""
  return table.concat(out, "\n"), columns
end

-- results.csv(path, rows, columns [, {formats = {column = "%.3f"}}]) -> path
-- One header line, then one line per row in order; columns in the order
-- given (default: every string key of the rows, sorted).
M.csv = api(function(path, rows, columns, opts)
  if type(path) ~= "string" then fail("csv", "path must be a string") end
  if type(rows) ~= "table" then fail("csv", "rows must be a table of rows") end
  local text, err = M.csv_text(rows, columns, opts)
  if not text then fail("csv", "'%s': %s", basename(path), err) end
  -- a column no row has is most likely a misspelt key: written empty, said
  if columns and #rows > 0 then
    for _, c in ipairs(columns) do
      local any = false
      for r = 1, #rows do any = any or rows[r][c] ~= nil end
      if not any then
        io.stderr:write(("results.csv: warning: '%s': no row has column '%s' (written empty; "
                         .. "a misspelt key?)\n"):format(basename(path), c))
      end
    end
  end
  return write_atomic("csv", path, text)
end)

-- Splits one CSV text into rows of strings.
local function csv_parse(text)
  local rows, row, field, i, n = {}, {}, {}, 1, #text
  local quoted = false
  while i <= n do
    local c = text:sub(i, i)
    if quoted then
      if c == '"' then
        if text:sub(i + 1, i + 1) == '"' then field[#field + 1] = '"'; i = i + 1
        else quoted = false end
      else
        field[#field + 1] = c
      end
    elseif c == '"' then
      quoted = true
    elseif c == "," then
      row[#row + 1] = table.concat(field); field = {}
    elseif c == "\n" then
      row[#row + 1] = table.concat(field); field = {}
      rows[#rows + 1] = row; row = {}
    elseif c ~= "\r" then
      field[#field + 1] = c
    end
    i = i + 1
  end
  if #field > 0 or #row > 0 then row[#row + 1] = table.concat(field); rows[#rows + 1] = row end
  return rows
end

-- results.read_csv(path) -> rows, columns: rows keyed by column name, with
-- values that look like numbers converted to numbers.
local function read_csv(path)
  local f, err = io.open(path, "rb")
  if not f then fail("read_csv", "cannot read '%s': %s", path, err) end
  local text = f:read("a")
  f:close()
  local lines = csv_parse(text)
  local columns = table.remove(lines, 1) or {}
  local rows = {}
  for r, line in ipairs(lines) do
    local row = {}
    for i, c in ipairs(columns) do
      local v = line[i]
      row[c] = v ~= "" and (math.tointeger(tonumber(v)) or tonumber(v) or v) or nil
    end
    rows[r] = row
  end
  return rows, columns
end
M.read_csv = api(read_csv)

-- ---- JSON --------------------------------------------------------------

-- The shortest %.Ng (N = 15..17) that reads back as the same float.
local function shortest(v)
  if math.type(v) == "integer" then return ("%d"):format(v) end
  local s
  for prec = 15, 17 do
    s = ("%." .. prec .. "g"):format(v)
    if tonumber(s) == v then break end
  end
  return s
end

local function json_number(v)
  if math.type(v) == "integer" then return ("%d"):format(v) end
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  local s = shortest(v)
  if not s:find("[.eEn]") then s = s .. ".0" end
  return s
end

local escapes = {['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t",
                 ["\r"] = "\\r", ["\b"] = "\\b", ["\f"] = "\\f"}
local function json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or ("\\u%04x"):format(c:byte())
  end) .. '"'
end

local function json_encode(v, indent, out, seen, where)
  local t = type(v)
  if v == nil then out[#out + 1] = "null"
  elseif t == "boolean" then out[#out + 1] = tostring(v)
  elseif t == "number" then out[#out + 1] = json_number(v)
  elseif t == "string" then out[#out + 1] = json_string(v)
  elseif t == "table" then
    if seen[v] then return ("'%s' is part of a cycle"):format(where) end
    seen[v] = true
    local n, count, keys = #v, 0, {}
    for k in pairs(v) do
      count = count + 1
      if type(k) == "string" then keys[#keys + 1] = k
      elseif math.type(k) == "integer" then keys[#keys + 1] = k
      else return ("'%s' has a %s key"):format(where, type(k)) end
    end
    local inner = indent .. "  "
    if count == n then
      -- An array (an empty table too): scalars on one line.
      local simple = true
      for i = 1, n do if type(v[i]) == "table" then simple = false end end
      out[#out + 1] = "["
      for i = 1, n do
        if i > 1 then out[#out + 1] = simple and ", " or "," end
        if not simple then out[#out + 1] = "\n" .. inner end
        local err = json_encode(v[i], inner, out, seen, where .. "[" .. i .. "]")
        if err then return err end
      end
      if not simple and n > 0 then out[#out + 1] = "\n" .. indent end
      out[#out + 1] = "]"
    else
      for i, k in ipairs(keys) do keys[i] = tostring(k) end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        out[#out + 1] = (i > 1 and ",\n" or "\n") .. inner .. json_string(k) .. ": "
        local val = v[k]
        if val == nil then val = v[math.tointeger(tonumber(k))] end
        local err = json_encode(val, inner, out, seen, where .. "." .. k)
        if err then return err end
      end
      out[#out + 1] = "\n" .. indent .. "}"
    end
    seen[v] = nil
  else
    return ("'%s' is a %s"):format(where, t)
  end
end

-- results.json_text(value) -> text: keys sorted, two-space indentation.
function M.json_text(value)
  local out = {}
  local err = json_encode(value, "", out, {}, "value")
  if err then return nil, err end
  out[#out + 1] = "\n"
  return table.concat(out)
end

-- results.json(path, value) -> path
M.json = api(function(path, value)
  if type(path) ~= "string" then fail("json", "path must be a string") end
  local text, err = M.json_text(value)
  if not text then fail("json", "'%s': %s", basename(path), err) end
  return write_atomic("json", path, text)
end)

-- ---- figures -----------------------------------------------------------

-- A gnuplot double-quoted string: a newline or tab becomes its escape and
-- other control characters are dropped, so a title cannot end the line and
-- start a gnuplot command.
local GP_ESCAPES = { ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n", ["\t"] = "\\t" }
local function gp_string(s)
  return '"' .. tostring(s):gsub('[%c\\"]', function(c) return GP_ESCAPES[c] or "" end) .. '"'
end

-- A comment line of a gnuplot script: control characters become spaces.
local function one_line(s)
  return (s:gsub("%c", " "))
end

local function sh_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local gnuplot_found
local function have_gnuplot()
  -- under MPI the other ranks' outputs go to a scratch folder, and so do a
  -- --shard run's: only rank 0 of a run that writes outputs renders figures
  local kb = require("kbsim")
  if gnuplot_found == nil and (kb.mpi() > 0 or kb.options.shard) then gnuplot_found = false end
  if gnuplot_found == nil then
    gnuplot_found = os.execute("command -v gnuplot >/dev/null 2>&1") == true
    if not gnuplot_found then
      io.stderr:write("kbsim.results: gnuplot is not on PATH: figures are written as "
        .. ".gp scripts and CSV, not rendered to SVG/PNG (install gnuplot-nox)\n")
    end
  end
  return gnuplot_found
end

-- results.have_gnuplot() -> whether gnuplot is on PATH (asked once; when
-- it is not, says so on stderr once).
M.have_gnuplot = have_gnuplot

-- results.gnuplot(dir, script [, args]) -> true, or false and gnuplot's
-- output: runs `gnuplot [args] script` in folder dir, every part quoted
-- for the shell (a folder may hold spaces or quotes). args is a list of
-- words, such as {"-e", "out='x'"}.
function M.gnuplot(dir, script, args)
  local words = {}
  for _, a in ipairs(args or {}) do words[#words + 1] = sh_quote(a) end
  words[#words + 1] = sh_quote(script)
  local p = io.popen(("cd %s && gnuplot %s 2>&1"):format(sh_quote(dir), table.concat(words, " ")))
  local msg = p:read("a")
  local ok = p:close()
  if ok then return true end
  return false, msg
end

-- results.render(fig) -> fig: draws a figure whose gnuplot script is
-- written (fig.gp, honouring `out`, as results.figure writes them) into
-- fig.svg and fig.png, in the background: gnuplot is started and
-- render returns at once; fig.rendered is true when gnuplot is on PATH.
-- The run waits for every figure before it exits; a figure gnuplot fails
-- to draw makes it exit 2, naming the figure (lua/lrender.h). Only rank 0
-- of an MPI job draws.
local function render(fig)
  if have_gnuplot() then
    local dir, script = dirname(fig.gp), basename(fig.gp)
    local tmp = fig.name .. ".tmp"
    require("kbsim")._render.start(fig.name, dir, script, {"-e", "out='" .. tmp .. "'"},
      {dir .. "/" .. tmp .. ".svg", dir .. "/" .. tmp .. ".png"}, {fig.svg, fig.png})
    fig.rendered = true
  end
  return fig
end
M.render = api(render)

-- results.wait_figures(): waits until every figure started so far is
-- drawn (its SVG and PNG in place); an error naming each that failed.
M.wait_figures = api(function()
  local failed = require("kbsim")._render.wait()
  if failed then fail("wait_figures", "%s", failed) end
end)

-- A datablock of (x, y) pairs sorted by x, from rows where both are
-- numbers.
local function datablock(name, rows, x, y, keep)
  local pts = {}
  for _, r in ipairs(rows) do
    if (not keep or keep(r)) and type(r[x]) == "number" and type(r[y]) == "number" then
      pts[#pts + 1] = {r[x], r[y]}
    end
  end
  table.sort(pts, function(a, b) return a[1] < b[1] end)
  local lines = {("$%s << EOD"):format(name)}
  for _, p in ipairs(pts) do
    lines[#lines + 1] = shortest(p[1]) .. " " .. shortest(p[2])
  end
  lines[#lines + 1] = "EOD"
  return table.concat(lines, "\n"), #pts
end

local function log_axis(axis, v)
  if not v then return nil end
  local base = v == true and 10 or v
  if type(base) ~= "number" or base <= 1 then
    fail("figure", "'log%s' must be true or a base greater than 1", axis)
  end
  return ("set logscale %s %s\nset format %s \"%%g\""):format(axis, base, axis)
end

-- results.figure{name=, csv=, x=, y=, series=, title=, xlabel=, ylabel=,
--   logx=, logy=, refs = {{title=, fn=} | {title=, points={{x,y},...}} |
--   {title=, y=, csv=, x=, series_value=}}} -> figure
-- Writes NAME.gp beside the CSV; renders NAME.svg and NAME.png there if
-- gnuplot is on PATH. The script holds its data, so `gnuplot NAME.gp` in
-- that folder redraws the figure on its own.
M.figure = api(function(spec)
  if type(spec) ~= "table" then fail("figure", "expected a table") end
  for _, k in ipairs{"name", "csv", "x", "y"} do
    if type(spec[k]) ~= "string" then fail("figure", "'%s' must be a string", k) end
  end
  local name, csv = spec.name, spec.csv
  -- a misspelt field (ylable =) would be ignored
  local fields = {"csv", "logx", "logy", "name", "refs", "series", "title", "x", "xlabel", "y",
                  "ylabel"}
  require("kbsim")._check_keys(spec, fields, "results.figure", "field", "fields: ", 0)
  if name == "" or name:find("[/%s'\"]") then
    fail("figure", "bad name '%s' (not empty; no slashes, spaces or quotes)", name)
  end
  if not exists(csv) then fail("figure", "no CSV '%s' (write it first with results.csv)", csv) end
  local rows, columns = read_csv(csv)
  local have = {}
  for _, c in ipairs(columns) do have[c] = true end
  for _, k in ipairs{"x", "y", "series"} do
    if spec[k] and not have[spec[k]] then
      fail("figure", "'%s' has no column '%s' (%s)", basename(csv), spec[k], k)
    end
  end
  local dir = dirname(csv)
  local blocks, plots = {}, {}

  local order, groups = {}, {}
  if spec.series then
    for _, r in ipairs(rows) do
      local s = r[spec.series]
      if s ~= nil and not groups[s] then groups[s] = true; order[#order + 1] = s end
    end
  else
    order[1] = false
  end
  for i, s in ipairs(order) do
    local keep = s ~= false and function(r) return r[spec.series] == s end or nil
    local block, n = datablock("s" .. i, rows, spec.x, spec.y, keep)
    blocks[#blocks + 1] = block
    if n > 0 then
      plots[#plots + 1] = ("$s%d using 1:2 with linespoints lw 2 lc %d pt %d title %s")
        :format(i, i, i, gp_string(s == false and spec.y or tostring(s)))
    end
  end

  for i, ref in ipairs(spec.refs or {}) do
    if type(ref) ~= "table" or type(ref.title) ~= "string" then
      fail("figure", "reference %d needs a 'title'", i)
    end
    local style = ("lc rgb \"black\" dt %d lw 1.5 title %s"):format(i % 4 + 2, gp_string(ref.title))
    if ref.fn then
      plots[#plots + 1] = ("%s with lines %s"):format(ref.fn, style)
    elseif ref.points then
      local prow = {}
      for j, p in ipairs(ref.points) do prow[j] = {x = p[1], y = p[2]} end
      local block = datablock("r" .. i, prow, "x", "y")
      blocks[#blocks + 1] = block
      plots[#plots + 1] = ("$r%d using 1:2 with linespoints pt %d ps 1.5 %s"):format(i, 5 + i, style)
    elseif ref.y then
      local rrows, rcols = rows, columns
      if ref.csv then rrows, rcols = read_csv(ref.csv) end
      local rx, ok = ref.x or spec.x, false
      for _, c in ipairs(rcols) do ok = ok or c == ref.y end
      if not ok then fail("figure", "reference %d: no column '%s'", i, ref.y) end
      local keep
      if ref.series_value ~= nil then
        keep = function(r) return r[spec.series] == ref.series_value end
      end
      blocks[#blocks + 1] = datablock("r" .. i, rrows, rx, ref.y, keep)
      plots[#plots + 1] = ("$r%d using 1:2 with lines %s"):format(i, style)
    else
      fail("figure", "reference %d needs 'fn', 'points' or 'y'", i)
    end
  end
  if #plots == 0 then fail("figure", "nothing to plot from '%s'", basename(csv)) end

  local title = spec.title or name
  -- table.pack: the log axes are nil when not asked for, and a nil in a
  -- list ends ipairs there (the script was cut off before its plot)
  local gp = table.pack(
    one_line(("# %s.gp — %s (kbsim %s)"):format(name, title, kbsim_version())),
    one_line(("# Data: %s (columns %s, %s%s). Redraw: gnuplot %s.gp"):format(
      basename(csv), spec.x, spec.y, spec.series and (", series " .. spec.series) or "", name)),
    ("if (!exists(\"out\")) out = %s"):format(gp_string(name)),
    table.concat(blocks, "\n"),
    "set termoption noenhanced",
    ("set title %s"):format(gp_string(title)),
    ("set xlabel %s"):format(gp_string(spec.xlabel or spec.x)),
    ("set ylabel %s"):format(gp_string(spec.ylabel or spec.y)),
    log_axis("x", spec.logx),
    log_axis("y", spec.logy),
    "set grid",
    "set key top left box opaque",
    "set terminal svg size 800,500 dynamic noenhanced font \"sans,11\" background \"white\"",
    "set output out.\".svg\"",
    "plot " .. table.concat(plots, ", \\\n     "),
    "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {",
    "  set terminal pngcairo size 1000,625 noenhanced font \"sans,10\"",
    "} else {",
    "  set terminal png size 1000,625 noenhanced",
    "}",
    "set output out.\".png\"",
    "replot",
    "set output",
    "")
  local lines = {}
  for i = 1, gp.n do if gp[i] then lines[#lines + 1] = gp[i] end end
  local gppath = dir .. "/" .. name .. ".gp"
  write_atomic("figure", gppath, table.concat(lines, "\n"))

  local fig = {name = name, title = title, csv = csv, gp = gppath,
               svg = dir .. "/" .. name .. ".svg", png = dir .. "/" .. name .. ".png",
               rendered = false}
  render(fig)
  return fig
end)

-- ---- index.md ----------------------------------------------------------

local function relative(outdir, path)
  local prefix = outdir:gsub("/+$", "") .. "/"
  if path:sub(1, #prefix) == prefix then return path:sub(#prefix + 1) end
  return path
end

-- results.index(outdir, entries [, title]) -> path of index.md
-- entries: {path=FILE, about=TEXT} for a table or any file, or
-- {figure=FIG, about=TEXT} for what results.figure returned. Every file
-- listed must exist.
M.index = api(function(outdir, entries, title)
  if type(outdir) ~= "string" then fail("index", "outdir must be a string") end
  if type(entries) ~= "table" then fail("index", "entries must be a table") end
  local tables, figures = {}, {}
  for i, e in ipairs(entries) do
    if type(e) ~= "table" or type(e.about) ~= "string" then
      fail("index", "entry %d needs 'about' (one line on how to read it)", i)
    end
    if e.figure then
      if not exists(e.figure.gp) then fail("index", "no figure script '%s'", e.figure.gp) end
      figures[#figures + 1] = e
    else
      if type(e.path) ~= "string" then fail("index", "entry %d needs 'path' or 'figure'", i) end
      if not exists(e.path) and not exists(outdir .. "/" .. e.path) then
        fail("index", "entry %d: no file '%s'", i, e.path)
      end
      tables[#tables + 1] = e
    end
  end
  local md = {("# %s"):format(title or basename(outdir:gsub("/+$", ""))), "",
              ("Written by kbsim %s%s."):format(kbsim_version(),
                arg and arg[0] and (" from `" .. arg[0] .. "`") or ""), ""}
  if #tables > 0 then
    md[#md + 1] = "## Tables"
    md[#md + 1] = ""
    for _, e in ipairs(tables) do
      local rel = relative(outdir, e.path)
      md[#md + 1] = ("- [%s](%s) — %s"):format(rel, rel, e.about)
    end
    md[#md + 1] = ""
  end
  if #figures > 0 then
    md[#md + 1] = "## Figures"
    md[#md + 1] = ""
    local unrendered = false
    for _, e in ipairs(figures) do
      local f = e.figure
      local gp, csv = relative(outdir, f.gp), relative(outdir, f.csv)
      md[#md + 1] = "### " .. f.title
      md[#md + 1] = ""
      if f.rendered then
        local svg, png = relative(outdir, f.svg), relative(outdir, f.png)
        md[#md + 1] = ("![%s](%s)"):format(f.title, svg)
        md[#md + 1] = ""
        md[#md + 1] = ("%s Data: [%s](%s); script: [%s](%s); also [PNG](%s).")
          :format(e.about, csv, csv, gp, gp, png)
      else
        unrendered = true
        md[#md + 1] = ("%s Data: [%s](%s); script: [%s](%s). *Not rendered: "
          .. "gnuplot was not on PATH; run `gnuplot %s` in this folder.*")
          :format(e.about, csv, csv, gp, gp, basename(f.gp))
      end
      md[#md + 1] = ""
    end
    if unrendered then
      md[#md + 1] = "Some figures were not rendered to SVG/PNG because gnuplot was "
        .. "not installed; their `.gp` scripts hold everything needed to draw them."
      md[#md + 1] = ""
    end
  end
  return write_atomic("index", outdir:gsub("/+$", "") .. "/index.md", table.concat(md, "\n"))
end)

-- ---- the summary line ----------------------------------------------------

-- results.ran(summary, what) -> "36 latency points" when every point of the
-- kb.sweep summary is done, else "30 of 36 latency points" (done of total).
function M.ran(summary, what)
  if summary.done == summary.total then return ("%d %s"):format(summary.done, what) end
  return ("%d of %d %s"):format(summary.done, summary.total, what)
end

-- results.verdict(summaries) -> "all checks passed" only when every sweep
-- (a list of kb.sweep summaries) ran all its points, none failed and no
-- kb.check of the script failed; else what went wrong, e.g.
-- "2 points failed, 10 not run (stopped by Ctrl-C), 1 check failed".
function M.verdict(summaries)
  -- what stopped the first sweep that was stopped (a later one runs no point)
  local failed, not_run, stopped_by = 0, 0, nil
  for _, s in ipairs(summaries) do
    failed, not_run = failed + s.failed, not_run + s.not_run
    stopped_by = stopped_by or (s.interrupted and (s.stopped_by or "Ctrl-C"))
  end
  local checks = require("kbsim").checks_failed()
  if failed + not_run + checks == 0 then return "all checks passed" end
  local function count(n, one, many) return ("%d %s"):format(n, n == 1 and one or many) end
  local parts = {}
  if failed > 0 then parts[#parts + 1] = count(failed, "point failed", "points failed") end
  if not_run > 0 then
    parts[#parts + 1] = ("%d not run%s"):format(not_run,
      stopped_by and (" (stopped by %s)"):format(stopped_by) or "")
  end
  if checks > 0 then parts[#parts + 1] = count(checks, "check failed", "checks failed") end
  return table.concat(parts, ", ")
end

-- results.path(name) -> kb.outdir() .. "/" .. name (the folder is created).
function M.path(name)
  return require("kbsim").outdir() .. "/" .. name
end

return M
