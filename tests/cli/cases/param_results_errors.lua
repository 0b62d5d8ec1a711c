-- param_results_errors.lua — the PARAM reader refuses what its readers cannot use with file:line
-- (rows without a latency or bandwidth column went through and failed deep in comms_bench; a
-- column named like a row field overwrote it), and a bad argument is the caller's error
local kb = require("kbsim")
local pr = require("kbsim.param_results")

local ROW = "\tCOMMS-RES-all_reduce   4096   1024   4.8   4.9   5.1   4.7   5.2   0.847   1.271"
local function header(cols) return "\tCOMMS-RES " .. cols end
local FULL = "size (B) nElementsPerRank Latency(us):p50 p75 p95 Min Max AlgBW(GB/s) BusBW(GB/s)"

local function refused(text, want)
  local rows, msg = pr.parse(text, "in.txt")
  kb.check(rows == nil and msg == want, ("want %q, got %s"):format(want, tostring(msg)))
end
refused(header("size (B) nElementsPerRank AlgBW(GB/s) BusBW(GB/s)") .. "\n" .. ROW,
        "in.txt:1: bad COMMS-RES header: no 'p50' column")
refused("log line\n" .. header("size (B) Latency(us):p50 AlgBW(GB/s)") .. "\n" .. ROW,
        "in.txt:2: bad COMMS-RES header: no 'busbw' column")
refused(header("size (B) Collective p50 AlgBW(GB/s) BusBW(GB/s)"),
        "in.txt:1: bad COMMS-RES header: column 'Collective' has a reserved name")
refused(header("size (B) p50 p50 AlgBW(GB/s) BusBW(GB/s)"),
        "in.txt:1: bad COMMS-RES header: column 'p50' appears twice")
local rows = pr.parse(header(FULL) .. "\n" .. ROW, "in.txt", {latency = "p95"})
kb.check(#rows == 1 and rows[1].latency == 5.1, "a full header still reads")

local function raised(fn, want)
  local ok, err = pcall(fn)
  kb.check(not ok and tostring(err):find(want, 1, true), "want " .. want .. ", got " .. tostring(err))
end
raised(function() pr.parse(nil, "x") end,
       "param_results_errors.lua:30: param_results.parse: the results text must be a string")
raised(function() pr.parse(ROW, "x", "p50") end,
       "param_results_errors.lua:32: param_results: options must be a table, got string")
raised(function() pr.read("x.txt", {latency = "p99"}) end,
       "param_results_errors.lua:34: unknown latency column 'p99'")
raised(function() pr.read(nil) end, "param_results.read: a file name is expected, got nil")
raised(function() pr.collectives(nil) end,
       "param_results_errors.lua:37: param_results.collectives: rows from parse or read")
raised(function() pr.series("rows") end, "param_results.series: rows from parse or read")
-- a latency or bandwidth of 0 or less is no measurement (algbw 0 gave an infinite busbw factor)
refused(header(FULL) .. "\n" .. ROW:gsub("0%.847", "0"),
        "in.txt:2: COMMS-RES row: algbw must be positive, got 0")
refused(ROW:gsub("4%.8", "-1", 1), "in.txt:1: COMMS-RES row: p50 must be positive, got -1")
print("param_results_errors ok")
