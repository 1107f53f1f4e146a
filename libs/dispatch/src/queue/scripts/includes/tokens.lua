--[[
  Token limits (docs/architecture.md, "Token limits"): a provider with `max_tokens` in its `limits`
  hash keeps the tokens its leases hold in `<q>tokens` (a string, INCRBY/DECRBY). A lease holds its
  job's `tp` (prompt estimate, 0 once prefill is done) and `tc` (completion allowance, written at the
  grant: the job's `tq`, else the provider's `default_completion`); a lease without `tc` holds none.
  The rule is `fitsTokens` of token-limit.ts: held + weight <= limit, or nothing held at all (a request
  larger than the whole limit runs alone).
]]
--- @include "rcall"
local function fitsTokens(held, weight, limit)
  return held == 0 or held + weight <= limit
end
-- Tokens the provider at `q` (`<base>:<qname>:`) holds now.
local function tokensHeld(q)
  return tonumber(rcall('GET', q .. 'tokens') or '0')
end
-- The completion allowance of a job: its own `tq`, else the provider's default `dc`.
local function completionOf(tq, dc)
  if tq and tq ~= '' then return tonumber(tq) end
  return dc
end
