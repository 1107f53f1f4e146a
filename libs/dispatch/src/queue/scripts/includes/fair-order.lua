--[[
  The order of waiting jobs (docs/architecture.md, "Clients, priority and fair share"): a score in
  BullMQ's `prioritized` layout, `priority * 2^32 + order`, lowest served first, where BullMQ's
  priority is the band's rank and the order the job's start tag. PRIORITY_SPAN equals
  `PRIORITY_SPAN` of `fair-order.ts` (a test keeps the two equal). Scores and tags are written with
  17 significant digits: Lua's own number-to-string keeps 14, too few for a tag beside a rank.
]]
local PRIORITY_SPAN = 4294967296
local function fmt(x)
  return string.format('%.17g', x)
end
-- BullMQ's priority of a score: the band's rank (1 = the highest band).
local function rankOf(score)
  return math.floor(tonumber(score) / PRIORITY_SPAN)
end
