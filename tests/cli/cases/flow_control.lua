-- Credit flow control through the kbsim binary, against hand calculations:
-- PE 0 -> PE 1 is two links (up to their corner router, down to PE 1),
-- 256 GB/s (d = 1 ns a 256-byte flit), no latency, no router overhead.
-- With buffers of B flits and a credit delay c, n flits take
--   B·d >= d + c:  T = 2d + (n-1)·d            (bandwidth bound)
--   B = 1:         T = 2d + (n-1)·(d + c)      (one flit per credit round trip)
-- and an isolated message costs what sys:path's closed form says.
local kb = require("kbsim")

local function one(fabric, a, b, bytes)
  local sim <close> = kb.sim{}
  local sys = kb.system(sim, {fabric = fabric})
  local h = sys:inject{src = {a}, dst = {b}, t_ns = {0}, bytes = bytes}
  sim:run()
  local r = h:results()
  assert(r.delivered == 1, "not delivered")
  return r.latency_ns[1], sys:path(a, b).latency_ns(bytes)
end

local function near(a, b) return math.abs(a - b) < 1e-6 end

for _, n in ipairs({1, 4, 16}) do
  local bytes = n * 256
  local t = one({flow_control = "credit", buffer_flits = 4, credit_ns = 3}, 0, 1, bytes)
  kb.check(near(t, 2 + (n - 1)), ("B=4 c=3 n=%d: %g ns, want %g"):format(n, t, 2 + (n - 1)))
  t = one({flow_control = "credit", buffer_flits = 1, credit_ns = 3}, 0, 1, bytes)
  kb.check(near(t, 2 + (n - 1) * 4), ("B=1 c=3 n=%d: %g ns, want %g"):format(n, t, 2 + (n - 1) * 4))
end

-- isolated messages across the system: the closed form, both modes
for _, pair in ipairs({{0, 1}, {0, 9}, {0, 255}, {17, 130}}) do
  for _, bytes in ipairs({1, 1024, 65536}) do
    for _, fc in ipairs({"wormhole_unbounded", "credit"}) do
      local t, want = one({flow_control = fc}, pair[1], pair[2], bytes)
      kb.check(near(t, want), ("%s %d -> %d, %d B: %g ns, closed form %g"):format(
        fc, pair[1], pair[2], bytes, t, want))
    end
  end
end
-- the credit-bound case: buffers of 1..8 flits and credit delays up to
-- 20 ns, most of them below the credit round trip, where the stream
-- slows to B flits a round trip; sys:path's closed form (the links' own,
-- link_credit.c) still gives the simulated time exactly
local checked = 0
for b = 1, 8 do
  for _, c in ipairs({0, 3, 20}) do
    local fabric = {flow_control = "credit", buffer_flits = b, credit_ns = c}
    for _, pair in ipairs({{0, 1}, {0, 42}, {0, 255}, {17, 130}}) do
      for _, bytes in ipairs({1, 300, 1024, 65536}) do
        local t, want = one(fabric, pair[1], pair[2], bytes)
        kb.check(near(t, want), ("credit B=%d c=%g %d -> %d, %d B: %g ns, closed form %g"):format(
          b, c, pair[1], pair[2], bytes, t, want))
        checked = checked + 1
      end
    end
  end
end
-- B=1 c=20 over two hops, 16 flits: (n-1)·(d + c) + 2d = 15·21 + 2 ns
local t1, w1 = one({flow_control = "credit", buffer_flits = 1, credit_ns = 20}, 0, 1, 4096)
kb.check(near(t1, 317) and near(w1, 317), ("B=1 c=20: %g ns, closed form %g, want 317"):format(
  t1, w1))
print(("flow_control credit-bound: %d points match the closed form"):format(checked))
print("flow_control ok")
