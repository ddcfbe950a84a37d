-- fair.lua: fair-tenant assignments (sidekiq-fair_tenant), in order: each registers one job
-- of a tenant and counts the tenant's jobs in each rule's window. Mirrors src/core/fair.rs.
--
-- KEYS[k]   a tenant's record: exact, a sorted set (member = job id, score = ms); approximate,
--           a hash (field = '<granularity ms>:<granule index>', value = jobs counted in it)
-- ARGV[1]   now_us: integer µs, or '' to use the server clock (TIME)
-- then      per call: <key index (1-based)> <mode (0 exact, 1 approximate: the fair kind's
--           operation codes, src/store/kinds/fair.rs)> <horizon_ms>
--           <job id> <rule count> then <per_ms> <granularity_ms> per rule (0 when exact)
-- Returns   flat array: per call, its count in each rule's window (this job included); or
--           -2 then 0 per further rule when the call's key holds a value of another type
--           (another writer uses our key prefix): that call is not applied, the others are
-- Notes     exact: ids registered at least horizon ago are dropped, registering an id again
--           moves it to now (it never counts twice), a window of per counts (now - per, now].
--           approximate: one job is counted in the current granule of each granularity; a
--           granule ending at least the longest window of its granularity ago is dropped (and
--           one of a granularity no rule uses); a window of per sums the floor(per / g) newest
--           granules of its granularity g. The key's PX is the horizon
--           (plus 60 s when now_us is given: see includes/clock.lua). All KEYS share one hash slot.
--           A call's first command on its key goes through redis.pcall: a command refused
--           with WRONGTYPE wrote nothing, and once one has run the key is ours.

local argv = ARGV
local nargs = #argv
if nargs < 7 then error('fair: expected keys and calls') end

-- @include clock
now = (now - now % 1000) / 1000 -- ms
-- @include wrong_type

local out, n = {}, 0
local i = 2
while i <= nargs do
  local key = KEYS[argv[i] + 0]
  local mode, horizon, id, count = argv[i + 1], argv[i + 2] + 0, argv[i + 3], argv[i + 4] + 0
  if key == nil or count < 1 or i + 4 + 2 * count > nargs then error('fair: malformed call') end
  local wrong, fields = false, nil
  if mode == '0' then
    local cut = now - horizon
    local first
    if cut >= 0 then first = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', cut)) end
    if not wrong_type(first) then first = redis.pcall('ZADD', key, string.format('%d', now), id) end
    wrong = wrong_type(first)
  elseif mode == '1' then
    fields = redis.pcall('HGETALL', key)
    wrong = wrong_type(fields)
  else
    error('fair: malformed call')
  end
  if wrong then
    n = n + 1
    out[n] = -2
    for _ = 2, count do
      n = n + 1
      out[n] = 0
    end
  elseif mode == '0' then
    for r = 1, count do
      local per = argv[i + 3 + 2 * r] + 0
      n = n + 1
      if per > now then
        out[n] = redis.call('ZCARD', key)
      else
        out[n] = redis.call('ZCOUNT', key, string.format('(%d', now - per), '+inf')
      end
    end
  elseif mode == '1' then
    -- the longest window of each granularity
    local keep, grans = {}, {}
    for r = 1, count do
      local per, g = argv[i + 3 + 2 * r] + 0, argv[i + 4 + 2 * r] + 0
      if keep[g] == nil then grans[#grans + 1] = g end
      if keep[g] == nil or per > keep[g] then keep[g] = per end
    end
    local counts, gone = {}, {}
    for f = 1, #fields, 2 do
      local field = fields[f]
      local colon = string.find(field, ':', 1, true)
      local g, h
      if colon then g, h = tonumber(string.sub(field, 1, colon - 1)), tonumber(string.sub(field, colon + 1)) end
      if g == nil or h == nil or keep[g] == nil or (h + 1) * g + keep[g] <= now then
        gone[#gone + 1] = field
      else
        counts[#counts + 1] = g
        counts[#counts + 1] = h
        counts[#counts + 1] = fields[f + 1] + 0
      end
    end
    for from = 1, #gone, 1000 do
      redis.call('HDEL', key, unpack(gone, from, math.min(from + 999, #gone)))
    end
    for _, g in ipairs(grans) do
      redis.call('HINCRBY', key, string.format('%d:%d', g, (now - now % g) / g), 1)
    end
    for r = 1, count do
      local per, g = argv[i + 3 + 2 * r] + 0, argv[i + 4 + 2 * r] + 0
      local current = (now - now % g) / g
      local from = current + 1 - (per - per % g) / g
      local sum = 1
      for c = 1, #counts, 3 do
        local h = counts[c + 1]
        if counts[c] == g and h >= from and h <= current then sum = sum + counts[c + 2] end
      end
      n = n + 1
      out[n] = sum
    end
  end
  if not wrong then redis.call('PEXPIRE', key, string.format('%d', horizon + margin)) end
  i = i + 5 + 2 * count
end
return out
