-- ccl_working_set.lua — the ring collectives return superseded TCM scratch as they go
--
-- Each collective runs twice on 8 ranks of one SIP: once tiny (the IPCQ
-- slots and a few bytes of scratch), then with 256 KiB per rank. The
-- largest TCM working set of any rank, from tl.pe_stats, may grow by no
-- more than the algorithm's few live tiles or chunks, whatever the world
-- size; holding every received piece until the kernel ends (about 2N
-- tiles) fails the bound. A receive's buffer is taken when it is waited
-- for, so a ring step holds one chunk beside what it sends. The values are checked against the host.
local kb = require("kbsim")
local T = require("kbsim.torch")
local tl = require("kbsim.tl")

local N, ELT = 8, 4
local n = 64 * 1024 -- f32 elements of one rank's tile: 256 KiB
local C = n // N    -- of one chunk

local function world(alg)
  local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 2}}}}
  torch.distributed.init_process_group{backend = "ahbm",
    config = {ccl = {algorithm = alg, dtype = "f32", algorithms = {[alg] = {world_size = N}}}}}
  return torch
end

local function peak(torch)
  local m = 0
  for _, r in ipairs(torch.distributed.get_ranks()) do
    m = math.max(m, tl.pe_stats(torch.sys, r).tcm_peak_bytes)
  end
  return m
end

-- element i of rank k: (i mod 64) + 100 k, exact in f32 when summed
local function fill(t, per_rank, ranks)
  for k, r in ipairs(ranks) do
    t:shard_write_vec(r, tl.vec_affine(per_rank, 1, 0):mod(64):add(100 * (k - 1)))
  end
end

-- run(torch, elements per tile) runs the collective once and returns its report
local cases = {
  {"ring_allreduce", 3 * n, function(torch, m)
    local D = torch.distributed
    local t = torch.zeros({1, N * m}); fill(t, m, D.get_ranks())
    return D.all_reduce(t)
  end},
  {"ring_rs_ag_allreduce", n + C, function(torch, m)
    local D = torch.distributed
    local t = torch.zeros({1, N * m}); fill(t, m, D.get_ranks())
    return D.all_reduce(t)
  end},
  {"tree_allreduce", 3 * n, function(torch, m)
    local D = torch.distributed
    local t = torch.zeros({1, N * m}); fill(t, m, D.get_ranks())
    return D.all_reduce(t)
  end},
  {"reduce_scatter", 3 * C, function(torch, m)
    local D = torch.distributed
    local inp, out = torch.zeros({1, N * m}), torch.zeros({1, m})
    fill(inp, m, D.get_ranks())
    return D.reduce_scatter(out, inp)
  end},
  {"all_gather", C, function(torch, m)
    local D = torch.distributed
    local inp, out = torch.zeros({1, m}), torch.zeros({1, N * m})
    fill(inp, m // N, D.get_ranks())
    return D.all_gather(out, inp)
  end},
  {"all_to_all", C, function(torch, m)
    local D = torch.distributed
    local inp, out = torch.zeros({1, N * m}), torch.zeros({1, N * m})
    fill(inp, m, D.get_ranks())
    return D.all_to_all(out, inp)
  end},
  {"broadcast", C, function(torch, m)
    local D = torch.distributed
    local t = torch.zeros({1, N * m}); fill(t, m, D.get_ranks())
    return D.broadcast(t, 0, {chunks = N})
  end},
}

for _, c in ipairs(cases) do
  local name, live, run = c[1], c[2], c[3]
  local torch = world(name:find("allreduce") and name or "ring_allreduce")
  local small = run(torch, N)
  kb.check(small.check == "passed", name .. ": tiny run: host check " .. small.check)
  local base = peak(torch)
  local rep = run(torch, n)
  kb.check(rep.check == "passed" and rep.max_err == 0,
    ("%s: host check %s, max error %g"):format(name, rep.check, rep.max_err))
  local grew = peak(torch) - base
  kb.check(grew <= live * ELT + 4096,
    ("%s: TCM working set grew by %d B, more than %d live elements (%d B)"):format(
      name, grew, live, live * ELT))
  print(("%-22s peak %8d B over the tiny run (bound %8d B)  %10.1f ns"):format(
    name, grew, live * ELT + 4096, rep.latency_ns))
end
print("ccl_working_set ok")
