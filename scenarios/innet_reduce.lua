-- innet_reduce.lua — an in-network reduction unit written in Lua, bound
-- into the C-built graph system of four PEs around a switch, and an
-- all-reduce that goes through it; checked by value and against the closed
-- form. docs/modules.md ("Writing a module in Lua") walks through it.
--
--   kbsim scenarios/innet_reduce.lua [n_elem=1024] [lanes=16]
local kb = require("kbsim")
local p = kb.params({
  n_elem = {default = 1024, type = "integer", min = 1, help = "f32 elements per rank"},
  lanes = {default = 16, type = "integer", min = 1, help = "f32 adds a cycle of the unit"},
  ring = {default = true, type = "boolean", help = "also run the ring all-reduce (C kernels)"},
}, {about = "an all-reduce through an in-network reduction unit written in Lua",
    refuse_topology = "the scenario builds its own graph"})

local P = 4                                    -- ranks a, b, c, d
local n_elem, lanes = p.n_elem, p.lanes
local clock_ghz = 1                            -- the unit's adder clock
local bytes = 4 * n_elem                       -- f32 vectors
local link = {gbps = 64, latency_ns = 5}
local buf = {gbps = 4096, setup_ns = 2}        -- the switch's SRAM

-- 1. The C-built system: four PEs around the switch `sw`.
local group = {nodes = {{name = "sw"}}, links = {}}
for _, pe in ipairs({"a", "b", "c", "d"}) do
  table.insert(group.nodes, {name = pe, pe = true})
  table.insert(group.links, {from = pe, to = "sw", bandwidth_gbps = link.gbps,
                             latency_ns = link.latency_ns, bidirectional = true})
end
local sim = kb.sim()
local sys = kb.system(sim, group)
-- a C memory placed at the switch: the unit's buffer (exports sw.sram.in)
local sram = kb.memory(sys, "sw", {kind = "sram", capacity = (P + 1) * bytes,
                                   bandwidth_gbps = buf.gbps, setup_ns = buf.setup_ns})

-- 2. The unit, a module written in Lua: "sw.reduce".
--    out dma : kb_dma_if  P..P -> a.dma.in, b.dma.in, ...  (the ranks' DMAs)
--    out tcm : kb_mem_if  P..P -> a.tcm.in, ...             (their TCMs)
--    out buf : kb_mem_if  1..1 -> sw.sram.in
--    in  in  : kb_allreduce_if  (its export, called by the ranks' clients)
local unit = kb.module(sys, "sw.reduce")
unit:out("dma", "kb_dma_if", {min = P, max = P})
unit:out("tcm", "kb_mem_if", {min = P, max = P})
unit:out("buf", "kb_mem_if")
for r = 0, P - 1 do
  local pe = sys:pe(r).name
  unit:bind("dma", pe .. ".dma.in")
  unit:bind("tcm", pe .. ".tcm.in")
end
unit:bind("buf", sram)

local arrived, go, done = 0, unit:event("go"), unit:event("done")
local stats = {reductions = 0, bytes_in = 0}
local ends = {} -- per rank: its DMA, its TCM end, its slot in the buffer

-- The export: allreduce(rank) runs in the caller's thread process. The
-- rank's DMA pushes its vector into the switch's buffer; the last arrival
-- wakes the unit's process; then the rank's DMA pulls the sum back.
unit:export("kb_allreduce_if", {
  allreduce = function(self, rank)
    local e = ends[rank]
    e.dma:copy(e.tcm, e.slot, bytes, "write")
    stats.bytes_in = stats.bytes_in + bytes
    arrived = arrived + 1
    if arrived == P then go:notify() end
    kb.wait(done)
    e.dma:copy(e.result, e.tcm, bytes, "read")
  end,
}, {max = P})

-- The unit's thread process: wait for all P vectors, read them through
-- its buf port (a timed access), add them lanes at a time, write the sum.
unit:thread("adder", function(self)
  local b = self:peer("buf")
  for r = 0, P - 1 do
    ends[r] = {dma = self:peer("dma", r + 1), tcm = {mem = self:peer("tcm", r + 1), addr = 0},
               slot = {mem = b, addr = r * bytes}, result = {mem = b, addr = P * bytes}}
  end
  kb.wait(go)
  b:access(0, P * bytes, "read")
  local fmt = "<" .. string.rep("f", n_elem)
  local sum = {string.unpack(fmt, b:read(0, bytes))}
  for r = 1, P - 1 do
    local v = {string.unpack(fmt, b:read(r * bytes, bytes))}
    for i = 1, n_elem do sum[i] = sum[i] + v[i] end
  end
  kb.wait((P - 1) * math.ceil(n_elem / lanes) / clock_ghz)
  sum[n_elem + 1] = nil
  b:write(P * bytes, string.pack(fmt, table.unpack(sum, 1, n_elem)))
  b:access(P * bytes, bytes, "write")
  stats.reductions = stats.reductions + 1
  done:notify()
end)

-- 3. Each rank's client, another Lua module, calls the unit through its
-- port net : kb_allreduce_if, bound to sw.reduce.in.
local finish = {}
for r = 0, P - 1 do
  local pe = sys:pe(r).name
  local client = kb.module(sys, pe .. ".ar")
  client:out("net", "kb_allreduce_if")
  client:bind("net", unit:port("in"))
  -- the rank's vector: v_r[i] = r + (i - 1) / 2, exact in f32
  local v = {}
  for i = 1, n_elem do v[i] = r + (i - 1) / 2 end
  local s = {}
  for i = 1, n_elem, 256 do
    s[#s + 1] = string.pack("<" .. string.rep("f", math.min(256, n_elem - i + 1)),
                            table.unpack(v, i, math.min(i + 255, n_elem)))
  end
  sys:tcm_write(r, 0, table.concat(s))
  client:thread("rank", function(self)
    self:peer("net"):allreduce(r)
    finish[r] = sim:now()
  end)
end

-- the wiring of the Lua modules, as sys:describe{ports = true} lists it
-- (every module of the system; kbsim --describe lists C-built ones)
local show = false
for line in sys:describe{ports = true}:gmatch("[^\n]+") do
  if not line:match("^ ") then show = line:match("^sw%.") or line:match("^%a%.ar$") end
  if show then print(line) end
end
sim:run()

-- 4. Values: every rank holds sum_r v_r[i] = 6 + 2 (i - 1).
for r = 0, P - 1 do
  local got = sys:tcm_read(r, 0, bytes)
  for i = 1, n_elem, 97 do
    local x = string.unpack("<f", got, 4 * (i - 1) + 1)
    kb.check(x == 6 + 2 * (i - 1), string.format("rank %d element %d: %g", r, i, x))
  end
  kb.check(got == sys:tcm_read(0, 0, bytes), "rank " .. r .. " holds rank 0's result")
end

-- 5. Timing: the closed form. A vector of B bytes crosses its one link
--    (rank <-> sw) as flits streaming back to back, the last one short:
--    Tnet = latency + B / gbps, and Lnet = latency.
local tnet = link.latency_ns + bytes / link.gbps
--    push (TCM -> sw SRAM): the DMA's T = Ls + max(Tnet, Lnet + Ds, Lnet + Dd) + Ld
--    with the TCM (512 GB/s, setup 0) and the buffer (setup 2 ns, fast
--    enough that P pushes do not queue on it); the pull is the same with
--    the ends swapped:
local tcm_gbps = sys:config("pe.tcm.bandwidth_gbps")
local t_push = 0 + math.max(tnet, link.latency_ns + bytes / tcm_gbps,
                            link.latency_ns + bytes / buf.gbps) + buf.setup_ns
local t_pull = buf.setup_ns + math.max(tnet, link.latency_ns + bytes / buf.gbps,
                                       link.latency_ns + bytes / tcm_gbps) + 0
--    reduce: read P B, add (P - 1) ceil(n / lanes) cycles, write B
local t_reduce = (buf.setup_ns + P * bytes / buf.gbps) +
                 (P - 1) * math.ceil(n_elem / lanes) / clock_ghz +
                 (buf.setup_ns + bytes / buf.gbps)
local closed = t_push + t_reduce + t_pull
print(string.format("%-8s %10s %10s", "rank", "sim_ns", "formula_ns"))
for r = 0, P - 1 do
  print(string.format("%-8s %10.1f %10.1f", sys:pe(r).name, finish[r], closed))
  -- (each stage is rounded to whole ps in the simulation: 6 stages)
  kb.check(math.abs(finish[r] - closed) <= 0.006, ("rank %d all-reduce time %.4f, closed form %.4f"):format(r, finish[r], closed))
end
local st = sram:stats()
print(string.format("unit: %d reduction, %d B in; buffer: %d B read, %d B written",
                    stats.reductions, stats.bytes_in, st.bytes_read, st.bytes_written))
kb.check(stats.reductions == 1 and stats.bytes_in == P * bytes, "the unit reduced once")
kb.check(st.bytes_read == P * bytes + P * bytes and st.bytes_written == P * bytes + bytes,
         "buffer traffic: P pushes + the reduce read, the sum + P pulls")

-- 6. The same all-reduce by the C-kernel ring collective (kbsim.ccl) on
--    the same graph, without the unit: the switch only forwards.
if not p.ring then
  print(string.format("all-reduce of %d f32 on %d ranks: %.1f ns through sw.reduce", n_elem, P,
                      finish[0]))
  return
end
local T = require("kbsim.torch")
local torch = T.init{topology = group}
torch.distributed.init_process_group{config = {ccl = {algorithm = "ring_allreduce",
                                                      dtype = "f32"}}}
local rep = torch.distributed.all_reduce(torch.zeros({1, P * n_elem}, {dtype = "f32"}),
                                         {check = true})
kb.check(rep.check == "passed", "ring all-reduce sums")
print(string.format("all-reduce of %d f32 on %d ranks: %.1f ns through sw.reduce, %.1f ns "
                    .. "by the ring (%.2fx)", n_elem, P, finish[0], rep.latency_ns,
                    rep.latency_ns / finish[0]))
