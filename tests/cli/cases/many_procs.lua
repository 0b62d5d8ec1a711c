-- 1000 Lua thread processes, each waiting a few times on a shared event
-- and on time, then passing a token along a ring of fifos.
local kb = require("kbsim")
local N = 1000
local sim = kb.sim{}
local go = sim:event("go")
local ring = {}
for i = 1, N do ring[i] = sim:fifo("ring" .. i, 1) end
local finished = 0
local procs = {}
for i = 1, N do
  procs[i] = sim:spawn("p" .. i, function(me)
    kb.wait(go)
    kb.wait(me % 7)
    if me == 1 then ring[1]:write(0) end
    local v = ring[me]:read()
    ring[me % N + 1]:write(v + 1)
    if me == 1 then kb.check(ring[1]:read() == N, "token went round") end
    finished = finished + 1
  end, i)
end
go:notify(1)
kb.check(sim:run() == "done", "run done")
kb.check(finished == N, ("%d finished"):format(finished))
kb.check(procs[N]:done() and procs[N]:name() == "p" .. N, "proc handle")
local st = sim:stats()
kb.check(st.threads_alive == 0 and st.switches > 2 * N, "stats")
print(("%d processes ok"):format(N))
