-- interrupt_scenario.lua SCENARIO SWEEP:N [KEY=VALUE ...] — runs SCENARIO
-- with its KEY=VALUE parameters as kbsim would, but point N of its sweep
-- SWEEP sends Ctrl-C (SIGINT) to kbsim and waits to be interrupted
-- (ctrl_c.lua, as in sweep_interrupt.lua): with -j 1 the points before it
-- are done, it and every later point (of any sweep) not run (the sweeps
-- run in input order: a scenario's `cost` ordering is dropped). The
-- scenario's summary line must then count what ran.
local kb = require("kbsim")
local ctrl_c = require("ctrl_c")

local script, where = arg[1], arg[2]
local stop_sweep, stop_index = where:match("^([%w_]+):(%d+)$")
stop_index = math.tointeger(tonumber(stop_index))

local sweep = kb.sweep
kb.sweep = function(spec)
  spec.cost = nil
  if spec.name == stop_sweep then
    spec.points[stop_index].kb_test_stop = true
    local run = spec.run
    spec.run = function(p)
      if p.kb_test_stop then ctrl_c() end
      return run(p)
    end
  end
  return sweep(spec)
end

-- the scenario sees itself as arg[0] and its own parameters
local params = {[0] = script}
for i = 3, #arg do params[#params + 1] = arg[i] end
arg = params
dofile(script)
