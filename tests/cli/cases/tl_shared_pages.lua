-- tl_shared_pages.lua — DMA copies of whole pages share them (decision
-- 0053): values stay those of a copy through a buffer when either side is
-- written after a load, a store or an IPCQ transfer of whole 4 KiB pages
local kb = require("kbsim")
local tl = require("kbsim.tl")

local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 1}}})
local N = 4 * 1024 -- f32: four whole pages (tiles and shards at page boundaries)

local addr, zaddr = {}, {}
for r = 0, 1 do
  addr[r] = tl.alloc(sys, r, "hbm", N * 4)
  zaddr[r] = tl.alloc(sys, r, "hbm", N * 4) -- never written: zeros
  tl.vec_affine(N, 1, 100 * r):write(sys, r, addr[r], "f32")
end
local function tensor(a)
  return {shard = function(_, rank) return {addr = a[rank], n = N, kind = "hbm", dtype = "f32"} end}
end
local t, z = tensor(addr), tensor(zaddr)

tl.wire(sys, 0, "E", 1, "W")
local errs = {}
local function expect(h, want, what)
  local v = tl.vec_from(h:to_table())
  local e = v:max_abs_diff(want)
  if e ~= 0 then errs[#errs + 1] = ("rank %d %s: max error %g"):format(tl.rank(), what, e) end
end
local run = tl.launch(sys, {0, 1}, function()
  local r = tl.rank()
  local orig = tl.vec_affine(N, 1, 100 * r)
  local h = tl.load(t, 0, N)             -- shares the shard's pages
  tl.store(t, 0, h + 1)                  -- the shard now holds h + 1
  expect(h, orig, "loaded tile after the shard was stored into")
  local zeros = tl.load(z, 0, N)         -- pages never written
  expect(zeros, tl.vec_new(N, 0), "tile loaded from never-written pages")
  tl.store(z, 0, h)                      -- zaddr shares h's pages
  tl.free(h)
  if r == 0 then
    local k = tl.load(z, 0, N)
    tl.send("E", k)
    tl.send("E", k * 3)                  -- the ring's slots written again
    expect(k, orig, "a tile sent twice")
  else
    local a = tl.recv("W", N, "f32")
    local b = tl.recv("W", N, "f32")
    expect(a, tl.vec_affine(N, 1, 0), "first message")
    expect(b, tl.vec_affine(N, 3, 0), "second message")
  end
end)
kb.check(sim:run() == "done", "run ends")
kb.check(#errs == 0, table.concat(errs, "; "))
for r = 0, 1 do
  local e1 = tl.vec_read(sys, r, addr[r], "f32", N):max_abs_diff(tl.vec_affine(N, 1, 100 * r + 1))
  local e2 = tl.vec_read(sys, r, zaddr[r], "f32", N):max_abs_diff(tl.vec_affine(N, 1, 100 * r))
  kb.check(e1 == 0 and e2 == 0, ("rank %d shards after the run: errors %g, %g"):format(r, e1, e2))
end
kb.check(run:latency_ns() > 0, "latency")
print("tl_shared_pages ok")
