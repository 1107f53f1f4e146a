--[[
  Admission against a client's token budget (docs/architecture.md, "Token budgets"; the hash's layout:
  `budget-window.lua`). Cost (the scripts are atomic, so each reads, computes in Lua and writes back):
  an admission reads every window with one HMGET and writes its reservation with one HSET (plus PEXPIRE
  when a window's newest bucket moves, an expiry step at most once a bucket); a settle
  (`budget-settle.lua`) is one HMGET and one HSET. In Redis's Lua each number read is a strtod
  (glibc's, ~1,000 instructions: parsed as `text + 0`, one, not `tonumber(text)`, which runs two),
  each one written a `string.format` (~900) and each table an allocation, more than a short HMGET's
  own work: so each number is parsed and formatted once, the texts at hand are reused, and field lists
  are built at once from multiple values.
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
-- hash holds up to 60 + 1440 buckets of two fields with its current buckets near its tail, so each
-- lookup would scan most of it (measured: with 60 + 190 buckets an admission and release took 2.4
-- times the instructions). A value longer than hash-max-listpack-value (64 bytes by default) makes it
-- a hash table for good, O(1) lookups whatever its size: written with every reservation that moves a
-- window's newest bucket (at most once a bucket, so a hash written before this rule turns too), in
-- the same HSET.
local BUDGET_TABLE_FIELD = 'ht'
local BUDGET_TABLE_VALUE = 'this field keeps the hash a hash table (O(1) field lookups): docs/architecture.md Token budgets'
-- Drops the buckets of window w wholly outside it at `now` from its state st (as read: u, r, o, n),
-- in place (budgetAge), deleting them and writing the sums back: the rare path (at most once a
-- bucket), one HMGET, HDEL and HSET, or one HDEL when the whole window left. Returns st.
local function budgetExpire(key, w, now, st)
  local first, last, whole, gone = budgetAge(key, w, now, st)
  if first == nil then return st end
  if whole then
    rcall('HDEL', key, w .. ':u', w .. ':r', w .. ':o', w .. ':n', unpack(bucketFields(w, first, last, true)))
  else
    rcall('HDEL', key, unpack(gone))
    rcall('HSET', key, w .. ':u', budgetInt(st.u), w .. ':r', budgetInt(st.r), w .. ':o', st.o)
  end
  return st
end
-- The six fields an admission reads of window w whose current bucket's fields are bf and bfr: its
-- sums, bounds, the bucket's charge and reserved part. Multiple values, so that no list is built.
local function readFields(w, bf, bfr)
  local u, r, o, n = windowFields(w)
  return u, r, o, n, bf, bfr
end
-- The state of a window from the six values from v[j + 1] (readFields: a field absent is false), its
-- current bucket b (bs: as text; bf, bfr: its fields).
local function readState(v, j, b, bs, bf, bfr)
  local o, n = v[j + 3], v[j + 4]
  return {u = (v[j + 1] or 0) + 0, r = (v[j + 2] or 0) + 0, o = o and o + 0 or nil, n = n and n + 0 or nil,
    b = b, bs = bs, bf = bf, bfr = bfr, c = (v[j + 5] or 0) + 0, cr = (v[j + 6] or 0) + 0}
end
-- The windows `wins` (budgetWindows: at most one of each) of the hash `key` at `now`, read with one
-- HMGET and expired: per window {u, r, o, n, b, bs, bf, bfr, c, cr}: the sums, oldest / newest bucket
-- (nil while it holds no charge), the current bucket b (bs: as text; bf, bfr: its fields) and its
-- charge and reserved part.
local function budgetRead(key, wins, now)
  if #wins == 0 then return {} end
  local w1, w2 = wins[1][1], wins[2] and wins[2][1]
  local b1 = math.floor(now / BUDGET_BUCKET[w1])
  local s1, b2, s2, f2, g2, v = budgetInt(b1)
  local f1 = w1 .. ':' .. s1
  local g1 = f1 .. 'r'
  if w2 then
    b2 = math.floor(now / BUDGET_BUCKET[w2])
    s2 = budgetInt(b2)
    f2 = w2 .. ':' .. s2
    g2 = f2 .. 'r'
    local a1, a2, a3, a4, a5, a6 = readFields(w1, f1, g1)
    v = rcall('HMGET', key, a1, a2, a3, a4, a5, a6, readFields(w2, f2, g2))
  else
    v = rcall('HMGET', key, readFields(w1, f1, g1))
  end
  local states = {budgetExpire(key, w1, now, readState(v, 0, b1, s1, f1, g1))}
  if w2 then states[2] = budgetExpire(key, w2, now, readState(v, 6, b2, s2, f2, g2)) end
  return states
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
-- The windows of a budget argument `<weight>|<per minute or ''>|<per day or ''>`: weight, {{w, limit,
-- limit as text}...}, the weight as text.
local function budgetWindows(arg)
  local weight, pm, pd = string.match(arg, '^(%d+)|(%d*)|(%d*)$')
  local wins = {}
  if pm and pm ~= '' then wins[#wins + 1] = {'m', pm + 0, pm} end
  if pd and pd ~= '' then wins[#wins + 1] = {'d', pd + 0, pd} end
  weight = weight or '0'
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
    if refusal == nil and weight > win[2] then refusal = {'budget_never', win[1], tostring(win[2])} end
  end
  local never = refusal ~= nil
  for i, win in ipairs(wins) do
    local st = states[i]
    local used = st.u + st.r
    if not never and used + weight > win[2] then
      local retry = budgetRetryMs(key, win[1], st, used + weight - win[2], now)
      if retry > refusalMs then
        refusal, refusalMs = {'budget', win[1], tostring(win[2]), tostring(used), tostring(retry)}, retry
      end
    end
  end
  if refusal == nil then return nil, states end
  local standing
  for i, win in ipairs(wins) do
    local w, st = win[1], states[i]
    local remaining, reset = math.max(0, win[2] - st.u - st.r), 0
    if st.n then reset = math.max(0, (st.n + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now) end
    if standing == nil or remaining < standing[3] or (remaining == standing[3] and reset > standing[4]) then
      standing = {w, win[2], remaining, reset}
    end
  end
  for _, v in ipairs({standing[1], budgetInt(standing[2]), budgetInt(standing[3]), budgetInt(standing[4])}) do
    refusal[#refusal + 1] = v
  end
  return refusal, states
end
-- The six reservation values of window w (state st): its current bucket's charge and reserved part,
-- and its reserved sum, each plus `weight`, as HSET arguments.
local function reserveFields(w, st, weight)
  local _, r = windowFields(w)
  return st.bf, budgetInt(st.c + weight), st.bfr, budgetInt(st.cr + weight), r, budgetInt(st.r + weight)
end
-- Reserves `weight` (weightText: the same as text) in the current bucket of every window (states as
-- budgetCheck read them, in the same script with no budget write between) with one HSET; returns the
-- job's `tb` and the tightest window after it as reply values {w, limit, remaining, resetMs} (lowest
-- remaining; a tie: later reset).
local function budgetReserve(key, wins, states, weight, weightText, now)
  local fields
  if wins[2] then
    local f1, f2, f3, f4, f5, f6 = reserveFields(wins[1][1], states[1], weight)
    fields = {f1, f2, f3, f4, f5, f6, reserveFields(wins[2][1], states[2], weight)}
  else
    fields = {reserveFields(wins[1][1], states[1], weight)}
  end
  local mi, di, moved, sw, sl, sr, sz = '', '', false
  for i = 1, #wins do
    local w, limit, st = wins[i][1], wins[i][2], states[i]
    local b = st.b
    if st.o == nil or b < st.o then fields[#fields + 1], fields[#fields + 2] = w .. ':o', st.bs end
    if st.n == nil or b > st.n then
      fields[#fields + 1], fields[#fields + 2] = w .. ':n', st.bs
      moved = true
    end
    if w == 'm' then mi = st.bs else di = st.bs end
    local remaining = math.max(0, limit - st.u - st.r - weight)
    local reset = (math.max(b, st.n or b) + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now
    if sw == nil or remaining < sr or (remaining == sr and reset > sz) then
      sw, sl, sr, sz = w, wins[i][3] or budgetInt(limit), remaining, reset
    end
  end
  if moved then fields[#fields + 1], fields[#fields + 2] = BUDGET_TABLE_FIELD, BUDGET_TABLE_VALUE end
  rcall('HSET', key, unpack(fields))
  if moved then rcall('PEXPIRE', key, BUDGET_TTL_MS) end
  return weightText .. '|' .. mi .. '|' .. di, {sw, sl, budgetInt(sr), budgetInt(sz)}
end
