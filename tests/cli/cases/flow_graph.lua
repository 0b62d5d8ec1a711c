-- Graph systems: a user-given path replaces the table's route, and credit
-- flow control runs on a graph's links (one hop a -> b, 64 GB/s: d = 4 ns a
-- 256-byte flit, l = 5 ns; buffer 1 flit, credit 10 ns: one flit per round
-- trip R = d + l + c = 19 ns, so n flits take (n-1)·19 + d + l).
local kb = require("kbsim")
local function ring(extra)
  local g = {nodes = {{name = "a", pe = true}, {name = "b", pe = true}, {name = "c", pe = true},
                      {name = "d", pe = true}}, links = {}}
  for i, n in ipairs({"a", "b", "c", "d"}) do
    local m = ({"b", "c", "d", "a"})[i]
    g.links[#g.links + 1] = {from = n, to = m, bandwidth_gbps = 64, latency_ns = 5,
                             bidirectional = true}
  end
  for k, v in pairs(extra or {}) do g[k] = v end
  return g
end

do
  local sim <close> = kb.sim{}
  local sys = kb.system(sim, ring())
  kb.check(table.concat(sys:path(0, 2).nodes, " ") == "a b c", "table route a b c")
end
do
  local sim <close> = kb.sim{}
  local sys = kb.system(sim, ring{routes = {{from = "a", to = "c", via = {"d"}},
                                            {from = "b", to = "a", via = {"c", "d"}}}})
  local p = sys:path(0, 2)
  kb.check(table.concat(p.nodes, " ") == "a d c", "user route a d c: " .. table.concat(p.nodes, " "))
  kb.check(table.concat(sys:path(1, 0).nodes, " ") == "b c d a", "user route b c d a")
  kb.check(table.concat(sys:path(2, 0).nodes, " ") == "c b a", "others keep the table")
  local h = sys:inject{src = {0}, dst = {2}, t_ns = {0}, bytes = 1024}
  sim:run()
  local t = h:results().latency_ns[1]
  kb.check(math.abs(t - p.latency_ns(1024)) < 1e-9, ("a->d->c %g ns, closed form %g"):format(
    t, p.latency_ns(1024)))
end
for _, n in ipairs({1, 3, 8}) do
  local sim <close> = kb.sim{}
  local g = ring{fabric = {flow_control = "credit", buffer_flits = 1, credit_ns = 10}}
  local sys = kb.system(sim, g)
  local h = sys:inject{src = {0}, dst = {1}, t_ns = {0}, bytes = n * 256}
  sim:run()
  local t = h:results().latency_ns[1]
  kb.check(math.abs(t - ((n - 1) * 19 + 9)) < 1e-9, ("credit graph n=%d: %g ns, want %g"):format(
    n, t, (n - 1) * 19 + 9))
end
print("flow_graph ok")
