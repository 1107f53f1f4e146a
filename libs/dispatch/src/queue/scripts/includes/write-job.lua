--[[
  The one write of a job hash, in BullMQ's job layout (`name`, `data`, `opts`, `timestamp`, `delay`,
  `priority`), so that BullMQ's `Queue.getJobCounts()` reads these queues as its own
  (docs/architecture.md, "Lease protocol"). `...` adds field, value pairs: `processedOn` for a
  lease, `seq` and `cands` for a waiting job.
]]
--- @include "rcall"
local function writeJob(key, data, now, ...)
  rcall('HSET', key, 'name', 'lease', 'data', data, 'opts', '{}', 'timestamp', now, 'delay', 0, 'priority', 0, ...)
end
