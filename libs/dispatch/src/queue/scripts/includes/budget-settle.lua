--[[
  Settling a reservation in a client's token budget (docs/architecture.md, "Token budgets"; the hash's
  layout: `budget-window.lua`), with a lease or a waiter that ends.
]]
--- @include "rcall"
--- @include "budget-key"
-- The HSET arguments that settle window w from its packed state s and its bucket's packed charge bc
-- (false when absent; bf: the bucket's field, i: its index as text): nothing when the window holds
-- no charge or the bucket was already dropped, else the state and the bucket with `weight` taken out
-- of the reserved and `charge` put into the used.
local function settleArgs(w, s, bf, bc, i, weight, charge)
  if not s then return end
  local u, r, o, n = unpackState(s)
  if o == nil or i + 0 < o then return end
  local c, cr = unpackCharge(bc)
  return w, packState(u + charge, r - weight, o, n), bf, packCharge(c + charge - weight, cr - weight)
end
-- Settles the reservation `tb` of a job of `client`: `charge` tokens are charged in its place (the
-- tokens used; -1: the reservation as it stands; 0: given back whole), in each bucket it was put in
-- that is still kept (one HMGET, one HSET). A bucket already dropped (before the window's oldest) is
-- left alone; one past the window not dropped yet is settled, and its drop takes out its settled
-- charge and reserved part, which leaves the sums as without the settle: every reader expires first,
-- so neither counts.
local function budgetSettle(base, client, tb, charge)
  local weight, mi, di = string.match(tb or '', '^(%d+)|(%d*)|(%d*)$')
  if not weight or (mi == '' and di == '') then return end
  weight = weight + 0
  if charge < 0 then charge = weight end
  -- The bucket indexes as the job keeps them (strings): no number is formatted into a field name.
  local key, out = budgetKey(base, client)
  if mi ~= '' and di ~= '' then
    local mb, db = 'm:' .. mi, 'd:' .. di
    local v = rcall('HMGET', key, 'm', mb, 'd', db)
    local a1, a2, a3, a4 = settleArgs('m', v[1], mb, v[2], mi, weight, charge)
    if a1 then
      out = {a1, a2, a3, a4, settleArgs('d', v[3], db, v[4], di, weight, charge)}
    else
      out = {settleArgs('d', v[3], db, v[4], di, weight, charge)}
    end
  else
    local w, i = 'm', mi
    if mi == '' then w, i = 'd', di end
    local bf = w .. ':' .. i
    local v = rcall('HMGET', key, w, bf)
    out = {settleArgs(w, v[1], bf, v[2], i, weight, charge)}
  end
  if out[1] then rcall('HSET', key, unpack(out)) end
end
