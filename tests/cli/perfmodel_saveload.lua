-- perfmodel_saveload.lua — fitted parameters saved, loaded back and predicting the same; the figure files
local kb = require("kbsim")
local pm = require("kbsim.perfmodel")
local pr = require("kbsim.param_results")

local rows = assert(pr.read("data/param_comms.txt"))
local model = assert(pm.fit(pr.series(rows, "all_reduce"),
  { factor = 1.5, collective = "all_reduce" }))

local path = os.tmpname()
assert(pm.save(model, path))
local back, err = pm.load(path)
kb.check(back ~= nil, err)
if back then
  for _, key in ipairs({ "ln_p", "sats_p", "overhead", "max_bw", "L", "x0", "k", "b", "factor" }) do
    kb.check(back[key] == model[key], ("'%s' %.17g after load, want %.17g"):format(
      key, back[key], model[key]))
  end
  kb.check(back.unit == "us" and back.collective == "all_reduce", "unit and collective")
  for e = 10, 32 do
    kb.check(pm.predict(back, 2 ^ e) == pm.predict(model, 2 ^ e), ("same prediction at 2^%d"):format(e))
  end
  print(("loaded: predict 2^20 B = %.4f us"):format(pm.predict(back, 2 ^ 20)))
end

-- A file that is not a parameter table is refused with its name.
local f = assert(io.open(path, "w"))
f:write("return {\n  unit = \"us\",\n  ln_p = 16,\n}\n")
f:close()
local bad, lerr = pm.load(path)
kb.check(bad == nil and lerr:find("missing or bad number 'sats_p'", 1, true), lerr)
-- The file is read as data, never run: code is refused with its line
-- (an endless loop in it hung kbsim; ("x"):rep(2^40) could exhaust memory)
local function refused(text, want)
  f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  bad, lerr = pm.load(path)
  kb.check(bad == nil and lerr == path .. want, ("want %s, got %s"):format(want, tostring(lerr)))
end
refused("os.exit(3)\n", ":1: not a perfmodel parameter file (want 'return {')")
refused("return {\n  while true do end\n}\n", ":2: not a 'key = value,' line")
refused("return {\n  L = (\"x\"):rep(2^40),\n}\n", ":2: 'L': not a number or a plain quoted string")
refused("return {\n  L = 1,\n  L = 2,\n}\n", ":3: 'L' given twice")
refused("return {\n}\nreturn 1\n", ":3: text after the closing '}'")
-- a folder in place of the file: named, not "attempt to concatenate a nil value"
local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir " .. dir)
bad, lerr = pm.load(dir)
kb.check(bad == nil and lerr:find("cannot read model '" .. dir .. "'", 1, true), tostring(lerr))
os.remove(dir)
os.remove(path)

-- The figure: data + model per point, turning points in the script.
local prefix = os.tmpname()
local fig = assert(pm.figure(model, prefix, { render = false }))
local csv = assert(io.open(fig.csv)):read("a")
kb.check(csv:find("^size,log2_size,latency,busbw,pred_latency,pred_busbw\n"), "csv header")
local _, lines = csv:gsub("\n", "")
kb.check(lines == 17, ("%d csv lines, want 17"):format(lines))
local gp = assert(io.open(fig.gp)):read("a")
kb.check(gp:find("set logscale x 2", 1, true) and gp:find("set logscale y 10", 1, true), "log-log")
kb.check(gp:find(("first 2**%.17g"):format(model.ln_p), 1, true)
  and gp:find(("first 2**%.17g"):format(model.sats_p), 1, true), "turning points drawn")
kb.check(fig.image == nil, "not rendered when render = false")
os.remove(fig.csv); os.remove(fig.gp)

-- Rendered only where gnuplot is installed; then the image must exist.
-- (drawn in the background: waited for here, as a script that reads it)
fig = assert(pm.figure(model, prefix, { format = "png" }))
if fig.image then
  require("kbsim.results").wait_figures()
  local img = io.open(fig.image, "rb")
  kb.check(img ~= nil and img:read(4) == "\x89PNG", "png written by gnuplot")
  if img then img:close() end
  os.remove(fig.image)
  print("figure rendered")
end
os.remove(fig.csv); os.remove(fig.gp); os.remove(prefix)
local _, ferr = pm.figure(model, prefix, { format = "gif" })
kb.check(ferr == "unknown figure format 'gif' (want svg or png)", ferr)
print("perfmodel_saveload ok")
