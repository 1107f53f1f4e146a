--[[
  Redis server time in ms (TIME): the clock of every lease expiry, whatever the replicas' clocks say.
  Returns it as a number and as its decimal text (`<seconds><3 digits of ms>`, built from TIME's
  texts), so that a script writing it into a command passes the text: Redis formats a number
  argument with `%.17g`, and a number read takes a `strtod`, each costlier than the command's own work.
]]
--- @include "rcall"
local function nowMs()
  local t = rcall('TIME')
  local text = t[1] .. string.sub('00000' .. t[2], -6, -4)
  return text + 0, text
end
