--[[
  Makes a waiting job of `from` (already taken out of its wait list) a lease of qname, and tells its
  origin on the grant channel `<channelPrefix><replicaId>` (message `jobId|qname`). The `granted`
  entry stays until the origin confirms, so a lost message is recovered by POLL.
]]
--- @include "rcall"
--- @include "owner-of"
--- @include "unwant"
--- @include "add-lease"
local function grant(base, qname, from, jobId, now, ttl, channelPrefix)
  local q = base .. ':' .. qname .. ':'
  local src = base .. ':' .. from .. ':' .. jobId
  if from ~= qname and rcall('EXISTS', src) == 1 then rcall('RENAME', src, q .. jobId) end
  local cands = rcall('HGET', q .. jobId, 'cands')
  rcall('HSET', q .. jobId, 'processedOn', now)
  addLease(q, jobId, now, ttl)
  if cands then unwant(base, cands, from, jobId) end
  rcall('HSET', base .. ':granted', jobId, qname)
  rcall('PUBLISH', channelPrefix .. (ownerOf(jobId) or ''), jobId .. '|' .. qname)
end
