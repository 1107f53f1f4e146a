--[[
  The state of waiting jobs of one origin, after filling free slots of their providers: recovers a
  grant message that was lost, and makes grants that a barrier held back.

  KEYS[1]    seq            `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]    base           key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]    ttlMs          lease lifetime of a grant made here, ms
  ARGV[3]    channelPrefix  grant channels, `<prefix>:grant:`
  ARGV[4..]  waiters        qname, jobId pairs

  Reply: {'polled', state...}, one state per pair: 'g:<qname>' granted, 'w' waiting (in line or
  parked), 's' shed (evicted for a higher band), 'x' gone (lost with Redis state)
]]
--- @include "includes/rcall"
--- @include "includes/args"
--- @include "includes/now-ms"
--- @include "includes/promote"

local base, ttl, channelPrefix = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local waiters = groupArgs(ARGV, 4, 2)

local now = nowMs()
local seen = {}
for _, waiter in ipairs(waiters) do
  local qname = waiter[1]
  if not seen[qname] then
    seen[qname] = true
    promote(base, qname, now, ttl, channelPrefix)
  end
end
local reply = {'polled'}
for _, waiter in ipairs(waiters) do
  local qname, jobId = waiter[1], waiter[2]
  local g = rcall('HGET', base .. ':granted', jobId)
  if g then reply[#reply + 1] = 'g:' .. g
  elseif rcall('EXISTS', base .. ':' .. qname .. ':' .. jobId) == 1 then reply[#reply + 1] = 'w'
  elseif rcall('EXISTS', base .. ':shed:' .. jobId) == 1 then reply[#reply + 1] = 's'
  else reply[#reply + 1] = 'x' end
end
return reply
