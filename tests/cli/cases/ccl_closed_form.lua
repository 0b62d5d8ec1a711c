-- ccl_closed_form.lua — ring all-reduce times against their closed forms on a contention-free graph ring
--
-- Run with dispatch, setups and memory time made negligible (see
-- tests/cli/CMakeLists.txt): pe.cpu.dispatch_cycles=0, a very fast TCM,
-- a wide vector unit and IPCQ slots large enough for a whole tile. One
-- hop of B bytes then costs alpha + B/bw, where alpha is the link latency
-- of the data plus the credit's return (the receiver is busy for it):
--   ring_rs_ag_allreduce  2(N-1) (alpha + (S/N)/bw)   + (N-1) math(S/N)
--   ring_allreduce         (N-1) (alpha + S/bw)        + (N-1) math(S)
local kb = require("kbsim")

local N, BW, LAT = 8, 64, 20 -- PEs, GB/s, ns
local S_ELEM = 16384          -- f32 elements per rank: S = 64 KiB
local VEC = tonumber(kb.options.set["pe.math.vector_bytes_per_cycle"] or "128")

local ring = require("ring_case")

local function math_ns(bytes) return math.ceil(bytes / VEC) end -- 1 GHz, one cycle per vector

-- the algorithm on the ring, its sums checked: latency and system
local function run(alg)
  local lat, torch = ring.allreduce(ring.graph(N, BW, LAT, true), alg, N, S_ELEM)
  return lat, torch.sys
end

local S = S_ELEM * 4
local lat, sys = run("ring_rs_ag_allreduce")
-- alpha from the system's own path times: data latency one hop east,
-- the 16-byte credit's flight back west
local east, west = sys:path(0, 1), sys:path(1, 0)
local alpha = east.latency_ns(0) + west.latency_ns(16)
local want = 2 * (N - 1) * (alpha + (S / N) / BW) + (N - 1) * math_ns(S / N)
local err = math.abs(lat - want) / want
print(("ring_rs_ag_allreduce N=%d S=%d B: %.3f ns, closed form %.3f ns (alpha %.3f ns), error %.4f%%")
  :format(N, S, lat, want, alpha, 100 * err))
kb.check(err < 1e-3, ("ring_rs_ag_allreduce: %.3f ns is %.4f%% off %.3f ns"):format(lat,
  100 * err, want))

lat = run("ring_allreduce")
want = (N - 1) * (alpha + S / BW) + (N - 1) * math_ns(S)
err = math.abs(lat - want) / want
print(("ring_allreduce       N=%d S=%d B: %.3f ns, closed form %.3f ns, error %.4f%%")
  :format(N, S, lat, want, 100 * err))
kb.check(err < 1e-3, ("ring_allreduce: %.3f ns is %.4f%% off %.3f ns"):format(lat,
  100 * err, want))
print("ccl_closed_form ok")
