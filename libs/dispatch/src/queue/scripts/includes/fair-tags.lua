--[[
  Start-time fair queueing tags (docs/architecture.md, "Clients, priority and fair share"), in the
  tag's hash `<base>:fair`: per pool and band the virtual time `v|<pool>|<band>`, per client its
  finish tag `f|<pool>|<band>|<client>`.
]]
--- @include "rcall"
--- @include "fair-order"
-- The start tag a job of `client` would get now, max(V, F), changing nothing.
local function peekTag(base, pool, band, client)
  local vf = rcall('HMGET', base .. ':fair', 'v|' .. pool .. '|' .. band, 'f|' .. pool .. '|' .. band .. '|' .. client)
  return math.max(tonumber(vf[1] or '0'), tonumber(vf[2] or '0'))
end
-- A job that has to wait: S = max(V, F), and F becomes S + charge (1 / weight). Returns S.
local function startTag(base, pool, band, client, charge)
  local s = peekTag(base, pool, band, client)
  rcall('HSET', base .. ':fair', 'f|' .. pool .. '|' .. band .. '|' .. client, fmt(s + charge))
  return s
end
-- The start tag of a job of the fleet's only client (solo: no other client, no caps): F, and F becomes
-- F + charge, in one command. Equal to startTag's max(V, F): V is the start tag of a granted job, and
-- the client's own F is past every start tag handed out, so V never exceeds F and need not be kept.
local function soloTag(base, pool, band, client, charge)
  local fKey = 'f|' .. pool .. '|' .. band .. '|' .. client
  return tonumber(rcall('HINCRBYFLOAT', base .. ':fair', fKey, fmt(charge))) - charge
end
-- A waiting job with start tag `st` left without being served (evicted): F = min(F, S), as if it never came.
local function giveBackTag(base, pool, band, client, st)
  local fKey = 'f|' .. pool .. '|' .. band .. '|' .. client
  local f = tonumber(rcall('HGET', base .. ':fair', fKey) or '0')
  if f > tonumber(st) then rcall('HSET', base .. ':fair', fKey, st) end
end
-- A job with start tag `st` was granted: V = max(V, S).
local function advanceVirtual(base, pool, band, st)
  local vKey = 'v|' .. pool .. '|' .. band
  local v = tonumber(rcall('HGET', base .. ':fair', vKey) or '0')
  if tonumber(st) > v then rcall('HSET', base .. ':fair', vKey, st) end
end
