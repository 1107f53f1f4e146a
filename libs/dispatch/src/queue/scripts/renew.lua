--[[
  Renews (or, with confirm, accepts) leases of one holder: each expiry becomes now + ttl. A lease
  Redis no longer has is registered again while the barrier stands (Redis lost its state,
  docs/architecture.md, "Redis restarts"), its client's lease count with it, else reported lost.

  KEYS[1]    seq      `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]    base     key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]    ttlMs    lease lifetime from now, ms
  ARGV[3]    confirm  '1': also accept fresh grants (drop their `granted` entries); '0': renew only
  ARGV[4..]  leases   qname, jobId, client, tokens quadruples; client `<pool>|<client id>|<max_in_flight
                      or ''>`, or '' for a solo job (the fleet's only client: registered again without a
                      count); tokens `<tp>|<tc>` the lease holds on a provider with a token limit
                      (registered again with them, docs/architecture.md, "Token limits"), or ''

  Reply: {'renewed', lostJobId...}
]]
--- @include "includes/rcall"
--- @include "includes/args"
--- @include "includes/now-ms"
--- @include "includes/write-job"
--- @include "includes/add-lease"
--- @include "includes/client-counts"

local base, ttl, confirm = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local leases = groupArgs(ARGV, 4, 4)

local now = nowMs()
local barrier = nil
local reply = {'renewed'}
for _, lease in ipairs(leases) do
  local qname, jobId = lease[1], lease[2]
  local pool, client, cap = string.match(lease[3], '^(.-)|(.-)|(.*)$')
  local tp, tc = string.match(lease[4], '^(%d+)|(%d+)$')
  local tokens = {}
  if tc then tokens = {'tp', tp, 'tc', tc} end
  local q = base .. ':' .. qname .. ':'
  local ok = rcall('ZADD', q .. 'leases', 'XX', 'CH', now + ttl, jobId) == 1 or rcall('ZSCORE', q .. 'leases', jobId)
  if not ok then
    if barrier == nil then barrier = rcall('EXISTS', base .. ':barrier') == 1 end
    if barrier and pool then
      writeJob(q .. jobId, '{}', now, 0, 'processedOn', now, 'cl', client, 'pool', pool, 'cap', cap, unpack(tokens))
      addLease(q, jobId, now, ttl)
      countClient(base, 'a', pool, client, '1')
    elseif barrier then
      writeJob(q .. jobId, '{}', now, 0, 'processedOn', now, 'solo', 1, unpack(tokens))
      addLease(q, jobId, now, ttl)
    else
      reply[#reply + 1] = jobId
    end
    if barrier and tc then addTokens(q, tonumber(tp) + tonumber(tc)) end
  end
  if confirm then rcall('HDEL', base .. ':granted', jobId) end
end
return reply
