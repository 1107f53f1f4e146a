--[[
  Admission against a client's token budget (docs/architecture.md, "Token budgets"; the hash's layout:
  `budget-window.lua`). Cost (the scripts are atomic, so each reads, computes in Lua and writes back):
  an admission reads both windows' states and current buckets with one HMGET of four fields and writes
  its reservation (held in the states, in no bucket) with one HSET (plus PEXPIRE when a window's newest bucket moves, an expiry
  step at most once a bucket); a settle (`budget-settle.lua`) is one HMGET and one HSET alike. The
  values are packed (`budget-key.lua`): no number is parsed from or formatted into text on this path.
]]
--- @include "rcall"
--- @include "budget-window"
local BUDGET_RETRY_SCAN = 61
-- ms until `need` tokens of window w (state st) have left it: the oldest buckets' usage, scanning at
-- most BUDGET_RETRY_SCAN buckets (past them, the time the last one scanned leaves: a lower bound; held
-- reservations leave only when settled: when the usage cannot free enough, the time until a charge
-- made now leaves, as what they use counts a window from their release).
local function budgetRetryMs(key, w, st, need, now)
  local settledNow = (math.floor(now / BUDGET_BUCKET[w]) + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now
  if not st.o or not st.n then
    if st.r > 0 then return settledNow end
    return 0
  end
  local last = math.min(st.n, st.o + BUDGET_RETRY_SCAN - 1)
  local fields = bucketFields(w, st.o, last)
  local v = rcall('HMGET', key, unpack(fields))
  local freed = 0
  for j = 1, #fields do
    freed = freed + unpackCharge(v[j])
    if freed >= need then return (st.o + j - 1 + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now end
  end
  local at = (last + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now
  if last == st.n and st.r > 0 then return math.max(at, settledNow) end
  return at
end
-- The windows of a budget argument `<weight>|<per minute or ''>|<per day or ''>`: weight, {{w, limit,
-- limit as text}...}, the weight as text; nil for an argument of another shape (the caller refuses
-- it before anything is written).
local function budgetWindows(arg)
  local weight, pm, pd = string.match(arg, '^(%d+)|(%d*)|(%d*)$')
  if weight == nil or (pm == '' and pd == '') then return nil end
  local wins = {}
  if pm and pm ~= '' then wins[#wins + 1] = {'m', pm + 0, pm} end
  if pd and pd ~= '' then wins[#wins + 1] = {'d', pd + 0, pd} end
  return weight + 0, wins, weight
end
-- Decides on `weight` tokens against every window: nil and the windows' states (budgetRead) when each
-- holds it, else the refusal reply: {'budget_never', w, limit, standing...} (over a whole window, first)
-- or {'budget', w, limit, used + reserved, retryMs, standing...} (the window that frees last), with
-- `standing` the tightest window as read, nothing reserved: w, limit, remaining, resetMs (lowest
-- remaining; a tie: later reset), as budgetReserve's.
local function budgetCheck(key, wins, weight, now)
  local states = budgetRead(key, wins, now)
  local refusal, refusalMs = nil, -1
  for _, win in ipairs(wins) do
    if refusal == nil and weight > win[2] then refusal = {'budget_never', win[1], win[3]} end
  end
  local never = refusal ~= nil
  for i, win in ipairs(wins) do
    local st = states[i]
    local used = st.u + st.r
    if not never and used + weight > win[2] then
      local retry = budgetRetryMs(key, win[1], st, used + weight - win[2], now)
      if retry > refusalMs then
        refusal, refusalMs = {'budget', win[1], win[3], budgetInt(used), budgetInt(retry)}, retry
      end
    end
  end
  if refusal == nil then return nil, states end
  local standing
  for i, win in ipairs(wins) do
    local w, st = win[1], states[i]
    local remaining, reset = math.max(0, win[2] - st.u - st.r), 0
    if st.u + st.r > 0 then reset = budgetResetMs(w, st, now) end
    if standing == nil or remaining < standing[3] or (remaining == standing[3] and reset > standing[4]) then
      standing = {w, win[2], remaining, reset}
    end
  end
  for _, v in ipairs({standing[1], budgetInt(standing[2]), budgetInt(standing[3]), budgetInt(standing[4])}) do
    refusal[#refusal + 1] = v
  end
  return refusal, states
end
-- The reservation values of window w (state st): its state with `weight` more held (in no bucket: it
-- counts until settled), its bounds taking in the current bucket (so the hash's TTL is pushed as a
-- bucket passes), as HSET arguments; and whether its newest bucket moved.
local function reserveFields(w, st, weight)
  local b, o, n = st.b, st.o, st.n
  local moved = n == nil or b > n
  if o == nil or b < o then o = b end
  if moved then n = b end
  return moved, w, packState(st.u, st.r + weight, o, n)
end
-- Reserves `weight` (weightText: the same as text) in the current bucket of every window (states as
-- budgetCheck read them, in the same script with no budget write between) with one HSET; returns the
-- job's `tb` (`<weight>|<'m' or ''>|<'d' or ''>`: the windows holding it) and the tightest window after it as reply values {w, limit, remaining, resetMs} (lowest
-- remaining; a tie: later reset).
local function budgetReserve(key, wins, states, weight, weightText, now)
  local fields, moved
  local m1, f1, f2 = reserveFields(wins[1][1], states[1], weight)
  if wins[2] then
    local m2, f3, f4 = reserveFields(wins[2][1], states[2], weight)
    fields, moved = {f1, f2, f3, f4}, m1 or m2
  else
    fields, moved = {f1, f2}, m1
  end
  local mi, di, sw, sl, sr, sz = '', ''
  for i = 1, #wins do
    local w, limit, st = wins[i][1], wins[i][2], states[i]
    if w == 'm' then mi = 'm' else di = 'd' end
    local remaining = math.max(0, limit - st.u - st.r - weight)
    local reset = 0
    if st.u + st.r + weight > 0 then reset = (math.max(st.b, st.n or st.b) + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now end
    if sw == nil or remaining < sr or (remaining == sr and reset > sz) then
      sw, sl, sr, sz = w, wins[i][3] or budgetInt(limit), remaining, reset
    end
  end
  if moved then fields[#fields + 1], fields[#fields + 2] = BUDGET_TABLE_FIELD, BUDGET_TABLE_VALUE end
  rcall('HSET', key, unpack(fields))
  if moved then rcall('PEXPIRE', key, BUDGET_TTL_MS) end
  return weightText .. '|' .. mi .. '|' .. di, {sw, sl, budgetInt(sr), budgetInt(sz)}
end
