--[[
  Short name of redis.call, for every script and include that calls Redis.
]]
local rcall = redis.call
