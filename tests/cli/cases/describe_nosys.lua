-- describe_nosys.lua — a script that makes no system, for kbsim --describe
print("no system here")
