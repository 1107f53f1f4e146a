--[[
  Makes a job whose hash is written a lease of the queue at `q` (`<base>:<qname>:`): in_flight + 1,
  expiry now + ttl (ms, Redis time).
]]
--- @include "rcall"
local function addLease(q, jobId, now, ttl)
  rcall('LPUSH', q .. 'active', jobId)
  rcall('ZADD', q .. 'leases', now + ttl, jobId)
end
