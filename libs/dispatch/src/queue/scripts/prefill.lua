--[[
  Prefill is done for a lease (the answer's first byte arrived, docs/architecture.md, "Token limits"):
  the prompt part of its token weight (`tp`) goes back to its provider's token count and the freed
  tokens are granted in line order. Idempotent: `tp` becomes 0; a lease that holds no tokens, or is
  gone (released, swept), changes nothing.

  KEYS[1]  seq            `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]  base           key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]  qname          queue of the lease
  ARGV[3]  jobId          the lease's job id
  ARGV[4]  ttlMs          lease lifetime of a grant made here, ms
  ARGV[5]  channelPrefix  grant channels, `<prefix>:grant:`

  Reply: {'prefilled'} tokens were given back | {'none'} nothing to give back
]]
--- @include "includes/rcall"
--- @include "includes/promote"

local base, qname, jobId, ttl, channelPrefix = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]

local q = base .. ':' .. qname .. ':'
local t = rcall('HMGET', q .. jobId, 'tp', 'tc')
local prompt = tonumber(t[1] or '0')
if not t[2] or prompt == 0 then return {'none'} end
rcall('HSET', q .. jobId, 'tp', 0)
rcall('DECRBY', q .. 'tokens', prompt)
promote(base, qname, nil, ttl, channelPrefix)
return {'prefilled'}
