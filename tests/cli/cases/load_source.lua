-- load_source.lua — kbsim's own load (lua/lload.c) keeps the base library's behaviour: env, reader functions, errors, text only
local f = load("return x", "chunk", "b", {x = 42}); assert(f() == 42)
local parts = {"return ", "1+", "1"}; local i = 0
local g = load(function() i = i + 1; return parts[i] end); assert(g() == 2)
local h, e = load(string.dump(function() end)); assert(h == nil and e:find("precompiled"), e)
local ok, e2 = pcall(load, {}); assert(not ok and e2:find("bad argument #1 to 'load'"), e2)
local k, e3 = load("return +"); assert(k == nil and e3:find("unexpected"), e3)
assert(load("return _ENV", "c", "t", nil)() == nil)
print("load ok")
