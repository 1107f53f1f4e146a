--[[
  Every window of the given clients' token budgets on this tag (docs/architecture.md, "Token
  budgets"), on Redis time, without the buckets that left them: the numbers an admission's expiry
  leaves, read only (no write command: the status exporter writes nothing but its push lock).

  KEYS[1]    seq      `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]    base     key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2..]  clients  client id, window ('m' minute, 'd' day) pairs

  Reply: {'budgets', reserved, used, resetMs, ...}: three values per pair, in order (tokens, tokens,
  ms until every charge in the window has left it; 0 when it holds none)
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
  local reset = 0
  -- A window whose buckets hold nothing (a reservation given back whole) resets at once.
  if st.n and st.u + st.r > 0 then reset = math.max(0, (st.n + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now) end
  reply[#reply + 1] = budgetInt(st.r)
  reply[#reply + 1] = budgetInt(st.u)
  reply[#reply + 1] = budgetInt(reset)
end
return reply
