-- tutorial_topology.lua — script a new topology (four PEs around one
-- switch) and run transfers on it; docs/tutorial_topology.md walks through it
local kb = require("kbsim")
kb.params({}, {about = "the topology tutorial (docs/tutorial_topology.md)",
               refuse_topology = "the tutorial describes its own graph in the script"})

-- 1. Describe the graph: nodes (mark the PEs) and links with parameters.
--    Ranks follow the order of the PE nodes: a = 0, b = 1, c = 2, d = 3.
local group = {
  nodes = {
    {name = "a", pe = true}, {name = "b", pe = true},
    {name = "c", pe = true}, {name = "d", pe = true},
    {name = "sw"},
  },
  links = {},
}
for _, pe in ipairs({"a", "b", "c", "d"}) do
  table.insert(group.links, {from = pe, to = "sw", bandwidth_gbps = 64,
                             latency_ns = 5, bidirectional = true})
end

-- 2. Build it in a simulation and look at it.
local sim = kb.sim()
local sys = kb.system(sim, group)
io.write(sys:describe())
local path = sys:path(0, 2)
print("route a -> c: " .. table.concat(path.nodes, " -> ") ..
      string.format(" (%d hops)", path.hops))

-- 3. Run transfers from thread processes: a -> c alone, then a -> c and
--    b -> c together (they share the link sw -> c).
local bytes = 4096
local done = {}
sim:spawn("alone", function()
  sys:tcm_write(0, 0, "hello from a")
  done.alone = sys:transfer(0, 2, bytes)
end)
sim:run()
local t0 = sim:now()
for _, src in ipairs({0, 1}) do
  sim:spawn("from" .. src, function()
    done[src] = sys:transfer(src, 2, bytes, {dst_addr = 8192 * (src + 1)})
  end)
end
sim:run()

-- 4. Compare with the closed form: 16 flits of 256 B at 64 GB/s = 4 ns
--    each; the head pays 2 × (5 ns + 4 ns), the other 15 flits 4 ns each.
--    The second flow on sw -> c waits for the whole first worm.
local alone = path.latency_ns(bytes)
print(string.format("%-12s %10s %10s", "transfer", "sim_ns", "formula_ns"))
print(string.format("%-12s %10.1f %10.1f", "a->c alone", done.alone, alone))
print(string.format("%-12s %10.1f %10.1f", "a->c shared", done[0], alone))
print(string.format("%-12s %10.1f %10.1f", "b->c shared", done[1], alone + 16 * 4))
kb.check(alone == 78, "closed form a -> c")
kb.check(done.alone == alone and done[0] == alone, "a -> c takes the closed form")
kb.check(done[1] == alone + 64, "b -> c waits for a's 16 flits")
kb.check(sys:tcm_read(2, 0, 12) == "hello from a", "payload arrived")
print(string.format("ran %.1f ns", sim:now() - t0))
