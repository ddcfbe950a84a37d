-- The @clickup/distributed-pacer algorithm as its README and source describe it
-- (../shared/reference/distributed-pacer.md §3): one hash per key, float seconds from the
-- client clock, HMGET + HMSET + EXPIRE. The "same algorithm in ioredis + Lua" of the benchmark.
-- KEYS[1] hash; ARGV: now (s), weight, qps, maxBurst, factor, save (1 pace / 0 rateLimit)
local now, w, qps = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local B, f, save = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == '1'
local v = redis.call('HMGET', KEYS[1], 'watermark', 'timeOfLastDrip', 'timeOfNextShot')
local W = tonumber(v[1]) or 0
local L = tonumber(v[2]) or now
local N = math.max(tonumber(v[3]) or 0, now)
if N <= now then W = math.max(0, W - (now - L) * qps * f) end
L = now
local before = W
W = W + w
local shot = now
if W - B > 0 then
  shot = N
  N = N + w / qps
end
W = math.min(B, W)
if save or shot <= now then
  redis.call('HMSET', KEYS[1], 'watermark', tostring(W), 'timeOfLastDrip', tostring(L), 'timeOfNextShot', tostring(N))
end
redis.call('EXPIRE', KEYS[1], math.ceil(math.max(N - now, B / (qps * f)) + 120))
return { tostring(shot), tostring(before), '' }
