-- trace_check.lua FILE KERNEL SPANS BYTES — the shape of a --trace file
-- (tests/cli/trace.sh): the trace-event JSON object Perfetto opens, one
-- event a line; SPANS kernel spans named KERNEL, each on its own PE row;
-- link spans and DMA spans, every link span's size in its name; only
-- messages of BYTES bytes per rank in the collective's kernels' DMA reads.
local kb = require("kbsim")
local path, kernel, nspans, bytes = arg[1], arg[2], tonumber(arg[3]), arg[4]
local f = assert(io.open(path, "rb"))
local text = f:read("a")
f:close()

kb.check(text:sub(1, 17) == '{"traceEvents":[\n', "starts with {\"traceEvents\":[")
kb.check(text:sub(-27) == '\n],"displayTimeUnit":"ns"}\n', "ends the object with displayTimeUnit")

local count, kernels, rows, links, dmas, named, bad = 0, 0, {}, 0, 0, 0, 0
local body = text:sub(18, -28)
for line in (body .. ",\n"):gmatch("(.-),?\n") do
  count = count + 1
  if not line:match('^{"ph":"[MXiC]","pid":%d+,"tid":%d+,.*}$') then
    bad = bad + 1
    if bad == 1 then kb.check(false, "not an event: " .. line) end
  end
  local tid = line:match('"tid":(%d+)')
  if line:find('"cat":"kernel"', 1, true) then
    kb.check(line:find('"name":"' .. kernel .. '"', 1, true) ~= nil, "kernel span named " .. kernel .. ": " .. line)
    kernels = kernels + 1
    rows[tid] = (rows[tid] or 0) + 1
  elseif line:find('"cat":"link"', 1, true) then
    links = links + 1
    local b, name = line:match('"args":{"bytes":(%d+)'), line:match('"name":"(%d+) B"')
    if b and b == name then named = named + 1 end
  elseif line:find('"cat":"dma"', 1, true) then
    dmas = dmas + 1
  end
end
local nrows = 0
for _, n in pairs(rows) do
  nrows = nrows + 1
  kb.check(n == 1, "one kernel span per PE row")
end
kb.check(kernels == nspans, ("%d kernel spans, want %d"):format(kernels, nspans))
kb.check(nrows == nspans, ("%d PE rows with a kernel, want %d"):format(nrows, nspans))
kb.check(links > 0 and named == links, ("%d link spans, %d named by their size"):format(links, named))
kb.check(dmas > 0, "DMA spans")
kb.check(text:find('"name":"thread_name","args":{"name":"cube0.pe0"}', 1, true) ~= nil, "a row named cube0.pe0")
kb.check(text:find('"name":"process_name","args":{"name":"sip0"}', 1, true) ~= nil, "a process named sip0")
kb.check(text:find('"bytes":' .. bytes .. ',', 1, true) ~= nil, "a transfer of " .. bytes .. " bytes")
print(("trace ok: %d events, %d kernel, %d link, %d dma spans"):format(count, kernels, links, dmas))
