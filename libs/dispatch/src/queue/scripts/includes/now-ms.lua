--[[
  Redis server time in ms (TIME): the clock of every lease expiry, whatever the replicas' clocks say.
]]
--- @include "rcall"
local function nowMs()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
