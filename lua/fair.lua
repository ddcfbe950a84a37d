-- fair.lua: fair-tenant assignments (sidekiq-fair_tenant), in order: each registers one job
-- of a tenant and counts the tenant's jobs in each rule's window. Mirrors src/core/fair.rs.
--
-- KEYS[k]   a tenant's record: exact, a sorted set (member = job id, score = ms); approximate,
--           a hash (field = granule index, value = jobs counted in that granule)
-- ARGV[1]   now_us: integer µs, or '' to use the server clock (TIME)
-- then      per call: <key index (1-based)> <mode (0 exact, 1 approximate)> <horizon_ms>
--           <granularity_ms> <job id> <rule count> <per_ms per rule>
-- Returns   flat array: per call, its count in each rule's window (this job included)
-- Notes     exact: ids registered at least horizon ago are dropped, registering an id again
--           moves it to now (it never counts twice), a window of per counts (now - per, now].
--           approximate: granules ending at least horizon ago are dropped; a window of per
--           sums the ceil(per / granularity) newest granules. The key's PX is the horizon
--           (plus 60 s when now_us is given: see limiter.lua). All KEYS share one hash slot.

local argv = ARGV
local nargs = #argv
if nargs < 7 then error('fair: expected keys and calls') end

local now, margin
if argv[1] == '' then
  local t = redis.call('TIME')
  now, margin = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000, 0
else
  local us = argv[1] + 0
  now, margin = (us - us % 1000) / 1000, 60000
end

local out, n = {}, 0
local i = 2
while i <= nargs do
  local key = KEYS[argv[i] + 0]
  local mode, horizon, granularity, id, count = argv[i + 1], argv[i + 2] + 0, argv[i + 3] + 0, argv[i + 4], argv[i + 5] + 0
  if key == nil or count < 1 or i + 5 + count > nargs then error('fair: malformed call') end
  if mode == '0' then
    local cut = now - horizon
    if cut >= 0 then redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', cut)) end
    redis.call('ZADD', key, string.format('%d', now), id)
    for r = 1, count do
      local per = argv[i + 5 + r] + 0
      n = n + 1
      if per > now then
        out[n] = redis.call('ZCARD', key)
      else
        out[n] = redis.call('ZCOUNT', key, string.format('(%d', now - per), '+inf')
      end
    end
  elseif mode == '1' then
    local g = (now - now % granularity) / granularity
    local fields = redis.call('HGETALL', key)
    local counts, gone = {}, {}
    for f = 1, #fields, 2 do
      local h = fields[f] + 0
      if (h + 1) * granularity + horizon <= now then
        gone[#gone + 1] = fields[f]
      else
        counts[#counts + 1] = h
        counts[#counts + 1] = fields[f + 1] + 0
      end
    end
    for from = 1, #gone, 1000 do
      redis.call('HDEL', key, unpack(gone, from, math.min(from + 999, #gone)))
    end
    redis.call('HINCRBY', key, string.format('%d', g), 1)
    for r = 1, count do
      local per = argv[i + 5 + r] + 0
      local from = g + 1 - math.ceil(per / granularity)
      local sum = 1
      for c = 1, #counts, 2 do
        local h = counts[c]
        if h >= from and h <= g then sum = sum + counts[c + 1] end
      end
      n = n + 1
      out[n] = sum
    end
  else
    error('fair: malformed call')
  end
  redis.call('PEXPIRE', key, string.format('%d', horizon + margin))
  i = i + 6 + count
end
return out
