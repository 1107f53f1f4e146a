--[[
  A client's token budget hash and the numbers written into it (docs/architecture.md, "Token budgets"):
  the smallest part, for the scripts that only settle a reservation (every include defines its
  functions anew on each run of a script, so a release defines no more of the budget than it runs).
]]
local function budgetKey(base, client)
  return base .. ':tb:' .. client
end
-- A whole number of tokens as a Redis argument (tostring writes 1e+15 past 14 digits).
local function budgetInt(x)
  return string.format('%d', x)
end
-- The sums' and bounds' fields of window w ('m' or 'd'): `w:u`, `w:r`, `w:o`, `w:n`, as literals, so
-- that no string is built for them.
local function windowFields(w)
  if w == 'm' then return 'm:u', 'm:r', 'm:o', 'm:n' end
  return 'd:u', 'd:r', 'd:o', 'd:n'
end
