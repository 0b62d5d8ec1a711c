#!/bin/sh
# binary_chunks.sh KBSIM WORKDIR — kbsim loads Lua source only: a precompiled
# chunk as the script, as a module (require, in the script and in a sweep
# point) or through load/loadfile/dofile gets an error naming the file,
# never a crash (Lua does not verify bytecode; mutated .luac files crashed
# kbsim when it loaded them)
set -u
kbsim=$1 work=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work/mods" || fail "cannot make $work"
cd "$work" || fail "cannot enter $work"

# the chunks, dumped by a plain source script
cat > dump.lua <<'LUA'
local function dump(path, src)
  local f = assert(io.open(path, "wb"))
  f:write(string.dump(assert(load(src))))
  f:close()
end
dump("main.luac", "print('ran binary main')")
dump("mods/binmod.lua", "return {answer = 42}")
LUA
"$kbsim" dump.lua > dump.log 2>&1 || { cat dump.log; fail "dumping the chunks"; }
head -c 4 main.luac | od -c | grep -q 'L   u   a' || fail "main.luac is not a binary chunk"

# 1. as the main script
"$kbsim" main.luac > main.log 2>&1
rc=$?
[ "$rc" -eq 2 ] || { cat main.log; fail "binary main script: exit $rc, want 2"; }
grep -qF "kbsim: main.luac: a precompiled (binary) chunk; kbsim loads Lua source only" main.log \
  || { cat main.log; fail "binary main script: no message naming the file"; }
grep -q "ran binary main" main.log && fail "the binary main script ran"

# 2. through require, load, loadfile and dofile, and require in a sweep point
cat > loaders.lua <<'LUA'
local kb = require("kbsim")
package.path = "mods/?.lua;" .. package.path
local want = "a precompiled (binary) chunk; kbsim loads Lua source only"
local ok, err = pcall(require, "binmod")
kb.check(not ok and err:find("error loading module 'binmod' from file 'mods/binmod.lua'", 1, true)
         and err:find("mods/binmod.lua: " .. want, 1, true), "require: " .. tostring(err))
local f, msg = loadfile("main.luac")
kb.check(f == nil and msg == "main.luac: " .. want, "loadfile: " .. tostring(msg))
f, msg = loadfile("main.luac", "b")
kb.check(f == nil and msg == "main.luac: " .. want, "loadfile mode b: " .. tostring(msg))
ok, err = pcall(dofile, "main.luac")
kb.check(not ok and err == "main.luac: " .. want, "dofile: " .. tostring(err))
f, msg = load(string.dump(function() return 1 end), "=dumped", "bt")
kb.check(f == nil and msg == "load: " .. want, "load: " .. tostring(msg))
-- source still loads, with its env, through every one of them
kb.check(load("return x", "=src", "t", {x = 7})() == 7, "load of source with an env")
kb.check(loadfile("mods/src.lua", "bt", {y = 8})() == 8, "loadfile of source with an env")
kb.check(dofile("mods/src.lua") == nil, "dofile of source")
local rows = kb.sweep{name = "binmod", points = {{p = 1}}, run = function()
  package.path = "mods/?.lua;" .. package.path
  local okp, errp = pcall(require, "binmod")
  return {ok = okp, named = tostring(errp):find("mods/binmod.lua: " .. want, 1, true) ~= nil}
end}
kb.check(rows[1].ok == false and rows[1].named, "require of a binary module in a sweep point")
print("loaders ok")
LUA
echo "return y" > mods/src.lua
"$kbsim" -q -j 1 loaders.lua > loaders.log 2>&1 || { cat loaders.log; fail "loaders.lua"; }
grep -q "loaders ok" loaders.log || { cat loaders.log; fail "loaders.lua did not finish"; }
echo "binary_chunks ok"
