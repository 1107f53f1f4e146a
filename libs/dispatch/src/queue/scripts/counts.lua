--[[
  The live counts of one tag, read in one atomic step (docs/architecture.md, "Status model"): each
  given provider's leases and waiting jobs, and the tag's clients hash, so that a pool's `queued` and
  its clients' `queued` (parked waiters included) come from the same instant and a pool's `parked`
  (their difference) is exact. Only reads (no write command: the status exporter writes nothing but
  its push lock). Every key it reads is in KEYS, all of one tag (one Redis Cluster slot).

  KEYS[1]      clients  `<base>:clients`: `a|<pool>|<client>` leases, `w|<pool>|<client>` waiting jobs
  KEYS[2..]    queues   per provider, in order: its `active`, `wait` and `prioritized` keys, then its
                        `tokens` key when its ARGV entry is '1'
  ARGV[1..]    tokened  per provider, in the order of KEYS: '1' when its `tokens` key is among KEYS, else ''

  Reply: {'counts', inFlight, queued, [tokensInFlight,] ... one group per provider, then the clients
  hash as field, value, ...}: `inFlight` = LLEN active, `queued` = LLEN wait + ZCARD prioritized,
  `tokensInFlight` = GET tokens (0 when absent) for a tokened provider; whole numbers as text
]]
--- @include "includes/rcall"
--- @include "includes/args"

local clientsKey = KEYS[1]
local queueKeys = sliceArgs(KEYS, 2)
local tokened = sliceArgs(ARGV, 1)

local reply = {'counts'}
local at = 1
for _, withTokens in ipairs(tokened) do
  local active, wait, prioritized = queueKeys[at], queueKeys[at + 1], queueKeys[at + 2]
  reply[#reply + 1] = tostring(rcall('LLEN', active))
  reply[#reply + 1] = tostring(rcall('LLEN', wait) + rcall('ZCARD', prioritized))
  at = at + 3
  if withTokens == '1' then
    reply[#reply + 1] = rcall('GET', queueKeys[at]) or '0'
    at = at + 1
  end
end
for _, v in ipairs(rcall('HGETALL', clientsKey)) do reply[#reply + 1] = v end
return reply
