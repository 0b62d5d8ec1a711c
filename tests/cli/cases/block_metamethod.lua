-- A Lua process blocks inside metamethods (__index, __add, __lt).
local kb = require("kbsim")
local sim = kb.sim{}
local slow = setmetatable({}, {__index = function(_, k) kb.wait(4); return k * 2 end})
local V = {}
V.__index = V
V.__add = function(a, b) kb.wait(3); return setmetatable({x = a.x + b.x}, V) end
V.__lt = function(a, b) kb.wait(2); return a.x < b.x end
local r = {}
sim:spawn("p", function()
  r.idx = slow[21]
  r.t1 = kb.now()
  local s = setmetatable({x = 1}, V) + setmetatable({x = 2}, V)
  r.add, r.t2 = s.x, kb.now()
  r.lt = setmetatable({x = 1}, V) < s
  r.t3 = kb.now()
end)
sim:run()
kb.check(r.idx == 42 and r.t1 == 4, "__index blocked 4 ns")
kb.check(r.add == 3 and r.t2 == 7, "__add blocked 3 ns")
kb.check(r.lt == true and r.t3 == 9, "__lt blocked 2 ns")
print("block_metamethod ok")
