-- kb.params refuses a bad declaration at the script's kb.params line:
-- a default of the wrong type, below its min, outside its choices, a min
-- on a string, choices on an integer. Each is caught and its text checked.
local kb = require("kbsim")

local cases = {
  {{n = {default = "3", type = "integer", help = "h"}}, "parameter 'n': default 3 is not of type integer"},
  {{n = {default = 2.5, type = "integer", help = "h"}}, "parameter 'n': default 2.5 is not of type integer"},
  {{n = {default = 0, type = "integer", min = 1, help = "h"}}, "parameter 'n': default 0 is below min 1"},
  {{s = {default = {1, "x"}, type = "integer", list = true, help = "h"}}, "parameter 's': default x is not of type integer"},
  {{s = {default = 4, type = "integer", list = true, help = "h"}}, "parameter 's': a list's default is a non-empty list"},
  {{a = {default = "fft", type = "string", choices = {"ring", "tree"}, help = "h"}}, "parameter 'a': default fft is not one of the choices"},
  {{a = {default = "x", type = "string", min = 1, help = "h"}}, "parameter 'a': min needs a number and a numeric type"},
  {{n = {default = 1, type = "integer", choices = {"1"}, help = "h"}}, "parameter 'n': choices needs a list of strings and type string"},
  {{q = {default = "yes", type = "boolean", help = "h"}}, "parameter 'q': default yes is not of type boolean"},
  -- a misspelt field or option would be ignored; a non-string name broke the library
  {{n = {default = 1, type = "integer", mni = 1, help = "h"}},
   "parameter 'n': unknown field 'mni' (fields: choices, default, help, list, min, type)"},
  {{n = {default = 1, type = "integer", help = "h"}}, "unknown option 'abuot' (options: about, check, grid_only, refuse_topology)",
   {abuot = "x"}},
  {{n = {default = 1, type = "integer", help = "h"}, [1] = {default = 1, help = "h"}},
   "parameter names are strings, got the number 1"},
}
for i, c in ipairs(cases) do
  local ok, err = pcall(kb.params, c[1], c[3])
  assert(not ok, "case " .. i .. " was accepted")
  assert(err:find("kb.params: " .. c[2]:gsub("%p", "%%%0")),
         "case " .. i .. ": " .. err)
end
-- a good declaration still passes
local p = kb.params({x = {default = 1.5, type = "number", min = 0, help = "h"}})
assert(p.x == 1.5)
print("params_spec ok")
