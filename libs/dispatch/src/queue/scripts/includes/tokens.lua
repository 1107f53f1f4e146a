--[[
  Token limits (docs/architecture.md, "Token limits"): a provider with `max_tokens` in its `limits`
  hash keeps the tokens its leases hold in `<q>tokens` (a string, INCRBY/DECRBY). A lease holds its
  job's `tp` (prompt estimate, 0 once prefill is done) and `tc` (completion allowance, written at the
  grant: the job's `tq`, else the provider's `default_completion` times the job's `tn`, the request's
  choices, chat `n`, when it has one); a lease without `tc` holds none.
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
-- The most tokens a count holds (2^53 - 1, `wholeTokens` of token-limit.ts): an exact double.
local MAX_TOKENS = 9007199254740991
-- The completion allowance of a job (`heldTokens` / `defaultAllowance` of token-limit.ts): its own
-- `tq` (digits), else the provider's default `dc` ('' or nil `tq`), for each of its choices `tn`
-- (digits; '' or nil: one) when it has them. The choices and the product are each capped at
-- MAX_TOKENS, so the product is finite, never NaN, and written in plain digits.
local function completionOf(tq, dc, tn)
  if tq and tq ~= '' then return tonumber(tq) end
  local choices = tonumber(tn or '')
  if choices then return math.min(dc * math.min(choices, MAX_TOKENS), MAX_TOKENS) end
  return dc
end
