-- barrier.lua — epoch-numbered dissemination barrier over IPCQ tokens
--
-- Round k (k = 0 .. ceil(log2 N) - 1) signals rank r + 2^k and waits for
-- rank r - 2^k. A token carries the episode number g; what a PE has
-- seen per round only grows (opts.state survives across launches), and
-- episode g passes a round only once that round's count is >= g, so a
-- token left over from an earlier episode can never release a later one.
local tl = require("kbsim.tl")

local function rounds(n)
  local k, d = 0, 1
  while d < n do k, d = k + 1, d * 2 end
  return k
end

local function args(world_size, n_elem, opts)
  if math.type(opts.epoch) ~= "integer" or opts.epoch < 1 then
    error("'barrier' needs an integer epoch >= 1", 0)
  end
  return {world_size = world_size, n_elem = n_elem, epoch = opts.epoch,
          state = opts.state or {}, rounds = rounds(world_size)}
end

local function wire(sys, ranks, _)
  local n = #ranks
  for k = 0, rounds(n) - 1 do
    local d = 1 << k
    for i = 0, n - 1 do
      tl.wire(sys, ranks[i + 1], "bar" .. k, ranks[(i + d) % n + 1], "bar" .. k)
    end
  end
end

local function kernel(a)
  local g = a.epoch
  local me = tl.program_id()
  local seen = a.state[me]
  if not seen then
    seen = {}
    a.state[me] = seen
  end
  for k = 0, a.rounds - 1 do
    local dir = "bar" .. k
    tl.send(dir, tl.full(1, g, "f32"))
    while (seen[k] or 0) < g do
      local t = tl.recv(dir, 1, "f32"):to_table()[1]
      if t > (seen[k] or 0) then seen[k] = t end
    end
  end
end

return {
  name = "barrier",
  collective = "barrier",
  args = args,
  wire = wire,
  kernel = kernel,
}
