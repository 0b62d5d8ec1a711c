-- lm.lua — Levenberg–Marquardt least squares, with Marquardt's diagonal scaling; used by
-- the sigmoid fit of kbsim.perfmodel and by kbsim.calibrate
--
--   local lm = require("kbsim.lm")
--   local p, info = lm.minimize({
--     n = 2,                                  -- number of parameters
--     linearize = function(p) return r, J end, -- residuals r[i] = y_i − f_i(p), J[i][a] = ∂f_i/∂p_a
--     residuals = function(p) return r end,    -- r only (a trial step); nil: p is not allowed
--     project = function(p) return p end,      -- optional: p moved into the allowed set
--   }, p0, opts)
--
-- Minimises ½ Σ r_i². Each iteration solves (JᵀJ + λ·diag(JᵀJ)) δ = Jᵀr and
-- takes p + δ when it lowers the cost (λ ÷ 3), else retries with λ × 4.
-- opts: max_iter (200), xtol (1e-10, step relative to |p|), ftol (1e-12,
-- relative cost decrease), gtol (1e-12, |Jᵀr|∞).
-- Returns p and info {cost, iterations, converged, A = JᵀJ at p, m = #r},
-- or nil, a message and that info (p in info.p) when it did not converge.
local M = {}

local abs = math.abs

local function finite(v)
  return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge
end

-- Solves the n×n system A x = v by Gaussian elimination with partial
-- pivoting; nil if it is singular (the caller then damps harder).
function M.solve(Ain, v)
  local n = #v
  local m = {}
  for i = 1, n do
    local row = {}
    for c = 1, n do row[c] = Ain[i][c] end
    row[n + 1] = v[i]
    m[i] = row
  end
  for col = 1, n do
    local piv, best = col, abs(m[col][col])
    for r = col + 1, n do
      if abs(m[r][col]) > best then piv, best = r, abs(m[r][col]) end
    end
    if not (best > 0) or best ~= best then return nil end
    m[col], m[piv] = m[piv], m[col]
    for r = col + 1, n do
      local f = m[r][col] / m[col][col]
      for c = col, n + 1 do m[r][c] = m[r][c] - f * m[col][c] end
    end
  end
  local x = {}
  for r = n, 1, -1 do
    local s = m[r][n + 1]
    for c = r + 1, n do s = s - m[r][c] * x[c] end
    x[r] = s / m[r][r]
    if not finite(x[r]) then return nil end
  end
  return x
end

-- The inverse of a symmetric positive definite n×n matrix, column by
-- column; nil if it is singular.
function M.inverse(A)
  local n = #A
  local inv = {}
  for i = 1, n do inv[i] = {} end
  for c = 1, n do
    local e = {}
    for i = 1, n do e[i] = i == c and 1 or 0 end
    local x = M.solve(A, e)
    if not x then return nil end
    for i = 1, n do inv[i][c] = x[i] end
  end
  return inv
end

-- ½ Σ r², JᵀJ and Jᵀr from residuals and the model's Jacobian.
local function normal_equations(n, r, J)
  local A, g = {}, {}
  for a = 1, n do
    A[a], g[a] = {}, 0
    for c = 1, n do A[a][c] = 0 end
  end
  local cost = 0
  for i = 1, #r do
    local ri, j = r[i], J[i]
    cost = cost + ri * ri
    for a = 1, n do
      g[a] = g[a] + j[a] * ri
      for c = a, n do A[a][c] = A[a][c] + j[a] * j[c] end
    end
  end
  for a = 2, n do
    for c = 1, a - 1 do A[a][c] = A[c][a] end
  end
  return cost / 2, A, g
end

local function half_sum_squares(r)
  local cost = 0
  for i = 1, #r do cost = cost + r[i] * r[i] end
  return cost / 2
end

function M.minimize(problem, p0, opts)
  opts = opts or {}
  local n = problem.n
  local max_iter = opts.max_iter or 200
  local xtol, ftol, gtol = opts.xtol or 1e-10, opts.ftol or 1e-12, opts.gtol or 1e-12
  local p = {}
  for a = 1, n do p[a] = p0[a] end
  local r, J = problem.linearize(p)
  local m = #r
  local cost, A, g = normal_equations(n, r, J)
  local lambda = 1e-3
  local iter, converged = 0, false
  local function small_gradient()
    local mg = 0
    for a = 1, n do mg = math.max(mg, abs(g[a])) end
    return mg <= gtol
  end
  converged = cost == 0 or small_gradient()
  while not converged and iter < max_iter do
    iter = iter + 1
    local D = {}
    local maxdiag = 0
    for a = 1, n do maxdiag = math.max(maxdiag, A[a][a]) end
    for a = 1, n do
      D[a] = {}
      for c = 1, n do D[a][c] = A[a][c] end
      -- A parameter the data cannot see (zero column) still gets damped.
      D[a][a] = A[a][a] + lambda * math.max(A[a][a], 1e-12 * maxdiag, 1e-300)
    end
    local delta = M.solve(D, g)
    local pnorm, dnorm = 0, 0
    local pn
    if delta then
      pn = {}
      for a = 1, n do pn[a] = p[a] + delta[a] end
      -- a bounded problem steps to the nearest allowed point
      if problem.project then pn = problem.project(pn) end
      for a = 1, n do
        local d = problem.project and pn[a] - p[a] or delta[a]
        pnorm = pnorm + p[a] * p[a]
        dnorm = dnorm + d * d
      end
      pnorm, dnorm = math.sqrt(pnorm), math.sqrt(dnorm)
    end
    local rn = pn and problem.residuals(pn)
    local cn = rn and half_sum_squares(rn)
    if cn and cn < cost then
      local rel = (cost - cn) / cost
      p = pn
      r, J = problem.linearize(p)
      cost, A, g = normal_equations(n, r, J)
      lambda = math.max(lambda / 3, 1e-15)
      converged = cost == 0 or rel <= ftol or dnorm <= xtol * (pnorm + xtol)
        or small_gradient()
    else
      -- A step too short to change p in floating point that still does not
      -- lower the cost: p is a minimum to working precision.
      if delta and dnorm <= xtol * (pnorm + xtol) then
        converged = true
      else
        lambda = lambda * 4
        if lambda > 1e20 then break end
      end
    end
  end
  local info = {cost = cost, iterations = iter, converged = converged, A = A, g = g, m = m,
                r = r, p = p}
  if not converged then
    return nil, ("fit did not converge after %d iterations (cost %.6g)"):format(iter, cost), info
  end
  return p, info
end

-- Two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom
-- (beyond: the normal 1.960).
local T975 = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
              2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
              2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

-- Half-widths of the 95 % confidence intervals of the parameters of a
-- converged fit (info from minimize): t · √(s² · (JᵀJ)⁻¹_aa) with
-- s² = 2·cost / (m − n), over the parameters the data determine. A
-- parameter whose column of J is zero (the points do not move with it) has
-- no interval: its entry is false. nil and why when there are no degrees of
-- freedom left or the determined parameters are still dependent.
function M.confidence(info, n)
  local dof = info.m - n
  if dof < 1 then
    return nil, ("%d points for %d parameters leave no degree of freedom"):format(info.m, n)
  end
  local A, maxdiag = info.A, 0
  for a = 1, n do maxdiag = math.max(maxdiag, A[a][a]) end
  local idx = {}
  for a = 1, n do if A[a][a] > 1e-12 * maxdiag and A[a][a] > 0 then idx[#idx + 1] = a end end
  if #idx == 0 then return nil, "the points do not move with any parameter" end
  local sub = {}
  for i, a in ipairs(idx) do
    sub[i] = {}
    for j, c in ipairs(idx) do sub[i][j] = A[a][c] end
  end
  local inv = M.inverse(sub)
  if not inv then return nil, "the points do not tell the parameters apart (JᵀJ is singular)" end
  local s2 = 2 * info.cost / dof
  local t = T975[dof] or 1.960
  local half = {}
  for a = 1, n do half[a] = false end
  for i, a in ipairs(idx) do half[a] = t * math.sqrt(math.max(s2 * inv[i][i], 0)) end
  return half
end

return M
