--[[
  Parking (docs/architecture.md, "Clients, priority and fair share"): a waiting job whose client holds
  its max_in_flight leases in the pool is kept aside, in its order, in `<base>:parked:<pool>|<client>`
  (member `<qname>|<jobId>`, its score), out of every provider's line, and `<base>:parked` lists the
  clients that have such a set (for the sweep). One lease of the client ending puts its first parked
  job back in line.
]]
--- @include "rcall"
--- @include "unwant"
--- @include "queue-job"
local function parkedKey(base, pool, client)
  return base .. ':parked:' .. pool .. '|' .. client
end
-- Parks a job of qname that is out of qname's `prioritized` set already; its `wanted` places go.
local function park(base, qname, jobId, score, pool, client, cands)
  unwant(base, cands, qname, jobId)
  rcall('ZADD', parkedKey(base, pool, client), score, qname .. '|' .. jobId)
  rcall('SADD', base .. ':parked', pool .. '|' .. client)
end
-- Puts the client's first parked job back in line. Returns the queue names that may grant it, or nil.
local function unpark(base, pool, client)
  local top = rcall('ZPOPMIN', parkedKey(base, pool, client))
  if #top == 0 then return nil end
  local sep = string.find(top[1], '|', 1, true)
  local qname, jobId = string.sub(top[1], 1, sep - 1), string.sub(top[1], sep + 1)
  local cands = rcall('HGET', base .. ':' .. qname .. ':' .. jobId, 'cands')
  queueJob(base, qname, jobId, top[2], cands)
  local names = split(cands)
  if #names == 0 then names = {qname} end
  return names
end
