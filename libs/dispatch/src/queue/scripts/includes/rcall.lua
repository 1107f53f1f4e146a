--[[
  Short name of redis.call, for every script and include that calls Redis.
]]
--- @include "std"
local rcall = redis.call
