--[[
  Fills the free slots of qname (docs/architecture.md, "Admission": work-conserving): its own queue
  first (FIFO), then the oldest sibling waiter that lists it. Grants nothing while the barrier
  stands. Returns the number of grants.
]]
--- @include "rcall"
--- @include "grant"
local function promote(base, qname, now, ttl, channelPrefix)
  if rcall('EXISTS', base .. ':barrier') == 1 then return 0 end
  local q = base .. ':' .. qname .. ':'
  local mc = tonumber(rcall('HGET', q .. 'limits', 'max_concurrency') or '0')
  local active = rcall('LLEN', q .. 'active')
  local granted = 0
  while active < mc do
    local jobId = rcall('RPOP', q .. 'wait')
    local from = qname
    if not jobId then
      local w = rcall('ZRANGE', q .. 'wanted', 0, 0)
      if #w == 0 then break end
      rcall('ZREM', q .. 'wanted', w[1])
      local sep = string.find(w[1], '|', 1, true)
      from = string.sub(w[1], 1, sep - 1)
      jobId = string.sub(w[1], sep + 1)
      if rcall('LREM', base .. ':' .. from .. ':wait', 1, jobId) == 0 then jobId = nil end
    end
    if jobId then
      grant(base, qname, from, jobId, now, ttl, channelPrefix)
      active = active + 1
      granted = granted + 1
    end
  end
  return granted
end
