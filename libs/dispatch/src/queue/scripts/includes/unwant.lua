--[[
  A job queued on `from` that lists sibling candidates (`cands`, comma-separated queue names) has a
  place in each sibling's `wanted` set; unwant removes those places once the job is granted, parked or gone.
]]
--- @include "rcall"
local function split(s)
  local out = {}
  for p in string.gmatch(s or '', '[^,]+') do out[#out + 1] = p end
  return out
end
local function unwant(base, cands, from, jobId)
  if not cands then return end
  local member = from .. '|' .. jobId
  for _, c in ipairs(split(cands)) do
    if c ~= from then rcall('ZREM', base .. ':' .. c .. ':wanted', member) end
  end
end
