-- ccl_config_table.lua — init_process_group{config = TABLE} reads the
-- table as a tree (no YAML text, no temporary file): a string stays a
-- string, and a bad value names this script's line and the key's path
local kb = require("kbsim")
local T = require("kbsim.torch")

os.tmpname = function() error("no temporary file is needed", 2) end

local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}}}
local D = torch.distributed

local function refused(config, want)
  local line = debug.getinfo(1, "l").currentline + 1 -- init_process_group's caller
  local ok, e = pcall(D.init_process_group, {backend = "ahbm", config = config})
  want = ("ccl_config_table.lua:%d: %s"):format(line, want)
  kb.check(not ok and tostring(e):find(want, 1, true), ("missing %q in %s"):format(want,
    ok and "success" or tostring(e)))
end

-- YAML in a string is a string: an unknown algorithm, not n_elem = 7
refused({ccl = {algorithm = "ring_allreduce\n  n_elem: 7"}},
  "ccl.algorithm: unknown algorithm 'ring_allreduce")
-- "64" is a string, not a number
refused({ccl = {n_elem = "64"}}, "ccl.n_elem: expected an integer, got \"64\"")
refused({ccl = {n_elem = 0}}, "ccl.n_elem: expected a value >= 1 and <= 1073741824")
refused({ccl = {n_elem = 1 << 31}}, "ccl.n_elem: expected a value >= 1 and <= 1073741824")
refused({ccl = {algorithms = {ring_allreduce = {world_size = 0}}}},
  "ccl.algorithms.ring_allreduce.world_size: expected a value >= 1")
refused({ccl = {dtype = "f64"}}, "ccl.dtype: expected one of f16, bf16, f32")
refused({ccl = {n_elme = 5}}, "ccl.n_elme: unknown key (did you mean 'n_elem'?)")
refused({cc = {}}, "cc: unknown key (did you mean 'ccl'?)")
refused({ccl = {algorithm = "nope"}}, "ccl.algorithm: unknown algorithm 'nope'")

-- a good table: laid over configs/ccl.yaml; the algorithm's place is this line
local line = debug.getinfo(1, "l").currentline + 1
D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = "ring_allreduce", n_elem = 64}}}
local cfg = D.get_config()
kb.check(cfg.algorithm == "ring_allreduce" and cfg.n_elem == 64 and cfg.dtype == "f16",
  "config laid over the defaults")
kb.check(cfg.where == ("ccl_config_table.lua:%d: ccl.algorithm"):format(line), cfg.where)

-- kb.ccl_config reads the same forms: nil, a file, a table
kb.check(kb.ccl_config().algorithm == "lrab", "the defaults")
local ok, e = pcall(kb.ccl_config, "no_such_ccl.yaml")
kb.check(not ok and e:find("ccl_config_table.lua:44: kb.ccl_config: cannot open 'no_such_ccl.yaml'", 1, true),
         tostring(e))
ok, e = pcall(kb.ccl_config, 5)
kb.check(not ok and e:find("nil, a file name or a table expected", 1, true), tostring(e))
print("ccl_config_table ok")
