-- system_graph.lua — a graph from a Lua table and from --topology-like
-- YAML files; bad graphs name the table path or file:line:col
local kb = require("kbsim")
local sim = kb.sim()
local sys = kb.system(sim, "graph4.yaml")
local c = sys:counts()
kb.check(c.nodes == 5 and c.links == 8 and c.pes == 4 and c.sips == 0, "graph counts")
kb.check(table.concat(sys:path(0, 3).nodes, " ") == "a sw d", "route")
local t
sim:spawn("x", function() t = sys:transfer(0, 3, 4096) end)
sim:run()
-- a->sw 64 GB/s 5 ns; sw->d 32 GB/s 5 ns + 2 ns overhead: (5+4) + (2+5+8) + 15·8
kb.check(t == 144, "graph transfer " .. tostring(t))

local function err_of(spec)
  local ok, e = pcall(kb.system, kb.sim(), spec)
  return not ok and e or ""
end
local e = err_of("bad_graph.yaml")
kb.check(e:find("bad_graph.yaml:7:19: links[1]: link to unknown node 'x'", 1, true), e)
kb.check(e:find("bad_graph.yaml:5:12: nodes[3]: duplicate node 'a' (first at " ..
                "bad_graph.yaml:3:12)", 1, true), e)
kb.check(e:find("bad_graph.yaml:9:5: links[3]: direction 'b' -> 'a' is wired twice " ..
                "(first at bad_graph.yaml:8:5)", 1, true), e)
local ok
ok, e = pcall(kb.system, kb.sim(), {
  nodes = {{name = "a", pe = true}, {name = "b"}},
  links = {{from = "a", to = "zz", bandwidth_gbps = 1},
           {from = "a", to = "b", bandwidth_gbps = 0}}})
kb.check(e:find("system_graph.lua:26: links[1].to: link to unknown node 'zz'", 1, true), e)
kb.check(e:find("system_graph.lua:26: links[2].bandwidth_gbps: expected a value >= 0.001 and <= 1000000", 1, true), e)
ok, e = pcall(kb.system, kb.sim(), {nodes = {{name = "a", pe = true}, {name = "a"}}, links = {}})
kb.check(e:find("system_graph.lua:32: nodes[2].name: duplicate node 'a'", 1, true), e)
-- a route's mistakes name the place once, as the YAML file does
-- (flow_graph_bad_route): the table path, then the problem
local function lines_of(spec)
  local _, err = pcall(kb.system, kb.sim(), spec)
  local t = {}
  for l in tostring(err):gmatch("[^\n]+") do t[#t + 1] = l end
  return t
end
local N = {{name = "a", pe = true}, {name = "b", pe = true}, {name = "c"}}
local L = {{from = "a", to = "c", bandwidth_gbps = 64, bidirectional = true}}
local function route_err(routes, want)
  local got = lines_of({nodes = N, links = L, routes = routes})
  kb.check(#got == 1 and got[1] == "system_graph.lua:37: " .. want,
           "route error: " .. table.concat(got, " | "))
end
route_err({{from = "a", to = "b", via = {"q"}}}, "routes[1].via[1]: unknown node 'q'")
route_err({{from = "a", to = "q"}}, "routes[1].to: unknown node 'q'")
route_err({{from = "a", to = "b", via = {"c"}}}, "routes[1]: no link from 'c' to 'b'")
route_err({{from = "a", to = "a"}}, "routes[1]: a route from 'a' to itself")
route_err({{from = "a", to = "c"}, {from = "a", to = "c"}},
          "routes[2]: a second route from 'a' to 'c'")
route_err({{from = "a", to = "c", hop = 1}},
          "routes[1].hop: unknown key (expected from, to, via)")
route_err({{from = "a", to = "c", via = 3}},
          "routes[1].via: 'via' must be a list of node names")
route_err({{from = "a"}}, "routes[1]: missing key 'to'")
route_err({3}, "routes[1]: expected a map with from, to, via")
route_err({{from = {}, to = "c"}}, "routes[1].from: 'from' must be a node name")
route_err({{from = "a", to = "c", via = {{}}}}, "routes[1].via[1]: 'via' must be a node name")
print("system_graph ok")
