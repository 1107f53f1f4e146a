--[[
  Takes a waiting job of qname out of line (its `prioritized` set, or its client's parked set) and
  deletes its hash, its places in the siblings' `wanted` sets and one of its client's waiting count
  (a solo job joined none). A reservation in its client's token budget (`tb`) comes back whole: a
  waiter used nothing (docs/architecture.md, "Token budgets").
  A job taken out of line while its client is under its max_in_flight passes that room on: the
  client's first parked job is back in line (else it could stay parked with nothing to wake it).
  Returns 1, or 0 when the job was not waiting there (then nothing else is touched), and the queue
  names that may grant a job put back in line (nil when none).
]]
--- @include "rcall"
--- @include "unwant"
--- @include "client-counts"
--- @include "park"
--- @include "budget-settle"
local function dropWaiter(base, qname, jobId)
  local q = base .. ':' .. qname .. ':'
  local job = rcall('HMGET', q .. jobId, 'cands', 'cl', 'pool', 'cap', 'solo', 'tb')
  if not job[2] then return 0, nil end
  local inLine = rcall('ZREM', q .. 'prioritized', jobId) == 1
  if not inLine and rcall('ZREM', parkedKey(base, job[3], job[2]), qname .. '|' .. jobId) == 0 then
    return 0, nil
  end
  rcall('DEL', q .. jobId)
  if job[6] then budgetSettle(base, job[2], job[6], 0) end
  unwant(base, job[1], qname, jobId)
  if not job[5] then countClient(base, 'w', job[3], job[2], '-1') end
  local cap = not job[5] and capOf(base, job[2], job[4]) or nil
  if inLine and cap and cap ~= '' and clientCount(base, 'a', job[3], job[2]) < tonumber(cap) then
    return 1, unpark(base, job[3], job[2])
  end
  return 1, nil
end
