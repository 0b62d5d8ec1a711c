-- check_keys.lua — every table whose keys are checked (the binding's
-- options, kb.sweep's spec, kb.params' declarations and options,
-- results.figure's spec, kbsim.torch's options) goes through the one check
-- (lkb_check_keys_as, to Lua kb._check_keys): a key that is not a string
-- is named as tostring names a number, else by its type (a table's
-- address would change from run to run), at the caller's line.
local kb = require("kbsim")
local results = require("kbsim.results")
local T = require("kbsim.torch")

local function refused(want, f)
  local line = debug.getinfo(f, "S").linedefined -- the line of the call in f
  local ok, msg = pcall(f)
  want = ("check_keys.lua:%d: %s"):format(line, want)
  kb.check(not ok and msg == want, ("expected %q, got %s"):format(want, ok and "success" or tostring(msg)))
end
local run = function() return {} end
local key = {}

refused("kb.sim: unknown option '1' (stack_size, guard, trace)", function() local _ = kb.sim{[1] = 4} end)
refused("kb.sim: unknown option 'table' (stack_size, guard, trace)", function() local _ = kb.sim{[key] = 4} end)
refused("kb.sim: unknown option 'true' (stack_size, guard, trace)", function() local _ = kb.sim{[true] = 4} end)
refused("kb.sweep: unknown field '2.5' (fields: points, run, name, jobs, key_extra, cache, timeout, cost)",
        function() local _ = kb.sweep{points = {}, run = run, [2.5] = 1} end)
refused("kb.sweep: unknown field 'table' (fields: points, run, name, jobs, key_extra, cache, timeout, cost)",
        function() local _ = kb.sweep{points = {}, run = run, [key] = 1} end)
refused("kb.params: parameter 'n': unknown field 'table' (fields: choices, default, help, list, min, type)",
        function() local _ = kb.params{n = {default = 1, type = "integer", help = "h", [key] = 1}} end)
refused("kb.params: unknown option 'table' (options: about, check, grid_only, refuse_topology)",
        function() local _ = kb.params({n = {default = 1, type = "integer", help = "h"}}, {[key] = 1}) end)
refused("results.figure: unknown field 'table' (fields: csv, logx, logy, name, refs, series, title, x, "
        .. "xlabel, y, ylabel)",
        function() local _ = results.figure{name = "f", csv = "f.csv", x = "x", y = "y", [key] = 1} end)
refused("torch.init: unknown option 'table' (topology, timing_only, guard, stack_size)",
        function() local _ = T.init{[key] = true} end)

-- kb._check_keys itself: the words and the place are the caller's
local function check(t, level) kb._check_keys(t, {"a", "b"}, "f", "field", "fields: ", level) end
kb._check_keys({a = 1, b = 2}, {"a", "b"}, "f")
refused("f: unknown option 'c' (a, b)", function() kb._check_keys({c = 1}, {"a", "b"}, "f") end)
refused("f: unknown field 'c' (fields: a, b)", function() check({c = 1}, 2) end)
local ok, msg = pcall(check, {c = 1}, 0)
kb.check(not ok and msg == "f: unknown field 'c' (fields: a, b)", "level 0: " .. tostring(msg))
print("check_keys ok")
