-- kb.sweep: what a point function may capture: plain data, modules (kbsim,
-- kbsim.results, string), module C functions, other Lua functions
-- (recursive, sharing a variable), _ENV.
local kb = require("kbsim")
local results = require("kbsim.results")
local fmt = string.format
local floor = math.floor
local cfg = {scale = 3, names = {"a", "b"}, nested = {deep = {v = 2.5}}}
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local count = 0
local function bump() count = count + 1 end
local function seen() return count end

local rows = kb.sweep{name = "upvalues", points = {{n = 5}, {n = 10}}, run = function(p)
  bump(); bump(); bump()
  local csv = results.csv_text({{n = p.n}}, {"n"})
  return {
    fib = fib(p.n), label = fmt("%s-%d", cfg.names[1], p.n), half = floor(p.n / 2),
    deep = cfg.nested.deep.v * cfg.scale, shared = seen(), csv = csv,
    version = kb.version, jobs = kb.options.jobs, global = type(print),
    arg0 = arg[0],
  }
end}
kb.check(#rows == 2, "two rows")
kb.check(rows[1].fib == 5 and rows[2].fib == 55, "recursive local function")
kb.check(rows[2].label == "a-10", "string.format as a module member")
kb.check(rows[2].half == 5, "math.floor")
kb.check(rows[1].deep == 7.5, "nested plain data")
kb.check(rows[1].shared == 3, "closures share their variable: " .. tostring(rows[1].shared))
kb.check(rows[2].csv == "n\n10\n", "kbsim.results required in the point")
kb.check(rows[1].version == kb.version and rows[1].jobs == kb.options.jobs, "kb.options")
kb.check(rows[1].global == "function", "_ENV is the point's globals")
kb.check(rows[1].arg0 == "sweep_upvalues.lua", "arg")
kb.check(count == 0, "the caller's variables are not touched")
print("sweep_upvalues ok")
