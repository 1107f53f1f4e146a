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
  Cost (the scripts are atomic, so each reads, computes in Lua and writes back): an admission reads
  every window with one HMGET and writes its reservation with one HSET (plus PEXPIRE when a window's
  newest bucket moves, an expiry step at most once a bucket); a settle is one HMGET and one HSET.
]]
--- @include "rcall"
local BUDGET_BUCKET = {m = 1000, d = 60000}
local BUDGET_COUNT = {m = 60, d = 1440}
local BUDGET_RETRY_SCAN = 61
-- The hash outlives the day window by a margin, then goes. Its expiry is pushed whenever a window's
-- newest bucket moves (at most once a bucket): a charge lies in a bucket no newer than its window's
-- newest, which began before that push, and leaves count + 1 buckets after it began, so at most a day
-- and 1 min after the push: within the TTL.
local BUDGET_TTL_MS = 86400000 + 120000
local function budgetKey(base, client)
  return base .. ':tb:' .. client
end
-- A whole number of tokens as a Redis argument (tostring writes 1e+15 past 14 digits).
local function budgetInt(x)
  return string.format('%d', x)
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
-- Drops the buckets of window w wholly outside it at `now` from its state st (as read: u, r, o, n),
-- in place: o and n nil after while it holds no charge. The rare path (at most once a bucket): one
-- HMGET, HDEL and HSET, or one HDEL when the whole window left.
local function budgetExpire(key, w, now, st)
  if not st.o or not st.n then
    st.u, st.r, st.o, st.n = 0, 0, nil, nil
    return st
  end
  local cut = math.floor(now / BUDGET_BUCKET[w]) - BUDGET_COUNT[w]
  if st.o >= cut then return st end
  if st.n < cut then
    local gone = bucketFields(w, st.o, st.n, true)
    rcall('HDEL', key, w .. ':u', w .. ':r', w .. ':o', w .. ':n', unpack(gone))
    st.u, st.r, st.o, st.n = 0, 0, nil, nil
    return st
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
  rcall('HSET', key, w .. ':u', budgetInt(st.u), w .. ':r', budgetInt(st.r), w .. ':o', cut)
  return st
end
-- The windows `wins` ({{w, ...}...}) of the hash `key` at `now`, read with one HMGET and expired:
-- per window {u, r, o, n, b, c, cr}: the sums, oldest / newest bucket (nil while it holds no charge),
-- the current bucket b and its charge and reserved part (tokens).
local function budgetRead(key, wins, now)
  -- A number turned into a string costs a formatting each time: each bucket index is formatted once.
  local fields, bs = {}, {}
  for i, win in ipairs(wins) do
    local w = win[1]
    bs[i] = budgetInt(math.floor(now / BUDGET_BUCKET[w]))
    local j, bf = (i - 1) * 6, w .. ':' .. bs[i]
    fields[j + 1], fields[j + 2], fields[j + 3], fields[j + 4], fields[j + 5], fields[j + 6] =
      w .. ':u', w .. ':r', w .. ':o', w .. ':n', bf, bf .. 'r'
  end
  local v = rcall('HMGET', key, unpack(fields))
  local states = {}
  for i, win in ipairs(wins) do
    local j, w = (i - 1) * 6, win[1]
    local st = {u = tonumber(v[j + 1] or '0'), r = tonumber(v[j + 2] or '0'), o = tonumber(v[j + 3] or ''),
      n = tonumber(v[j + 4] or ''), b = tonumber(bs[i]), bs = bs[i], c = tonumber(v[j + 5] or '0'),
      cr = tonumber(v[j + 6] or '0')}
    states[i] = budgetExpire(key, w, now, st)
  end
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
-- The windows of a budget argument `<weight>|<per minute or ''>|<per day or ''>`: weight, {{w, limit}...}.
local function budgetWindows(arg)
  local weight, pm, pd = string.match(arg, '^(%d+)|(%d*)|(%d*)$')
  local wins = {}
  if pm and pm ~= '' then wins[#wins + 1] = {'m', tonumber(pm)} end
  if pd and pd ~= '' then wins[#wins + 1] = {'d', tonumber(pd)} end
  return tonumber(weight or '0'), wins, weight or '0'
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
-- Reserves `weight` in the current bucket of every window (states as budgetCheck read them, in the
-- same script with no budget write between) with one HSET; returns the job's `tb` and the tightest
-- window after it as reply values {w, limit, remaining, resetMs} (lowest remaining; a tie: later reset).
local function budgetReserve(key, wins, states, weight, now)
  local tb, standing, fields, moved = {budgetInt(weight), '', ''}, nil, {}, false
  for i, win in ipairs(wins) do
    local w, limit, st = win[1], win[2], states[i]
    local b, r, bf = st.b, st.r + weight, w .. ':' .. st.bs
    local k = #fields
    fields[k + 1], fields[k + 2], fields[k + 3], fields[k + 4], fields[k + 5], fields[k + 6] =
      bf, budgetInt(st.c + weight), bf .. 'r', budgetInt(st.cr + weight), w .. ':r', budgetInt(r)
    if st.o == nil or b < st.o then fields[#fields + 1], fields[#fields + 2] = w .. ':o', st.bs end
    if st.n == nil or b > st.n then
      fields[#fields + 1], fields[#fields + 2] = w .. ':n', st.bs
      moved = true
    end
    if w == 'm' then tb[2] = st.bs else tb[3] = st.bs end
    local remaining = math.max(0, limit - st.u - r)
    local reset = (math.max(b, st.n or b) + BUDGET_COUNT[w] + 1) * BUDGET_BUCKET[w] - now
    if standing == nil or remaining < standing[3] or (remaining == standing[3] and reset > standing[4]) then
      standing = {w, limit, remaining, reset}
    end
  end
  rcall('HSET', key, unpack(fields))
  if moved then rcall('PEXPIRE', key, BUDGET_TTL_MS) end
  return table.concat(tb, '|'), {standing[1], budgetInt(standing[2]), budgetInt(standing[3]), budgetInt(standing[4])}
end
-- Settles the reservation `tb` of a job of `client`: `charge` tokens are charged in its place (the
-- tokens used; -1: the reservation as it stands; 0: given back whole), in each bucket it was put in
-- that is still kept (one HMGET, one HSET). A bucket already dropped (before `w:o`) is left alone; one
-- past the window not dropped yet is settled, and its drop takes out its settled charge and reserved
-- part, which leaves the sums as without the settle: every reader expires first, so neither counts.
local function budgetSettle(base, client, tb, charge)
  local weight, mi, di = string.match(tb or '', '^(%d+)|(%d*)|(%d*)$')
  if not weight then return end
  weight = tonumber(weight)
  if charge < 0 then charge = weight end
  -- The bucket indexes as the job keeps them (strings): no number is formatted into a field name.
  local ws, is, fields, nw = {}, {}, {}, 0
  if mi ~= '' then nw, ws[1], is[1] = 1, 'm', mi end
  if di ~= '' then nw = nw + 1; ws[nw], is[nw] = 'd', di end
  if nw == 0 then return end
  for k = 1, nw do
    local w, bf, j = ws[k], ws[k] .. ':' .. is[k], (k - 1) * 5
    fields[j + 1], fields[j + 2], fields[j + 3], fields[j + 4], fields[j + 5] = w .. ':o', bf, bf .. 'r', w .. ':u', w .. ':r'
  end
  local key = budgetKey(base, client)
  local v = rcall('HMGET', key, unpack(fields))
  local out, n = {}, 0
  for k = 1, nw do
    local j = (k - 1) * 5
    local o = tonumber(v[j + 1] or '')
    if o and tonumber(is[k]) >= o then
      if charge ~= weight then
        out[n + 1], out[n + 2], n = fields[j + 2], budgetInt(tonumber(v[j + 2] or '0') + charge - weight), n + 2
      end
      out[n + 1], out[n + 2], n = fields[j + 3], budgetInt(tonumber(v[j + 3] or '0') - weight), n + 2
      if charge > 0 then
        out[n + 1], out[n + 2], n = fields[j + 4], budgetInt(tonumber(v[j + 4] or '0') + charge), n + 2
      end
      out[n + 1], out[n + 2], n = fields[j + 5], budgetInt(tonumber(v[j + 5] or '0') - weight), n + 2
    end
  end
  if n > 0 then rcall('HSET', key, unpack(out)) end
end
