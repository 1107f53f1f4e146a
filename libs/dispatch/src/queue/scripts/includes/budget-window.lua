--[[
  Token budgets (docs/architecture.md, "Token budgets"): per client one hash `<base>:budget:<client>`,
  and per window w ('m' the minute: 60 buckets of 1000 ms; 'd' the day: 1440 buckets of 60000 ms):
  field `w`, the window's state (tokens used and reserved, running sums over the window, and the
  oldest / newest bucket index that may hold charges), and `w:<i>`, the tokens charged in bucket i
  (used + reserved) and its reserved part, each packed (`budget-key.lua`); `ht` keeps the hash a hash
  table (`budget.lua`). A bucket i counts until it lies wholly outside the window
  (i < floor(now / bucket) - count), so a charge counts at least a window and at most a bucket more.
  Expiry walks from the oldest bucket, each bucket once (amortized O(1) commands). The arithmetic is
  budget-ledger.ts's (BUDGET_BUCKET_MS, BUDGET_RETRY_SCAN; the contract suite runs both). A job that
  reserved keeps `tb` = `<weight>|<minute bucket or ''>|<day bucket or ''>`.
  This part: the windows' arithmetic, for admission (`budget.lua`) and the status readers'
  `budgets.lua`; the settle is `budget-settle.lua`.
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
-- in place: o and n nil after while it holds no charge. Writes nothing; reads those buckets with one
-- HMGET unless the whole window left. Returns nil when no bucket left, else the first and last bucket
-- that left, true when the whole window left, and the fields of the buckets read.
local function budgetAge(key, w, now, st)
  if not st.o or not st.n then
    st.u, st.r, st.o, st.n = 0, 0, nil, nil
    return nil
  end
  local o, n = st.o, st.n
  local cut = math.floor(now / BUDGET_BUCKET[w]) - BUDGET_COUNT[w]
  if o >= cut then return nil end
  if n < cut then
    st.u, st.r, st.o, st.n = 0, 0, nil, nil
    return o, n, true
  end
  local gone = bucketFields(w, o, cut - 1)
  local v = rcall('HMGET', key, unpack(gone))
  local charged, reserved = 0, 0
  for j = 1, #gone do
    local c, cr = unpackCharge(v[j])
    charged, reserved = charged + c, reserved + cr
  end
  st.u, st.r, st.o = st.u - (charged - reserved), st.r - reserved, cut
  return o, cut - 1, false, gone
end
