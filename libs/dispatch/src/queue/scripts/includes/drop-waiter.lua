--[[
  Takes a waiting job out of qname's `wait` list and deletes its hash and its places in the siblings'
  `wanted` sets. Returns 1, or 0 when the job was not waiting there (then nothing else is touched).
]]
--- @include "rcall"
--- @include "unwant"
local function dropWaiter(base, qname, jobId)
  local q = base .. ':' .. qname .. ':'
  if rcall('LREM', q .. 'wait', 1, jobId) == 0 then return 0 end
  local cands = rcall('HGET', q .. jobId, 'cands')
  rcall('DEL', q .. jobId)
  unwant(base, cands, qname, jobId)
  return 1
end
