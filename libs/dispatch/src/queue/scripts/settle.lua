--[[
  Takes a job out of Redis wherever its admission put it, when the origin does not know where that is
  (a reply lost or late: docs/architecture.md, "Leftovers"): out of any candidate's line or its
  client's parked set (and the siblings' `wanted` sets), or, if it became a lease on any candidate,
  the lease is dropped (its client's count with it) and its slot handed on. Idempotent: a second run
  finds nothing.

  KEYS[1]       seq            `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]       base           key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]       ttlMs          lease lifetime of a grant made here, ms
  ARGV[3]       channelPrefix  grant channels, `<prefix>:grant:`
  ARGV[4]       jobId          the job to take out
  ARGV[5..]     qnames         queue names of every candidate of its admission

  Reply: {'left'} it was waiting | {'released'} it was a lease | {'gone'} nothing of it was left
]]
--- @include "includes/rcall"
--- @include "includes/args"
--- @include "includes/now-ms"
--- @include "includes/drop-lease"
--- @include "includes/drop-waiter"
--- @include "includes/promote"

local base, ttl, channelPrefix, jobId = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local qnames = sliceArgs(ARGV, 5)

local outcome = 'gone'
local now = nowMs()
for _, qname in ipairs(qnames) do
  local left, back = dropWaiter(base, qname, jobId)
  if left == 1 then
    outcome = 'left'
    promoteAll(base, back, now, ttl, channelPrefix)
  end
  -- A place in a sibling's `wanted` set whose job hash is gone already (dropWaiter unwants only by `cands`).
  for _, other in ipairs(qnames) do rcall('ZREM', base .. ':' .. other .. ':wanted', qname .. '|' .. jobId) end
end
for _, qname in ipairs(qnames) do
  local n, back = dropLease(base, qname, jobId)
  if n == 1 then
    outcome = 'released'
    promote(base, qname, now, ttl, channelPrefix)
    promoteAll(base, back, now, ttl, channelPrefix)
  end
end
rcall('HDEL', base .. ':granted', jobId)
return {outcome}
