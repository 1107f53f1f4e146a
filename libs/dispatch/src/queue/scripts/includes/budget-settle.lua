--[[
  Settling a reservation in a client's token budget (docs/architecture.md, "Token budgets"; the hash's
  layout: `budget-window.lua`), with a lease or a waiter that ends.
]]
--- @include "rcall"
--- @include "budget-key"
-- The HSET arguments that settle window w's bucket (its fields bf and bfr, its index i as text) from
-- the five values read from v[j + 1] (the oldest bucket kept, the bucket's charge and reserved part,
-- the sums): nothing when the bucket was already dropped, else four fields and their values (a value
-- the settle leaves as it is is written back as read, so that the list is built at once).
-- (A number is parsed as `text + 0`, one strtod, not tonumber's two; an absent field reads false.)
local function settleArgs(v, j, w, bf, bfr, i, weight, charge)
  local o = v[j + 1]
  if not o or i + 0 < o + 0 then return end
  local c, u = v[j + 2] or '0', v[j + 4] or '0'
  if charge ~= weight then c = budgetInt(c + charge - weight) end
  if charge > 0 then u = budgetInt(u + charge) end
  local fu, fr = windowFields(w)
  return bf, c, bfr, budgetInt((v[j + 3] or 0) - weight), fu, u, fr, budgetInt((v[j + 5] or 0) - weight)
end
-- The five fields a settle reads of window w for its bucket's fields bf and bfr (settleArgs' values).
local function settleFields(w, bf, bfr)
  local u, r, o = windowFields(w)
  return o, bf, bfr, u, r
end
-- Settles the reservation `tb` of a job of `client`: `charge` tokens are charged in its place (the
-- tokens used; -1: the reservation as it stands; 0: given back whole), in each bucket it was put in
-- that is still kept (one HMGET, one HSET). A bucket already dropped (before `w:o`) is left alone; one
-- past the window not dropped yet is settled, and its drop takes out its settled charge and reserved
-- part, which leaves the sums as without the settle: every reader expires first, so neither counts.
local function budgetSettle(base, client, tb, charge)
  local weight, mi, di = string.match(tb or '', '^(%d+)|(%d*)|(%d*)$')
  if not weight or (mi == '' and di == '') then return end
  weight = weight + 0
  if charge < 0 then charge = weight end
  -- The bucket indexes as the job keeps them (strings): no number is formatted into a field name.
  local key, out = budgetKey(base, client)
  if mi ~= '' and di ~= '' then
    local mb, db = 'm:' .. mi, 'd:' .. di
    local mr, dr = mb .. 'r', db .. 'r'
    local f1, f2, f3, f4, f5 = settleFields('m', mb, mr)
    local v = rcall('HMGET', key, f1, f2, f3, f4, f5, settleFields('d', db, dr))
    local a1, a2, a3, a4, a5, a6, a7, a8 = settleArgs(v, 0, 'm', mb, mr, mi, weight, charge)
    if a1 then
      out = {a1, a2, a3, a4, a5, a6, a7, a8, settleArgs(v, 5, 'd', db, dr, di, weight, charge)}
    else
      out = {settleArgs(v, 5, 'd', db, dr, di, weight, charge)}
    end
  else
    local w, i = 'm', mi
    if mi == '' then w, i = 'd', di end
    local bf = w .. ':' .. i
    local bfr = bf .. 'r'
    out = {settleArgs(rcall('HMGET', key, settleFields(w, bf, bfr)), 0, w, bf, bfr, i, weight, charge)}
  end
  if out[1] then rcall('HSET', key, unpack(out)) end
end
