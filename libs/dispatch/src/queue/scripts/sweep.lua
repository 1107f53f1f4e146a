--[[
  Frees every lease and waiting job of replicas that died (no connection left and liveness expired,
  docs/architecture.md, "Dead replicas"), then fills the freed slots.

  KEYS[1]            seq             `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]            base            key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]            ttlMs           lease lifetime of a grant made here, ms
  ARGV[3]            channelPrefix   grant channels, `<prefix>:grant:`
  ARGV[4]            nDead           number of dead replicas
  ARGV[5..4+nDead]   deadReplicaIds  ids of the dead replicas
  ARGV[5+nDead..]    qnames          queues to sweep

  Reply: {'swept', removed} (leases and waiting jobs removed, decimal)
]]
--- @include "includes/rcall"
--- @include "includes/args"
--- @include "includes/now-ms"
--- @include "includes/owner-of"
--- @include "includes/drop-lease"
--- @include "includes/drop-waiter"
--- @include "includes/promote"

local base, ttl, channelPrefix, nDead = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local deadReplicaIds = sliceArgs(ARGV, 5, 4 + nDead)
local qnames = sliceArgs(ARGV, 5 + nDead)

local dead = {}
for _, id in ipairs(deadReplicaIds) do dead[id] = true end
local now = nowMs()
local removed = 0
for _, qname in ipairs(qnames) do
  local q = base .. ':' .. qname .. ':'
  for _, jobId in ipairs(rcall('ZRANGE', q .. 'leases', 0, -1)) do
    if dead[ownerOf(jobId) or ''] then removed = removed + dropLease(base, qname, jobId) end
  end
  for _, jobId in ipairs(rcall('LRANGE', q .. 'wait', 0, -1)) do
    if dead[ownerOf(jobId) or ''] then removed = removed + dropWaiter(base, qname, jobId) end
  end
end
for _, qname in ipairs(qnames) do promote(base, qname, now, ttl, channelPrefix) end
return {'swept', tostring(removed)}
