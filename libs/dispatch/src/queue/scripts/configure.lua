--[[
  Writes the limits admission decides on and the clients' caps, and fills slots a raised limit or cap
  freed. When some provider had no limits (a new deployment, or Redis lost its state) and
  barrierMs > 0, raises the barrier before anything is granted (docs/architecture.md, "Redis
  restarts"). A reload reaches the jobs already waiting (docs/architecture.md, "Clients, priority and
  fair share"): the caps go to `<base>:caps` (field the client id, value its max_in_flight, '' for
  none), which every script reads in place of a job's own `cap`; then each client now under its cap
  gets as many parked jobs back in line as it has room (all of them without a cap), and every queue
  here is promoted, so the room a raised or removed cap made is granted at once, whichever replica's
  jobs wait (each grant goes to its origin's channel). A lowered cap ends no lease: it only parks.

  KEYS[1]    seq            `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]    base           key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]    ttlMs          lease lifetime of a grant made here, ms
  ARGV[3]    channelPrefix  grant channels, `<prefix>:grant:`
  ARGV[4]    barrierMs      lifetime of a barrier raised here, ms (0: none)
  ARGV[5]    nClients       number of client pairs that follow; '' leaves `<base>:caps` as it is
  ARGV[6..5+2*nClients]     clientId, maxInFlight pairs ('' for no cap): every configured client; the
                            caps of clients left out are forgotten (their jobs keep their own `cap`)
  ARGV[6+2*nClients..]      limits: qname, max_concurrency, max_queued, max_tokens, default_completion
                            quintuples (max_tokens '' for no token limit; default_completion in tokens)

  Every key is built from ARGV[1], as in every lease script (`lease-scripts.ts`): the tag's `caps`,
  `clients`, `parked`, `parked:<pool>|<client>`, `barrier` and `fair` keys, and each queue's keys and
  job hashes; all share the tag's slot.

  Reply: {'configured'} every provider had limits | {'unconfigured'} some had none
]]
--- @include "includes/rcall"
--- @include "includes/args"
--- @include "includes/now-ms"
--- @include "includes/promote"

local base, ttl, channelPrefix, barrierMs = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
-- '' when the caller names no clients: the caps in force stay as the last call wrote them.
local clientsNamed = ARGV[5] ~= ''
local nClients = tonumber(ARGV[5]) or 0
local caps = groupArgs(sliceArgs(ARGV, 6, 5 + 2 * nClients), 1, 2)
local limits = groupArgs(ARGV, 6 + 2 * nClients, 5)

if clientsNamed then
  rcall('DEL', base .. ':caps')
  for _, c in ipairs(caps) do rcall('HSET', base .. ':caps', c[1], c[2]) end
end

local missing = false
for _, l in ipairs(limits) do
  local q = base .. ':' .. l[1] .. ':'
  if rcall('EXISTS', q .. 'limits') == 0 then missing = true end
  rcall('HSET', q .. 'limits', 'max_concurrency', l[2], 'max_queued', l[3],
    'max_tokens', l[4], 'default_completion', l[5])
end
if missing and barrierMs > 0 then rcall('SET', base .. ':barrier', '1', 'PX', barrierMs, 'NX') end
local now = nowMs()
-- Parked jobs of clients with room under the cap in force come back in line; promote grants them or
-- parks them again (a client at its cap, or no free slot: they wait in line for the next one).
local back = {}
if clientsNamed then
  for _, owner in ipairs(rcall('SMEMBERS', base .. ':parked')) do
    local sep = string.find(owner, '|', 1, true)
    local pool, client = string.sub(owner, 1, sep - 1), string.sub(owner, sep + 1)
    local first = rcall('ZRANGE', parkedKey(base, pool, client), 0, 0)
    if first[1] then
      local at = string.find(first[1], '|', 1, true)
      local job = base .. ':' .. string.sub(first[1], 1, at - 1) .. ':' .. string.sub(first[1], at + 1)
      local cap = capOf(base, client, rcall('HGET', job, 'cap'))
      -- nil: no cap, every parked job comes back.
      local room = nil
      if cap and cap ~= '' then room = tonumber(cap) - clientCount(base, 'a', pool, client) end
      while room == nil or room > 0 do
        local names = unpark(base, pool, client)
        if names == nil then break end
        for _, qname in ipairs(names) do back[#back + 1] = qname end
        if room then room = room - 1 end
      end
    end
  end
end
for _, l in ipairs(limits) do promote(base, l[1], now, ttl, channelPrefix) end
promoteAll(base, back, now, ttl, channelPrefix)
if missing then return {'unconfigured'} end
return {'configured'}
