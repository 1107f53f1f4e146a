--[[
  Writes the limits admission decides on and fills slots a raised limit freed. When some provider
  had no limits (a new deployment, or Redis lost its state) and barrierMs > 0, raises the barrier
  before anything is granted (docs/architecture.md, "Redis restarts").

  KEYS[1]    seq            `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]    base           key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]    ttlMs          lease lifetime of a grant made here, ms
  ARGV[3]    channelPrefix  grant channels, `<prefix>:grant:`
  ARGV[4]    barrierMs      lifetime of a barrier raised here, ms (0: none)
  ARGV[5..]  limits         qname, max_concurrency, max_queued, max_tokens, default_completion
                            quintuples (max_tokens '' for no token limit; default_completion in tokens)

  Reply: {'configured'} every provider had limits | {'unconfigured'} some had none
]]
--- @include "includes/rcall"
--- @include "includes/args"
--- @include "includes/now-ms"
--- @include "includes/promote"

local base, ttl, channelPrefix, barrierMs = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local limits = groupArgs(ARGV, 5, 5)

local missing = false
for _, l in ipairs(limits) do
  local q = base .. ':' .. l[1] .. ':'
  if rcall('EXISTS', q .. 'limits') == 0 then missing = true end
  rcall('HSET', q .. 'limits', 'max_concurrency', l[2], 'max_queued', l[3],
    'max_tokens', l[4], 'default_completion', l[5])
end
if missing and barrierMs > 0 then rcall('SET', base .. ':barrier', '1', 'PX', barrierMs, 'NX') end
local now = nowMs()
for _, l in ipairs(limits) do promote(base, l[1], now, ttl, channelPrefix) end
if missing then return {'unconfigured'} end
return {'configured'}
