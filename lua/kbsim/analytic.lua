-- analytic.lua — α-β (Hockney) and LogGP cost formulas of collective algorithms
--
-- Pure functions of the rank count N, the message size S in bytes and the
-- link parameters. Units only need to agree: with α, L, o, g in ns and
-- bandwidth in GB/s (= bytes/ns; β, G, γ in ns per byte) a cost is in ns.
-- What S means per collective, and every formula, is in docs/perfmodel.md.
local M = { hockney = {}, loggp = {} }

local function finite(v)
  return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge
end

local function check_n(n)
  if math.type(n) ~= "integer" or n < 1 then
    error(("bad rank count '%s' (want an integer >= 1)"):format(tostring(n)), 3)
  end
end

local function check_size(s)
  if not finite(s) or s < 0 then
    error(("bad message size '%s' (want a number of bytes >= 0)"):format(tostring(s)), 3)
  end
end

local function nonneg(link, key, default)
  local v = link[key]
  if v == nil then v = default end
  if not finite(v) or v < 0 then
    error(("bad link parameter '%s' = %s (want a number >= 0)"):format(key, tostring(v)), 4)
  end
  return v
end

-- {alpha, beta, gamma} from a link table {alpha=, bw= or beta=, gamma=}.
local function hockney_link(link)
  if type(link) ~= "table" then error("link parameters must be a table", 3) end
  local beta = link.beta
  if beta == nil then
    local bw = link.bw
    if not finite(bw) or bw <= 0 then
      error(("bad link parameter 'bw' = %s (want a bandwidth > 0, or give 'beta')"):format(
        tostring(bw)), 3)
    end
    beta = 1 / bw
  end
  local l = { alpha = nonneg(link, "alpha"), beta = nonneg({ beta = beta }, "beta"),
    gamma = nonneg(link, "gamma", 0) }
  return l
end

local function loggp_link(link)
  if type(link) ~= "table" then error("link parameters must be a table", 3) end
  return { L = nonneg(link, "L"), o = nonneg(link, "o", 0), g = nonneg(link, "g", 0),
    G = nonneg(link, "G"), gamma = nonneg(link, "gamma", 0) }
end

-- ⌈log2 n⌉, exactly, for the binomial-tree step counts.
local function ceil_log2(n)
  local d, p = 0, 1
  while p < n do p, d = p * 2, d + 1 end
  return d
end

-- ⌊log2 n⌋: depth of a binary heap of n nodes (root at depth 0).
local function floor_log2(n)
  local d = 0
  while n >= 2 do n, d = n // 2, d + 1 end
  return d
end

-- ---- Hockney α-β: a k-byte message costs α + kβ -------------------------

local H = M.hockney

-- Flat ring: N−1 rounds, each forwarding and adding the whole buffer.
-- (N−1)(α + Sβ + Sγ)
function H.ring_allreduce(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  return (n - 1) * (l.alpha + s * l.beta + s * l.gamma)
end

-- Bandwidth-optimal ring (reduce-scatter then all-gather of S/N chunks).
-- 2(N−1)(α + (S/N)β) + (N−1)(S/N)γ
function H.ring_allreduce_bw(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  local c = s / n
  return 2 * (n - 1) * (l.alpha + c * l.beta) + (n - 1) * c * l.gamma
end

-- Binary tree (heap order, depth D = ⌊log2 N⌋): reduce up to the root,
-- broadcast down; a parent's links to its children work concurrently and
-- it adds up to c = min(N−1, 2) child buffers per level.
-- 2D(α + Sβ) + D·c·Sγ
function H.tree_allreduce(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  local d = floor_log2(n)
  local c = math.min(n - 1, 2)
  return 2 * d * (l.alpha + s * l.beta) + d * c * s * l.gamma
end

-- Ring all-gather; S is the gathered (output) bytes per rank.
-- (N−1)(α + (S/N)β)
function H.all_gather(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  return (n - 1) * (l.alpha + s / n * l.beta)
end

-- Ring reduce-scatter; S is the input bytes per rank.
-- (N−1)(α + (S/N)(β + γ))
function H.reduce_scatter(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  return (n - 1) * (l.alpha + s / n * (l.beta + l.gamma))
end

-- Pairwise-exchange all-to-all; S is the input bytes per rank, S/N to each.
-- (N−1)(α + (S/N)β)
function H.all_to_all(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  return (n - 1) * (l.alpha + s / n * l.beta)
end

-- Binomial-tree broadcast: ⌈log2 N⌉(α + Sβ)
function H.broadcast_tree(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  return ceil_log2(n) * (l.alpha + s * l.beta)
end

-- Ring broadcast pipelined in k chunks (opts.chunks, default 1):
-- (N−1 + k−1)(α + (S/k)β); 0 for N = 1.
function H.broadcast_ring(n, s, link, opts)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  local k = opts and opts.chunks or 1
  if math.type(k) ~= "integer" or k < 1 then
    error(("bad chunk count '%s' (want an integer >= 1)"):format(tostring(k)), 2)
  end
  if n == 1 then return 0 end
  return (n - 1 + k - 1) * (l.alpha + s / k * l.beta)
end

-- ---- LogGP: a k-byte message costs L + 2o + (k−1)G ----------------------

local G = M.loggp

-- One k-byte message from send call to receive completion.
local function msg(l, k)
  return l.L + 2 * l.o + math.max(k - 1, 0) * l.G
end

-- One round of a synchronous algorithm: the message, or the gap g if a
-- process may not inject its next message sooner.
local function round(l, k)
  return math.max(l.g, msg(l, k))
end

-- Back-to-back injections from one process are g apart at least and one
-- send overhead plus the bytes' transmission apart at most.
local function interval(l, k)
  return math.max(l.g, l.o + math.max(k - 1, 0) * l.G)
end

-- Flat ring: (N−1)(max(g, L + 2o + (S−1)G) + Sγ)
function G.ring_allreduce(n, s, link)
  check_n(n); check_size(s)
  local l = loggp_link(link)
  return (n - 1) * (round(l, s) + s * l.gamma)
end

-- Bandwidth-optimal ring: 2(N−1)·max(g, L + 2o + (S/N−1)G) + (N−1)(S/N)γ
function G.ring_allreduce_bw(n, s, link)
  check_n(n); check_size(s)
  local l = loggp_link(link)
  local c = s / n
  return 2 * (n - 1) * round(l, c) + (n - 1) * c * l.gamma
end

-- Binary tree, D = ⌊log2 N⌋, c = min(N−1, 2) children: going up a parent
-- pays one more receive overhead per extra child; going down its second
-- send leaves one injection interval after the first.
-- D(msg(S) + (c−1)o + c·Sγ) + D(msg(S) + (c−1)·interval(S))
function G.tree_allreduce(n, s, link)
  check_n(n); check_size(s)
  local l = loggp_link(link)
  local d = floor_log2(n)
  local c = math.min(n - 1, 2)
  local up = msg(l, s) + (c - 1) * l.o + c * s * l.gamma
  local down = msg(l, s) + (c - 1) * interval(l, s)
  return d * (up + down)
end

-- Ring all-gather: (N−1)·max(g, L + 2o + (S/N−1)G)
function G.all_gather(n, s, link)
  check_n(n); check_size(s)
  local l = loggp_link(link)
  return (n - 1) * round(l, s / n)
end

-- Ring reduce-scatter: (N−1)(max(g, L + 2o + (S/N−1)G) + (S/N)γ)
function G.reduce_scatter(n, s, link)
  check_n(n); check_size(s)
  local l = loggp_link(link)
  return (n - 1) * (round(l, s / n) + s / n * l.gamma)
end

-- All-to-all with the N−1 messages of S/N bytes injected back to back:
-- the last leaves after N−2 intervals. (N−2)·interval(S/N) + msg(S/N)
function G.all_to_all(n, s, link)
  check_n(n); check_size(s)
  local l = loggp_link(link)
  if n == 1 then return 0 end
  local k = s / n
  return (n - 2) * interval(l, k) + msg(l, k)
end

-- Binomial-tree broadcast: ⌈log2 N⌉·max(g, L + 2o + (S−1)G)
function G.broadcast_tree(n, s, link)
  check_n(n); check_size(s)
  local l = loggp_link(link)
  return ceil_log2(n) * round(l, s)
end

-- Ring broadcast in k chunks: (N−1 + k−1)·max(g, L + 2o + (S/k−1)G)
function G.broadcast_ring(n, s, link, opts)
  check_n(n); check_size(s)
  local l = loggp_link(link)
  local k = opts and opts.chunks or 1
  if math.type(k) ~= "integer" or k < 1 then
    error(("bad chunk count '%s' (want an integer >= 1)"):format(tostring(k)), 2)
  end
  if n == 1 then return 0 end
  return (n - 1 + k - 1) * round(l, s / k)
end

-- ---- Topology-aware algorithms (lua/kbsim/ccl/, docs/collectives.md) ----
-- Hockney, per message: these kernels exchange one piece per message in
-- lockstep (post the receive, send, wait), so every message pays α.

-- 2^⌊log2 n⌋, the core of recursive halving and doubling.
local function pow2_floor(n)
  local p = 1
  while p * 2 <= n do p = p * 2 end
  return p
end

-- Per-dimension (multi-ring) all-reduce on a grid of N = Π d_i ranks, S
-- cut into N pieces: a ring step at dimension i moves m_i = N/(d_1…d_i)
-- pieces, and Σ_i (d_i − 1) m_i = N − 1, so
-- T = 2(N−1)(α + (S/N)β) + (N−1)(S/N)γ, α and β of one neighbour hop.
-- (Also the snake-order ring's cost.) dims: a list of sizes.
function H.torus_allreduce(dims, s, link)
  if type(dims) ~= "table" or #dims == 0 then
    error("torus_allreduce: dims must be a list of dimension sizes", 2)
  end
  local n = 1
  for _, d in ipairs(dims) do check_n(d); n = n * d end
  check_size(s)
  local l = hockney_link(link)
  local c = s / n
  return 2 * (n - 1) * (l.alpha + c * l.beta) + (n - 1) * c * l.gamma
end

-- Rabenseifner all-reduce, p = 2^⌊log2 N⌋ pieces of S/p: the halving
-- sends p − 1 pieces (adding each), the doubling p − 1;
-- T = 2(p−1)(α + (S/p)β) + (p−1)(S/p)γ, and for N > p the fold in and
-- out of whole tiles, p pieces each way, at most 2p(α + (S/p)β) + Sγ
-- more (the pieces stream one way, so the simulated time is below it;
-- rhd_allreduce_exact plays it out).
function H.rhd_allreduce(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  local p = pow2_floor(n)
  local c = s / p
  local t = 2 * (p - 1) * (l.alpha + c * l.beta) + (p - 1) * c * l.gamma
  if n > p then t = t + p * (2 * l.alpha + 2 * c * l.beta + c * l.gamma) end
  return t
end

-- Recursive-halving reduce-scatter, S the input bytes, N a power of two:
-- N − 1 chunk messages of S/N, each added. (N−1)(α + (S/N)(β + γ))
function H.rhd_reduce_scatter(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  local c = s / n
  local p = pow2_floor(n)
  local t = (p - 1) * (l.alpha + c * (l.beta + l.gamma))
  -- N > p, an upper bound: fold in N chunks, hand one back; a core
  -- rank owns up to two chunks, so at most twice the core's messages
  if n > p then
    t = 2 * t + n * (l.alpha + c * (l.beta + l.gamma)) + (l.alpha + c * l.beta)
  end
  return t
end

-- Recursive-doubling all-gather, S the output bytes, N a power of two:
-- N − 1 chunk messages of S/N. (N−1)(α + (S/N)β)
function H.rhd_all_gather(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  local c = s / n
  local p = pow2_floor(n)
  local t = (p - 1) * (l.alpha + c * l.beta)
  -- N > p, an upper bound: one chunk in, N − 1 back, up to twice the core
  if n > p then t = 2 * t + (l.alpha + c * l.beta) + (n - 1) * (l.alpha + c * l.beta) end
  return t
end

-- Double binary tree: two heap-order trees (the second on mirrored
-- ranks) each reduce and broadcast S/2 at once, children served
-- concurrently. 2D(α + (S/2)β) + D·c·(S/2)γ, D = ⌊log2 N⌋, c = min(N−1, 2).
-- With one DMA channel for sends a parent's second child waits for the
-- first's bytes (dbtree_allreduce_exact; docs/collectives.md).
function H.dbtree_allreduce(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  local d = floor_log2(n)
  local c = math.min(n - 1, 2)
  return 2 * d * (l.alpha + s / 2 * l.beta) + d * c * s / 2 * l.gamma
end

-- Trees when a send blocks until its credit is back (kbsim's IPCQ): a
-- parent's sends to its children run one after the other, so reaching a
-- right child costs two messages and a left child one. W = the largest
-- such weight from the root to any node of the heap of n nodes; going up,
-- children send at once (one message a level).
-- tree:   (D + W)(α + Sβ) + D·c·Sγ
-- dbtree: (D + W)(α + (S/2)β) + D·c·(S/2)γ
-- Estimates (auto's until decision 0069), not exact: a right child waits δ + Sβ for the left
-- one's copy, not α + Sβ, and for odd N one rank is a leaf of both trees
-- and sends its halves one after the other (the simulation 0.85-1.31x
-- these); the exact forms are tree_allreduce_exact, dbtree_allreduce_exact.
local function heap_weight(n)
  local w, best = {[0] = 0}, 0
  for i = 1, n - 1 do
    w[i] = w[(i - 1) // 2] + ((i % 2 == 0) and 2 or 1)
    if w[i] > best then best = w[i] end
  end
  return best
end

function H.tree_allreduce_serial(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  local d = floor_log2(n)
  local c = math.min(n - 1, 2)
  return (d + heap_weight(n)) * (l.alpha + s * l.beta) + d * c * s * l.gamma
end

function H.dbtree_allreduce_serial(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  local d = floor_log2(n)
  local c = math.min(n - 1, 2)
  return (d + heap_weight(n)) * (l.alpha + s / 2 * l.beta) + d * c * s / 2 * l.gamma
end

-- A schedule's link: its Hockney parameters and δ (link.delta, the data's
-- part of α; default α, at most α). Errors `level` frames above the caller.
local function schedule_link(link, level)
  local l = hockney_link(link)
  local delta = l.alpha
  if link.delta ~= nil then delta = nonneg(link, "delta") end
  if delta > l.alpha then
    error(("bad link parameter 'delta' = %s (want at most alpha = %s)"):format(
      tostring(delta), tostring(l.alpha)), level + 1)
  end
  return l, delta
end

-- link.slots (the IPCQ ring's n_slots; default 4), checked likewise
local function schedule_slots(link, level)
  local slots = link.slots or 4
  if math.type(slots) ~= "integer" or slots < 1 then
    error(("bad link parameter 'slots' = %s (want an integer >= 1)"):format(tostring(slots)),
      level + 1)
  end
  return slots
end

-- ---- Trees, message by message ------------------------------------------
-- The trees' schedules played out as the kernels run them, under the
-- IPCQ's timing (docs/components/pe_ipcq.md, pe_dma.md): a send queues a
-- DMA copy on the sender's one comm channel, which carries one copy at a
-- time for δ + kβ (δ: the data's route latency, link.delta); the receive
-- of a message that landed at t returns at t + (α − δ), the credit's
-- flight (α = δ + the credit's return, as the closed-form tests measure
-- it); an add of k bytes takes kγ. A rank's kernel goes on once its
-- receive returns; only its comm channel makes its sends wait. The
-- result is the last rank's end, which the simulation gives to a few
-- memory touches (a free TCM). trees: {{mirror=, bytes=}, ...} (tree A:
-- heap order; mirrored: on the indices N−1−r); each rank climbs the trees
-- where it is a leaf first, then the others, and comes down in the
-- reverse order (dbtree_allreduce.lua; one tree: tree_allreduce.lua).
local function tree_schedule(n, trees, link)
  local l, delta = schedule_link(link, 2)
  local credit = l.alpha - delta
  local function heap(t, r) if t.mirror then return n - 1 - r end return r end
  -- up[t][h]: when heap node h's partial lands at its parent; down[t][h]:
  -- when the result lands at h (math.huge: not known yet)
  local up, down = {}, {}
  for k = 1, #trees do up[k], down[k] = {}, {} end
  local last
  for _ = 1, 4 * n + 16 do
    local changed = false
    last = 0
    for r = 0, n - 1 do
      local now, dma = 0, 0
      local function send(bytes)
        dma = math.max(now, dma) + delta + bytes * l.beta
        return dma
      end
      local function set(map, h, v)
        if map[h] ~= v then map[h], changed = v, true end
      end
      -- the trees where this rank is a leaf first, each part in the given
      -- order (a tree of no bytes: no messages)
      local leaf, inner = {}, {}
      for k, t in ipairs(trees) do
        local h = t.bytes > 0 and heap(t, r) or 0
        local kids = {}
        if t.bytes > 0 then
          for c = 2 * h + 1, math.min(2 * h + 2, n - 1) do kids[#kids + 1] = c end
        end
        local o = {k = k, h = h, kids = kids, bytes = t.bytes}
        if #kids == 0 then leaf[#leaf + 1] = o else inner[#inner + 1] = o end
      end
      local sorted = leaf
      for _, o in ipairs(inner) do sorted[#sorted + 1] = o end
      for _, o in ipairs(sorted) do
        for _, c in ipairs(o.kids) do
          now = math.max(now, (up[o.k][c] or math.huge) + credit) + o.bytes * l.gamma
        end
        if o.h > 0 then set(up[o.k], o.h, send(o.bytes)) end
      end
      for i = #sorted, 1, -1 do
        local o = sorted[i]
        if o.h > 0 then now = math.max(now, (down[o.k][o.h] or math.huge) + credit) end
        for _, c in ipairs(o.kids) do set(down[o.k], c, send(o.bytes)) end
      end
      if now > last then last = now end
    end
    if not changed then return last end
  end
  error("tree schedule did not settle", 3) -- a dependency cycle: a bug here
end

-- Double binary tree, message by message (tree_schedule): exact for the
-- kernel on contention-free links, every N (odd N too, where one rank is
-- a leaf of both trees and its second half waits for its first on the
-- comm channel). S/2 bytes a tree (an even element count).
function H.dbtree_allreduce_exact(n, s, link)
  check_n(n); check_size(s)
  return tree_schedule(n, {{bytes = s / 2}, {mirror = true, bytes = s / 2}}, link)
end

-- The single heap tree of tree_allreduce, exactly (what tree_schedule
-- plays out, in closed form). Up: a heap's left subtree is never later
-- than its right, so the root has the sum after the leftmost path, D
-- hops of α + Sβ and k adds (k = 2D, or 2D − 1 when N = 2^D and the
-- last parent on that path has one child). Down: the root's sends start
-- then; a node's copy leaves its parent's comm channel w·(δ + Sβ) after
-- the parent has the result (w = 1 for a left child, 2 for a right one,
-- queued behind the left), and its receive returns α − δ after landing.
--   T = D(α + Sβ) + k·Sγ + max_v [W(v)(δ + Sβ) + d(v)(α − δ)]
-- W(v), d(v): the weight and the depth of the root-to-v path.
function H.tree_allreduce_exact(n, s, link)
  check_n(n); check_size(s)
  local l = hockney_link(link)
  local delta = l.alpha
  if link.delta ~= nil then delta = nonneg(link, "delta") end
  if n == 1 then return 0 end
  local d = floor_log2(n)
  local k = (n == 1 << d) and 2 * d - 1 or 2 * d
  local hop, credit = delta + s * l.beta, l.alpha - delta
  local w, dep, down = {[0] = 0}, {[0] = 0}, 0
  for i = 1, n - 1 do
    local p = (i - 1) // 2
    w[i] = w[p] + ((i % 2 == 0) and 2 or 1)
    dep[i] = dep[p] + 1
    down = math.max(down, w[i] * hop + dep[i] * credit)
  end
  return d * (l.alpha + s * l.beta) + k * s * l.gamma + down
end

-- As tree_schedule plays it (a check of the closed form above).
function H.tree_allreduce_schedule(n, s, link)
  check_n(n); check_size(s)
  return tree_schedule(n, {{bytes = s}}, link)
end

-- ---- Kernels message by message (rhd on any N) ---------------------------
-- progs[r] (r = 0..N−1): a rank's operations in its kernel's order,
-- {"send", ch, bytes}, {"post", ch, id} (tl.recv_async), {"wait", id},
-- {"recv", ch} (blocking), {"add", bytes}; ch names a one-way channel, and
-- its m-th send is its m-th receive. The component rules of tree_schedule,
-- plus the ring's credits: the m-th send on a channel waits (blocks) for
-- the credit of message m − slots, back when that receive returned
-- (slots: the IPCQ's n_slots, a message one slot). per (optional):
-- per[ch] = {beta=, delta=, credit=} for a channel over other links (a
-- credit: α − δ of its route). Returns the last rank's end.
-- Played in dependency order: each rank runs its program until an
-- operation needs a time not known yet (a message not landed, a credit not
-- back, a posted receive not landed), waits there, and is woken when that
-- time is set; a posted receive is resolved when its message lands. Every
-- operation is done once (was a relaxation over all ranks until nothing
-- moved: O(N^2 log N) operations, minutes at N = 768).
local function msg_schedule(progs, l, delta, slots, per)
  local credit = l.alpha - delta
  -- a channel's own {beta, delta, credit} (per[ch]), else the common ones
  per = per or {}
  local common = {beta = l.beta, delta = delta, credit = credit}
  local land, back = {}, {} -- [ch][m]: when message m lands / its credit is back
  local pend = {} -- [ch][m]: a posted receive of message m not landed yet
  local waiting = {} -- [key]: the rank waiting for that time
  local st, ready, last = {}, {}, 0
  for r = 0, #progs do
    st[r] = {pc = 1, now = 0, dma = 0, sent = {}, got = {}, posted = {}}
    ready[#ready + 1] = r
  end
  local function wake(key)
    local w = waiting[key]
    if w then ready[#ready + 1], waiting[key] = w, nil end
  end
  local set_back
  local function set_land(ch, m, v)
    land[ch] = land[ch] or {}
    land[ch][m] = v
    wake("L" .. ch .. "#" .. m)
    local p = pend[ch] and pend[ch][m]
    if p then -- the receive was posted at p.now: it returns credit after both
      pend[ch][m] = nil
      local t = math.max(p.now, v) + (per[ch] or common).credit
      st[p.r].posted[p.id] = t
      wake("P" .. p.r .. "#" .. p.id)
      set_back(ch, m, t)
    end
  end
  function set_back(ch, m, v)
    back[ch] = back[ch] or {}
    back[ch][m] = v
    wake("B" .. ch .. "#" .. m)
  end
  while #ready > 0 do
    local r = table.remove(ready)
    local s, prog = st[r], progs[r]
    while s.pc <= #prog do
      local op = prog[s.pc]
      local k, ch = op[1], op[2]
      if k == "send" then
        local m = (s.sent[ch] or 0) + 1
        if m > slots then
          local t = (back[ch] or {})[m - slots]
          if t == nil then waiting["B" .. ch .. "#" .. (m - slots)] = r; break end
          s.now = math.max(s.now, t)
        end
        s.sent[ch] = m
        local c = per[ch] or common
        s.dma = math.max(s.now, s.dma) + c.delta + op[3] * c.beta
        set_land(ch, m, s.dma)
      elseif k == "post" then
        local m = (s.got[ch] or 0) + 1
        s.got[ch] = m
        local t = (land[ch] or {})[m]
        if t == nil then
          pend[ch] = pend[ch] or {}
          pend[ch][m] = {r = r, id = op[3], now = s.now}
        else
          t = math.max(s.now, t) + (per[ch] or common).credit
          s.posted[op[3]] = t
          set_back(ch, m, t)
        end
      elseif k == "recv" then
        local m = (s.got[ch] or 0) + 1
        local t = (land[ch] or {})[m]
        if t == nil then waiting["L" .. ch .. "#" .. m] = r; break end
        s.got[ch] = m
        s.now = math.max(s.now, t) + (per[ch] or common).credit
        set_back(ch, m, s.now)
      elseif k == "wait" then
        local t = s.posted[op[2]]
        if t == nil then waiting["P" .. r .. "#" .. op[2]] = r; break end
        s.now = math.max(s.now, t)
      else -- add
        s.now = s.now + op[2] * l.gamma
      end
      s.pc = s.pc + 1
    end
    if s.pc > #prog and s.now > last then last = s.now end
  end
  for r = 0, #progs do
    if st[r].pc <= #progs[r] then
      error("message schedule did not settle", 3) -- a cycle: a bug here
    end
  end
  return last
end

-- The programs of ccl/lib/rhd.lua's kernels on n ranks (kind "ar":
-- rhd_allreduce, p pieces; "rs": rhd_reduce_scatter and "ag":
-- rhd_all_gather, n chunks), c bytes a piece.
local function rhd_programs(kind, n, c)
  local p, bits = 1, 0
  while p * 2 <= n do p, bits = p * 2, bits + 1 end
  local ex = n - p
  local np = kind == "ar" and p or n
  local function core(r)
    if r < 2 * ex then return (r % 2 == 1) and r // 2 or nil end
    return r - ex
  end
  local function real(j) if j < ex then return 2 * j + 1 end return j + ex end
  local function owner(q)
    if kind == "ar" then return q end
    if q < 2 * ex then return q // 2 end
    return q - ex
  end
  local function held(j, free)
    local fixed, list = (p - 1) & ~free, {}
    for q = 0, np - 1 do if ((owner(q) ~ j) & fixed) == 0 then list[#list + 1] = q end end
    return list
  end
  -- pieces folded in (and added unless all-gather) and handed back
  local fold_in = kind == "ag" and 1 or np
  local fold_out = kind == "ar" and p or kind == "rs" and 1 or n - 1
  local progs = {}
  for r = 0, n - 1 do
    local P = {}
    progs[r] = P
    local function op(...) P[#P + 1] = {...} end
    local function ch(from, to, dir) return from .. ">" .. to .. ":" .. dir end
    local j = core(r)
    if not j then
      for _ = 1, fold_in do op("send", ch(r, r + 1, "f"), c) end
      for _ = 1, fold_out do op("recv", ch(r + 1, r, "f")) end
    else
      if r < 2 * ex then
        for _ = 1, fold_in do
          op("recv", ch(r - 1, r, "f"))
          if kind ~= "ag" then op("add", c) end
        end
      end
      local id = 0
      local function exchange(b, sends, recvs, reduce)
        local peer = real(j ~ (1 << b))
        for i = 1, math.max(#sends, #recvs) do
          id = id + 1
          if recvs[i] then op("post", ch(peer, r, b), id) end
          if sends[i] then op("send", ch(r, peer, b), c) end
          if recvs[i] then
            op("wait", id)
            if reduce then op("add", c) end
          end
        end
      end
      if kind ~= "ag" then -- halving, lowest bit first
        local free = p - 1
        for b = 0, bits - 1 do
          local nf = free & ~(1 << b)
          exchange(b, held(j ~ (1 << b), nf), held(j, nf), true)
          free = nf
        end
      end
      if kind ~= "rs" then -- doubling, highest bit first
        local free = 0
        for b = bits - 1, 0, -1 do
          exchange(b, held(j, free), held(j ~ (1 << b), free), false)
          free = free | (1 << b)
        end
      end
      if r < 2 * ex then
        for _ = 1, fold_out do op("send", ch(r, r - 1, "f"), c) end
      end
    end
  end
  return progs
end

local function rhd_exact(kind, n, c, link)
  local l, delta = schedule_link(link, 2)
  return msg_schedule(rhd_programs(kind, n, c), l, delta, schedule_slots(link, 2))
end

-- Rabenseifner on any N, exactly: the kernels of ccl/lib/rhd.lua played
-- out message by message (msg_schedule), the fold's pieces streaming
-- through the IPCQ ring (link.slots, default 4: configs' ipcq.n_slots)
-- while the core ranks already exchange. link.delta as for the trees.
-- Pieces of S/p (all-reduce) or S/N (reduce-scatter: S the input;
-- all-gather: S the output), each one slot.
function H.rhd_allreduce_exact(n, s, link)
  check_n(n); check_size(s)
  return rhd_exact("ar", n, s / pow2_floor(n), link)
end

function H.rhd_reduce_scatter_exact(n, s, link)
  check_n(n); check_size(s)
  return rhd_exact("rs", n, s / n, link)
end

function H.rhd_all_gather_exact(n, s, link)
  check_n(n); check_size(s)
  return rhd_exact("ag", n, s / n, link)
end

-- One line of L ranks of the mesh all-reduce: prefix sums go up, suffix
-- sums down. A message costs its receiver α + Sβ (the bytes land δ + Sβ
-- after the send, the credit flies back α − δ); a send returns at once,
-- its bytes leaving through the sender's one DMA channel. The prefix
-- reaches rank L−2 after L−2 hops of α + Sβ + Sγ; rank L−2 sends it up,
-- then the suffix (long since there) down, whose copy waits for the
-- up copy to leave, δ + Sβ, or for its own add if longer; the suffix
-- then takes L−2 hops of α + Sβ + Sγ down to rank 0, the last to finish.
-- line(1) = 0, line(2) = α + Sβ + Sγ (one exchange),
-- line(L ≥ 3) = 2(L−2)(α + Sβ + Sγ) + max(δ + Sβ, Sγ)
-- δ: link.delta, the part of α before the bytes land (the data's route
-- latency; the rest is the credit's way back); default α, a bound above.
local function mesh_line(len, s, l, delta)
  if len < 2 then return 0 end
  local hop = l.alpha + s * l.beta + s * l.gamma
  if len == 2 then return hop end
  return 2 * (len - 2) * hop + math.max(delta + s * l.beta, s * l.gamma)
end

-- Mesh all-reduce on w × h: the rows, then the columns (every rank of a
-- column ends its row at the same time).
-- T = line(w) + line(h)
function H.mesh_allreduce(w, h, s, link)
  check_n(w); check_n(h); check_size(s)
  local l = hockney_link(link)
  local delta = l.alpha
  if link.delta ~= nil then delta = nonneg(link, "delta") end
  return mesh_line(w, s, l, delta) + mesh_line(h, s, l, delta)
end

-- Hierarchical all-reduce over G groups of at most m ranks: tree reduce
-- to the leaders (link_in), pass-along ring of the leaders (link_out),
-- tree broadcast. D = ⌊log2 m⌋, c = min(m − 1, 2):
-- T = 2D(α_i + Sβ_i) + D·c·Sγ + (G − 1)(α_o + Sβ_o + Sγ)
-- As hier_allreduce with the groups' trees under blocking sends:
-- (D + W)(α_i + Sβ_i) + D·c·Sγ + (G − 1)(α_o + Sβ_o + Sγ), W of a heap of m.
function H.hier_allreduce_serial(groups, m, s, link_in, link_out)
  check_n(groups); check_n(m); check_size(s)
  local li, lo = hockney_link(link_in), hockney_link(link_out or link_in)
  local d = floor_log2(m)
  local c = math.min(m - 1, 2)
  return (d + heap_weight(m)) * (li.alpha + s * li.beta) + d * c * s * li.gamma
    + (groups - 1) * (lo.alpha + s * lo.beta + s * lo.gamma)
end

-- hier_allreduce's kernel message by message (msg_schedule): groups of
-- sizes[1..G] ranks (heap order within a group, the first its leader),
-- each group's tree over link_in, the leaders' ring (group g sends to
-- g + 1) over link_out; both links' delta as for the trees (default α),
-- slots from link_in (default 4). A rank posts its children's receives,
-- adds each as it lands, sends up and waits for the result (a leader:
-- G − 1 ring steps of post, send, wait, add), then sends it down, left
-- child first, on its one comm channel. Exact for the kernel on
-- contention-free links (cli.ccl_topo_closed_form); equal groups of m
-- need not be given as a list: sizes may be G with m.
function H.hier_allreduce_exact(sizes, m, s, link_in, link_out)
  if type(sizes) ~= "table" then
    check_n(sizes); check_n(m)
    local list = {}
    for g = 1, sizes do list[g] = m end
    sizes = list
  else
    link_out, link_in, s = link_in, s, m
    if #sizes == 0 then error("hier_allreduce_exact: no groups", 2) end
    for _, k in ipairs(sizes) do check_n(k) end
  end
  check_size(s)
  local li, di = schedule_link(link_in, 2)
  local lo, dout = schedule_link(link_out or link_in, 2)
  local slots = schedule_slots(link_in, 2)
  local G, progs, per, base = #sizes, {}, {}, {}
  local n = 0
  for g = 1, G do base[g] = n; n = n + sizes[g] end
  local ring = {beta = lo.beta, delta = dout, credit = lo.alpha - dout}
  for g = 1, G do
    local m_g = sizes[g]
    for k = 0, m_g - 1 do
      local r = base[g] + k
      local P = {}
      progs[r] = P
      local function op(...) P[#P + 1] = {...} end
      local function tch(a, b) return "t" .. (base[g] + a) .. ">" .. (base[g] + b) end
      local kids = {}
      for c = 2 * k + 1, math.min(2 * k + 2, m_g - 1) do kids[#kids + 1] = c end
      for i, c in ipairs(kids) do op("post", tch(c, k), i) end
      for i = 1, #kids do op("wait", i); op("add", s) end
      if k > 0 then
        op("send", tch(k, (k - 1) // 2), s)
        op("recv", tch((k - 1) // 2, k))
      elseif G > 1 then
        local tx, rx = "r" .. g, "r" .. ((g - 2) % G + 1)
        per[tx] = ring
        for step = 1, G - 1 do
          op("post", rx, #kids + step)
          op("send", tx, s)
          op("wait", #kids + step)
          op("add", s)
        end
      end
      for _, c in ipairs(kids) do op("send", tch(k, c), s) end
    end
  end
  return msg_schedule(progs, li, di, slots, per)
end

function H.hier_allreduce(groups, m, s, link_in, link_out)
  check_n(groups); check_n(m); check_size(s)
  local li, lo = hockney_link(link_in), hockney_link(link_out or link_in)
  local d = floor_log2(m)
  local c = math.min(m - 1, 2)
  return 2 * d * (li.alpha + s * li.beta) + d * c * s * li.gamma
    + (groups - 1) * (lo.alpha + s * lo.beta + s * lo.gamma)
end

-- ---- Hierarchical all-reduce, either model ------------------------------

-- levels = {{n=, link=}, ...}, innermost first. Every level but the last
-- reduce-scatters the buffer it holds (S_1 = S, S_i+1 = S_i/N_i) and
-- all-gathers it back afterwards; the last level all-reduces S_last with
-- opts.top ("ring_allreduce_bw" default, "ring_allreduce", "tree_allreduce").
-- T = Σ_{i<last} [RS_i(S_i) + AG_i(S_i)] + AR_last(S_last)
-- (Called in tail position, so error level 2 is the user's line.)
local function hierarchical(model, s, levels, opts)
  check_size(s)
  if type(levels) ~= "table" or #levels == 0 then
    error("hierarchical all-reduce needs at least one level", 2)
  end
  local top = opts and opts.top or "ring_allreduce_bw"
  local ar = model[top]
  if top ~= "ring_allreduce_bw" and top ~= "ring_allreduce" and top ~= "tree_allreduce" then
    error(("unknown top-level algorithm '%s'"):format(tostring(top)), 2)
  end
  local t = 0
  for i = 1, #levels - 1 do
    local lv = levels[i]
    t = t + model.reduce_scatter(lv.n, s, lv.link) + model.all_gather(lv.n, s, lv.link)
    s = s / lv.n
  end
  local last = levels[#levels]
  return t + ar(last.n, s, last.link)
end

function H.hierarchical_allreduce(s, levels, opts)
  return hierarchical(H, s, levels, opts)
end

function G.hierarchical_allreduce(s, levels, opts)
  return hierarchical(G, s, levels, opts)
end

-- LogGP parameters that make a LogGP cost equal the Hockney one up to the
-- one-byte difference of (k−1)G: L = α, G = β, o = g = 0.
function M.loggp_from_hockney(link)
  local l = hockney_link(link)
  return { L = l.alpha, o = 0, g = 0, G = l.beta, gamma = l.gamma }
end

return M
