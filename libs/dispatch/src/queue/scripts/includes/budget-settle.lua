--[[
  Settling a reservation in a client's token budget (docs/architecture.md, "Token budgets"; the hash's
  layout: `budget-window.lua`), with a lease or a waiter that ends.
]]
--- @include "rcall"
--- @include "now-ms"
--- @include "budget-window"
-- Settles the reservation `tb` (`<weight>|<'m' or ''>|<'d' or ''>`) of a job of `client`: `charge`
-- tokens (the tokens used; -1: the reservation as it stands; 0: given back whole). The reservation is
-- taken out of every window holding it, however old (it was held in no bucket), and `charge` is put in
-- the current bucket on Redis time (`TIME`), so the usage counts in every window that contains the
-- release (README "Token budgets"). A give-back is one HMGET and one HSET of the states; a charge one
-- HMGET of the states and current buckets and one HSET (plus PEXPIRE when a newest bucket moves, an
-- expiry step at most once a bucket). A `tb` of an earlier build (bucket indexes, not window letters)
-- settles nothing: its reservation leaves with its bucket, as that build counted it.
local function budgetSettle(base, client, tb, charge)
  local weight, m, d = string.match(tb or '', '^(%d+)|(m?)|(d?)$')
  if not weight or (m == '' and d == '') then return end
  weight = weight + 0
  if charge < 0 then charge = weight end
  local key, wins = budgetKey(base, client), {}
  if m ~= '' then wins[#wins + 1] = {'m'} end
  if d ~= '' then wins[#wins + 1] = {'d'} end
  local out, moved = {}, false
  if charge <= 0 then
    local names = {wins[1][1]}
    if wins[2] then names[2] = wins[2][1] end
    local v = rcall('HMGET', key, unpack(names))
    for j, win in ipairs(wins) do
      if v[j] then
        local u, r, o, n = unpackState(v[j])
        out[#out + 1], out[#out + 2] = win[1], packState(u, math.max(0, r - weight), o, n)
      end
    end
  else
    local now = nowMs()
    for i, st in ipairs(budgetRead(key, wins, now)) do
      local o, n = st.o, st.n
      if o == nil or st.b < o then o = st.b end
      if n == nil or st.b > n then n, moved = st.b, true end
      out[#out + 1], out[#out + 2] = wins[i][1], packState(st.u + charge, math.max(0, st.r - weight), o, n)
      out[#out + 1], out[#out + 2] = st.bf, packCharge(st.c + charge, st.cr)
    end
    if moved then out[#out + 1], out[#out + 2] = BUDGET_TABLE_FIELD, BUDGET_TABLE_VALUE end
  end
  if out[1] then rcall('HSET', key, unpack(out)) end
  if moved then rcall('PEXPIRE', key, BUDGET_TTL_MS) end
end
