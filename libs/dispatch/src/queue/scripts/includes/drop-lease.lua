--[[
  Ends a lease of qname: out of `leases` and `active`, its job hash and its `granted` entry deleted.
  When the lease was still in `leases`, its client's lease count goes down in the same step (so the
  count ends with the lease on every path: release, fencing, sweep, reaper, settle), and when that
  brings the client under its max_in_flight its first parked job is back in line.
  A lease of a solo job (the fleet's only client: field `solo`) joined no count; `solo` true says so
  before the hash is read (the caller knows it), and spares that read. `confirmed` true: the lease
  has no `granted` entry (its origin holds it: granted at once, or its grant confirmed).
  The tokens the lease holds (`tp` + `tc`, docs/architecture.md, "Token limits") go back to the
  provider's token count with it; `tokened` true says a solo lease may hold some (its job had a
  weight, or its client has a token budget), so its hash is read all the same (a solo job without
  either spares that read).
  A lease that reserved in its client's token budget (`tb`, docs/architecture.md, "Token budgets")
  settles it with the lease: `charge` the tokens used (-1: the reservation as it stands; nil: given
  back whole, for a lease nobody released: a dead replica's, an expired one, a leftover settled).
  Returns 1 when the lease was still in `leases`, else 0 (it had expired and been swept), and the
  queue names that may grant the job put back in line (nil when none).
]]
--- @include "rcall"
--- @include "client-counts"
--- @include "park"
--- @include "budget-settle"
local function dropLease(base, qname, jobId, solo, confirmed, tokened, charge)
  local q = base .. ':' .. qname .. ':'
  local job = {}
  if not solo or tokened then job = rcall('HMGET', q .. jobId, 'cl', 'pool', 'cap', 'solo', 'tp', 'tc', 'tb') end
  local n = rcall('ZREM', q .. 'leases', jobId)
  rcall('LREM', q .. 'active', '1', jobId)
  rcall('DEL', q .. jobId)
  if not confirmed then rcall('HDEL', base .. ':granted', jobId) end
  if n == 1 and job[6] then
    local held = (tonumber(job[5]) or 0) + tonumber(job[6])
    if held > 0 then rcall('DECRBY', q .. 'tokens', held) end
  end
  if n == 1 and job[7] and job[1] then budgetSettle(base, job[1], job[7], charge or 0) end
  if n == 0 or solo or not job[1] or job[4] then return n, nil end
  local held = countClient(base, 'a', job[2], job[1], '-1')
  -- The cap in force is read only for a lease admitted under a cap: a client without one costs nothing.
  local cap = job[3]
  if cap and cap ~= '' then cap = capOf(base, job[1], cap) end
  if cap and cap ~= '' and held < cap + 0 then return n, unpark(base, job[2], job[1]) end
  return n, nil
end
