-- hello_notrace.lua — a script that creates no simulation (tests/cli/trace.sh)
print("no simulation here")
