--[[
  Admission against a client's token budget (docs/architecture.md, "Token budgets"; the hash's layout:
  `budget-window.lua`). Cost (the scripts are atomic, so each reads, computes in Lua and writes back):
  an admission reads both windows' states and current buckets with one HMGET of four fields and writes
  its reservation with one HSET of them (plus PEXPIRE when a window's newest bucket moves, an expiry
  step at most once a bucket); a settle (`budget-settle.lua`) is one HMGET and one HSET alike. The
  values are packed (`budget-key.lua`): no number is parsed from or formatted into text on this path.
]]
--- @include "rcall"
--- @include "budget-window"
local BUDGET_RETRY_SCAN = 61
-- The hash outlives the day window by a margin, then goes. Its expiry is pushed whenever a window's
-- newest bucket moves (at most once a bucket): a charge lies in a bucket no newer than its window's
-- newest, which began before that push, and leaves count + 1 buckets after it began, so at most a day
-- and 1 min after the push: within the TTL.
local BUDGET_TTL_MS = 86400000 + 120000
-- A hash of few short fields is kept as a listpack, whose field lookups scan it from its head; a budget
-- hash holds up to 60 + 1440 buckets with its current buckets near its tail, so each lookup would scan
-- most of it (measured: with 60 + 190 buckets of two fields each, an admission and release took 2.4
-- times the instructions). A value longer than hash-max-listpack-value (64 bytes by default) makes it
-- a hash table for good, O(1) lookups whatever its size: written with every reservation that moves a
-- window's newest bucket (at most once a bucket, so a hash written before this rule turns too), in
-- the same HSET.
local BUDGET_TABLE_FIELD = 'ht'
local BUDGET_TABLE_VALUE = 'this field keeps the hash a hash table (O(1) field lookups): docs/architecture.md Token budgets'
-- Drops the buckets of window w wholly outside it at `now` from its state st (as read: u, r, o, n),
-- in place (budgetAge), deleting them and writing the state back: the rare path (at most once a
-- bucket), one HMGET, HDEL and HSET, or one HDEL when the whole window left. Returns st.
local function budgetExpire(key, w, now, st)
  local first, last, whole, gone = budgetAge(key, w, now, st)
  if first == nil then return st end
  if whole then
    rcall('HDEL', key, w, unpack(bucketFields(w, first, last)))
  else
    rcall('HDEL', key, unpack(gone))
    rcall('HSET', key, w, packState(st.u, st.r, st.o, st.n))
  end
  return st
end
-- The state of window w from its packed state s and current bucket's packed charge bc (false when
-- absent), its current bucket b (bs: as text; bf: its field): {u, r, o, n, b, bs, bf, c, cr}.
local function readState(s, bc, b, bs, bf)
  local u, r, o, n = unpackState(s)
  local c, cr = unpackCharge(bc)
  return {u = u, r = r, o = o, n = n, b = b, bs = bs, bf = bf, c = c, cr = cr}
end
-- The windows `wins` (budgetWindows: at most one of each) of the hash `key` at `now`, read with one
-- HMGET and expired: per window {u, r, o, n, b, bs, bf, c, cr}: the sums, oldest / newest bucket
-- (nil while it holds no charge), the current bucket b (bs: as text; bf: its field) and its charge
-- and reserved part.
local function budgetRead(key, wins, now)
  if #wins == 0 then return {} end
  local w1, w2 = wins[1][1], wins[2] and wins[2][1]
  local b1 = math.floor(now / BUDGET_BUCKET[w1])
  local s1, b2, s2, f2, v = budgetInt(b1)
  local f1 = w1 .. ':' .. s1
  if w2 then
    b2 = math.floor(now / BUDGET_BUCKET[w2])
    s2 = budgetInt(b2)
    f2 = w2 .. ':' .. s2
    v = rcall('HMGET', key, w1, f1, w2, f2)
  else
    v = rcall('HMGET', key, w1, f1)
  end
  local states = {budgetExpire(key, w1, now, readState(v[1], v[2], b1, s1, f1))}
  if w2 then states[2] = budgetExpire(key, w2, now, readState(v[3], v[4], b2, s2, f2)) end
  return states
end
-- ms until `need` tokens of window w (state st) have left it: the oldest buckets' charges, scanning
-- at most BUDGET_RETRY_SCAN buckets (past them, the time the last one scanned leaves: a lower bound).
local function budgetRetryMs(key, w, st, need, now)
  local last = math.min(st.n, st.o + BUDGET_RETRY_SCAN - 1)
  local fields = bucketFields(w, st.o, last)
  local v = rcall('HMGET', key, unpack(fields))
  local freed, at = 0, last
  for j = 1, #fields do
    freed = freed + unpackCharge(v[j])
    if freed >= need then
      at = st.o + j - 1
      break
    end
  end
  return (at + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now
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
    if st.n and st.u + st.r > 0 then reset = math.max(0, (st.n + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now) end
    if standing == nil or remaining < standing[3] or (remaining == standing[3] and reset > standing[4]) then
      standing = {w, win[2], remaining, reset}
    end
  end
  for _, v in ipairs({standing[1], budgetInt(standing[2]), budgetInt(standing[3]), budgetInt(standing[4])}) do
    refusal[#refusal + 1] = v
  end
  return refusal, states
end
-- The four reservation values of window w (state st): its state and its current bucket's charge,
-- each with `weight` more reserved, its bounds taking in the current bucket, as HSET arguments; and
-- whether its newest bucket moved.
local function reserveFields(w, st, weight)
  local b, o, n = st.b, st.o, st.n
  local moved = n == nil or b > n
  if o == nil or b < o then o = b end
  if moved then n = b end
  return moved, w, packState(st.u, st.r + weight, o, n), st.bf, packCharge(st.c + weight, st.cr + weight)
end
-- Reserves `weight` (weightText: the same as text) in the current bucket of every window (states as
-- budgetCheck read them, in the same script with no budget write between) with one HSET; returns the
-- job's `tb` and the tightest window after it as reply values {w, limit, remaining, resetMs} (lowest
-- remaining; a tie: later reset).
local function budgetReserve(key, wins, states, weight, weightText, now)
  local fields, moved
  local m1, f1, f2, f3, f4 = reserveFields(wins[1][1], states[1], weight)
  if wins[2] then
    local m2, f5, f6, f7, f8 = reserveFields(wins[2][1], states[2], weight)
    fields, moved = {f1, f2, f3, f4, f5, f6, f7, f8}, m1 or m2
  else
    fields, moved = {f1, f2, f3, f4}, m1
  end
  local mi, di, sw, sl, sr, sz = '', ''
  for i = 1, #wins do
    local w, limit, st = wins[i][1], wins[i][2], states[i]
    local b = st.b
    if w == 'm' then mi = st.bs else di = st.bs end
    local remaining = math.max(0, limit - st.u - st.r - weight)
    local reset = 0
    if st.u + st.r + weight > 0 then reset = (math.max(b, st.n or b) + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now end
    if sw == nil or remaining < sr or (remaining == sr and reset > sz) then
      sw, sl, sr, sz = w, wins[i][3] or budgetInt(limit), remaining, reset
    end
  end
  if moved then fields[#fields + 1], fields[#fields + 2] = BUDGET_TABLE_FIELD, BUDGET_TABLE_VALUE end
  rcall('HSET', key, unpack(fields))
  if moved then rcall('PEXPIRE', key, BUDGET_TTL_MS) end
  return weightText .. '|' .. mi .. '|' .. di, {sw, sl, budgetInt(sr), budgetInt(sz)}
end
