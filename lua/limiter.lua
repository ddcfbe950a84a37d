-- limiter.lua: decides a batch of rate-limiter calls (bucket, window, leaky/points)
-- atomically, in order. Mirrors src/core/{limit,bucket,window,leaky}.rs operation for
-- operation (same doubles, same order).
--
-- KEYS[k]   limiter state: 16 bytes, struct '<dd' = a, b (see core/limit.rs `State`)
-- ARGV[1]   now_us: integer µs, or '' to use the server clock (TIME)
-- then      5 numbers per call: <key index (1-based) * 4 + kind> <weight> <limit>
--           <interval_us> <max_wait_us>
--           kind: 0 bucket, 1 window, 2 leaky; max_wait_us >= 0: take (charge if it fits
--           now, or for leaky within max_wait_us by reserving a later slot), -1: adjust
--           (charge unconditionally, negative refunds), -2: reset (delete the key),
--           -3: peek (the answer of a take with max_wait_us 0, charging nothing)
-- Returns   flat array, 4 integers per call: allowed (0/1), remaining, retry_after_us,
--           reset_after_us
-- Notes     every key is read at most once and written (SET PX, or DEL) at most once, with
--           PX = the time until its state no longer matters (end of the bucket or window,
--           or until the leaky bucket has drained), in whole ms, at least 1; plus 60 s when
--           now_us is given (a test's ManualClock: Redis still expires keys on its own
--           clock, and a frozen or slow test clock must not lose state to it).
--           All KEYS share one hash slot: the caller groups calls by slot.

local nargs = #ARGV
assert(nargs >= 6 and (nargs - 1) % 5 == 0 and #KEYS >= 1, 'limiter: expected keys and calls')

local now
local margin = 0
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
  margin = 60000
end
local MAX_TTL_MS = 315360000000
local MAX_DELAY_US = 9e15

local sA, sB, loaded, dirty, ttl = {}, {}, {}, {}, {}
local out, nout = {}, 0

-- GET raises WRONGTYPE on a key of another type (nothing written); a value of another
-- shape is treated as a fresh key, so no value can leave a key unusable.
local function load(k)
  loaded[k] = true
  local v = redis.call('GET', KEYS[k])
  if v and #v == 16 then
    local a, b = struct.unpack('<dd', v)
    if a == a and b == b and a < math.huge and a > -math.huge and b < math.huge and b > -math.huge then
      sA[k], sB[k] = a, b
    end
  end
end

local function ttl_ms(span)
  local t = math.ceil(span / 1000) + margin
  if t < 1 then return 1 end
  if t > MAX_TTL_MS then return MAX_TTL_MS end
  return t
end

-- bucket and window: `used` of `limit` in [start, finish)
local function counter(k, used, start, finish, limit, weight, max_wait)
  local reset_after = math.ceil(finish - now)
  local allowed, after = true, used
  if max_wait == -1 then
    after = used + weight
    if after < 0 then after = 0 end
  elseif max_wait == -3 then
    allowed = used + weight <= limit
  elseif used + weight <= limit then
    after = used + weight
  else
    allowed = false
  end
  if after ~= used then
    sA[k], sB[k], dirty[k], ttl[k] = start, after, true, ttl_ms(finish - now)
  end
  local retry = 0
  if not allowed then
    if weight > limit then retry = MAX_DELAY_US else retry = reset_after end
  end
  local remaining = limit - after
  if remaining < 0 then remaining = 0 end
  return allowed, remaining, retry, reset_after
end

local function leaky(k, limit, interval, weight, max_wait)
  local per_unit = interval / limit
  local tat = now
  if sA[k] ~= nil and sA[k] > now then tat = sA[k] end
  local allowed, wait, after = true, 0, tat
  if max_wait == -1 then
    after = tat + weight * per_unit
    if after < now then after = now end
  elseif max_wait == -3 then
    wait = tat + weight * per_unit - now - interval
    allowed = wait <= 0
  else
    wait = tat + weight * per_unit - now - interval
    if wait <= max_wait then after = tat + weight * per_unit else allowed = false end
  end
  local backlog = after - now
  if after ~= tat then
    sA[k], sB[k], dirty[k], ttl[k] = after, 0, true, ttl_ms(backlog)
  end
  local remaining = math.floor((interval - backlog) / per_unit)
  if remaining < 0 then remaining = 0 end
  if wait < 0 then wait = 0 end
  return allowed, remaining, math.ceil(wait), math.ceil(backlog)
end

for i = 2, nargs, 5 do
  local code = tonumber(ARGV[i])
  local kind = code % 4
  local k = (code - kind) / 4
  local weight, limit, interval, max_wait =
    tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  assert(KEYS[k] and limit and interval and max_wait and weight, 'limiter: malformed call')
  if not loaded[k] then load(k) end
  local allowed, remaining, retry, reset_after
  if max_wait == -2 then
    sA[k], sB[k], dirty[k] = nil, nil, true
    allowed, remaining, retry, reset_after = true, limit, 0, 0
  elseif kind == 2 then
    allowed, remaining, retry, reset_after = leaky(k, limit, interval, weight, max_wait)
  else
    local start, used = now, 0
    if kind == 0 then
      start = math.floor(now / interval) * interval
      if sA[k] == start then used = sB[k] end
    elseif sA[k] ~= nil and now < sA[k] + interval then
      start, used = sA[k], sB[k]
    end
    allowed, remaining, retry, reset_after = counter(k, used, start, start + interval, limit, weight, max_wait)
  end
  if allowed then out[nout + 1] = 1 else out[nout + 1] = 0 end
  out[nout + 2], out[nout + 3], out[nout + 4] = remaining, retry, reset_after
  nout = nout + 4
end

for k in pairs(dirty) do
  if sA[k] == nil then
    redis.call('DEL', KEYS[k])
  else
    redis.call('SET', KEYS[k], struct.pack('<dd', sA[k], sB[k]), 'PX', ttl[k])
  end
end
return out
