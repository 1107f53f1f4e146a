--[[
  A client's token budget hash and the values kept in it (docs/architecture.md, "Token budgets"):
  the smallest part, for the scripts that only settle a reservation (every include defines its
  functions anew on each run of a script, so a release defines no more of the budget than it runs).
  A window's state and a bucket's charge are packed binary values (Redis's `struct` library,
  little-endian doubles: whole numbers below 2^53 are exact), so that reading one is a copy, where a
  decimal text costs a glibc `strtod` (~1,000 instructions) per number read and a `string.format`
  (~900) per number written.
]]
--- @include "std"
-- A window's state: tokens used, tokens reserved (running sums over the window), the oldest and newest
-- bucket index that may hold charges (-1 while it holds none).
local BUDGET_STATE = '<dddd'
-- A bucket's charge: tokens charged (used + reserved) and its reserved part.
local BUDGET_CHARGE = '<dd'
local function budgetKey(base, client)
  return base .. ':budget:' .. client
end
-- A whole number of tokens as a Redis argument or reply value (tostring writes 1e+15 past 14 digits).
local function budgetInt(x)
  return string.format('%d', x)
end
-- A window's state from its packed value s (false when absent): used, reserved, oldest, newest (the
-- bounds nil while it holds no charge).
local function unpackState(s)
  if not s then return 0, 0, nil, nil end
  local u, r, o, n = struct.unpack(BUDGET_STATE, s)
  if o < 0 then return u, r, nil, nil end
  return u, r, o, n
end
local function packState(u, r, o, n)
  return struct.pack(BUDGET_STATE, u, r, o or -1, n or -1)
end
-- A bucket's charged and reserved tokens from its packed value s (false when absent: 0, 0).
local function unpackCharge(s)
  if not s then return 0, 0 end
  local c, cr = struct.unpack(BUDGET_CHARGE, s)
  return c, cr
end
local function packCharge(c, cr)
  return struct.pack(BUDGET_CHARGE, c, cr)
end
