--[[
  Makes a job whose hash is written a lease of the queue at `q` (`<base>:<qname>:`): in_flight + 1,
  expiry now + ttl (ms, Redis time; ttl a number or its text). The expiry is a whole number written
  with `%d`, cheaper than Redis's `%.17g` of a number argument.
]]
--- @include "rcall"
local function addLease(q, jobId, now, ttl)
  rcall('LPUSH', q .. 'active', jobId)
  rcall('ZADD', q .. 'leases', string.format('%d', now + ttl), jobId)
end
-- A lease of a provider with a token limit takes `tokens` (> 0) of it (docs/architecture.md, "Token limits").
local function addTokens(q, tokens)
  if tokens > 0 then rcall('INCRBY', q .. 'tokens', tokens) end
end
