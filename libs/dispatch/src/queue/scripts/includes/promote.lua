--[[
  Fills the free slots of qname (docs/architecture.md, "Admission" and "Clients, priority and fair
  share"): each goes to the lowest score among its own `prioritized` set and its `wanted` set (every
  waiter that lists it, in one order: band, fair-share tag), the own queue first on a tie. A waiter
  whose client holds its max_in_flight leases is parked instead and the next one is tried. Grants
  nothing while the barrier stands. `now` (Redis ms) is read when the first grant needs it if nil.
  `freed`: the caller just ended a lease of qname, so a slot is most likely free: the head of the own
  line is taken out at once rather than looked at first. Returns the number of grants.
  Token limits (docs/architecture.md, "Token limits"): on a provider with `max_tokens`, a first waiter
  whose weight does not fit the tokens held stops the grants, left in its place: no later waiter
  passes it, and the next release or prefill of the provider tries again.
]]
--- @include "rcall"
--- @include "now-ms"
--- @include "grant"
--- @include "client-counts"
--- @include "park"
--- @include "tokens"
local function promote(base, qname, now, ttl, channelPrefix, freed)
  local q = base .. ':' .. qname .. ':'
  local mc, active, mt, dc, held
  local granted = 0
  -- After a release, nothing waiting for qname is the common case: its line and its `wanted` set both
  -- empty (Redis deletes an empty set) is one command, not the loop's two reads.
  if freed and rcall('EXISTS', q .. 'wanted', q .. 'prioritized') == 0 then return 0 end
  while mc == nil or active < mc do
    -- With no sibling's waiter listing qname and a slot known (or, `freed`, most likely) free, the own
    -- line's head is taken out at once (one command, not a look and a ZREM); it is put back, score
    -- unchanged, if no slot can be granted after all.
    local want = rcall('ZRANGE', q .. 'wanted', '0', '0', 'WITHSCORES')
    local popped = #want == 0 and (mc ~= nil or freed == true)
    local own
    if popped then
      own = rcall('ZPOPMIN', q .. 'prioritized')
    else
      own = rcall('ZRANGE', q .. 'prioritized', '0', '0', 'WITHSCORES')
    end
    if #own == 0 and #want == 0 then break end
    if mc == nil then
      local full = rcall('EXISTS', base .. ':barrier') == 1
      if not full then
        local l = rcall('HMGET', q .. 'limits', 'max_concurrency', 'max_tokens', 'default_completion')
        mc, mt, dc = tonumber(l[1] or '0'), tonumber(l[2] or ''), tonumber(l[3] or '0')
        active = rcall('LLEN', q .. 'active')
        full = active >= mc
        if mt and not full then held = tokensHeld(q) end
      end
      if full then
        if popped then rcall('ZADD', q .. 'prioritized', own[2], own[1]) end
        break
      end
    end
    local from, jobId, score, inLine = qname, own[1], own[2], popped
    local wanted = #own == 0 or (#want > 0 and tonumber(want[2]) < tonumber(own[2]))
    if wanted then
      local sep = string.find(want[1], '|', 1, true)
      from, jobId, score = string.sub(want[1], 1, sep - 1), string.sub(want[1], sep + 1), want[2]
      rcall('ZREM', q .. 'wanted', want[1])
    end
    local job = rcall('HMGET', base .. ':' .. from .. ':' .. jobId,
      'cands', 'cl', 'pool', 'cap', 'band', 'st', 'solo', 'tp', 'tq', 'tn')
    -- The cap in force, not the job's own: a reload that raised or removed it reaches waiting jobs.
    local capped = job[2] ~= nil and not job[7] and atCap(capOf(base, job[2], job[4]), clientCount(base, 'a', job[3], job[2]))
    local tc = nil
    if mt and job[2] and job[8] and not capped then
      tc = completionOf(job[9], dc, job[10])
      if not fitsTokens(held, tonumber(job[8]) + tc, mt) then
        if popped then rcall('ZADD', q .. 'prioritized', own[2], own[1]) end
        if wanted then rcall('ZADD', q .. 'wanted', want[2], want[1]) end
        break
      end
    end
    if inLine or rcall('ZREM', base .. ':' .. from .. ':prioritized', jobId) == 1 then
      if capped then
        park(base, from, jobId, score, job[3], job[2], job[1])
      else
        now = now or nowMs()
        grant(base, qname, from, jobId, job, now, ttl, channelPrefix, tc)
        active = active + 1
        granted = granted + 1
        if tc then held = held + tonumber(job[8]) + tc end
      end
    end
  end
  return granted
end
-- promote for every queue of `qnames` (nil: none).
local function promoteAll(base, qnames, now, ttl, channelPrefix)
  for _, qname in ipairs(qnames or {}) do promote(base, qname, now, ttl, channelPrefix) end
end
