-- figures_plotter.lua DIR — renders drawn one after the other by the same
-- gnuplot (lua/lrender.c, decision 0046): a figure whose gnuplot quits,
-- fails or is killed ends as it would in a gnuplot of its own, and the
-- figures after it are still drawn, each from gnuplot's initial settings.
local results = require("kbsim.results")
local dir = arg[1]
local function gp(name, body)
  local f = assert(io.open(dir .. "/" .. name .. ".gp", "w"))
  f:write('if (!exists("out")) out = "', name, '"\n',
          body or "", "\n",
          'set terminal svg size 300,200\nset output out.".svg"\nplot x\n',
          'set terminal png size 300,200\nset output out.".png"\nplot x\n')
  f:close()
  return {name = name, gp = dir .. "/" .. name .. ".gp", svg = dir .. "/" .. name .. ".svg",
          png = dir .. "/" .. name .. ".png"}
end
results.render(gp("first", "set title 'first'\nleak = 1"))
-- drawn after `first` in the same gnuplot: neither its title nor its
-- variable is left
results.render(gp("fresh", "if (exists('leak')) set title 'LEAKED'"))
results.render(gp("quits", "")) -- `exit` after its files: drawn
local f = assert(io.open(dir .. "/quits.gp", "a"))
f:write("set output\nexit\n")
f:close()
results.render(gp("bad", "plot nosuchfunction(x)"))
results.render(gp("killed", "system('kill -9 $PPID')"))
results.render(gp("last"))
print("figures started")
