--[[
  A client's counts in one pool (docs/architecture.md, "Clients, priority and fair share"), in the
  tag's hash `<base>:clients`: field `a|<pool>|<client>` its leases, `w|<pool>|<client>` its waiting
  jobs (parked ones included). Returns the new count. `by` is text ('1', '-1'): Redis formats a number
  argument with `%.17g`, costlier than the HINCRBY.
]]
--- @include "rcall"
local function countClient(base, which, pool, client, by)
  return rcall('HINCRBY', base .. ':clients', which .. '|' .. pool .. '|' .. client, by)
end
-- The count without changing it.
local function clientCount(base, which, pool, client)
  return tonumber(rcall('HGET', base .. ':clients', which .. '|' .. pool .. '|' .. client) or '0')
end
