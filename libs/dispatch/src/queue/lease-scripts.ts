/**
 * Lua scripts of the Redis lease store (docs/architecture.md, "Lease protocol"). Every state change
 * that reads then writes is one script, so admission, release, promotion and sweeping are atomic
 * and cost one round trip. Keys are built inside the scripts from the tag base (`<prefix>:{<tag>}`),
 * as BullMQ's own scripts build job keys, so every key a script touches shares the tag's slot.
 *
 * Waiting requests and leases are BullMQ jobs in BullMQ's own layout (`wait` and `active` lists, one
 * hash per job with `name`, `data`, `opts`, `timestamp`), so `Queue.getJobCounts()` reports exactly the
 * `queued` and `in_flight` that admission decides on; `lease-store.spec.ts` pins this against BullMQ.
 * No BullMQ worker ever runs on these queues: grants are made by the scripts below.
 */

/** Functions shared by every script. `now` is Redis server time in ms. */
const COMMON = `
local rcall = redis.call
local function nowMs()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function split(s)
  local out = {}
  for p in string.gmatch(s or '', '[^,]+') do out[#out + 1] = p end
  return out
end
local function ownerOf(jobId)
  return string.match(jobId, '^(.+)%.%d+$')
end
-- Removes a waiting job from the 'wanted' sets of its other candidates.
local function unwant(base, cands, from, jobId)
  if not cands then return end
  local member = from .. '|' .. jobId
  for _, c in ipairs(split(cands)) do
    if c ~= from then rcall('ZREM', base .. ':' .. c .. ':wanted', member) end
  end
end
local function dropLease(base, qname, jobId)
  local q = base .. ':' .. qname .. ':'
  local n = rcall('ZREM', q .. 'leases', jobId)
  rcall('LREM', q .. 'active', 1, jobId)
  rcall('DEL', q .. jobId)
  rcall('HDEL', base .. ':granted', jobId)
  return n
end
-- Makes a waiting job (already taken out of its wait list) a lease of qname and tells its origin.
local function grant(base, qname, from, jobId, now, ttl, channelPrefix)
  local q = base .. ':' .. qname .. ':'
  local src = base .. ':' .. from .. ':' .. jobId
  if from ~= qname and rcall('EXISTS', src) == 1 then rcall('RENAME', src, q .. jobId) end
  local cands = rcall('HGET', q .. jobId, 'cands')
  rcall('HSET', q .. jobId, 'processedOn', now)
  rcall('LPUSH', q .. 'active', jobId)
  rcall('ZADD', q .. 'leases', now + ttl, jobId)
  if cands then unwant(base, cands, from, jobId) end
  rcall('HSET', base .. ':granted', jobId, qname)
  rcall('PUBLISH', channelPrefix .. (ownerOf(jobId) or ''), jobId .. '|' .. qname)
end
-- Fills free slots of qname: its own queue first (FIFO), then the oldest sibling waiter that lists it.
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
`;

/**
 * Admission in one step (docs/architecture.md, "Admission"): for all candidates at once, picks the
 * lowest (in_flight + queued) / max_concurrency; takes its free slot, or queues the job on the least
 * loaded candidate whose queue has room, or answers full.
 * KEYS[1] `<base>:seq`. ARGV: base, ttlMs, jobId, dataJson, n, queueName × n.
 * Returns {'granted', qname} | {'queued', qname} | {'full'} | {'unconfigured', qname}.
 */
export const ADMIT = `${COMMON}
local base, ttl, jobId, data = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local n = tonumber(ARGV[5])
local now = nowMs()
local barrier = rcall('EXISTS', base .. ':barrier') == 1
local best, bestLoad, room, roomLoad
local qs, mcs, acts = {}, {}, {}
for i = 1, n do
  local qname = ARGV[5 + i]
  local q = base .. ':' .. qname .. ':'
  local l = rcall('HMGET', q .. 'limits', 'max_concurrency', 'max_queued')
  if not l[1] then return {'unconfigured', qname} end
  local mc, mq = tonumber(l[1]), tonumber(l[2])
  local a, w = rcall('LLEN', q .. 'active'), rcall('LLEN', q .. 'wait')
  local load = (a + w) / mc
  if best == nil or load < bestLoad then best, bestLoad = i, load end
  if w < mq and (room == nil or load < roomLoad) then room, roomLoad = i, load end
  qs[i], mcs[i], acts[i] = q, mc, a
end
if not barrier and acts[best] < mcs[best] then
  local q = qs[best]
  rcall('HSET', q .. jobId, 'name', 'lease', 'data', data, 'opts', '{}', 'timestamp', now, 'delay', 0, 'priority', 0, 'processedOn', now)
  rcall('LPUSH', q .. 'active', jobId)
  rcall('ZADD', q .. 'leases', now + ttl, jobId)
  return {'granted', ARGV[5 + best]}
end
if room == nil then return {'full'} end
local q, target = qs[room], ARGV[5 + room]
local seq = rcall('INCR', KEYS[1])
if n > 1 then
  local cands = {}
  for i = 1, n do cands[i] = ARGV[5 + i] end
  rcall('HSET', q .. jobId, 'name', 'lease', 'data', data, 'opts', '{}', 'timestamp', now, 'delay', 0, 'priority', 0, 'seq', seq, 'cands', table.concat(cands, ','))
  for i = 1, n do
    if i ~= room then rcall('ZADD', qs[i] .. 'wanted', seq, target .. '|' .. jobId) end
  end
else
  rcall('HSET', q .. jobId, 'name', 'lease', 'data', data, 'opts', '{}', 'timestamp', now, 'delay', 0, 'priority', 0, 'seq', seq)
end
rcall('LPUSH', q .. 'wait', jobId)
return {'queued', target}
`;

/**
 * Ends a lease and hands the freed slot on (own queue first, then a sibling's waiter).
 * KEYS[1] `<base>:seq`. ARGV: base, qname, jobId, ttlMs, channelPrefix. Returns 1 if the lease existed.
 */
export const RELEASE = `${COMMON}
local base, qname, jobId, ttl, channelPrefix = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local n = dropLease(base, qname, jobId)
promote(base, qname, nowMs(), ttl, channelPrefix)
return n
`;

/**
 * A waiter leaves its queue (deadline, abort, shutdown). If its job was granted meanwhile, says so,
 * so that the origin uses or releases that lease instead of leaking it.
 * KEYS[1] `<base>:seq`. ARGV: base, qname, jobId. Returns {'left'} | {'granted', qname} | {'gone'}.
 */
export const LEAVE = `${COMMON}
local base, qname, jobId = ARGV[1], ARGV[2], ARGV[3]
local q = base .. ':' .. qname .. ':'
if rcall('LREM', q .. 'wait', 1, jobId) == 1 then
  local cands = rcall('HGET', q .. jobId, 'cands')
  rcall('DEL', q .. jobId)
  unwant(base, cands, qname, jobId)
  return {'left'}
end
local g = rcall('HGET', base .. ':granted', jobId)
if g then return {'granted', g} end
return {'gone'}
`;

/**
 * Renews (or, with `confirm`, accepts) leases of one holder: each expiry becomes now + ttl. A lease
 * Redis no longer has is re-registered while the barrier stands (Redis lost its state), else lost.
 * KEYS[1] `<base>:seq`. ARGV: base, ttlMs, confirm (0|1), then qname, jobId pairs. Returns the lost job ids.
 */
export const RENEW = `${COMMON}
local base, ttl, confirm = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local now = nowMs()
local barrier = nil
local lost = {}
for i = 4, #ARGV, 2 do
  local qname, jobId = ARGV[i], ARGV[i + 1]
  local q = base .. ':' .. qname .. ':'
  local ok = rcall('ZADD', q .. 'leases', 'XX', 'CH', now + ttl, jobId) == 1 or rcall('ZSCORE', q .. 'leases', jobId)
  if not ok then
    if barrier == nil then barrier = rcall('EXISTS', base .. ':barrier') == 1 end
    if barrier then
      rcall('HSET', q .. jobId, 'name', 'lease', 'data', '{}', 'opts', '{}', 'timestamp', now, 'delay', 0, 'priority', 0, 'processedOn', now)
      rcall('LPUSH', q .. 'active', jobId)
      rcall('ZADD', q .. 'leases', now + ttl, jobId)
    else
      lost[#lost + 1] = jobId
    end
  end
  if confirm then rcall('HDEL', base .. ':granted', jobId) end
end
return lost
`;

/**
 * The state of waiting jobs of one origin, after filling free slots of their providers (recovers a
 * grant message that was lost, and grants that a barrier held back).
 * KEYS[1] `<base>:seq`. ARGV: base, ttlMs, channelPrefix, then qname, jobId pairs.
 * Returns one entry per pair: 'g:<qname>' granted, 'w' waiting, 'x' gone (lost with Redis state).
 */
export const POLL = `${COMMON}
local base, ttl, channelPrefix = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local now = nowMs()
local seen = {}
for i = 4, #ARGV, 2 do
  if not seen[ARGV[i]] then
    seen[ARGV[i]] = true
    promote(base, ARGV[i], now, ttl, channelPrefix)
  end
end
local out = {}
for i = 4, #ARGV, 2 do
  local qname, jobId = ARGV[i], ARGV[i + 1]
  local g = rcall('HGET', base .. ':granted', jobId)
  if g then out[#out + 1] = 'g:' .. g
  elseif rcall('EXISTS', base .. ':' .. qname .. ':' .. jobId) == 1 then out[#out + 1] = 'w'
  else out[#out + 1] = 'x' end
end
return out
`;

/**
 * Frees every lease and waiting job of replicas that died (no connection left and liveness expired),
 * then fills the freed slots. KEYS[1] `<base>:seq`.
 * ARGV: base, ttlMs, channelPrefix, nDead, deadReplicaId × nDead, qname × rest. Returns the count removed.
 */
export const SWEEP = `${COMMON}
local base, ttl, channelPrefix, nDead = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local dead = {}
for i = 1, nDead do dead[ARGV[4 + i]] = true end
local now = nowMs()
local removed = 0
for i = 5 + nDead, #ARGV do
  local qname = ARGV[i]
  local q = base .. ':' .. qname .. ':'
  for _, jobId in ipairs(rcall('ZRANGE', q .. 'leases', 0, -1)) do
    if dead[ownerOf(jobId) or ''] then removed = removed + dropLease(base, qname, jobId) end
  end
  for _, jobId in ipairs(rcall('LRANGE', q .. 'wait', 0, -1)) do
    if dead[ownerOf(jobId) or ''] then
      rcall('LREM', q .. 'wait', 1, jobId)
      local cands = rcall('HGET', q .. jobId, 'cands')
      rcall('DEL', q .. jobId)
      unwant(base, cands, qname, jobId)
      removed = removed + 1
    end
  end
end
for i = 5 + nDead, #ARGV do promote(base, ARGV[i], now, ttl, channelPrefix) end
return removed
`;

/**
 * Writes the limits admission decides on and fills slots a raised limit freed.
 * KEYS[1] `<base>:seq`. ARGV: base, ttlMs, channelPrefix, barrierMs, then qname, max_concurrency,
 * max_queued triples. Returns 1 when some provider had no limits (a new deployment, or Redis lost its
 * state; then a barrierMs > 0 raises the barrier before anything is granted), else 0.
 */
export const CONFIGURE = `${COMMON}
local base, ttl, channelPrefix, barrierMs = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local missing = 0
for i = 5, #ARGV, 3 do
  local q = base .. ':' .. ARGV[i] .. ':'
  if rcall('EXISTS', q .. 'limits') == 0 then missing = 1 end
  rcall('HSET', q .. 'limits', 'max_concurrency', ARGV[i + 1], 'max_queued', ARGV[i + 2])
end
if missing == 1 and barrierMs > 0 then rcall('SET', base .. ':barrier', '1', 'PX', barrierMs, 'NX') end
local now = nowMs()
for i = 5, #ARGV, 3 do promote(base, ARGV[i], now, ttl, channelPrefix) end
return missing
`;
