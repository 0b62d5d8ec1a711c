-- perfmodel_analytic.lua — α-β and LogGP costs on small cases worked by hand
local kb = require("kbsim")
local an = require("kbsim.analytic")
local H, G = an.hockney, an.loggp

local function eq(got, want, what)
  kb.check(math.abs(got - want) < 1e-9 * math.max(1, math.abs(want)),
    ("%s: %.12g, want %.12g"):format(what, got, want))
end

-- α 10 ns, 100 GB/s (β 0.01 ns/B), γ 0.001 ns/B; N 4, S 1000 B.
local l1 = { alpha = 10, bw = 100, gamma = 0.001 }
eq(H.ring_allreduce(4, 1000, l1), 3 * (10 + 10 + 1), "flat ring")            -- 63
eq(H.ring_allreduce_bw(4, 1000, l1), 6 * 12.5 + 3 * 0.25, "bw-optimal ring") -- 75.75
eq(H.tree_allreduce(4, 1000, l1), 4 * 20 + 2 * 2 * 1, "binary tree")          -- 84
eq(H.all_gather(4, 1000, l1), 3 * 12.5, "all-gather")                        -- 37.5
eq(H.reduce_scatter(4, 1000, l1), 3 * 12.75, "reduce-scatter")               -- 38.25
eq(H.all_to_all(4, 1000, l1), 37.5, "all-to-all")
eq(H.broadcast_tree(4, 1000, l1), 40, "tree broadcast N 4")
eq(H.broadcast_tree(5, 1000, l1), 60, "tree broadcast N 5")
eq(H.broadcast_ring(4, 1000, l1), 60, "ring broadcast")
eq(H.broadcast_ring(4, 1000, l1, { chunks = 4 }), 6 * 12.5, "pipelined ring broadcast")
eq(H.ring_allreduce_bw(4, 1000, { alpha = 10, beta = 0.01, gamma = 0.001 }), 75.75, "beta given")
eq(H.tree_allreduce(2, 1000, l1), 2 * 20 + 1, "tree of 2")
for _, name in ipairs({ "ring_allreduce", "ring_allreduce_bw", "tree_allreduce", "all_gather",
  "reduce_scatter", "all_to_all", "broadcast_tree", "broadcast_ring" }) do
  eq(H[name](1, 1000, l1), 0, name .. " on one rank")
end

-- Two levels: RS+AG inside 4 (S 1000), bandwidth-optimal ring across 2
-- on 250 B with α 100, 10 GB/s: 75.75 + 2(100 + 12.5) + 0.125.
local l2 = { alpha = 100, bw = 10, gamma = 0.001 }
eq(H.hierarchical_allreduce(1000, { { n = 4, link = l1 }, { n = 2, link = l2 } }), 300.875,
  "hierarchical")
eq(H.hierarchical_allreduce(1000, { { n = 4, link = l1 } }), 75.75, "one level")
eq(H.hierarchical_allreduce(1000, { { n = 4, link = l1 }, { n = 2, link = l2 } },
  { top = "ring_allreduce" }), 75.75 + 100 + 25 + 0.25, "hierarchical, flat top")

-- LogGP: L 10, o 2, g 5, G 0.01, γ 0.001. msg(1000) = 23.99, msg(250) = 16.49.
local g1 = { L = 10, o = 2, g = 5, G = 0.01, gamma = 0.001 }
eq(G.ring_allreduce(4, 1000, g1), 3 * (23.99 + 1), "LogGP flat ring")
eq(G.ring_allreduce_bw(4, 1000, g1), 6 * 16.49 + 0.75, "LogGP bw-optimal ring")
-- up 23.99 + o + 2γS, down 23.99 + max(g, o + 999G)
eq(G.tree_allreduce(4, 1000, g1), 2 * ((23.99 + 2 + 2) + (23.99 + 11.99)), "LogGP tree")
eq(G.all_gather(4, 1000, g1), 3 * 16.49, "LogGP all-gather")
eq(G.reduce_scatter(4, 1000, g1), 3 * (16.49 + 0.25), "LogGP reduce-scatter")
-- injections of 250 B are gap bound: max(5, 2 + 2.49) = 5
eq(G.all_to_all(4, 1000, g1), 2 * 5 + 16.49, "LogGP all-to-all")
eq(G.broadcast_tree(4, 1000, g1), 2 * 23.99, "LogGP tree broadcast")
eq(G.broadcast_ring(4, 1000, g1, { chunks = 4 }), 6 * 16.49, "LogGP ring broadcast")
-- A gap larger than a one-byte message bounds every round.
eq(G.all_gather(4, 4, { L = 10, o = 2, g = 20, G = 0.01 }), 60, "gap-bound rounds")
eq(G.hierarchical_allreduce(1000, { { n = 4, link = g1 } }), 6 * 16.49 + 0.75, "LogGP one level")

-- With o = g = 0, L = α and G = β LogGP is Hockney less one byte per message.
local lg = an.loggp_from_hockney(l1)
eq(G.all_gather(4, 1000, lg), H.all_gather(4, 1000, l1) - 3 * 0.01, "LogGP from Hockney")

-- Bad arguments name the argument and point at the caller.
local ok, err = pcall(H.all_gather, 0, 1000, l1)
kb.check(not ok and err:find("bad rank count '0' (want an integer >= 1)", 1, true), err)
ok, err = pcall(H.all_gather, 4, 1000, { alpha = 10, bw = 0 })
kb.check(not ok and err:find("bad link parameter 'bw' = 0", 1, true), err)
ok, err = pcall(G.all_gather, 4, -1, g1)
kb.check(not ok and err:find("bad message size '-1'", 1, true), err)
ok, err = pcall(G.all_gather, 4, 8, { L = 1, o = -1, G = 1 })
kb.check(not ok and err:find("bad link parameter 'o' = -1", 1, true), err)
print(("ring all-reduce of 1 MiB on 8 ranks at 1 us, 100 GB/s: %.1f ns"):format(
  H.ring_allreduce_bw(8, 2 ^ 20, { alpha = 1000, bw = 100 })))
print("perfmodel_analytic ok")
