-- A sweep with points that may never end, for the signal, timeout and
-- cache tests (tests/cli/sweep_cache.sh). Point i returns {i = i} unless
-- KBSIM_TEST_SPIN lists it ("3" or "2,4"): then it first creates the file
-- KBSIM_TEST_MARK.i (if set), and spins for ever, in C (a pathological
-- string.find, which no hook interrupts) or, with KBSIM_TEST_SPIN_LUA=1,
-- in Lua. arg[1]: number of points (default 6); arg[2]: kb.sweep's
-- timeout ("-": none); arg[3]: a size in bytes of padding in every row (not in the CSV).
local kb = require("kbsim")
local results = require("kbsim.results")

local n = tonumber(arg[1] or "6")
local padding = tonumber(arg[3] or "0")
local points = {}
for i = 1, n do points[i] = {i = i} end
local rows, summary = kb.sweep{name = "spin", points = points, timeout = tonumber(arg[2]),
                               run = function(p)
  local spin = os.getenv("KBSIM_TEST_SPIN") or ""
  for s in spin:gmatch("%d+") do
    if tonumber(s) == p.i then
      local mark = os.getenv("KBSIM_TEST_MARK")
      if mark then io.open(mark .. "." .. p.i, "w"):close() end
      if os.getenv("KBSIM_TEST_SPIN_LUA") == "1" then
        local x = 0
        while true do x = x + 1 end
      end
      string.find(("a"):rep(60), ("a*"):rep(60) .. "b")
    end
  end
  return {i = p.i, pad = ("x"):rep(padding)}
end}
results.csv(kb.outdir() .. "/spin.csv", rows, {"i"})
print(("spin: rows=%d done=%d failed=%d not_run=%d reused=%d interrupted=%s"):format(
  #rows, summary.done, summary.failed, summary.not_run, summary.reused,
  tostring(summary.interrupted)))
