--[[
  Token budgets (docs/architecture.md, "Token budgets"): per client one hash `<base>:budget:<client>`,
  and per window w ('m' the minute: 60 buckets of 1000 ms; 'd' the day: 1440 buckets of 60000 ms):
  field `w`, the window's state (tokens used: a running sum over the window's buckets; tokens
  reserved: the reservations held by requests waiting or in flight, in no bucket, so they count until
  settled or given back however old; the oldest / newest bucket index that may hold charges), and
  `w:<i>`, the tokens used (settled) in bucket i and a reserved part (0 since reservations are held in
  the state; a bucket written by an earlier build may hold one, taken out of the state when the bucket
  leaves), each packed (`budget-key.lua`); `ht` keeps the hash a hash table. A bucket i counts until it
  lies wholly outside the window (i < floor(now / bucket) - count), so a charge counts at least a
  window and at most a bucket more. Expiry walks from the oldest bucket, each bucket once (amortized
  O(1) commands). The arithmetic is budget-ledger.ts's (BUDGET_BUCKET_MS, BUDGET_RETRY_SCAN; the
  contract suite runs both). A job that reserved keeps `tb` = `<weight>|<'m' or ''>|<'d' or ''>`, the
  windows it holds its reservation in.
  This part: the windows' arithmetic, for admission (`budget.lua`), the settle (`budget-settle.lua`)
  and the status readers' `budgets.lua` (which calls only budgetAge, writing nothing).
]]
--- @include "rcall"
--- @include "budget-key"
local BUDGET_BUCKET = {m = 1000, d = 60000}
local BUDGET_COUNT = {m = 60, d = 1440}
-- The bucket fields i..j of window w.
local function bucketFields(w, i, j)
  local out = {}
  for b = i, j do out[#out + 1] = w .. ':' .. b end
  return out
end
-- Takes the buckets of window w wholly outside it at `now` out of its state st (as read: u, r, o, n),
-- in place: o and n nil after while it holds no charge; the held reservations (r) stay, less the
-- reserved parts of an earlier build's buckets that left. Writes nothing; reads those buckets with one
-- HMGET unless the whole window left with nothing held. Returns nil when no bucket left, else the first
-- and last bucket that left, true when the whole window left, and the fields of the buckets read.
local function budgetAge(key, w, now, st)
  if not st.o or not st.n then
    st.u, st.o, st.n = 0, nil, nil
    return nil
  end
  local o, n = st.o, st.n
  local cut = math.floor(now / BUDGET_BUCKET[w]) - BUDGET_COUNT[w]
  if o >= cut then return nil end
  if n < cut and st.r <= 0 then
    st.u, st.r, st.o, st.n = 0, 0, nil, nil
    return o, n, true
  end
  local gone = bucketFields(w, o, math.min(n, cut - 1))
  local v = rcall('HMGET', key, unpack(gone))
  local charged, reserved = 0, 0
  for j = 1, #gone do
    local c, cr = unpackCharge(v[j])
    charged, reserved = charged + c, reserved + cr
  end
  st.u, st.r = st.u - (charged - reserved), math.max(0, st.r - reserved)
  if n < cut then
    st.u, st.o, st.n = 0, nil, nil
    return o, n, true, gone
  end
  st.o = cut
  return o, cut - 1, false, gone
end
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
-- bucket), one HMGET, HDEL and HSET, or one HDEL when the whole window left with nothing held.
-- Returns st.
local function budgetExpire(key, w, now, st)
  local first, last, whole, gone = budgetAge(key, w, now, st)
  if first == nil then return st end
  if whole and st.r <= 0 then
    rcall('HDEL', key, w, unpack(gone or bucketFields(w, first, last)))
  elseif whole then
    rcall('HDEL', key, unpack(gone))
    rcall('HSET', key, w, packState(st.u, st.r, nil, nil))
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
-- The windows `wins` ({{w, ...}...}: at most one of each, as budgetWindows) of the hash `key` at `now`, read with one
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
-- ms until everything window w (state st, expired at `now`) holds has left it: its newest usage, and a
-- held reservation as if settled now (a window after the current bucket); 0 when it holds nothing.
local function budgetResetMs(w, st, now)
  if st.u + st.r <= 0 then return 0 end
  local last = st.n
  if st.r > 0 then last = math.max(math.floor(now / BUDGET_BUCKET[w]), st.n or 0) end
  if last == nil then return 0 end
  return math.max(0, (last + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now)
end
