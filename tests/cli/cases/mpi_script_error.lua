-- mpi_script_error.lua — a script error after a sweep (every rank), only on
-- the ranks but 0 ("rank"), or a table raised (every rank): said once;
-- "before" and "rank0" fail before the sweep on some ranks only
local kb = require("kbsim")
-- "before": the ranks but 0 fail before a sweep rank 0 goes into
if arg[1] == "before" and kb.outdir() ~= "out" then error("not on rank 0, before the sweep") end
-- "rank0": rank 0 only fails before the sweep the others go into
if arg[1] == "rank0" and kb.outdir() == "out" then error("only on rank 0, before the sweep") end
local rows = kb.sweep{name = "s", points = {{n = 1}, {n = 2}, {n = 3}},
                      run = function(p) return {n = p.n} end}
print("rows " .. #rows)
local rank0 = kb.outdir() == "out" -- the other ranks' is a scratch folder
if arg[1] == "rank" then
  if not rank0 then error("not on rank 0") end
elseif arg[1] == "table" then
  error({rows = #rows})
else
  error("after the sweep: " .. #rows .. " rows")
end
