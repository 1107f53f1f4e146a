--[[
  Admission in one step (docs/architecture.md, "Admission", "Clients, priority and fair share"): for
  all candidates at once, picks the lowest (in_flight + queued) / max_concurrency; takes its free slot
  (none while the barrier stands) unless the client holds its max_in_flight leases in the pool; else
  queues the job (with its fair-share start tag) on the least loaded candidate whose queue has room,
  parks it when the client is at its cap, evicts the last waiter when every queue is full and it is of
  a lower sheddable band or of this band with a later fair-share tag than this job would get, or
  answers full. A solo job (the fleet's only client, no caps) joins no client count.
  Token limits (docs/architecture.md, "Token limits"): a candidate with `max_tokens` takes a job with
  a weight at once only when no waiter that lists it is in line and the weight fits its tokens held
  (or it holds none); when only that stops the least-loaded candidate, the least-loaded other one
  that can take it does. A candidate without `max_tokens` costs no command more than before.
  Token budgets (docs/architecture.md, "Token budgets"): a job of a client with a budget reserves its
  weight in each of the client's windows where it is granted or queued, or is refused first when a
  window cannot hold it; a client without a budget costs no command more.

  KEYS[1]        seq             `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]        base            key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]        ttlMs           lease lifetime after a grant, ms
  ARGV[3]        channelPrefix   grant channels, `<prefix>:grant:` (an evicted waiter hears `jobId|!shed`)
  ARGV[4]        jobId           `<replicaId>.<n>`
  ARGV[5]        data            job data, JSON (origin, model, client: never a prompt or a key)
  ARGV[6]        client          the request's client id
  ARGV[7]        pool            the candidates' pool
  ARGV[8]        band            the request's band
  ARGV[9]        rank            BullMQ's priority of the band (1 = highest)
  ARGV[10]       charge          what the request adds to its client's finish tag (1 / weight)
  ARGV[11]       maxInFlight     the client's cap on leases in the pool ('' none); the cap configure
                                 wrote for the client (`<base>:caps`) wins over it
  ARGV[12]       maxQueued       the client's cap on waiting jobs in the pool ('' none)
  ARGV[13]       sheddableRank   ranks above it are sheddable (the rank of band 0)
  ARGV[14]       shedMarkMs      how long an evicted job's mark stays for its origin to read, ms
  ARGV[15]       solo            '1': the fleet's only client, with no caps (flow control off): its
                                 counts are not kept and its tag is its finish tag alone; '' otherwise
  ARGV[16]       tp              the request's prompt tokens (estimate), '' for no token weight
  ARGV[17]       tq              its completion allowance in tokens; '' for each provider's default;
                                 `*<choices>` for each provider's default times its choices (chat `n`,
                                 digits, 2 to 2^53 - 1), kept in the job as `tq` '' and `tn` <choices>
  ARGV[18]       budget          the client's token budget, `<weight>|<per minute or ''>|<per day or ''>`
                                 (tokens), or '' for a client without one
  ARGV[19]       n               number of candidates
  ARGV[20..19+n] qnames          queue names of the candidates, in config order (ties go to the first)

  Reply: {'granted', qname, standing...} | {'queued', qname, standing...} | {'full', queued} |
  {'client_full', queued} | {'unconfigured', qname} | {'budget', window, limit, used, retryMs, standing...} |
  {'budget_never', window, limit, standing...}; `queued`: waiting jobs of the candidates, or of the
  client in the pool; `standing`: the client's tightest window (window, limit, remaining, resetMs)
  after the reservation, or as read when its budget refused (nothing reserved), none without a
  budget; window 'm' (minute) or 'd' (day)
]]
--- @include "includes/rcall"
--- @include "includes/args"
--- @include "includes/now-ms"
--- @include "includes/owner-of"
--- @include "includes/fair-order"
--- @include "includes/write-job"
--- @include "includes/add-lease"
--- @include "includes/client-counts"
--- @include "includes/fair-tags"
--- @include "includes/queue-job"
--- @include "includes/park"
--- @include "includes/drop-waiter"
--- @include "includes/promote"
--- @include "includes/tokens"
--- @include "includes/budget"

-- A number never '' is parsed as `text + 0` (one strtod; tonumber runs two), one that may be '' by
-- tonumber. ttl, rank, charge, sheddableRank and shedMarkMs stay texts: read only on some paths, by
-- arithmetic (which converts a text), `+ 0` before a comparison, or written as they are (a number
-- argument would be formatted with %.17g), so a job granted at once parses none of them.
local base, ttl, channelPrefix, jobId, data = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local client, pool, band, rank, charge = ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10]
local cap, maxQueued, sheddableRank = ARGV[11], tonumber(ARGV[12]), ARGV[13]
local shedMarkMs, solo = ARGV[14], ARGV[15] == '1'
local tp, tq, budgetArg, n = tonumber(ARGV[16]), ARGV[17], ARGV[18], ARGV[19] + 0
local qnames = sliceArgs(ARGV, 20, 19 + n)
-- The cap in force: the one the last configure wrote for the client wins over the request's, so a
-- replica that has not reloaded yet admits on the fleet's current terms. Read only for a request that
-- names a cap (a client without one costs no command): a solo client has none.
if not solo and cap ~= '' then cap = capOf(base, client, cap) or '' end
-- A default allowance for each of several choices: the job keeps `tq` '' and the choices as `tn`, so
-- a build that reads no `tn` (a replica of an older build during a rollout) counts the default once
-- rather than failing on a `tq` it cannot read.
local tn = string.match(tq, '^%*(%d+)$')
if tn then tq = '' end

local now, nowText = nowMs()
local best, bestLoad, room, roomLoad
local qs, mcs, acts, loads, takes, tcs = {}, {}, {}, {}, {}, {}
local queued = 0
for i = 1, n do
  local q = base .. ':' .. qnames[i] .. ':'
  local l = rcall('HMGET', q .. 'limits', 'max_concurrency', 'max_queued', 'max_tokens', 'default_completion')
  if not l[1] then return {'unconfigured', qnames[i]} end
  local mc, mq, mt = l[1] + 0, l[2] and l[2] + 0 or nil, tonumber(l[3] or '')
  local a, w = rcall('LLEN', q .. 'active'), rcall('ZCARD', q .. 'prioritized')
  local load = (a + w) / mc
  if best == nil or load < bestLoad then best, bestLoad = i, load end
  if w < mq and (room == nil or load < roomLoad) then room, roomLoad = i, load end
  qs[i], mcs[i], acts[i], loads[i], takes[i] = q, mc, a, load, true
  if mt and a < mc then
    takes[i] = w == 0 and rcall('ZCARD', q .. 'wanted') == 0
    if tp then
      tcs[i] = completionOf(tq, tonumber(l[4] or '0'), tn)
      takes[i] = takes[i] and fitsTokens(tokensHeld(q), tp + tcs[i], mt)
    end
  end
  queued = queued + w
end
-- The candidate that takes the job at once: the least loaded, or, when only its token limit stops it,
-- the least-loaded other one that can.
local pick
if acts[best] < mcs[best] then
  if takes[best] then
    pick = best
  else
    for i = 1, n do
      if i ~= best and acts[i] < mcs[i] and takes[i] and (pick == nil or loads[i] < loads[pick]) then pick = i end
    end
  end
end
-- The client's token budget: refused here, before anything is written, when a window cannot hold it.
local budget = nil
if budgetArg ~= '' then
  local weight, wins, weightText = budgetWindows(budgetArg)
  -- An argument of another shape is the caller's bug: refused here, before anything is written, so
  -- no count is left behind (a script's error does not undo its earlier writes).
  if weight == nil then return redis.error_reply('ERR admit: budget argument not <weight>|<per minute>|<per day>: ' .. budgetArg) end
  local key = budgetKey(base, client)
  local refusal, states = budgetCheck(key, wins, weight, now)
  if refusal then return refusal end
  budget = {key = key, wins = wins, states = states, weight = weight, weightText = weightText}
end
-- Reserves the budget (if any) for the job about to be written: its `tb` field (a list for writeJob's
-- tail) and the reply `{status, qname, standing...}`.
local function reserve(status, qname)
  if budget == nil then return {}, {status, qname} end
  local tb, standing = budgetReserve(budget.key, budget.wins, budget.states, budget.weight, budget.weightText, now)
  return {'tb', tb}, {status, qname, unpack(standing)}
end
-- A lease's hash fields: `...` and its token weight, `tp`, `tq` (and `tn`, its choices, when it has
-- them), and `tc` when it holds tokens on a provider with a limit (a list, for writeJob's tail).
local tokenFields = {}
if tp then tokenFields = {'tp', tp, 'tq', tq} end
if tp and tn then tokenFields[5], tokenFields[6] = 'tn', tn end
local function leaseFields(tb, ...)
  local out = {...}
  for _, f in ipairs(tb) do out[#out + 1] = f end
  for _, f in ipairs(tokenFields) do out[#out + 1] = f end
  if tcs[pick] then out[#out + 1], out[#out + 2] = 'tc', tcs[pick] end
  return out
end

local parked = false
if pick ~= nil and rcall('EXISTS', base .. ':barrier') == 0 then
  -- A solo job's lease is marked so that no path that ends it takes it off a count it never joined.
  if solo then
    local tb, reply = reserve('granted', qnames[pick])
    local fields = leaseFields(tb, 'processedOn', nowText, 'cl', client, 'pool', pool, 'cap', cap, 'solo', '1')
    writeJob(qs[pick] .. jobId, data, nowText, '0', unpack(fields))
    addLease(qs[pick], jobId, now, ttl)
    if tcs[pick] then addTokens(qs[pick], tp + tcs[pick]) end
    return reply
  end
  local held = countClient(base, 'a', pool, client, '1')
  if cap == '' or held <= cap + 0 then
    local tb, reply = reserve('granted', qnames[pick])
    local fields = leaseFields(tb, 'processedOn', nowText, 'cl', client, 'pool', pool, 'cap', cap)
    writeJob(qs[pick] .. jobId, data, nowText, '0', unpack(fields))
    addLease(qs[pick], jobId, now, ttl)
    if tcs[pick] then addTokens(qs[pick], tp + tcs[pick]) end
    return reply
  end
  countClient(base, 'a', pool, client, '-1')
  parked = true
elseif cap ~= '' then
  parked = clientCount(base, 'a', pool, client) >= tonumber(cap)
end

if maxQueued then
  local waiting = clientCount(base, 'w', pool, client)
  if waiting >= maxQueued then return {'client_full', tostring(waiting)} end
end

local target = room
if parked then target = best end
if target == nil then
  -- Every queue is full: the waiter served last among them goes, if its band is sheddable and lower,
  -- or if it is of this band and this job would be served before it (its client holds more than its
  -- fair share of the places: a client retrying at once cannot keep one of equal weight out).
  local victim, victimScore, at
  for i = 1, n do
    local last = rcall('ZRANGE', qs[i] .. 'prioritized', -1, -1, 'WITHSCORES')
    if last[1] and (victimScore == nil or tonumber(last[2]) > victimScore) then
      victim, victimScore, at = last[1], tonumber(last[2]), i
    end
  end
  local victimRank = victim and rankOf(victimScore)
  local evicts = victim ~= nil and victimRank > sheddableRank + 0 and victimRank > rank + 0
  if victim ~= nil and not solo and victimRank == rank + 0 then
    evicts = rank * PRIORITY_SPAN + peekTag(base, pool, band, client) < victimScore
  end
  if not evicts then return {'full', tostring(queued)} end
  -- The evicted waiter's place in its client's fair order is given back: its client's finish tag goes
  -- back to the waiter's start tag, so a client that loses places is not also pushed back for them.
  local v = rcall('HMGET', qs[at] .. victim, 'cl', 'pool', 'band', 'st')
  local _, back = dropWaiter(base, qnames[at], victim)
  if v[1] and v[4] then giveBackTag(base, v[2], v[3], v[1], v[4]) end
  -- The victim may be this client's: its give-back changed the budget read before, so read it again.
  if budget ~= nil then budget.states = budgetRead(budget.key, budget.wins, now) end
  promoteAll(base, back, now, ttl, channelPrefix)
  rcall('SET', base .. ':shed:' .. victim, '1', 'PX', shedMarkMs)
  rcall('PUBLISH', channelPrefix .. (ownerOf(victim) or ''), victim .. '|!shed')
  target = at
end

local st
if solo then st = soloTag(base, pool, band, client, charge) else st = startTag(base, pool, band, client, charge) end
local score = fmt(rank * PRIORITY_SPAN + st)
local cands = nil
if n > 1 then cands = table.concat(qnames, ',') end
local tb, reply = reserve('queued', qnames[target])
local fields = {'cl', client, 'pool', pool, 'cap', cap, 'band', band, 'st', fmt(st), unpack(tb)}
for _, f in ipairs(tokenFields) do fields[#fields + 1] = f end
if cands then fields[#fields + 1], fields[#fields + 2] = 'cands', cands end
if solo then fields[#fields + 1], fields[#fields + 2] = 'solo', '1' end
writeJob(qs[target] .. jobId, data, nowText, rank, unpack(fields))
if not solo then countClient(base, 'w', pool, client, '1') end
if parked then
  park(base, qnames[target], jobId, score, pool, client, nil)
else
  queueJob(base, qnames[target], jobId, score, cands)
end
return reply
