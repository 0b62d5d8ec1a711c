-- kbsim/ccl/lib/rhd.lua — recursive halving and doubling (Rabenseifner) over any rank count
--
-- p2 = 2^⌊log2 N⌋ ranks form the core; the ex = N − p2 others fold in:
-- for r < 2ex, even r hands its data to r + 1 and sits out, odd r is
-- core rank r // 2; rank r >= 2ex is core rank r − ex. The data is a
-- list of pieces, each with an owner among the core ranks. Halving,
-- lowest bit first: at bit b a core rank sends its partner (j xor 2^b)
-- the pieces whose owners agree with the partner on the bits fixed so
-- far, and adds the pieces the partner sends back; after log2 p2 steps
-- it holds the full sums of its own pieces. Doubling runs the bits in
-- reverse and sends everything held. Pieces go one message each,
-- exchanged in lockstep (post the receive, send, wait), as the flat ring
-- does, so any tile size is deadlock-free.
-- Not an algorithm: the registry only finds names without a dot.
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local M = {}

function M.plan(N)
  local p2, L = 1, 0
  while p2 * 2 <= N do p2, L = p2 * 2, L + 1 end
  local ex = N - p2
  local pl = {N = N, p2 = p2, L = L, ex = ex}
  -- core index of launch index r (nil: folded away)
  function pl.core(r)
    if r < 2 * ex then
      if r % 2 == 0 then return nil end
      return r // 2
    end
    return r - ex
  end
  -- the core index a launch index's data belongs to
  function pl.owner_of(r)
    if r < 2 * ex then return r // 2 end
    return r - ex
  end
  function pl.real(j)
    if j < ex then return 2 * j + 1 end
    return j + ex
  end
  return pl
end

-- Channels: "rhd_f" between each folded pair, "rhd<b>" to the bit-b partner.
function M.wire(sys, ranks, a)
  local pl = M.plan(#ranks)
  for r = 0, 2 * pl.ex - 1, 2 do
    tl.wire(sys, ranks[r + 1], "rhd_f", ranks[r + 2], "rhd_f")
    tl.wire(sys, ranks[r + 2], "rhd_f", ranks[r + 1], "rhd_f")
  end
  for j = 0, pl.p2 - 1 do
    for b = 0, pl.L - 1 do
      local k = j ~ (1 << b)
      tl.wire(sys, ranks[pl.real(j) + 1], "rhd" .. b, ranks[pl.real(k) + 1], "rhd" .. b)
    end
  end
  return a
end

-- The pieces (0..#owner, ascending) whose owners agree with core rank j
-- on every bit not in `free`.
local function held(owner, np, j, free, p2)
  local fixed, list = (p2 - 1) & ~free, {}
  for q = 0, np - 1 do
    if ((owner[q] ~ j) & fixed) == 0 then list[#list + 1] = q end
  end
  return list
end

-- A piece q that arrived: added into P[q] (reduce) or taken as P[q].
local function arrived(P, q, got, a, reduce)
  if reduce then
    local sum = ccl.combine(a.op, P[q], got)
    tl.free(P[q], got)
    P[q] = sum
  else
    P[q] = got
  end
end

-- Send P[sends[i]] and receive recvs[i] on dir, in lockstep; reduce:
-- add what arrives into P and return what was sent, else replace.
function M.exchange(dir, sends, recvs, P, len, a, reduce)
  for i = 1, math.max(#sends, #recvs) do
    local q, o = recvs[i], sends[i]
    local f = q and tl.recv_async(dir, len(q), a.dtype)
    if o then
      tl.send(dir, P[o])
      if reduce then tl.free(P[o]); P[o] = nil end
    end
    if f then arrived(P, q, tl.wait(f), a, reduce) end
  end
end

-- Reduce-scatter by halving on the core: P[q] for the np pieces, owner[q]
-- the core index. Leaves the full sums of core rank j's pieces in P.
function M.halving(pl, j, P, owner, np, len, a)
  local free = pl.p2 - 1
  for b = 0, pl.L - 1 do
    local m = 1 << b
    local nf = free & ~m
    M.exchange("rhd" .. b, held(owner, np, j ~ m, nf, pl.p2), held(owner, np, j, nf, pl.p2),
      P, len, a, true)
    free = nf
  end
end

-- All-gather by doubling on the core, from the pieces core rank j owns.
function M.doubling(pl, j, P, owner, np, len, a)
  local free = 0
  for b = pl.L - 1, 0, -1 do
    local m = 1 << b
    M.exchange("rhd" .. b, held(owner, np, j, free, pl.p2), held(owner, np, j ~ m, free, pl.p2),
      P, len, a, false)
    free = free | m
  end
end

-- Every piece of `list` one way over "rhd_f": send (and free when
-- `drop`), or receive and add (reduce) or take.
function M.send_list(list, P, drop)
  for _, q in ipairs(list) do
    tl.send("rhd_f", P[q])
    if drop then tl.free(P[q]); P[q] = nil end
  end
end

function M.recv_list(list, P, len, a, reduce)
  for _, q in ipairs(list) do
    arrived(P, q, tl.recv("rhd_f", len(q), a.dtype), a, reduce)
  end
end

function M.range(n) local l = {} for q = 0, n - 1 do l[q + 1] = q end return l end

return M
