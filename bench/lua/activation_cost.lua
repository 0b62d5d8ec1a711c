-- activation_cost.lua — CPU per kernel activation of real collectives
-- (bench/README.md, "Where an activation's CPU goes")
--
--   kbsim -q bench/lua/activation_cost.lua [sips=6,24] [n_elem=1024] [algorithms=lrab,ring]
--
-- For each SIP count (torus_2d of the default 4x4 cubes of 8 PEs) and each
-- algorithm, builds the system, runs one all-reduce over PE 0 of every
-- cube (16 participants a SIP) in timing-only mode, and prints one line:
-- activations (the engine's counter, sim:stats()), CPU seconds of building
-- the system and of the collective (os.clock: user + sys of the process;
-- the collective's includes wiring its channels and making the units and
-- links it uses on first use), µs of CPU per activation of the collective,
-- and the simulated latency. `lrab` is the
-- milestone algorithm; `ring` is the flat ring_allreduce over the same
-- ranks in launch order. The counts and latencies are deterministic; the
-- CPU is not (measure medians: bench/activation_cost.sh).
local kb = require("kbsim")

local GRIDS = {[6] = {3, 2}, [24] = {6, 4}, [96] = {12, 8}, [384] = {24, 16}, [1024] = {32, 32}}
local ALGOS = {lrab = "lrab", ring = "ring_allreduce"}

local p = kb.params({
  sips = {default = {6, 24}, type = "integer", list = true, min = 1,
          help = "SIP counts (torus_2d grids 3x2, 6x4, 12x8, 24x16, 32x32)"},
  n_elem = {default = 1024, type = "integer", min = 1, help = "f16 elements a participant"},
  algorithms = {default = {"lrab", "ring"}, type = "string", list = true, choices = {"lrab", "ring"},
                help = "lrab (milestone), ring (flat ring_allreduce over the same ranks)"},
  values = {default = false, type = "boolean", help = "write and move values (not timing-only)"},
}, {about = "CPU per kernel activation of lrab and the flat ring at system scale",
    refuse_topology = "the script builds its own torus_2d systems"})

local T = require("kbsim.torch")
local tl = require("kbsim.tl")

print("| case | participants | activations | build CPU s | run CPU s | µs/activation | simulated ns |")
print("|---|---:|---:|---:|---:|---:|---:|")
for _, sips in ipairs(p.sips) do
  for _, name in ipairs(p.algorithms) do
    local b0 = os.clock()
    local g = GRIDS[sips] or error(("sips=%d: one of 6, 24, 96, 384, 1024"):format(sips), 0)
    local torch = T.init{topology = {sips = {count = sips, topology = "torus_2d", w = g[1], h = g[2]}},
                         timing_only = not p.values, guard = false}
    local D = torch.distributed
    D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = "lrab", dtype = "f16"}}}
    local n = #D.get_ranks()
    local t = torch.zeros({1, n * p.n_elem}, {dtype = "f16"})
    if p.values then
      local base = tl.vec_affine(p.n_elem, 0.25, 0):mod(2)
      for _, r in ipairs(D.get_ranks()) do t:shard_write_vec(r, base) end
    end
    local build = os.clock() - b0
    local a0 = torch.sim:stats().activations
    local c0 = os.clock()
    local rep = D.all_reduce(t, {algorithm = ALGOS[name], check = false})
    local cpu = os.clock() - c0
    local acts = torch.sim:stats().activations - a0
    print(("| %s %d SIPs n_elem %d%s | %d | %d | %.3f | %.3f | %.3f | %.1f |"):format(
      name, sips, p.n_elem, p.values and " values" or "", n, acts, build, cpu, cpu * 1e6 / acts, rep.latency_ns))
    torch.sim:close()
  end
end
