--[[
  Named lists from the variadic tail of ARGV. A script passes ARGV in, so that every read of ARGV
  stays in the block of named locals at the top of the script.
]]
-- list[from..to] (to: #list when nil) as a new list.
local function sliceArgs(list, from, to)
  local out = {}
  for i = from, to or #list do out[#out + 1] = list[i] end
  return out
end
-- list[from..] cut into groups of `width` consecutive items: {{a1, b1}, {a2, b2}, ...}.
local function groupArgs(list, from, width)
  local out = {}
  for i = from, #list, width do out[#out + 1] = {unpack(list, i, i + width - 1)} end
  return out
end
