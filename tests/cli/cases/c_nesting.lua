-- Deep C nesting in a thread process (string.gsub callbacks, sort
-- comparators, pcall, metamethods, load readers, require, coroutines) fits
-- the default stack up to Lua's own limit, which is then an ordinary,
-- catchable "C stack overflow" error, not a crash in the guard page.
local kb = require("kbsim")

local nest
local modules = 0
local via = {
  gsub = function(n) return (string.gsub("a", "a", function() return nest(n - 1) end)) end,
  gsub_table = function(n)
    return (string.gsub("a", "a", setmetatable({}, {__index = function() return nest(n - 1) end})))
  end,
  format = function(n)
    return string.format("%s", setmetatable({}, {__tostring = function() return nest(n - 1) end}))
  end,
  concat = function(n)
    return table.concat(setmetatable({}, {__index = function() return nest(n - 1) end,
                                          __len = function() return 1 end}))
  end,
  sort = function(n)
    local r
    table.sort({2, 1}, function(a, b) r = r or nest(n - 1); return a < b end)
    return r
  end,
  pcall = function(n)
    local ok, r = pcall(nest, n - 1)
    if not ok then error(r, 0) end
    return r
  end,
  metamethod = function(n) return setmetatable({}, {__index = function() return nest(n - 1) end}).x end,
  load = function(n)
    local r, done = nil, false
    local f, e = load(function()
      if done then return nil end
      done = true
      r = nest(n - 1)
      return "return 1"
    end)
    if not f then error(e, 0) end
    return r
  end,
  require = function(n)
    modules = modules + 1
    local name = "nested" .. modules
    package.preload[name] = function() return nest(n - 1) end
    return require(name)
  end,
  coroutine = function(n) return coroutine.wrap(function() return nest(n - 1) end)() end,
  parser = function(n) return assert(load("return " .. ("("):rep(n) .. "'x'" .. (")"):rep(n)))() end,
}
local kinds = {}
for k in pairs(via) do kinds[#kinds + 1] = k end
table.sort(kinds)

local results = {}
local sim <close> = kb.sim{}
for _, kind in ipairs(kinds) do
  sim:spawn(kind, function()
    local f = via[kind]
    nest = function(n) if n <= 0 then return "x" end return f(n) end
    local shallow = nest(150)
    local ok, err = pcall(nest, 300)
    results[kind] = {shallow = shallow, ok = ok, err = tostring(err)}
  end)
end
-- an error handler that nests again at the limit (Lua allows 10% more)
sim:spawn("handler", function()
  local function g(k)
    if k == 0 then return "x" end
    return (string.gsub("a", "a", setmetatable({}, {__index = function() return g(k - 1) end})))
  end
  local ok, err = xpcall(g, function() return g(60) end, 400)
  results.handler = {shallow = "x", ok = ok, err = tostring(err)}
end)
assert(sim:run() == "done")
for _, kind in ipairs(kinds) do
  local r = results[kind]
  assert(r and r.shallow == "x", kind .. ": 150 levels did not finish")
  assert(not r.ok and r.err:find("stack overflow", 1, true), kind .. ": " .. r.err:sub(1, 200))
end
assert(not results.handler.ok, "the handler's nesting was not stopped")
print("c_nesting ok: " .. #kinds .. " kinds")
