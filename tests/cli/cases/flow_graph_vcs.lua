-- A graph system takes fewer VCs than the default grid's routing needs (a
-- graph has one VC class): fabric.vcs = 1 in the graph table or by --set.
-- One hop, 64 GB/s (d = 4 ns a 256-byte flit), l = 5 ns, buffer 1 flit,
-- credit 10 ns: 3 flits take 2·(d + l + c) + d + l = 47 ns.
local kb = require("kbsim")
local g = {nodes = {{name = "a", pe = true}, {name = "b", pe = true}},
           links = {{from = "a", to = "b", bandwidth_gbps = 64, latency_ns = 5, bidirectional = true}},
           fabric = {flow_control = "credit", buffer_flits = 1, credit_ns = 10, vcs = 1}}
local sim <close> = kb.sim{}
local sys = kb.system(sim, g)
local h = sys:inject{src = {0}, dst = {1}, t_ns = {0}, bytes = 3 * 256}
sim:run()
local t = h:results().latency_ns[1]
kb.check(math.abs(t - 47) < 1e-9, ("one VC on a graph: %g ns, want 47"):format(t))
print("flow_graph_vcs ok")
