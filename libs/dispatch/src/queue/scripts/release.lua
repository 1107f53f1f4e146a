--[[
  Ends a lease and hands the freed slot on (docs/architecture.md, "Lease protocol"): to the first
  waiter in line that lists the provider (own queue and siblings' alike); the client's count ends
  with the lease, and a job of the client that was parked at its cap is back in line.

  KEYS[1]  seq            `<base>:seq`: not read, it routes the call to the tag's slot
  ARGV[1]  base           key prefix of the tag, `<prefix>:{<shardTag>}`
  ARGV[2]  qname          queue of the lease
  ARGV[3]  jobId          the lease's job id
  ARGV[4]  ttlMs          lease lifetime of a grant made here, ms
  ARGV[5]  channelPrefix  grant channels, `<prefix>:grant:`
  ARGV[6]  solo           '1': the lease is of a solo job (the fleet's only client): no client count to end
  ARGV[7]  confirmed      '1': the origin holds the lease, so it has no `granted` entry left to delete
                          (granted at once, or confirmed); '0' for a lease it never took over
  ARGV[8]  tokened        '1': the lease's job had a token weight or its client has a token budget, so
                          it may hold tokens or a reservation (its hash is read even for a solo job); ''
                          otherwise
  ARGV[9]  used           tokens the call used, charged to the client's token budget in place of the
                          reservation (docs/architecture.md, "Token budgets"); '' charges the
                          reservation as it stands

  Reply: {'released'} the lease existed | {'gone'} it had expired and been swept
]]
--- @include "includes/drop-lease"
--- @include "includes/promote"

-- ttl stays text: only a grant reads it, by arithmetic (which converts a text).
local base, qname, jobId, ttl, channelPrefix = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local solo, confirmed, tokened = ARGV[6] == '1', ARGV[7] == '1', ARGV[8] == '1'
local used = tonumber(ARGV[9]) or -1

local n, back = dropLease(base, qname, jobId, solo, confirmed, tokened, used)
promote(base, qname, nil, ttl, channelPrefix, n == 1)
promoteAll(base, back, nil, ttl, channelPrefix)
if n == 1 then return {'released'} end
return {'gone'}
