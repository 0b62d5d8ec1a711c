-- all_to_all.lua — pairwise-exchange all-to-all: chunk j of rank i goes to chunk i of rank j
--
-- Input and output: N*C elements per rank. Step s (1..N-1) sends to
-- rank r+s and receives from rank r-s, so every step is a permutation
-- and no PE receives from two senders at once.
local tl = require("kbsim.tl")

local function args(world_size, n_elem, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype}
end

-- One channel per ordered pair: rank i sends on "p<j>", which arrives on
-- rank j's "p<i>" (launch indices).
local function wire(sys, ranks, _)
  for i = 1, #ranks do
    for j = 1, #ranks do
      if i ~= j then
        tl.wire(sys, ranks[i], "p" .. (j - 1), ranks[j], "p" .. (i - 1))
      end
    end
  end
end

local function kernel(a, input, output)
  local C, N, r = a.n_elem, a.world_size, tl.rank()
  -- each block is returned once sent or stored: the working set stays at
  -- two blocks whatever the world size
  local own = tl.load(input, r * C, C)
  tl.store(output, r * C, own)
  tl.free(own)
  for s = 1, N - 1 do
    local to, from = (r + s) % N, (r - s) % N
    local f = tl.recv_async("p" .. from, C, a.dtype)
    local out = tl.load(input, to * C, C)
    tl.send("p" .. to, out)
    tl.free(out)
    local got = tl.wait(f)
    tl.store(output, from * C, got)
    tl.free(got)
  end
end

return {
  name = "all_to_all",
  collective = "all_to_all",
  args = args,
  wire = wire,
  kernel = kernel,
}
