-- all_to_allv.lua — all-to-all with uneven splits, by pairwise exchange
--
-- opts.splits[i][j] (1-based) is the number of elements launch index i-1
-- sends to j-1. Rank i's input holds its outgoing chunks in order of the
-- destination; rank j's output holds the incoming ones in order of the
-- source. Empty chunks are neither sent nor received.
local tl = require("kbsim.tl")

local function args(world_size, n_elem, opts)
  local sp = opts.splits
  if type(sp) ~= "table" or #sp ~= world_size then
    error(("'all_to_allv' needs a %d x %d split matrix"):format(world_size, world_size), 0)
  end
  -- prefix sums: where chunk i->j starts in i's input and in j's output
  local in_off, out_off = {}, {}
  for i = 1, world_size do
    if type(sp[i]) ~= "table" or #sp[i] ~= world_size then
      error(("'all_to_allv': split row %d must have %d entries"):format(i - 1, world_size), 0)
    end
    in_off[i] = {}
    local o = 0
    for j = 1, world_size do
      local c = sp[i][j]
      if math.type(c) ~= "integer" or c < 0 then
        error(("'all_to_allv': split [%d][%d] must be a non-negative integer, got %s")
          :format(i - 1, j - 1, tostring(c)), 0)
      end
      in_off[i][j] = o
      o = o + c
    end
  end
  for j = 1, world_size do
    out_off[j] = {}
    local o = 0
    for i = 1, world_size do
      out_off[j][i] = o
      o = o + sp[i][j]
    end
  end
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype,
          splits = sp, in_off = in_off, out_off = out_off}
end

-- The same channels as all_to_all: one per ordered pair.
local wire = require("kbsim.ccl.all_to_all").wire

local function kernel(a, input, output)
  local N, r = a.world_size, tl.rank()
  local me = r + 1
  local sp, io, oo = a.splits, a.in_off, a.out_off
  -- as all_to_all: each block is returned once sent or stored
  if sp[me][me] > 0 then
    local own = tl.load(input, io[me][me], sp[me][me])
    tl.store(output, oo[me][me], own)
    tl.free(own)
  end
  for s = 1, N - 1 do
    local to, from = (r + s) % N + 1, (r - s) % N + 1
    local nin = sp[from][me]
    local f = nin > 0 and tl.recv_async("p" .. (from - 1), nin, a.dtype)
    if sp[me][to] > 0 then
      local out = tl.load(input, io[me][to], sp[me][to])
      tl.send("p" .. (to - 1), out)
      tl.free(out)
    end
    if f then
      local got = tl.wait(f)
      tl.store(output, oo[me][from], got)
      tl.free(got)
    end
  end
end

return {
  name = "all_to_allv",
  collective = "all_to_allv",
  args = args,
  wire = wire,
  kernel = kernel,
}
