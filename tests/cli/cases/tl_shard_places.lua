-- tl_shard_places.lua — a tensor that names its shards in a places record
-- (t.shard_places, tl.shard_places): tl.load and tl.store find each rank's
-- shard there, with no call to t:shard_place; a rank the record lacks still
-- asks t:shard_place (and gets its error); kbsim.torch's tensors carry one;
-- a bad record is refused.
local kb = require("kbsim")
local tl = require("kbsim.tl")

local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}})

local N = 8
local ranks, addrs = {3, 0, 5}, {} -- listed out of order: the record sorts them
for k, r in ipairs(ranks) do
  addrs[k] = tl.alloc(sys, r, "hbm", N * 4)
  local v = {}
  for j = 1, N do v[j] = 100 * r + j end
  tl.host_write(sys, r, addrs[k], "f32", v, "hbm")
end
local where = {}
for k, r in ipairs(ranks) do where[r] = addrs[k] end

local place_calls = 0
local t = {shard_places = tl.shard_places(ranks, addrs, N, "hbm", "f32")}
function t:shard() error("t:shard is not asked when t:shard_place exists") end
function t:shard_place(rank)
  place_calls = place_calls + 1
  if not where[rank] then error(("tensor has no shard on rank %d"):format(rank), 2) end
  return where[rank], N, "hbm", "f32"
end

local errs = {}
tl.launch(sys, {0, 3, 5, 6}, function()
  local r = tl.program_id()
  if r == 6 then
    local ok, err = pcall(tl.load, t, 0, 1)
    errs[#errs + 1] = not ok and tostring(err) or "no error"
    return
  end
  local h = tl.load(t, 2, 4) -- elements 2..5: 100 r + 3 .. 100 r + 6
  local got = h.to_table(h)
  for j = 1, 4 do
    kb.check(got[j] == 100 * r + 2 + j, ("rank %d load[%d] = %s"):format(r, j, tostring(got[j])))
  end
  tl.store(t, 0, h * 2) -- elements 0..3 of the same shard
  -- what the record's quick way does not take goes the general way, with
  -- its errors (and writes nothing)
  local function err(f, ...)
    local ok, e = pcall(f, ...)
    return not ok and tostring(e) or "no error"
  end
  local function has(e, s) kb.check(e:find(s, 1, true), ("rank %d: %s"):format(r, e)) end
  has(err(tl.load, t, N - 1, 2), "outside the shard of 8")
  has(err(tl.load, t, 1.5, 1), "outside the shard of 8")
  has(err(tl.load, t, 0, 0), "a count of 0 elements")
  has(err(tl.store, t, N - 3, h), "outside the shard of 8")
  has(err(tl.store, t, 0, tl.full(4, 1, "f16")), "a f16 handle into a f32 tensor")
  local g = tl.load(t, 0, 1)
  tl.free(g)
  has(err(tl.store, t, 0, g), "handle was freed")
end)
sim:run()
kb.check(#errs == 1 and errs[1]:find("tensor has no shard on rank 6", 1, true),
         "rank 6: " .. tostring(errs[1]))
kb.check(place_calls == 1, "t:shard_place asked only for the rank without a place: " .. place_calls)
for _, r in ipairs(ranks) do
  local got = tl.host_read(sys, r, where[r], "f32", N, "hbm")
  for j = 1, N do
    local want = j <= 4 and 2 * (100 * r + 2 + j) or 100 * r + j
    kb.check(got[j] == want, ("rank %d element %d = %s, want %s"):format(r, j - 1,
             tostring(got[j]), tostring(want)))
  end
end

-- kbsim.torch's tensors carry the record, and loads go to their shards
local T = require("kbsim.torch")
local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}}}
local tt = torch.zeros({1, 4 * N}, {dtype = "f32", ranks = {1, 2, 4, 7}})
kb.check(tt.shard_places ~= nil, "torch.zeros makes t.shard_places")
for k, r in ipairs({1, 2, 4, 7}) do
  local v = {}
  for j = 1, N do v[j] = 10 * k + j end
  tt:shard_write_vec(r, tl.vec_from(v))
end
local tcalls = 0
local place = tt.shard_place
tt.shard_place = function(self, rank) tcalls = tcalls + 1 return place(self, rank) end
tl.launch(torch.sys, {1, 2, 4, 7}, function(x)
  local h = tl.load(x)
  tl.store(x, 0, h + 1)
end, tt)
torch.sim:run()
kb.check(tcalls == 0, "a torch tensor's places come from its record: " .. tcalls .. " calls")
for k, r in ipairs({1, 2, 4, 7}) do
  local got = tt:shard_table(r)
  for j = 1, N do
    kb.check(got[j] == 10 * k + j + 1, ("torch rank %d element %d = %s"):format(r, j - 1,
             tostring(got[j])))
  end
end

-- a bad record is refused
local function refused(pattern, ...)
  local ok, err = pcall(tl.shard_places, ...)
  kb.check(not ok and tostring(err):find(pattern, 1, true),
           "tl.shard_places: want '" .. pattern .. "', got " .. tostring(err))
end
refused("tl.shard_places: rank 2 listed twice", {2, 2}, {0, 64}, N, "hbm", "f32")
refused("rank or address 2 is not an integer", {1, 2}, {0, 1.5}, N, "hbm", "f32")
refused("rank or address 1 is not an integer", {"x"}, {0}, N, "hbm", "f32")
-- a bad memory or dtype is said where the record is made, not at each tl.load
refused("tl.shard_places: unknown memory 'hmb' (tcm, sram, hbm)", {1}, {0}, N, "hmb", "f32")
refused("tl.shard_places: unknown dtype 'f23' (f16, bf16, f32)", {1}, {0}, N, "hbm", "f23")
print("tl_shard_places ok")
