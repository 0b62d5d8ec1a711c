-- cosim_message_ref.lua — one raw message on an idle fabric (sys:inject,
-- no server): its latency is the reference of tests/cli/cosim_test.py's
-- case inject_kinds (an injected message of kbsim serve).
--   kbsim cosim_message_ref.lua src=R dst=R bytes=B -> latency_ns=...
local kb = require("kbsim")
local a = {}
for _, s in ipairs{...} do
  local k, v = s:match("^([%w_]+)=(.*)$")
  a[k] = v
end
local sim = kb.sim{}
local sys = kb.system(sim)
local h = sys:inject{src = {tonumber(a.src)}, dst = {tonumber(a.dst)}, t_ns = {0},
                     bytes = tonumber(a.bytes)}
sim:run()
print(("latency_ns=%.17g"):format(h:results().latency_ns[1]))
