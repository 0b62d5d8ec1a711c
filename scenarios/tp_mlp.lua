-- tp_mlp.lua — Megatron-style tensor-parallel 2-layer MLP: ColumnParallelLinear then RowParallelLinear on ws ranks, the HARDWARE_MODEL.md checks, and GEMM vs all-reduce time
--
--   kbsim [-j N] scenarios/tp_mlp.lua [ws=4] [in=256] [hidden=1024] [out=256]
--                                     [tokens=8,32,128] [dtype=f32]
--
-- For every token count m (one kb.sweep point each): x (m x in, replicated)
-- -> fc1 = ColumnParallelLinear(in, hidden): rank r holds W1[:, r] (in x
-- hidden/ws) and computes h_r = x W1_r -> fc2 = RowParallelLinear(hidden,
-- out): rank r holds W2_r (hidden/ws x out), computes h_r W2_r, and the
-- all-reduce sums them. Checks (on host vectors, exact: small integers):
--   column output equals x W1_r on every rank;
--   row output equals sum_r h_r W2_r on every rank;
--   all ranks identical after the all-reduce.
-- Writes breakdown.csv (column GEMM, row GEMM, all-reduce ns per m), the
-- breakdown figure and index.md to the output folder (docs/tp_mlp.md).
local kb = require("kbsim")
local results = require("kbsim.results")

local P = kb.params({
  ws = {default = 4, type = "integer", min = 2, help = "tensor-parallel ranks"},
  ["in"] = {default = 256, type = "integer", min = 1, help = "input features"},
  hidden = {default = 1024, type = "integer", min = 1, help = "hidden features (split over ws)"},
  out = {default = 256, type = "integer", min = 1, help = "output features"},
  tokens = {default = {8, 32, 128}, type = "integer", list = true, min = 1,
            help = "token counts m, one sweep point each"},
  dtype = {default = "f32", type = "string", choices = {"f32", "f16", "bf16"},
           help = "element type"},
}, {about = "Megatron-style tensor-parallel 2-layer MLP on ws ranks",
    check = function(p)
      -- Megatron splits fc1's output columns and fc2's input rows over the
      -- ranks: both are the hidden size, which must divide evenly.
      if p.hidden % p.ws ~= 0 then
        return ("hidden size %d does not divide over %d tensor-parallel ranks (world size %d)")
          :format(p.hidden, p.ws, p.ws)
      end
    end})
local opt = {ws = P.ws, in_features = P["in"], hidden = P.hidden, out_features = P.out,
             tokens = P.tokens, dtype = P.dtype}

-- One MLP forward pass for m tokens; runs in its own Lua state.
local function mlp_point(p)
  local T = require("kbsim.torch")
  local tl = require("kbsim.tl")
  local torch = T.init{}
  local D = torch.distributed
  D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = "ring_rs_ag_allreduce",
    dtype = p.dtype, algorithms = {ring_rs_ag_allreduce = {world_size = p.ws}}}}}
  local tp = require("kbsim.tp").new(torch)
  tp.initialize_model_parallel(p.ws)
  local ws = tp.get_tensor_model_parallel_world_size()
  local ranks = tp.get_tensor_model_parallel_ranks()
  local m, IN, HID, OUT = p.m, p.in_features, p.hidden, p.out_features
  -- small integers: every product and sum is exact in f32 (and in f16 for
  -- the sizes the tests use), so the checks can ask for equality
  local fc1 = tp.ColumnParallelLinear(IN, HID, {dtype = p.dtype,
    init = function(i, j) return (i + 2 * j) % 3 - 1 end})
  local fc2 = tp.RowParallelLinear(HID, OUT, {dtype = p.dtype, all_reduce = {check = false},
    init = function(i, j) return (3 * i + j) % 3 - 1 end})
  local x = torch.zeros({m, IN}, {dtype = p.dtype, placement = "replicate", ranks = ranks})
  local xv = tl.vec_affine(m * IN, 1, 0):mod(3)
  for _, r in ipairs(ranks) do x:shard_write_vec(r, xv) end

  local h = fc1:forward(x, m)
  local per = HID // ws
  local col_err, hs = 0, {}
  for _, r in ipairs(ranks) do
    local want = tl.vec_matmul(xv, fc1.weight:shard_vec(r), m, IN, per)
    hs[r] = h:shard_vec(r)
    col_err = math.max(col_err, hs[r]:max_abs_diff(want))
  end
  -- the row layer's reference from what each rank actually holds
  local want = tl.vec_new(m * OUT)
  for _, r in ipairs(ranks) do
    want:add(tl.vec_matmul(hs[r], fc2.weight:shard_vec(r), m, per, OUT))
  end
  local y = fc2:forward(h, m)
  local row_err, same_err = 0, 0
  local y0 = y:shard_vec(ranks[1])
  for _, r in ipairs(ranks) do
    local got = y:shard_vec(r)
    row_err = math.max(row_err, got:max_abs_diff(want))
    same_err = math.max(same_err, got:max_abs_diff(y0))
  end
  return {
    tp_rank0 = tp.get_tensor_model_parallel_rank(), ws = ws, m = m, in_features = IN,
    hidden = HID, out_features = OUT, dtype = p.dtype,
    column_gemm_ns = fc1.last_ns, row_gemm_ns = fc2.gemm_ns,
    all_reduce_ns = fc2.all_reduce.latency_ns, all_reduce_bytes = fc2.all_reduce.bytes,
    column_check = col_err == 0 and "passed" or "failed",
    row_check = row_err == 0 and "passed" or "failed",
    identical_check = same_err == 0 and "passed" or "failed",
    col_err = col_err, row_err = row_err,
  }
end

local points = {}
for _, m in ipairs(opt.tokens) do
  points[#points + 1] = {m = m, ws = opt.ws, in_features = opt.in_features, hidden = opt.hidden,
                         out_features = opt.out_features, dtype = opt.dtype}
end
local rows, summary = kb.sweep{name = "tp_mlp", points = points, run = mlp_point}

local table_rows, parts = {}, {}
for _, r in ipairs(rows) do
  kb.check(r.column_check == "passed", ("m %d: column output differs from x W1_r (max error %g)")
    :format(r.m, r.col_err))
  kb.check(r.row_check == "passed", ("m %d: row output differs from sum_r h_r W2_r (max error %g)")
    :format(r.m, r.row_err))
  kb.check(r.identical_check == "passed", ("m %d: ranks differ after the all-reduce"):format(r.m))
  local total = r.column_gemm_ns + r.row_gemm_ns + r.all_reduce_ns
  table_rows[#table_rows + 1] = {ws = r.ws, m = r.m, in_features = r.in_features,
    hidden = r.hidden, out_features = r.out_features, dtype = r.dtype,
    column_gemm_ns = r.column_gemm_ns, row_gemm_ns = r.row_gemm_ns,
    all_reduce_ns = r.all_reduce_ns, all_reduce_bytes = r.all_reduce_bytes, total_ns = total,
    all_reduce_share = r.all_reduce_ns / total, column_check = r.column_check,
    row_check = r.row_check, identical_check = r.identical_check}
  for _, part in ipairs({"column_gemm", "row_gemm", "all_reduce"}) do
    parts[#parts + 1] = {m = r.m, part = part, ns = r[part .. "_ns"]}
  end
  parts[#parts + 1] = {m = r.m, part = "total", ns = total}
end

local out = kb.outdir()
local csv = results.csv(out .. "/breakdown.csv", table_rows, {"ws", "m", "in_features", "hidden",
  "out_features", "dtype", "column_gemm_ns", "row_gemm_ns", "all_reduce_ns", "all_reduce_bytes",
  "total_ns", "all_reduce_share", "column_check", "row_check", "identical_check"})
local pcsv = results.csv(out .. "/breakdown_parts.csv", parts, {"m", "part", "ns"})
local entries = {
  {path = csv, about = "one row per token count: the column GEMM (x W1_r), the row GEMM "
    .. "(h_r W2_r) and the all-reduce of the row layer's m x out partial sums, in ns (slowest "
    .. "rank), their total and the all-reduce's share; the three checks of HARDWARE_MODEL.md"},
  {path = pcsv, about = "the same times in long form for the figure"},
}
-- no figure when no point finished (the failures are reported, exit 1)
if #parts > 0 then
  local fig = results.figure{name = "breakdown", csv = pcsv, x = "m", y = "ns", series = "part",
    title = ("TP MLP on %d ranks: %d -> %d -> %d, %s"):format(opt.ws, opt.in_features, opt.hidden,
      opt.out_features, opt.dtype),
    xlabel = "tokens m", ylabel = "time (ns)", logx = 2, logy = 10}
  entries[#entries + 1] = {figure = fig, about = "GEMM and all-reduce time against the token "
    .. "count: the GEMMs grow with m x in x hidden / ws, the all-reduce with m x out."}
end
results.index(out, entries, "Tensor-parallel MLP")

print(("%4s %6s %14s %14s %14s %8s  %s"):format("ws", "m", "column_gemm_ns", "row_gemm_ns",
  "all_reduce_ns", "ar_share", "checks"))
for _, r in ipairs(table_rows) do
  print(("%4d %6d %14.1f %14.1f %14.1f %7.1f%%  column %s, row %s, identical %s"):format(r.ws, r.m,
    r.column_gemm_ns, r.row_gemm_ns, r.all_reduce_ns, 100 * r.all_reduce_share, r.column_check,
    r.row_check, r.identical_check))
end
print(("tp_mlp: %s, %s; results in %s/index.md"):format(results.ran(summary, "points"),
  results.verdict{summary}, out))
