-- huge_pages.lua — by default, and with --huge-pages, kbsim runs with malloc's memory on 2 MiB
-- pages (decisions 0072, 0073), and what it starts sees the user's environment, not the tunables
-- it ran with, and the process keeps its name; with --no-huge-pages (expect=off) the heap stays
-- on small pages
local kb = require("kbsim")
local p = kb.params({expect = {default = "on", type = "string", choices = {"on", "off"},
                               help = "on: the heap is on huge pages; off: it is not"}})
local f = io.open("/sys/kernel/mm/transparent_hugepage/enabled")
local thp = f and f:read("l") or ""
if f then f:close() end
if not thp:find("%[madvise%]") then
  print("huge_pages skipped: transparent huge pages are not given on request here (" .. thp .. ")")
  return
end
-- ~80 MB of Lua strings: the heap, not the memories' page pool
local keep = {}
for i = 1, 250000 do keep[i] = string.rep("x", 300) .. i end
local r = io.open("/proc/self/smaps_rollup")
local text = r:read("a")
r:close()
local kib = tonumber(text:match("AnonHugePages:%s+(%d+) kB"))
if p.expect == "on" then
  kb.check(kib and kib >= 4096, ("AnonHugePages %s kB: the heap is not on huge pages"):format(tostring(kib)))
else
  kb.check(kib == 0, ("AnonHugePages %s kB with --no-huge-pages"):format(tostring(kib)))
end
kb.check(os.getenv("GLIBC_TUNABLES") == nil and os.getenv("KBSIM_MALLOC_TUNED") == nil,
  "the tunables kbsim ran itself with are left in the environment of what it starts")
-- ps, top and pkill know it by its name, not by the "exe" of /proc/self/exe it ran itself as
local c = io.open("/proc/self/comm")
local comm = c and c:read("l")
if c then c:close() end
kb.check(comm == "kbsim", ("the process is called '%s', not 'kbsim'"):format(tostring(comm)))
print(("huge_pages %s ok: %d kB on huge pages, %d strings"):format(p.expect, kib, #keep))
