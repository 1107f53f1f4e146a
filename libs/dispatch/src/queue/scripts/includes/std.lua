--[[
  The standard functions and libraries the scripts use, as locals (docs/architecture.md, "Lua
  scripts"). A Redis Function sees an empty global table whose metatable `__index` is the real
  globals (Redis's Lua engine for Functions), so every global read misses once and then takes the
  metatable path: a `tonumber` or `string.format` read as a global costs a table miss and an
  `__index` lookup each time. Read here once, at the function's first call, they are upvalues from
  then on. Under `EVALSHA` (no Functions) this runs per call: eight global reads.
]]
local tonumber, tostring, ipairs, unpack = tonumber, tostring, ipairs, unpack
local string, math, table, struct = string, math, table, struct
