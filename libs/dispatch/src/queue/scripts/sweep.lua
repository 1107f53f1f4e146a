--[[
  Frees what nobody holds any more, then fills the freed slots:
  - every lease and waiting job (in line or parked at its client's cap) of replicas that died (no
    connection left and liveness expired, docs/architecture.md, "Dead replicas");
  - every lease whose expiry passed more than graceMs ago (Redis time), whoever it names, except
    the leases of stalled replicas (liveness expired, connections still open): a live holder renews
    long before expiry and fences itself before it, so such a lease is one nobody holds
    (docs/architecture.md, "Expired leases").

  KEYS[1]                 seq              `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]                 base             key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]                 ttlMs            lease lifetime of a grant made here, ms
  ARGV[3]                 channelPrefix    grant channels, `<prefix>:grant:`
  ARGV[4]                 graceMs          how long past its expiry a lease is reaped, ms
  ARGV[5]                 nDead            number of dead replicas
  ARGV[6..5+nDead]        deadReplicaIds   ids of the dead replicas
  ARGV[6+nDead]           nStalled         number of stalled replicas
  ARGV[7+nDead..6+nDead+nStalled]  stalledReplicaIds  ids of the stalled replicas (their leases stay)
  ARGV[7+nDead+nStalled..]         qnames  queues to sweep

  Reply: {'swept', removed, reaped, nextMs} (decimal: leases and waiting jobs of dead replicas
  removed; expired leases reaped; ms from now until a lease here can next be reaped: the earliest
  expiry not yet past graceMs, or now + ttlMs for leases granted later, plus graceMs)
]]
--- @include "includes/rcall"
--- @include "includes/args"
--- @include "includes/now-ms"
--- @include "includes/owner-of"
--- @include "includes/drop-lease"
--- @include "includes/drop-waiter"
--- @include "includes/promote"

local base, ttl, channelPrefix, graceMs = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local nDead = tonumber(ARGV[5])
local deadReplicaIds = sliceArgs(ARGV, 6, 5 + nDead)
local nStalled = tonumber(ARGV[6 + nDead])
local stalledReplicaIds = sliceArgs(ARGV, 7 + nDead, 6 + nDead + nStalled)
local qnames = sliceArgs(ARGV, 7 + nDead + nStalled)

local dead, stalled = {}, {}
for _, id in ipairs(deadReplicaIds) do dead[id] = true end
for _, id in ipairs(stalledReplicaIds) do stalled[id] = true end
local now = nowMs()
local removed, reaped = 0, 0
local nextExpiry = now + ttl
if nDead > 0 then
  -- First the jobs of dead replicas parked at their client's cap, so that the room a dropped lease or
  -- waiter passes on goes to a live one (docs/architecture.md, "Clients, priority and fair share").
  for _, owner in ipairs(rcall('SMEMBERS', base .. ':parked')) do
    for _, member in ipairs(rcall('ZRANGE', base .. ':parked:' .. owner, 0, -1)) do
      local sep = string.find(member, '|', 1, true)
      local qname, jobId = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
      if dead[ownerOf(jobId) or ''] then removed = removed + dropWaiter(base, qname, jobId) end
    end
  end
end
for _, qname in ipairs(qnames) do
  local q = base .. ':' .. qname .. ':'
  if nDead > 0 then
    for _, jobId in ipairs(rcall('ZRANGE', q .. 'leases', 0, -1)) do
      if dead[ownerOf(jobId) or ''] then removed = removed + dropLease(base, qname, jobId) end
    end
    for _, jobId in ipairs(rcall('ZRANGE', q .. 'prioritized', 0, -1)) do
      if dead[ownerOf(jobId) or ''] then removed = removed + dropWaiter(base, qname, jobId) end
    end
  end
  for _, jobId in ipairs(rcall('ZRANGEBYSCORE', q .. 'leases', '-inf', '(' .. (now - graceMs))) do
    if not stalled[ownerOf(jobId) or ''] then reaped = reaped + dropLease(base, qname, jobId) end
  end
  local first = rcall('ZRANGEBYSCORE', q .. 'leases', now - graceMs, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if first[2] and tonumber(first[2]) < nextExpiry then nextExpiry = tonumber(first[2]) end
end
if removed + reaped > 0 then
  -- Unparked jobs wait on these queues too: a freed slot and a client back under its cap meet here.
  for _, qname in ipairs(qnames) do promote(base, qname, now, ttl, channelPrefix) end
end
return {'swept', tostring(removed), tostring(reaped), tostring(math.max(0, nextExpiry - now) + graceMs)}
