--[[
  Makes a waiting job of `from` (already out of its line) a lease of qname, and tells its origin on
  the grant channel `<channelPrefix><replicaId>` (message `jobId|qname`). The `granted` entry stays
  until the origin confirms, so a lost message is recovered by POLL. `job` is the job's
  {cands, cl, pool, cap, band, st, solo} (HMGET): its client's lease count goes up and its waiting
  count down, and the pool's virtual time of its band moves up to its start tag; none of it for a solo
  job (it joined no count, and the only client's tags need no virtual time: see fair-tags).
  `tc`: on a provider with a token limit, the completion allowance the lease holds (nil otherwise):
  written as the job's `tc`, and its `tp` + `tc` (job[8] is `tp`) added to the provider's tokens.
]]
--- @include "rcall"
--- @include "owner-of"
--- @include "unwant"
--- @include "add-lease"
--- @include "client-counts"
--- @include "fair-tags"
local function grant(base, qname, from, jobId, job, now, ttl, channelPrefix, tc)
  local q = base .. ':' .. qname .. ':'
  if from ~= qname then rcall('RENAME', base .. ':' .. from .. ':' .. jobId, q .. jobId) end
  if tc then
    rcall('HSET', q .. jobId, 'processedOn', now, 'tc', tc)
    addTokens(q, (tonumber(job[8]) or 0) + tc)
  else
    rcall('HSET', q .. jobId, 'processedOn', now)
  end
  addLease(q, jobId, now, ttl)
  if job[1] then unwant(base, job[1], from, jobId) end
  rcall('HSET', base .. ':granted', jobId, qname)
  rcall('PUBLISH', channelPrefix .. (ownerOf(jobId) or ''), jobId .. '|' .. qname)
  if job[2] and not job[7] then
    countClient(base, 'a', job[3], job[2], '1')
    countClient(base, 'w', job[3], job[2], '-1')
    advanceVirtual(base, job[3], job[5], job[6])
  end
end
