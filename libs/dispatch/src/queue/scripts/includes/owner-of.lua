--[[
  The replica that owns a job: job ids are `<replicaId>.<n>` (docs/architecture.md, "Fencing").
  Returns nil for an id of another shape.
]]
local function ownerOf(jobId)
  return string.match(jobId, '^(.+)%.%d+$')
end
