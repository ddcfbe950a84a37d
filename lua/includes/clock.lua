-- includes/clock.lua: the time of a script call. now: µs, ARGV[1] (integer µs: a test's
-- ManualClock) or, when ARGV[1] is '', the server clock (TIME); margin: ms a script adds to
-- its keys' expiry under a given clock (60 s: Redis expires keys on its own clock, and a
-- frozen or slow test clock must not lose state to it), 0 on the server clock (a script with a
-- fixed margin of its own leaves it unused). Strings made numbers by arithmetic (tonumber
-- parses twice).
local now, margin
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now, margin = t[1] * 1000000 + t[2], 0
else
  now, margin = ARGV[1] + 0, 60000
end
