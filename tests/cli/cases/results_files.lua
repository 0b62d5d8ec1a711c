-- kbsim.results: CSV, JSON, a figure with references and index.md; SVG and
-- PNG only when gnuplot is installed.
local kb = require("kbsim")
local results = require("kbsim.results")

local out = kb.outdir()
local rows = {}
for _, topo in ipairs{"ring_1d", "torus_2d"} do
  for k = 0, 5 do
    local bytes = 1024 << k
    rows[#rows + 1] = {topology = topo, bytes = bytes, latency_ns = 1000 + bytes / (topo == "ring_1d" and 2 or 3),
                       ok = true, note = k == 0 and "first, \"small\"" or nil}
  end
end
local csv = results.csv(out .. "/latency.csv", rows, {"topology", "bytes", "latency_ns", "ok", "note"})
local f = assert(io.open(csv))
local text = f:read("a")
f:close()
kb.check(text:find("^topology,bytes,latency_ns,ok,note\nring_1d,"), "header first")
kb.check(text:find('ring_1d,1024,1512,true,"first, ""small"""\n', 1, true), "row formatting")
kb.check(text:find("torus_2d,32768,11922.66667,true,\n", 1, true), "float formatting")
local back = results.read_csv(csv)
kb.check(#back == 12 and back[1].bytes == 1024 and back[12].topology == "torus_2d", "read back")

results.json(out .. "/latency.json", {rows = rows, b = {z = 1, a = 0.1}})
f = assert(io.open(out .. "/latency.json"))
text = f:read("a")
f:close()
kb.check(text:find('"b": {\n    "a": 0.1,\n    "z": 1\n  },', 1, true), "json key order")

local fig = results.figure{name = "latency", csv = csv, x = "bytes", y = "latency_ns",
  series = "topology", title = "all_reduce latency", xlabel = "bytes per PE (B)",
  ylabel = "latency (ns)", logx = 2, logy = true,
  refs = {{title = "analytic", fn = "1000 + x/2.5"}, {title = "external", points = {{4096, 3000}}}}}
results.index(out, {{path = csv, about = "one row per topology and size; latency in ns"},
                    {path = out .. "/latency.json", about = "the rows as JSON"},
                    {figure = fig, about = "Latency against size, log-log; black dashed lines are references."}})

local function exists(p) local h = io.open(p) if h then h:close() end return h ~= nil end
kb.check(exists(out .. "/latency.gp"), "gnuplot script")
kb.check(exists(out .. "/index.md"), "index")
f = assert(io.open(out .. "/index.md"))
local index = f:read("a")
f:close()
kb.check(index:find("[latency.csv](latency.csv)", 1, true), "index lists the CSV")
kb.check(index:find("### all_reduce latency", 1, true), "index lists the figure")
local have_gnuplot = os.execute("command -v gnuplot >/dev/null 2>&1") == true
kb.check(fig.rendered == have_gnuplot, "rendered when gnuplot is there")
-- drawn in the background: in place once results.wait_figures returns
results.wait_figures()
kb.check(exists(out .. "/latency.svg") == have_gnuplot, "svg")
kb.check(exists(out .. "/latency.png") == have_gnuplot, "png")
kb.check(have_gnuplot or index:find("Not rendered", 1, true), "index says what was not rendered")
for _, name in ipairs{"latency.csv.tmp", "latency.gp.tmp", "index.md.tmp", "latency.tmp.svg"} do
  kb.check(not exists(out .. "/" .. name), "no temporary file " .. name)
end
print("results_files ok", have_gnuplot and "(rendered)" or "(gnuplot absent)")
