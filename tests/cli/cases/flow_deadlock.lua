-- A network deadlock under credit flow control, reported by the engine:
-- one PE in each of the 8 cubes of the cube grid's first row (a ring of
-- cubes over the two SIPs) sends 64 KiB four cubes east at once. Without
-- VC classes (deadlock_avoidance: none, one VC, one-flit buffers) each
-- message holds the UCIe link the next one needs: the run ends with every
-- sender blocked and the report names them. With the default vc_classes
-- the same traffic completes. Argument: "none" or "vc_classes".
local kb = require("kbsim")
local mode = arg[1] or "none"
local sim = kb.sim{}
local fabric = {flow_control = "credit", buffer_flits = 1, deadlock_avoidance = mode}
if mode == "none" then fabric.vcs = 1 end
local sys = kb.system(sim, {fabric = fabric})
local ppc = 8
local row = {}
for sip = 0, 1 do
  for c = 0, 3 do row[#row + 1] = (sip * 16 + c) * ppc end -- cube c of row 0, PE 0
end
local done = 0
for i, src in ipairs(row) do
  local dst = row[(i - 1 + 4) % #row + 1]
  sim:spawn("sender" .. i, function()
    sys:transfer(src, dst, 65536)
    done = done + 1
  end)
end
sim:run()
print(("flow_deadlock %s: %d of %d delivered"):format(mode, done, #row))
