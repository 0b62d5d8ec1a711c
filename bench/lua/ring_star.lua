-- ring_star.lua — the C path beside scenarios/innet_reduce.lua: the same
-- all-reduce (4 ranks around a switch, f32) by the ring collective of
-- kbsim.ccl, whose kernels run on the PEs' C units; the switch only
-- forwards. For bench/lua_module.sh.
--   kbsim bench/lua/ring_star.lua n_elem=1024
local kb = require("kbsim")
local p = kb.params({n_elem = {default = 1024, type = "integer", min = 1, help = "f32 a rank"}},
                    {refuse_topology = "the bench builds its own graph"})
local group = {nodes = {{name = "sw"}}, links = {}}
for _, pe in ipairs({"a", "b", "c", "d"}) do
  table.insert(group.nodes, {name = pe, pe = true})
  table.insert(group.links, {from = pe, to = "sw", bandwidth_gbps = 64, latency_ns = 5,
                             bidirectional = true})
end
local torch = require("kbsim.torch").init{topology = group}
torch.distributed.init_process_group{config = {ccl = {algorithm = "ring_allreduce",
                                                      dtype = "f32"}}}
local rep = torch.distributed.all_reduce(torch.zeros({1, 4 * p.n_elem}, {dtype = "f32"}),
                                         {check = true})
kb.check(rep.check == "passed", "ring sums")
print(string.format("ring all-reduce of %d f32 on 4 ranks: %.1f ns", p.n_elem, rep.latency_ns))
