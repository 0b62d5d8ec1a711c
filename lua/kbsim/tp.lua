-- kbsim/tp.lua — Megatron-style tensor parallelism: parallel state, ColumnParallelLinear, RowParallelLinear
--
--   local tp = require("kbsim.tp").new(torch)
--   tp.initialize_model_parallel(4)
--   local fc1 = tp.ColumnParallelLinear(in, hidden)   -- weight per rank: in x hidden/ws
--   local fc2 = tp.RowParallelLinear(hidden, out)     -- weight per rank: hidden/ws x out
--   local y = fc2:forward(fc1:forward(x, m), m)       -- all-reduced on every rank
--
-- Activations are tensors with one shard per tensor-parallel rank, row-
-- major m x cols: x replicated for the column layer, the column layer's
-- output (m x out/ws per rank) feeding the row layer directly. GEMMs run
-- as kernels on PE_GEMM; the row layer's partial sums are all-reduced
-- with the process group's algorithm.
local tl = require("kbsim.tl")

local M = {}

-- One GEMM per rank: y_r = x_r (m x k) . w_r (k x n).
local function gemm_kernel(x, w, y, m, n, k)
  local a = tl.load(x, 0, m * k)
  local b = tl.load(w, 0, k * n)
  tl.store(y, 0, tl.dot(a, b, m, n, k))
end

function M.new(torch)
  local D = torch.distributed
  local tp = {}
  local size -- tensor-parallel world size once initialised

  local function ranks()
    if not size then
      error("tp: call initialize_model_parallel first", 3)
    end
    local all, list = D.get_ranks(), {}
    for i = 1, size do list[i] = all[i] end
    return list
  end

  function tp.initialize_model_parallel(tensor_model_parallel_size)
    local ws = D.get_world_size()
    local n = tensor_model_parallel_size or ws
    if math.type(n) ~= "integer" or n < 1 or n > ws then
      error(("tp: tensor parallel size %s is not in 1..%d"):format(tostring(n), ws), 2)
    end
    size = n
  end
  function tp.model_parallel_is_initialized() return size ~= nil end
  function tp.get_tensor_model_parallel_world_size() ranks(); return size end
  function tp.get_tensor_model_parallel_rank() ranks(); return D.get_rank() % size end
  function tp.get_tensor_model_parallel_ranks() return ranks() end

  -- A weight (rows x cols per rank) with every rank's slice written from
  -- slice(rank_index) -> flat row-major values.
  local function weight(rows, cols, dtype, slice)
    local rs = ranks()
    local w = torch.zeros({1, #rs * rows * cols}, {dtype = dtype, ranks = rs})
    if slice then
      for i, r in ipairs(rs) do w:shard_copy_(r, slice(i - 1)) end
    end
    return w
  end

  local function run_gemm(x, w, m, n, k, dtype)
    local rs = ranks()
    local y = torch.zeros({1, #rs * m * n}, {dtype = dtype, ranks = rs})
    local run = tl.launch(torch.sys, rs, gemm_kernel, x, w, y, m, n, k)
    torch.sim:run()
    return y, run:latency_ns()
  end

  local function checkdiv(a, b, what)
    if a % b ~= 0 then
      error(("tp: %s %d does not divide over %d ranks"):format(what, a, b), 3)
    end
    return a // b
  end

  -- Y = X W with W split by columns: rank r holds W[:, r*out/ws : (r+1)*out/ws].
  -- o.init(r, i, j) gives the full weight's element (i, j) seen from rank r's slice.
  function tp.ColumnParallelLinear(in_features, out_features, o)
    o = o or {}
    local ws = #ranks()
    local per = checkdiv(out_features, ws, "output size")
    local dtype = o.dtype or "f16"
    local layer = {in_features = in_features, out_features = out_features, per_rank = per,
                   dtype = dtype}
    layer.weight = weight(in_features, per, dtype, o.init and function(r)
      local v = {}
      for i = 0, in_features - 1 do
        for j = 0, per - 1 do v[i * per + j + 1] = o.init(i, r * per + j) end
      end
      return v
    end)
    -- x: m x in_features on every rank; returns m x per on each rank
    function layer.forward(_, x, m)
      local y, ns = run_gemm(x, layer.weight, m, per, in_features, dtype)
      layer.last_ns = ns
      return y
    end
    return layer
  end

  -- Y = sum_r X_r W_r with W split by rows: rank r holds W[r*in/ws : (r+1)*in/ws, :].
  function tp.RowParallelLinear(in_features, out_features, o)
    o = o or {}
    local ws = #ranks()
    local per = checkdiv(in_features, ws, "input size")
    local dtype = o.dtype or "f16"
    local layer = {in_features = in_features, out_features = out_features, per_rank = per,
                   dtype = dtype}
    layer.weight = weight(per, out_features, dtype, o.init and function(r)
      local v = {}
      for i = 0, per - 1 do
        for j = 0, out_features - 1 do v[i * out_features + j + 1] = o.init(r * per + i, j) end
      end
      return v
    end)
    -- x: m x per on each rank; returns m x out_features, all-reduced
    function layer.forward(_, x, m)
      local y, ns = run_gemm(x, layer.weight, m, out_features, per, dtype)
      layer.gemm_ns = ns
      layer.all_reduce = D.all_reduce(y, o.all_reduce)
      return y
    end
    return layer
  end

  return tp
end

return M
