#!/bin/sh
# readme.sh KBSIM SRCDIR WORKDIR — runs the README's Lua example as written
set -u
mkdir -p "$3"
awk '/^## Writing your own/{w=1} w&&/^```lua/{p=1;next} p&&/^```/{exit} p' "$2/README.md" > "$3/readme_example.lua"
[ -s "$3/readme_example.lua" ] || { echo "FAIL: no Lua example under '## Writing your own'"; exit 1; }
cd "$3" && "$1" readme_example.lua && echo "readme example ok"
