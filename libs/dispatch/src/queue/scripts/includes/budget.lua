--[[
  Token budgets (docs/architecture.md, "Token budgets"): per client one hash `<base>:tb:<client>`, and
  per window w ('m' the minute: 60 buckets of 1000 ms; 'd' the day: 1440 buckets of 60000 ms):
  `w:u` tokens used, `w:r` tokens reserved (running sums over the window), `w:o` / `w:n` the oldest /
  newest bucket index that may hold charges, `w:<i>` the tokens charged in bucket i (used + reserved)
  and `w:<i>r` its reserved part. A bucket i counts until it lies wholly outside the window
  (i < floor(now / bucket) - count), so a charge counts at least a window and at most a bucket more.
  Expiry walks from `w:o`, each bucket once (amortized O(1) commands). The arithmetic is
  budget-ledger.ts's (BUDGET_BUCKET_MS, BUDGET_RETRY_SCAN; the contract suite runs both).
  A job that reserved keeps `tb` = `<weight>|<minute bucket or ''>|<day bucket or ''>`.
]]
--- @include "rcall"
--- @include "now-ms"
local BUDGET_BUCKET = {m = 1000, d = 60000}
local BUDGET_COUNT = {m = 60, d = 1440}
local BUDGET_RETRY_SCAN = 61
-- The hash outlives the day window by a margin, then goes (every reservation pushes it).
local BUDGET_TTL_MS = 86400000 + 120000
local function budgetKey(base, client)
  return base .. ':tb:' .. client
end
-- The bucket fields i..j of window w (both fields of each when `both`).
local function bucketFields(w, i, j, both)
  local out = {}
  for b = i, j do
    out[#out + 1] = w .. ':' .. b
    if both then out[#out + 1] = w .. ':' .. b .. 'r' end
  end
  return out
end
-- Drops the buckets of window w wholly outside it at `now`; returns its state {u, r, o, n} after
-- (o and n nil while it holds no charge).
local function budgetExpire(key, w, now)
  local s = rcall('HMGET', key, w .. ':u', w .. ':r', w .. ':o', w .. ':n')
  local st = {u = tonumber(s[1] or '0'), r = tonumber(s[2] or '0'), o = tonumber(s[3] or ''), n = tonumber(s[4] or '')}
  if not st.o or not st.n then return {u = 0, r = 0} end
  local cut = math.floor(now / BUDGET_BUCKET[w]) - BUDGET_COUNT[w]
  if st.o >= cut then return st end
  if st.n < cut then
    local gone = bucketFields(w, st.o, st.n, true)
    rcall('HDEL', key, w .. ':u', w .. ':r', w .. ':o', w .. ':n', unpack(gone))
    return {u = 0, r = 0}
  end
  local gone = bucketFields(w, st.o, cut - 1, true)
  local v = rcall('HMGET', key, unpack(gone))
  local charged, reserved = 0, 0
  for j = 1, #gone, 2 do
    charged = charged + tonumber(v[j] or '0')
    reserved = reserved + tonumber(v[j + 1] or '0')
  end
  rcall('HDEL', key, unpack(gone))
  st.u, st.r, st.o = st.u - (charged - reserved), st.r - reserved, cut
  rcall('HSET', key, w .. ':u', st.u, w .. ':r', st.r, w .. ':o', cut)
  return st
end
-- ms until `need` tokens of window w (state st) have left it: the oldest buckets' charges, scanning
-- at most BUDGET_RETRY_SCAN buckets (past them, the time the last one scanned leaves: a lower bound).
local function budgetRetryMs(key, w, st, need, now)
  local last = math.min(st.n, st.o + BUDGET_RETRY_SCAN - 1)
  local fields = bucketFields(w, st.o, last, false)
  local v = rcall('HMGET', key, unpack(fields))
  local freed, at = 0, last
  for j = 1, #fields do
    freed = freed + tonumber(v[j] or '0')
    if freed >= need then
      at = st.o + j - 1
      break
    end
  end
  return (at + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now
end
-- The windows of a budget argument `<weight>|<per minute or ''>|<per day or ''>`: weight, {{w, limit}...}.
local function budgetWindows(arg)
  local weight, pm, pd = string.match(arg, '^(%d+)|(%d*)|(%d*)$')
  local wins = {}
  if pm and pm ~= '' then wins[#wins + 1] = {'m', tonumber(pm)} end
  if pd and pd ~= '' then wins[#wins + 1] = {'d', tonumber(pd)} end
  return tonumber(weight or '0'), wins
end
-- Decides on `weight` tokens against every window: nil and the windows' states when each holds it,
-- else the refusal reply: {'budget_never', w, limit} (over a whole window, first) or
-- {'budget', w, limit, used + reserved, retryMs} (the window that frees last).
local function budgetCheck(key, wins, weight, now)
  for _, win in ipairs(wins) do
    if weight > win[2] then return {'budget_never', win[1], tostring(win[2])}, nil end
  end
  local states, refusal, refusalMs = {}, nil, -1
  for i, win in ipairs(wins) do
    local st = budgetExpire(key, win[1], now)
    states[i] = st
    local used = st.u + st.r
    if used + weight > win[2] then
      local retry = budgetRetryMs(key, win[1], st, used + weight - win[2], now)
      if retry > refusalMs then
        refusal, refusalMs = {'budget', win[1], tostring(win[2]), tostring(used), tostring(retry)}, retry
      end
    end
  end
  return refusal, states
end
-- Reserves `weight` in the current bucket of every window; returns the job's `tb` and the tightest
-- window after it as reply values {w, limit, remaining, resetMs} (lowest remaining; a tie: later reset).
local function budgetReserve(key, wins, states, weight, now)
  local tb, standing = {tostring(weight), '', ''}, nil
  for i, win in ipairs(wins) do
    local w, limit, st = win[1], win[2], states[i]
    local b = math.floor(now / BUDGET_BUCKET[w])
    rcall('HINCRBY', key, w .. ':' .. b, weight)
    rcall('HINCRBY', key, w .. ':' .. b .. 'r', weight)
    local r = rcall('HINCRBY', key, w .. ':r', weight)
    if st.o == nil or b < st.o then
      rcall('HSET', key, w .. ':n', math.max(b, st.n or b), w .. ':o', b)
    elseif b > st.n then
      rcall('HSET', key, w .. ':n', b)
    end
    if w == 'm' then tb[2] = tostring(b) else tb[3] = tostring(b) end
    local remaining = math.max(0, limit - st.u - r)
    local reset = (math.max(b, st.n or b) + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now
    if standing == nil or remaining < standing[3] or (remaining == standing[3] and reset > standing[4]) then
      standing = {w, limit, remaining, reset}
    end
  end
  rcall('PEXPIRE', key, BUDGET_TTL_MS)
  local out = {}
  for i, x in ipairs(standing) do out[i] = tostring(x) end
  return table.concat(tb, '|'), out
end
-- Settles the reservation `tb` of a job of `client`: `charge` tokens are charged in its place (the
-- tokens used; -1: the reservation as it stands; 0: given back whole), in each bucket it was put in
-- that still counts (a bucket already out of the window is left alone).
local function budgetSettle(base, client, tb, charge)
  local weight, mi, di = string.match(tb or '', '^(%d+)|(%d*)|(%d*)$')
  if not weight then return end
  weight = tonumber(weight)
  if charge < 0 then charge = weight end
  local key = budgetKey(base, client)
  local now = nowMs()
  for _, at in ipairs({{'m', mi}, {'d', di}}) do
    local w, i = at[1], tonumber(at[2])
    local o = i and tonumber(rcall('HGET', key, w .. ':o') or '')
    if o and i >= o and i >= math.floor(now / BUDGET_BUCKET[w]) - BUDGET_COUNT[w] then
      if charge ~= weight then rcall('HINCRBY', key, w .. ':' .. i, charge - weight) end
      rcall('HINCRBY', key, w .. ':' .. i .. 'r', -weight)
      if charge > 0 then rcall('HINCRBY', key, w .. ':u', charge) end
      rcall('HINCRBY', key, w .. ':r', -weight)
    end
  end
end
