--[[
  Admission in one step (docs/architecture.md, "Admission"): for all candidates at once, picks the
  lowest (in_flight + queued) / max_concurrency; takes its free slot (none while the barrier
  stands), or queues the job on the least loaded candidate whose queue has room, or answers full.

  KEYS[1]       seq     arrival counter of the tag, `<base>:seq` (orders waiters across siblings)
  ARGV[1]       base    key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]       ttlMs   lease lifetime after a grant, ms
  ARGV[3]       jobId   `<replicaId>.<n>`
  ARGV[4]       data    job data, JSON
  ARGV[5]       n       number of candidates
  ARGV[6..5+n]  qnames  queue names of the candidates, in config order (ties go to the first)

  Reply: {'granted', qname} | {'queued', qname} | {'full'} | {'unconfigured', qname}
]]
--- @include "includes/rcall"
--- @include "includes/args"
--- @include "includes/now-ms"
--- @include "includes/write-job"
--- @include "includes/add-lease"

local seqKey = KEYS[1]
local base, ttl, jobId, data = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local n = tonumber(ARGV[5])
local qnames = sliceArgs(ARGV, 6, 5 + n)

local now = nowMs()
local barrier = rcall('EXISTS', base .. ':barrier') == 1
local best, bestLoad, room, roomLoad
local qs, mcs, acts = {}, {}, {}
for i = 1, n do
  local q = base .. ':' .. qnames[i] .. ':'
  local l = rcall('HMGET', q .. 'limits', 'max_concurrency', 'max_queued')
  if not l[1] then return {'unconfigured', qnames[i]} end
  local mc, mq = tonumber(l[1]), tonumber(l[2])
  local a, w = rcall('LLEN', q .. 'active'), rcall('LLEN', q .. 'wait')
  local load = (a + w) / mc
  if best == nil or load < bestLoad then best, bestLoad = i, load end
  if w < mq and (room == nil or load < roomLoad) then room, roomLoad = i, load end
  qs[i], mcs[i], acts[i] = q, mc, a
end

if not barrier and acts[best] < mcs[best] then
  writeJob(qs[best] .. jobId, data, now, 'processedOn', now)
  addLease(qs[best], jobId, now, ttl)
  return {'granted', qnames[best]}
end
if room == nil then return {'full'} end

local q, target = qs[room], qnames[room]
local seq = rcall('INCR', seqKey)
if n > 1 then
  writeJob(q .. jobId, data, now, 'seq', seq, 'cands', table.concat(qnames, ','))
  for i = 1, n do
    if i ~= room then rcall('ZADD', qs[i] .. 'wanted', seq, target .. '|' .. jobId) end
  end
else
  writeJob(q .. jobId, data, now, 'seq', seq)
end
rcall('LPUSH', q .. 'wait', jobId)
return {'queued', target}
