-- A Lua process blocks inside a table.sort comparator (a C function
-- calling back into Lua), while another process interleaves.
local kb = require("kbsim")
local sim = kb.sim{}
local cmps, sorted, other = 0, nil, {}
sim:spawn("sorter", function()
  local t = {5, 3, 9, 1, 7, 2}
  table.sort(t, function(a, b) kb.wait(1); cmps = cmps + 1; return a < b end)
  sorted = table.concat(t, ",")
end)
sim:spawn("other", function() for i = 1, 3 do kb.wait(1.5); other[i] = kb.now() end end)
sim:run()
kb.check(sorted == "1,2,3,5,7,9", "sorted " .. tostring(sorted))
kb.check(cmps > 0 and sim:now() == math.max(cmps, 4.5), ("one ns per comparison: %d, now %g"):format(cmps, sim:now()))
kb.check(other[3] == 4.5, "the other process interleaved")
print("block_sort ok")
