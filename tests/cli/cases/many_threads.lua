-- 34,000 thread processes with the default kb.sim{}: guarded stacks would
-- need 68,000 memory maps, past Linux's default vm.max_map_count (65530);
-- the stacks past the guard budget come without a guard, with a notice.
local kb = require("kbsim")
local sim <close> = kb.sim{}
local n, woke = 34000, 0
for i = 1, n do
  sim:spawn("t" .. i, function() kb.wait(i % 7); woke = woke + 1 end)
end
assert(sim:run() == "done")
assert(woke == n, woke)
print(("many_threads ok: %d processes, %d still alive"):format(woke, sim:stats().threads_alive))
