-- tl.spawn's helpers bind to their kernel through kbsim.tlcore's adopt,
-- which says by its result whether the kernel still runs (true: bound;
-- false: ended, nothing bound), so tl.spawn needs no error caught and no
-- message read to tell a late helper; and a helper that starts on a closed
-- system is refused with the tl.spawn line.
local kb = require("kbsim")
local tl = require("kbsim.tl")
local core = require("kbsim.tlcore")

local sim = kb.sim{}
local sys = kb.system(sim)
local ctx, bound, helper_pe, late, after_ok, after_err
tl.launch(sys, {0}, function()
  ctx = core.context()
  sim:spawn("early", function()
    bound = core.adopt(ctx)
    helper_pe = tl.pe().name
    core.unadopt()
  end)
  kb.wait(1)
end)
sim:spawn("after", function()
  kb.wait(5)
  late = core.adopt(ctx)
  after_ok, after_err = pcall(tl.pe)
end)
sim:run()
kb.check(bound == true, "adopt while the kernel runs: " .. tostring(bound))
kb.check(helper_pe == "sip0.cube0.pe0", "the helper acts for the kernel's PE: " .. tostring(helper_pe))
kb.check(late == false, "adopt after the kernel ended: " .. tostring(late))
kb.check(not after_ok and tostring(after_err):find("called outside a kernel", 1, true),
         "nothing bound after a late adopt: " .. tostring(after_err))

-- the system closed before the helper starts: the tl.spawn line, once
sim = kb.sim{}
sys = kb.system(sim)
tl.launch(sys, {0}, function()
  sim:spawn("closer", function() sys:close() end)
  tl.spawn("late", function() end)
  tl.free(tl.full(64, 1, "f32"))
end)
local ok, err = pcall(sim.run, sim)
kb.check(not ok and tostring(err):find("process 'sip0.cube0.pe0.late' failed: "
                                        .. "tl_spawn_adopt.lua:39: attempt to use a closed system",
                                        1, true), tostring(err))
print("tl_spawn_adopt ok")
