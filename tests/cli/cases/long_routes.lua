-- long_routes.lua — routes of any length: a one-way ring of 100 PEs, where
-- every credit goes 99 links back round, wired as a ring and running a ring
-- all-reduce whose time matches its closed form; a DMA over a route of more
-- than 64 links taking the time its path gives
--
-- Run with dispatch, setups and memory time made negligible, as
-- ccl_closed_form.lua (see tests/cli/CMakeLists.txt). One hop of B bytes
-- costs alpha + B/bw, alpha being the data's latency one hop on plus the
-- 16-byte credit's flight all the way back round (the receiver is busy for
-- it), so ring_allreduce takes (N-1) (alpha + S/bw) + (N-1) math(S).
local kb = require("kbsim")

local N, BW, LAT = 100, 64, 20 -- PEs, GB/s, ns
local S_ELEM = 256             -- f32 elements per rank: S = 1 KiB
local VEC = tonumber(kb.options.set["pe.math.vector_bytes_per_cycle"] or "128")

local ring = require("ring_case")

-- the ring all-reduce (tl.wire_ring: each rank's E into the next one's W),
-- every credit going N-1 links back; its sums checked
local lat, torch = ring.allreduce(ring.graph(N, BW, LAT, false), "ring_allreduce", N, S_ELEM)
local sys = torch.sys
local back = sys:path(1, 0)
kb.check(back.hops == N - 1, "the way back from p1 to p0 is " .. back.hops .. " links")
local S = S_ELEM * 4
local alpha = sys:path(0, 1).latency_ns(0) + back.latency_ns(16)
local want = (N - 1) * (alpha + S / BW) + (N - 1) * math.ceil(S / VEC)
print(("ring_allreduce on a one-way ring of %d: %.3f ns, closed form %.3f ns (alpha %.3f ns)")
  :format(N, lat, want, alpha))
kb.check(math.abs(lat - want) <= 1e-3 * want, ("%.3f ns is off the closed form %.3f ns")
  :format(lat, want))

-- a DMA over 99 links: the copy takes its closed form, which is the path's
-- time with memory times negligible
local took, formula
torch.sim:spawn("dma", function() took, formula = sys:dma(1, 0, 4096) end)
torch.sim:run()
print(("dma over %d links: %.3f ns, closed form %.3f ns, path %.3f ns"):format(back.hops, took,
  formula, back.latency_ns(4096)))
kb.check(took == formula, ("dma took %.3f ns, closed form %.3f ns"):format(took, formula))
kb.check(math.abs(took - back.latency_ns(4096)) < 1, ("dma took %.3f ns, the path %.3f ns")
  :format(took, back.latency_ns(4096)))
print("long_routes ok")
