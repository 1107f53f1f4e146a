--[[
  Ends a lease of qname: out of `leases` and `active`, its job hash and its `granted` entry deleted.
  Returns 1 when the lease was still in `leases`, else 0 (it had expired and been swept).
]]
--- @include "rcall"
local function dropLease(base, qname, jobId)
  local q = base .. ':' .. qname .. ':'
  local n = rcall('ZREM', q .. 'leases', jobId)
  rcall('LREM', q .. 'active', 1, jobId)
  rcall('DEL', q .. jobId)
  rcall('HDEL', base .. ':granted', jobId)
  return n
end
