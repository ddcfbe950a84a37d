-- The "two-window sliding log" of mhenrixon's client-side rate limiter, the peer of the
-- benchmark's multi-window check(): one sorted set per window, scored by the client's clock.
-- KEYS[1], KEYS[2]: one sorted set per window
-- ARGV: now, limit, window, limit2, window2 (now and the windows in microseconds)
-- Returns, per window, limit - amount (the amount counted before this call).
-- The original uses the timestamp as the member, so two calls in the same tick collapse into
-- one entry and are undercounted; the benchmark passes a unique now per call to keep the
-- comparison fair (every admitted call adds an entry, as in sluice).
local now = tonumber(ARGV[1])
local result = {}
for i = 1, #KEYS do
  local limit, window = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  -- drop the entries at or before now - window
  redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, now - window)
  local amount = redis.call('ZCARD', KEYS[i])
  if amount < limit then redis.call('ZADD', KEYS[i], now, now) end
  -- the window is in microseconds, EXPIRE takes seconds
  redis.call('EXPIRE', KEYS[i], math.ceil(window / 1000000))
  result[i] = limit - amount
end
return result
