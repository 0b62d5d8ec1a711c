-- tl_kernel.lua — the tl binding through a kernel: loads, math, dot, send/recv, dispatch time, host vectors
local kb = require("kbsim")
local tl = require("kbsim.tl")

local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 1}}})
local N = 64

-- inputs: rank r holds i + 100 r (f32), written with a host vector
local addr = {}
for r = 0, 1 do
  addr[r] = tl.alloc(sys, r, "hbm", N * 4)
  tl.vec_affine(N, 1, 100 * r):write(sys, r, addr[r], "f32")
end
local tensor = {}
function tensor:shard(rank) return {addr = addr[rank], n = N, kind = "hbm", dtype = "f32"} end

tl.wire(sys, 0, "E", 1, "W")
local got = {}
local t_math
local run = tl.launch(sys, {0, 1}, function()
  local h = tl.load(tensor, 0, N)
  kb.check(#h == N and h.dtype == "f32", "a handle of N f32")
  if tl.rank() == 0 then
    tl.send("E", h)
    local t0 = kb.now()
    local y = tl.fma(h, 2, h)            -- 3 x
    t_math = kb.now() - t0
    local s = tl.sum(y)
    got.sum = s:to_table()[1]
    local a = tl.full(4, 1, "f32")        -- 2x2 ones
    local b = tl.load(tensor, 0, 4)       -- [0 1; 2 3]
    got.dot = tl.dot(a, b, 2, 2, 2):to_table()
  else
    local r = tl.recv("W", N, "f32")
    local z = (r + h) * 0.5 - 1
    tl.store(tensor, 0, z)
    got.pid = tl.program_id()
  end
end)
kb.check(sim:run() == "done", "run ends")

-- rank 1's shard: ((i) + (i + 100)) / 2 - 1 = i + 49
local v = tl.vec_read(sys, 1, addr[1], "f32", N)
local err = v:max_abs_diff(tl.vec_affine(N, 1, 49))
kb.check(err == 0, "rank 1 result i + 49, max error " .. err)
kb.check(got.sum == 3 * (N * (N - 1) / 2), "sum of 3i is " .. tostring(got.sum))
kb.check(got.dot[1] == 2 and got.dot[2] == 4 and got.dot[3] == 2 and got.dot[4] == 4,
         "ones(2x2) . [0 1; 2 3] = [2 4; 2 4]")
kb.check(got.pid == 1, "program_id is the global rank")
-- a kernel call costs the PE_CPU dispatch, then the vector unit: fma of 64
-- f32 = 256 B at 128 B/cycle = 2 cycles, 1 GHz, after 4 cycles of dispatch
kb.check(math.abs(t_math - 6) < 1e-9, "fma takes dispatch 4 ns + 2 cycles, got " .. tostring(t_math))
kb.check(run:latency_ns() > 0, "latency")
local times = run:times()
kb.check(times[0].exec_ns > 0 and times[1].exec_ns > 0, "both kernels timed")

-- tl.wire_ring: each rank's out port into the next one's in port, around
do
  local sim2 = kb.sim{}
  local sys2 = kb.system(sim2, {sips = {count = 1}, sip = {cube_mesh = {w = 3, h = 1}}})
  local ring = {2, 0, 1}
  tl.wire_ring(sys2, ring, "R", "L")
  for i, r in ipairs(ring) do
    local nxt = ring[i % #ring + 1]
    kb.check(tl.wired(sys2, r, "R", true) and tl.wired(sys2, nxt, "L", false),
             ("ring %d -> %d wired"):format(r, nxt))
  end
  kb.check(not tl.wired(sys2, 0, "E", true), "no default ports when named")
  tl.wire_ring(sys2, {1})  -- one rank: nothing to wire
  kb.check(not tl.wired(sys2, 1, "E", true), "a ring of one needs no wire")
  -- host-side arguments of the wrong kind are refused by name
  for _, c in ipairs{
    {"tl.wire_ring: a list of ranks is expected, got string", tl.wire_ring, sys2, "012"},
    {"tl.name: a kernel function is expected, got number", tl.name, 5, "x"},
    {"tl.launch: a system (kb.system) is expected, got table", tl.launch, {}, {0}, function() end},
    {"tl.vec_from: element 2 is a boolean, not a number", tl.vec_from, {1, true}},
  } do
    local ok, err = pcall(c[2], table.unpack(c, 3))
    kb.check(not ok and tostring(err):find(c[1], 1, true), "expected '" .. c[1] .. "', got " .. tostring(err))
  end
end
-- tl.free returns TCM at once: one handle or several; a freed handle (or
-- none at all) is refused by name
do
  local sim3 = kb.sim{}
  local sys3 = kb.system(sim3, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}})
  local msgs = {}
  tl.launch(sys3, {0}, function()
    local a, b, c = tl.full(256, 1, "f32"), tl.full(256, 2, "f32"), tl.full(256, 3, "f32")
    msgs.names = tostring(a) .. " " .. tostring(b)
    tl.free(a, b)
    local d = tl.full(512, 4, "f32") -- fits where a and b were
    msgs.again = select(2, pcall(tl.free, c, c))
    msgs.use = select(2, pcall(tl.sum, a))
    msgs.none = select(2, pcall(tl.free))
    msgs.store = select(2, pcall(tl.store, {shard = function() return {addr = 0, n = 4,
      kind = "tcm", dtype = "f32"} end}, 0, 5))
    tl.free(d)
  end)
  kb.check(sim3:run() == "done", "free kernel runs")
  -- a, b and c were live at once (3 KiB); d reused a and b's 2 KiB
  kb.check(tl.pe_stats(sys3, 0).tcm_peak_bytes == 3 * 1024,
           "TCM peak 3 KiB, got " .. tl.pe_stats(sys3, 0).tcm_peak_bytes)
  kb.check(tostring(msgs.again):match("bad argument #2 to '[%w.]*free' %(handle was freed%)"),
           "second free of one handle: " .. tostring(msgs.again))
  kb.check(tostring(msgs.use):find("handle was freed", 1, true), "use after free: " .. tostring(msgs.use))
  kb.check(tostring(msgs.store):find("tl.store: a handle is expected as the value, got number", 1, true),
           "store of a number: " .. tostring(msgs.store))
  kb.check(msgs.names == "handle(256 f32 at tcm 0x0 of 'sip0.cube0.pe0') "
           .. "handle(256 f32 at tcm 0x400 of 'sip0.cube0.pe0')", "handle names: " .. msgs.names)
  kb.check(tostring(msgs.none):match("bad argument #1 to '[%w.]*free' %(kbsim.handle expected, got no value%)"), "free(): " .. tostring(msgs.none))
end
print("tl_kernel ok")
