-- vec_max_diff.lua — v:max_abs_diff(w) and v:max_rel_diff(w): the largest difference and the
-- index of its first occurrence; NaN on either side, or inf against inf, an inf difference;
-- relative to |w[i]|, and inf where w[i] = 0 and v[i] is not
local kb = require("kbsim")
local tl = require("kbsim.tl")
local inf, nan = math.huge, 0 / 0
local function same(a, b) return a == b or (a ~= a and b ~= b) end
local function expect(v, w, abs, abs_at, rel, rel_at)
  local x, y = tl.vec_from(v), tl.vec_from(w)
  local d, i = x:max_abs_diff(y)
  kb.check(same(d, abs) and i == abs_at, ("max_abs_diff(%s, %s) = %s at %s, want %s at %s")
    :format(table.concat(v, " "), table.concat(w, " "), d, i, abs, abs_at))
  local r, j = x:max_rel_diff(y)
  kb.check(same(r, rel) and j == rel_at, ("max_rel_diff(%s, %s) = %s at %s, want %s at %s")
    :format(table.concat(v, " "), table.concat(w, " "), r, j, rel, rel_at))
end
expect({1, 2, 3}, {1, 2, 3}, 0, 0, 0, 0)
expect({0, -0.0}, {-0.0, 0}, 0, 0, 0, 0)
expect({1, 2, 3.5, 4}, {1, 2, 3, 4}, 0.5, 2, 0.5 / 3, 2)
expect({1, 5, 3, 9}, {2, 1, 3, 5}, 4, 1, 4, 1)        -- ties: the first
expect({1, 2, 0}, {1, 2, 0}, 0, 0, 0, 0)
expect({1, 2, 1}, {1, 2, 0}, 1, 2, inf, 2)           -- relative to a zero
expect({1, nan, 3}, {1, 2, 3}, inf, 1, inf, 1)
expect({1, 2, nan}, {1, 2, nan}, inf, 2, inf, 2)      -- NaN against NaN
expect({inf, 2}, {inf, 2}, inf, 0, inf, 0)            -- inf - inf is NaN
expect({1, -inf}, {1, 5}, inf, 1, inf, 1)
-- long vectors: one difference anywhere is found, in either operand
local n = 100003
for _, at in ipairs({0, 1, 4096, n - 1}) do
  local a, b = tl.vec_affine(n, 1, 0), tl.vec_affine(n, 1, 0)
  b:set(at, tl.vec_from({at + 0.25}))
  local d, i = a:max_abs_diff(b)
  kb.check(d == 0.25 and i == at, ("long: %s at %s, want 0.25 at %d"):format(d, i, at))
  d, i = tl.vec_affine(n, 1, 0):max_abs_diff(tl.vec_affine(n, 1, 0))
  kb.check(d == 0 and i == 0, ("long, equal: %s at %s"):format(d, i))
end
print("vec_max_diff ok")
