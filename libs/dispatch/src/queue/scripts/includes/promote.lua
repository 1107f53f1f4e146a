--[[
  Fills the free slots of qname (docs/architecture.md, "Admission" and "Clients, priority and fair
  share"): each goes to the lowest score among its own `prioritized` set and its `wanted` set (every
  waiter that lists it, in one order: band, fair-share tag), the own queue first on a tie. A waiter
  whose client holds its max_in_flight leases is parked instead and the next one is tried. Grants
  nothing while the barrier stands. `now` (Redis ms) is read when the first grant needs it if nil.
  `freed`: the caller just ended a lease of qname, so a slot is most likely free: the head of the own
  line is taken out at once rather than looked at first. Returns the number of grants.
]]
--- @include "rcall"
--- @include "now-ms"
--- @include "grant"
--- @include "client-counts"
--- @include "park"
local function promote(base, qname, now, ttl, channelPrefix, freed)
  local q = base .. ':' .. qname .. ':'
  local mc, active
  local granted = 0
  while mc == nil or active < mc do
    -- With no sibling's waiter listing qname and a slot known (or, `freed`, most likely) free, the own
    -- line's head is taken out at once (one command, not a look and a ZREM); it is put back, score
    -- unchanged, if no slot can be granted after all.
    local want = rcall('ZRANGE', q .. 'wanted', 0, 0, 'WITHSCORES')
    local popped = #want == 0 and (mc ~= nil or freed == true)
    local own
    if popped then
      own = rcall('ZPOPMIN', q .. 'prioritized')
    else
      own = rcall('ZRANGE', q .. 'prioritized', 0, 0, 'WITHSCORES')
    end
    if #own == 0 and #want == 0 then break end
    if mc == nil then
      local full = rcall('EXISTS', base .. ':barrier') == 1
      if not full then
        mc = tonumber(rcall('HGET', q .. 'limits', 'max_concurrency') or '0')
        active = rcall('LLEN', q .. 'active')
        full = active >= mc
      end
      if full then
        if popped then rcall('ZADD', q .. 'prioritized', own[2], own[1]) end
        break
      end
    end
    local from, jobId, score, inLine = qname, own[1], own[2], popped
    if #own == 0 or (#want > 0 and tonumber(want[2]) < tonumber(own[2])) then
      local sep = string.find(want[1], '|', 1, true)
      from, jobId, score = string.sub(want[1], 1, sep - 1), string.sub(want[1], sep + 1), want[2]
      rcall('ZREM', q .. 'wanted', want[1])
    end
    local job = rcall('HMGET', base .. ':' .. from .. ':' .. jobId, 'cands', 'cl', 'pool', 'cap', 'band', 'st', 'solo')
    if inLine or rcall('ZREM', base .. ':' .. from .. ':prioritized', jobId) == 1 then
      if job[4] and job[4] ~= '' and clientCount(base, 'a', job[3], job[2]) >= tonumber(job[4]) then
        park(base, from, jobId, score, job[3], job[2], job[1])
      else
        now = now or nowMs()
        grant(base, qname, from, jobId, job, now, ttl, channelPrefix)
        active = active + 1
        granted = granted + 1
      end
    end
  end
  return granted
end
-- promote for every queue of `qnames` (nil: none).
local function promoteAll(base, qnames, now, ttl, channelPrefix)
  for _, qname in ipairs(qnames or {}) do promote(base, qname, now, ttl, channelPrefix) end
end
