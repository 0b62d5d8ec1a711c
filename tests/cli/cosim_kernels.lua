-- cosim_kernels.lua — kernels `kbsim serve --kernels` offers to clients
-- (tests/cli/cosim_test.py, case launch; docs/cosim.md)
local tl = require("kbsim.tl")
return {
  -- every rank's input, times args.scale, into its output
  scale = function(a, input, output)
    local h = tl.load(input, 0, a.n_elem)
    local s = h * a.scale
    tl.store(output, 0, s)
    tl.free(h, s)
  end,
  -- a ring shift: rank r's output is rank r-1's input (one send and one
  -- receive per rank over the one-way ring E -> W)
  ring_shift = {
    wire = function(sys, ranks) tl.wire_ring(sys, ranks) end,
    kernel = function(a, input, output)
      local f = tl.recv_async("W", a.n_elem, a.dtype)
      local h = tl.load(input, 0, a.n_elem)
      tl.send("E", h)
      tl.free(h)
      local got = tl.wait(f)
      tl.store(output, 0, got)
      tl.free(got)
    end,
  },
  -- fails on rank args.bad: every member hears it
  fails = function(a)
    if tl.rank() == a.bad then error("kernel failure on purpose (" .. a.why .. ")") end
  end,
  -- loads its input again and again without freeing it: the TCM runs out
  hog = function(a, input)
    local held = {}
    for i = 1, 1000 do held[i] = tl.load(input, 0, a.n_elem) end
  end,
  -- one PE_DMA read of the input into the TCM: an injected read's reference
  read = function(a, input)
    tl.free(tl.load(input, 0, a.n_elem))
  end,
}
