-- interrupt_scenario.lua SCENARIO SWEEP:N [KEY=VALUE ...] — runs SCENARIO
-- with its KEY=VALUE parameters as kbsim would, but point N of its sweep
-- SWEEP sends Ctrl-C (SIGINT) to kbsim and waits to be interrupted, as
-- tests/cli/cases/sweep_interrupt.lua does: with -j 1 the points before it
-- are done, it and every later point (of any sweep) not run. The
-- scenario's summary line must then count what ran.
local kb = require("kbsim")

local script, where = arg[1], arg[2]
local stop_sweep, stop_index = where:match("^([%w_]+):(%d+)$")
stop_index = math.tointeger(tonumber(stop_index))

local sweep = kb.sweep
kb.sweep = function(spec)
  if spec.name == stop_sweep then
    spec.points[stop_index].kb_test_stop = true
    local run = spec.run
    spec.run = function(p)
      if p.kb_test_stop then
        -- popen, not os.execute: system() ignores SIGINT while it waits.
        io.popen("kill -INT $PPID"):close()
        local sim <close> = kb.sim{}
        local t0 = kb.clock()
        sim:spawn("spin", function() while kb.clock() - t0 < 10 do kb.wait(1) end end)
        sim:run()
      end
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
