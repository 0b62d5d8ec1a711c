-- A Lua process blocks inside a Lua coroutine it resumes.
local kb = require("kbsim")
local sim = kb.sim{}
local seen = {}
sim:spawn("p", function()
  local gen = coroutine.wrap(function()
    for i = 1, 3 do kb.wait(2); coroutine.yield(i * 10) end
  end)
  for _ = 1, 3 do seen[#seen + 1] = ("%d@%g"):format(gen(), kb.now()) end
end)
sim:run()
kb.check(table.concat(seen, " ") == "10@2 20@4 30@6", table.concat(seen, " "))
print("block_coroutine ok")
