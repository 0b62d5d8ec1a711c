-- system_default_graph.lua — with --topology naming a graph file, the
-- default system is that graph
local kb = require("kbsim")
local c = kb.system(kb.sim()):counts()
kb.check(c.pes == 4 and c.nodes == 5 and c.links == 8, "the --topology graph")
print("system_default_graph ok")
