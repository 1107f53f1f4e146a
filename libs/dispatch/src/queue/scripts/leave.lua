--[[
  A waiter leaves its queue (deadline, abort, shutdown). If its job was granted meanwhile, says so,
  so that the origin uses or releases that lease instead of leaking it.

  KEYS[1]  seq    `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]  base   key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]  qname  queue the job waits in
  ARGV[3]  jobId  the waiting job's id

  Reply: {'left'} | {'granted', qname} | {'gone'} (lost with Redis state)
]]
--- @include "includes/rcall"
--- @include "includes/drop-waiter"

local base, qname, jobId = ARGV[1], ARGV[2], ARGV[3]

if dropWaiter(base, qname, jobId) == 1 then return {'left'} end
local g = rcall('HGET', base .. ':granted', jobId)
if g then return {'granted', g} end
return {'gone'}
