--[[
  The one write of a job hash, in BullMQ's job layout (`name`, `data`, `opts`, `timestamp`, `delay`,
  `priority`), so that BullMQ's `Queue.getJobCounts()` reads these queues as its own
  (docs/architecture.md, "Lease protocol"). `priority` is BullMQ's priority: the band's rank for a
  waiting job (its score's high part), 0 for a lease granted at once. `...` adds field, value pairs:
  `processedOn` for a lease; the client (`cl`, `pool`, `cap`), and for a waiting job `band`, `st`
  (its start tag) and `cands`.
]]
--- @include "rcall"
local function writeJob(key, data, now, priority, ...)
  rcall('HSET', key, 'name', 'lease', 'data', data, 'opts', '{}', 'timestamp', now, 'delay', '0', 'priority', priority, ...)
end
