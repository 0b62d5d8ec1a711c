-- huge_pages.lua — kbsim --huge-pages runs with malloc's memory on 2 MiB pages (decision 0072),
-- and what it starts sees the user's environment, not the tunables it ran with
local kb = require("kbsim")
local f = io.open("/sys/kernel/mm/transparent_hugepage/enabled")
local thp = f and f:read("l") or ""
if f then f:close() end
if thp == "" or thp:find("%[never%]") then
  print("huge_pages skipped: transparent huge pages are off here (" .. thp .. ")")
  return
end
-- ~80 MB of Lua strings: the heap, not the memories' page pool
local keep = {}
for i = 1, 250000 do keep[i] = string.rep("x", 300) .. i end
local r = io.open("/proc/self/smaps_rollup")
local text = r:read("a")
r:close()
local kib = tonumber(text:match("AnonHugePages:%s+(%d+) kB"))
kb.check(kib and kib >= 4096, ("AnonHugePages %s kB: the heap is not on huge pages"):format(tostring(kib)))
kb.check(os.getenv("GLIBC_TUNABLES") == nil and os.getenv("KBSIM_MALLOC_TUNED") == nil,
  "the tunables kbsim ran itself with are left in the environment of what it starts")
print(("huge_pages ok: %d kB on huge pages, %d strings"):format(kib, #keep))
