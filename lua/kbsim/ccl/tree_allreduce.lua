-- tree_allreduce.lua — binary-tree all-reduce: reduce up to rank 0, broadcast down
--
-- Launch index r has children 2r+1 and 2r+2 and parent (r-1)//2.
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local function args(world_size, n_elem, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, op = opts.op}
end

-- Parent and child talk both ways on one name per side: the child's
-- "parent", the parent's "child_left" or "child_right".
local function wire(sys, ranks, _)
  for i = 2, #ranks do
    local c = i - 1
    local p = (c - 1) // 2
    local side = (c % 2 == 1) and "child_left" or "child_right"
    tl.wire(sys, ranks[i], "parent", ranks[p + 1], side)
    tl.wire(sys, ranks[p + 1], side, ranks[i], "parent")
  end
end

local function kernel(a, input, output)
  local n, r, N = a.n_elem, tl.rank(), a.world_size
  local left, right = 2 * r + 1, 2 * r + 2
  local fl = left < N and tl.recv_async("child_left", n, a.dtype)
  local fr = right < N and tl.recv_async("child_right", n, a.dtype)
  local acc = tl.load(input, 0, n)
  -- each partial sum and received tile is returned once used: the working
  -- set stays at three tiles
  local function add(f)
    local got = tl.wait(f)
    local sum = ccl.combine(a.op, acc, got)
    tl.free(acc, got)
    acc = sum
  end
  if fl then add(fl) end
  if fr then add(fr) end
  if r > 0 then
    tl.send("parent", acc)
    tl.free(acc)
    acc = tl.recv("parent", n, a.dtype)
  end
  if fl then tl.send("child_left", acc) end
  if fr then tl.send("child_right", acc) end
  tl.store(output, 0, acc)
end

return {
  name = "tree_allreduce",
  collective = "all_reduce",
  args = args,
  wire = wire,
  kernel = kernel,
}
