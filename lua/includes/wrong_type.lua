-- includes/wrong_type.lua: whether `reply` (of redis.pcall) is a WRONGTYPE error: the key
-- holds a value of another type (another writer uses our key prefix) and the command wrote
-- nothing. Any other error is raised; a reply that is no error (a value, an array, false for a
-- missing key) is false.
local function wrong_type(reply)
  if type(reply) ~= 'table' or not reply.err then return false end
  if string.sub(reply.err, 1, 10) ~= 'WRONGTYPE ' then error(reply) end
  return true
end
