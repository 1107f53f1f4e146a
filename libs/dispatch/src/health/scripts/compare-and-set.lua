--[[
  Compare-and-set of one provider's health record (docs/architecture.md, "Provider health"): the
  hash {v, rec, state} is replaced only if its version is still the expected one, so every replica
  applies the one rule (`nextHealth`) to the record as it is and none overwrites another's update.

  KEYS[1]  record           `<prefix>:{health}:<providerId>`, hash {v, rec, state}
  ARGV[1]  expectedVersion  `v` the new record was computed from ('0': no record)
  ARGV[2]  recordJson       the new record, JSON of a `ProviderHealth`
  ARGV[3]  state            its state, 'healthy' | 'unhealthy'
  ARGV[4]  ttlMs            lifetime of the record without updates, ms

  Reply: {'written', newVersion} | {'conflict', version, recordJson} (the current ones; '' for none)
]]
local recordKey = KEYS[1]
local expectedVersion, recordJson, state, ttlMs = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local v = redis.call('HGET', recordKey, 'v') or '0'
if v ~= expectedVersion then return {'conflict', v, redis.call('HGET', recordKey, 'rec') or ''} end
local nv = tostring(tonumber(v) + 1)
redis.call('HSET', recordKey, 'v', nv, 'rec', recordJson, 'state', state)
redis.call('PEXPIRE', recordKey, ttlMs)
return {'written', nv}
