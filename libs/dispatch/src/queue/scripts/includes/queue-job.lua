--[[
  Puts a waiting job (hash written) in line: in qname's BullMQ `prioritized` set with `score`, and
  with the same score in the `wanted` set of each sibling candidate (`cands`, comma-separated queue
  names; nil for a single candidate) as `<qname>|<jobId>`, so every candidate sees it in one order.
]]
--- @include "rcall"
--- @include "unwant"
local function queueJob(base, qname, jobId, score, cands)
  rcall('ZADD', base .. ':' .. qname .. ':prioritized', score, jobId)
  for _, c in ipairs(split(cands)) do
    if c ~= qname then rcall('ZADD', base .. ':' .. c .. ':wanted', score, qname .. '|' .. jobId) end
  end
end
