-- references_errors.lua — the references CSV reader (kbsim.references) names file:line for
-- every problem; non-finite numbers, a missing header and a name twice were taken before
local kb = require("kbsim")
local refs_csv = require("kbsim.references")
local H = refs_csv.HEADER .. "\n"

local function refused(text, want)
  local refs, msg = refs_csv.parse(text, "r.csv")
  kb.check(refs == nil and msg == want, ("want %q, got %s"):format(want, tostring(msg)))
end
refused("", "r.csv:1: the header line must be '" .. refs_csv.HEADER .. "' (empty file?)")
refused("a,point,1,2,,,\n", "r.csv:1: the header line must be '" .. refs_csv.HEADER .. "'")
refused(H .. "a,point,inf,2,,,", "r.csv:2: bytes_per_pe: 'inf' is not a number")
refused(H .. "a,point,1e999,2,,,", "r.csv:2: bytes_per_pe: '1e999' is not a finite number")
refused(H .. "a,point,-4,2,,,", "r.csv:2: bytes_per_pe must be positive, got '-4'")
refused(H .. "a,point,4,0,,,", "r.csv:2: latency_ns must be positive, got '0'")
refused(H .. "a,line,,,1,2,0", "r.csv:2: slope_bits must be positive, got '0'")
refused(H .. "a,line,,,-1e999,2,8", "r.csv:2: intercept_ns: '-1e999' is not a finite number")
refused(H .. "a,point,1,2,,,\n\n#\nb,point,1,2\n", "r.csv:5: expected 7 fields, got 4")
refused(H .. "a,point,1,2,,,\na,line,,,1,2,8\n", "r.csv:3: reference 'a' is already defined on line 2")
refused(H .. "a\tb,point,1,2,,,", "r.csv:2: a name must not hold control characters")
refused(H .. "a,curve,1,2,,,", "r.csv:2: unknown kind 'curve' (point, line)")
refused(H .. ",point,1,2,,,", "r.csv:2: a reference needs a name")

local refs = assert(refs_csv.parse(H:gsub("\n", "\r\n") .. "a,point,0x10,2.5,,,\r\nb,line,,,1,2,8\r\n"))
kb.check(#refs == 2 and refs[1].bytes_per_pe == 16 and refs[2].slope_bits == 8, "CRLF and hex")
local ok, err = pcall(function() local r = refs_csv.parse(nil); return r end)
kb.check(not ok and err:find("references_errors.lua:27: references.parse: the text must be a string",
                             1, true), tostring(err))
-- a missing file is named once (io.open's message names it)
local none, rerr = refs_csv.read("/nonexistent/refs.csv")
kb.check(none == nil and rerr == "cannot read the references: /nonexistent/refs.csv: No such file or directory",
         tostring(rerr))
print("references_errors ok")
