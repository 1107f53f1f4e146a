--[[
  A waiter leaves its queue (deadline, abort, shutdown). If its job was granted meanwhile, says so,
  so that the origin uses or releases that lease instead of leaking it. A job of its client that was
  parked and takes its room is put back in line and may be granted at once.

  KEYS[1]  seq            `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]  base           key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]  qname          queue the job waits in
  ARGV[3]  jobId          the waiting job's id
  ARGV[4]  ttlMs          lease lifetime of a grant made here, ms
  ARGV[5]  channelPrefix  grant channels, `<prefix>:grant:`

  Reply: {'left'} | {'granted', qname} | {'shed'} (evicted for a higher band: docs/architecture.md,
  "Clients, priority and fair share") | {'gone'} (lost with Redis state)
]]
--- @include "includes/rcall"
--- @include "includes/drop-waiter"
--- @include "includes/promote"

local base, qname, jobId, ttl, channelPrefix = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]

local left, back = dropWaiter(base, qname, jobId)
if left == 1 then
  promoteAll(base, back, nil, ttl, channelPrefix)
  return {'left'}
end
local g = rcall('HGET', base .. ':granted', jobId)
if g then return {'granted', g} end
if rcall('DEL', base .. ':shed:' .. jobId) == 1 then return {'shed'} end
return {'gone'}
