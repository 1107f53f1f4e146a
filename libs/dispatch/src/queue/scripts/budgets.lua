--[[
  Every window of the given clients' token budgets on this tag (docs/architecture.md, "Token
  budgets"), on Redis time, without the buckets that left them: the numbers an admission's expiry
  leaves, read only (no write command: the status exporter writes nothing but its push lock).

  KEYS[1]    seq      `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]    base     key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2..]  clients  client id, window ('m' minute, 'd' day) pairs

  Reply: {'budgets', reserved, used, resetMs, ...}: three values per pair, in order (tokens held by
  requests waiting or in flight, however old; tokens used in the window; ms until every charge in the
  window has left it, a held reservation as if settled now; 0 when it holds none)
]]
--- @include "includes/rcall"
--- @include "includes/args"
--- @include "includes/now-ms"
--- @include "includes/budget-window"

local base = ARGV[1]
local clients = groupArgs(ARGV, 2, 2)

-- Window w of the hash `key` as a reader sees it at `now`: {u, r, o, n} with the buckets wholly outside
-- it taken out, the numbers an admission's expiry leaves, and nothing written (one HGET, one HMGET more
-- when buckets left the window since the last admission expired it).
local function budgetView(key, w, now)
  local u, r, o, n = unpackState(rcall('HGET', key, w))
  local st = {u = u, r = r, o = o, n = n}
  budgetAge(key, w, now, st)
  return st
end

local now = nowMs()
local reply = {'budgets'}
for _, c in ipairs(clients) do
  local w = c[2]
  local st = budgetView(budgetKey(base, c[1]), w, now)
  -- A window that holds nothing (a reservation given back whole) resets at once; a held reservation
  -- (in no bucket: it counts until settled) resets a window after now at the earliest.
  local reset = budgetResetMs(w, st, now)
  reply[#reply + 1] = budgetInt(st.r)
  reply[#reply + 1] = budgetInt(st.u)
  reply[#reply + 1] = budgetInt(reset)
end
return reply
