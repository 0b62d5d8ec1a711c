-- hello.lua — smallest real scenario: a producer and a consumer pass tokens
-- through a two-slot fifo; the consumer is slower, so the producer stalls
-- on a full fifo. Prints when each token was sent and received and checks
-- the times against the closed form.
local kb = require("kbsim")
kb.params({}, {about = "a producer and a consumer pass tokens through a two-slot fifo",
               refuse_topology = "hello builds no system, only a fifo between two processes"})

local N = 5          -- tokens
local T_PROD = 10.0  -- ns the producer needs per token
local T_CONS = 25.0  -- ns the consumer needs per token
local DEPTH = 2      -- fifo slots

local sim <close> = kb.sim{}
local fifo = sim:fifo("tokens", DEPTH)
local sent, got = {}, {}

sim:spawn("producer", function()
  for i = 1, N do
    kb.wait(T_PROD)
    fifo:write({id = i, made = kb.now()})
    sent[i] = kb.now()
  end
end)

sim:spawn("consumer", function()
  for i = 1, N do
    local tok = fifo:read()
    kb.check(tok.id == i, ("token %d arrives in order"):format(i))
    kb.wait(T_CONS)
    got[i] = kb.now()
  end
end)

local status = sim:run()
kb.check(status == "done", "the run ends with nothing pending")

-- Token i is ready at i*T_PROD and consumed T_CONS after the later of that
-- and the previous token's completion. The producer's write of token i
-- returns once a slot is free: token i-DEPTH has been taken (read) by then.
print(("%-6s %10s %10s"):format("token", "sent_ns", "done_ns"))
local done_prev = 0
for i = 1, N do
  local start = math.max(i * T_PROD, done_prev)
  local want_done = start + T_CONS
  local read_at = i - DEPTH >= 1 and (got[i - DEPTH] - T_CONS) or 0
  local want_sent = math.max(i * T_PROD, read_at)
  print(("%-6d %10.1f %10.1f"):format(i, sent[i], got[i]))
  kb.check(got[i] == want_done, ("token %d done at %g ns, want %g"):format(i, got[i], want_done))
  kb.check(sent[i] == want_sent, ("token %d sent at %g ns, want %g"):format(i, sent[i], want_sent))
  done_prev = want_done
end
print(("simulated %.1f ns"):format(sim:now()))
