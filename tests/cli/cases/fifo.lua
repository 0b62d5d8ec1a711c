-- A fifo of Lua values blocks the writer when full and the reader when
-- empty, with the sc_fifo delta rule.
local kb = require("kbsim")
local sim = kb.sim{}
local f = sim:fifo("f", 2)
local wrote, read = {}, {}

-- writer blocks: five writes into two slots, reader takes one every 10 ns
sim:spawn("writer", function()
  for i = 1, 5 do f:write({n = i}); wrote[i] = kb.now() end
end)
sim:spawn("reader", function()
  for i = 1, 5 do kb.wait(10); read[i] = f:read().n end
end)
sim:run()
local function list(t) local s = {} for i, v in ipairs(t) do s[i] = tostring(v) end return table.concat(s, ",") end
kb.check(list(wrote) == "0.0,0.0,10.0,20.0,30.0", "write times " .. list(wrote))
kb.check(list(read) == "1,2,3,4,5", "values in order " .. list(read))

-- reader blocks: it waits for a writer that comes 5 ns later
local g = sim:fifo("g", 1)
local got_at, got
sim:spawn("late_reader", function() got = g:read(); got_at = kb.now() end)
sim:spawn("late_writer", function() kb.wait(5); g:write("hello") end)
local t0 = sim:now()
sim:run()
kb.check(got == "hello" and got_at == t0 + 5, ("reader woke at %s with %s"):format(got_at, got))

-- any value goes through, nil and false included; non-blocking calls
local h = sim:fifo("h", 3)
kb.check(h:nb_write(nil) and h:nb_write(false) and h:nb_write(print), "nb_write x3")
kb.check(not h:nb_write(1), "nb_write on a full fifo fails")
kb.check(h:free() == 0, "no free slot")
sim:spawn("drain", function()
  kb.wait(0)
  kb.check(h:available() == 3, "three available after a delta")
  local ok1, v1 = h:nb_read()
  local ok2, v2 = h:nb_read()
  local ok3, v3 = h:nb_read()
  kb.check(ok1 and v1 == nil and ok2 and v2 == false and ok3 and v3 == print, "values round-trip")
  kb.check(h:nb_read() == false, "nb_read on an empty fifo fails")
end)
sim:run()
kb.check(tostring(f) == "fifo 'f'" and f:name() == "f", "fifo name")
print("fifo ok")
