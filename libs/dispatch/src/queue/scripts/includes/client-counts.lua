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
--[[
  A client's max_in_flight in force (docs/architecture.md, "Clients, priority and fair share"): the one
  the last configure wrote for it in the tag's hash `<base>:caps` (field the client id, value its cap
  in leases per pool, '' for none), so that a config reload reaches the jobs already waiting or held;
  else `own`, the cap its job was admitted with (field `cap`: a client configure never named). Returns
  the cap as text, '' or nil for none.
]]
local function capOf(base, client, own)
  local cap = rcall('HGET', base .. ':caps', client)
  if cap then return cap end
  return own
end
-- True when `held` leases reach the cap (text, '' or nil for none; never true without a cap).
local function atCap(cap, held)
  return cap ~= nil and cap ~= '' and held >= tonumber(cap)
end
