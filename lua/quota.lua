-- quota.lua: Sentry-compatible granular quotas on counters that share one hash slot: read
-- what they used, check-and-charge requests atomically, or add amounts. Mirrors
-- src/core/quota.rs (Counter, plan) step for step.
--
-- KEYS[c]   one counter (prefix, window, granularity): a sorted set of its charged
--           granules, score = granule, member = '<granule>:<before>:<count>' (before = the
--           running total charged to older granules)
-- ARGV[1]   timestamp: whole seconds, or '' to use the server clock (TIME)
-- ARGV[2]   ttl margin, ms, added to every PEXPIRE (60 s under a test clock)
-- ARGV[3]   mode: 1 read, 2 charge, 3 add
-- ARGV[4]   C = #KEYS, then per counter: <window_s> <granularity_s>
-- then      read: nothing; charge: per request <requested> <q> then q x (<counter index
--           (1-based)> <limit>); add: per counter <amount> (may be negative: a refund)
-- Returns   read: timestamp, then per counter the units used in the window at timestamp;
--           charge: timestamp, then per request: granted, then per quota its remaining as
--           the request saw it (after earlier requests of the call, clamped at 0);
--           add: timestamp
-- Notes     a call at t counts granules g0 - n + 1 .. g0, g0 = floor(t / granularity) - 1,
--           n = window / granularity, and charges g0 only. A request charges each distinct
--           counter once; a denied request (granted 0) writes nothing. Every counter
--           written gets PEXPIRE (window + granularity) s + margin.

local C = tonumber(ARGV[4])
assert(C and C == #KEYS and #ARGV >= 4 + 2 * C, 'quota: expected counters')
local t
if ARGV[1] == '' then
  t = tonumber(redis.call('TIME')[1])
else
  t = tonumber(ARGV[1])
end
local margin, mode = tonumber(ARGV[2]), tonumber(ARGV[3])
local REBASE_AT = 1e15

local g0, n, ttl = {}, {}, {}
for c = 1, C do
  local window, gran = tonumber(ARGV[3 + 2 * c]), tonumber(ARGV[4 + 2 * c])
  g0[c] = math.floor(t / gran) - 1
  n[c] = math.floor(window / gran)
  ttl[c] = (window + gran) * 1000 + margin
end
local at = 5 + 2 * C

local function num(x)
  return string.format('%.17g', x)
end

local function mk(g, before, count)
  return string.format('%.0f:%.0f:%.0f', g, before, count)
end

-- before, count of a member
local function parse(m)
  local a = string.find(m, ':', 1, true)
  local b = string.find(m, ':', a + 1, true)
  return tonumber(string.sub(m, a + 1, b - 1)), tonumber(string.sub(m, b + 1))
end

local function used(c)
  local key = KEYS[c]
  local first = redis.call('ZRANGEBYSCORE', key, num(g0[c] - n[c] + 1), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if not first[1] or tonumber(first[2]) > g0[c] then return 0 end
  local last = redis.call('ZREVRANGEBYSCORE', key, num(g0[c]), '-inf', 'LIMIT', 0, 1)
  local start = parse(first[1])
  local b, k = parse(last[1])
  return b + k - start
end

local function add(c, amount)
  local key, g = KEYS[c], g0[c]
  local cur = redis.call('ZRANGEBYSCORE', key, num(g), num(g))
  local delta = 0
  if cur[1] then
    local b, k = parse(cur[1])
    local after = k + amount
    if after < 0 then after = 0 end
    delta = after - k
    if delta ~= 0 then
      redis.call('ZREM', key, cur[1])
      if after > 0 then redis.call('ZADD', key, num(g), mk(g, b, after)) end
    end
  elseif amount > 0 then
    local before = 0
    local pred = redis.call('ZREVRANGEBYSCORE', key, '(' .. num(g), '-inf', 'LIMIT', 0, 1)
    if pred[1] then
      local b, k = parse(pred[1])
      before = b + k
    else
      local succ = redis.call('ZRANGEBYSCORE', key, '(' .. num(g), '+inf', 'LIMIT', 0, 1)
      if succ[1] then before = parse(succ[1]) end
    end
    redis.call('ZADD', key, num(g), mk(g, before, amount))
    delta = amount
  end
  if delta ~= 0 then
    -- an older granule changed: the newer ones' running totals move with it
    local later = redis.call('ZRANGEBYSCORE', key, '(' .. num(g), '+inf', 'WITHSCORES')
    for j = 1, #later, 2 do
      local b, k = parse(later[j])
      redis.call('ZREM', key, later[j])
      redis.call('ZADD', key, later[j + 1], mk(tonumber(later[j + 1]), b + delta, k))
    end
  end
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest[1] then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. num(tonumber(newest[2]) - 2 * n[c] + 1))
    local b, k = parse(newest[1])
    if b + k > REBASE_AT then
      local all = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
      local base = parse(all[1])
      redis.call('DEL', key)
      for j = 1, #all, 2 do
        local bj, kj = parse(all[j])
        redis.call('ZADD', key, all[j + 1], mk(tonumber(all[j + 1]), bj - base, kj))
      end
    end
    redis.call('PEXPIRE', key, ttl[c])
  end
end

local out = { t }
if mode == 1 then
  assert(#ARGV == at - 1, 'quota: read takes no more arguments')
  for c = 1, C do out[c + 1] = used(c) end
elseif mode == 3 then
  assert(#ARGV == at - 1 + C, 'quota: add takes one amount per counter')
  for c = 1, C do
    local amount = tonumber(ARGV[at + c - 1])
    if amount ~= 0 then add(c, amount) end
  end
else
  assert(mode == 2, 'quota: unknown mode')
  local base, charged = {}, {}
  local i = at
  while i <= #ARGV do
    local requested, q = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
    assert(requested and q and q >= 1 and i + 1 + 2 * q <= #ARGV, 'quota: malformed request')
    local granted = requested
    local slot = #out + 1
    out[slot] = 0
    local mine = {}
    for j = 1, q do
      local c, limit = tonumber(ARGV[i + 2 * j]), tonumber(ARGV[i + 1 + 2 * j])
      assert(KEYS[c], 'quota: bad counter index')
      if base[c] == nil then
        base[c] = used(c)
        charged[c] = 0
      end
      local r = limit - base[c] - charged[c]
      if r < 0 then r = 0 end
      if r < granted then granted = r end
      out[slot + j] = r
      mine[c] = true
    end
    out[slot] = granted
    for c in pairs(mine) do charged[c] = charged[c] + granted end
    i = i + 2 + 2 * q
  end
  for c = 1, C do
    if charged[c] and charged[c] > 0 then add(c, charged[c]) end
  end
end
return out
