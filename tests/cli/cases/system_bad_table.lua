-- system_bad_table.lua — a bad topology table names this file and line
local kb = require("kbsim")
local sim = kb.sim()
kb.system(sim, {sips = {count = 6, topology = "torus_2d"}})
