-- quota.lua: Sentry-compatible granular quotas on counters that share one hash slot: read
-- what they used, check-and-charge requests atomically, or add amounts. Mirrors
-- src/core/quota.rs (Counter, plan) step for step.
--
-- KEYS[c]   one counter (prefix, window, granularity): a sorted set of its charged
--           granules, score = granule, member = '<granule>:<before>:<count>' (before = the
--           running total charged to older granules)
-- ARGV[1]   timestamp: whole seconds, or '' to use the server clock (TIME)
-- ARGV[2]   ttl margin, ms, added to every PEXPIRE (60 s under a test clock)
-- ARGV[3]   mode: 1 read, 2 charge, 3 add (this script's own; a call's check / checkAndUse /
--           use codes are the quota kind's, src/store/kinds/quota, which sends these phases)
-- ARGV[4]   C = #KEYS, then per counter: <window_s> <granularity_s>
-- then      read: nothing; charge: per caller's call <r>, then its r requests, each
--           <requested> <q> then q x (<counter index (1-based)> <limit>); add: per counter
--           <amount> (may be negative: a refund)
-- Returns   read: timestamp, then per counter the units used in the window at timestamp;
--           charge: timestamp, then per request: granted, then per quota its remaining as
--           the request saw it (after earlier requests, clamped at 0);
--           add: timestamp.
--           A counter holding a value of another type (another writer uses our key prefix):
--           read and add answer { -2 } alone and write nothing; charge answers granted -2
--           and remaining 0 for every request of each caller's call that names such a
--           counter, and charges none of that call's requests (the other calls go on).
-- Notes     a call at t counts granules g0 - n + 1 .. g0, g0 = floor(t / granularity) - 1,
--           n = window / granularity, and charges g0 only. A request charges each distinct
--           counter once; a denied request (granted 0) writes nothing. Every counter
--           written gets PEXPIRE (window + granularity) s + margin.
--           A counter's first read (redis.pcall) comes before anything is written to it.

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
-- @include wrong_type

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

-- the newest charged granule of each counter: { score, member } or false; wrong[c]: the
-- counter holds another type
local newest, wrong = {}, {}
local function load_newest(c)
  if newest[c] == nil then
    local e = redis.pcall('ZRANGE', KEYS[c], -1, -1, 'WITHSCORES')
    if wrong_type(e) then
      wrong[c] = true
      newest[c] = false
    elseif e[1] then
      newest[c] = { tonumber(e[2]), e[1] }
    else
      newest[c] = false
    end
  end
  return newest[c]
end

-- whether any of the counters 1..C (with a non-zero amount, when `amounts` is given) holds
-- another type; each is read once
local function any_wrong(amounts)
  local found = false
  for c = 1, C do
    if not amounts or tonumber(amounts[c]) ~= 0 then
      load_newest(c)
      if wrong[c] then found = true end
    end
  end
  return found
end

local function used(c)
  local key = KEYS[c]
  local top = load_newest(c)
  if not top then return 0 end
  local last = top[2]
  if top[1] > g0[c] then
    last = redis.call('ZREVRANGEBYSCORE', key, num(g0[c]), '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if not last[1] or tonumber(last[2]) < g0[c] - n[c] + 1 then return 0 end
    last = last[1]
  elseif top[1] < g0[c] - n[c] + 1 then
    return 0
  end
  local first = redis.call('ZRANGEBYSCORE', key, num(g0[c] - n[c] + 1), '+inf', 'LIMIT', 0, 1)
  local start = parse(first[1])
  local b, k = parse(last)
  return b + k - start
end

local function rebase(key)
  local all = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local base = parse(all[1])
  local left = redis.call('PTTL', key)
  redis.call('DEL', key)
  for j = 1, #all, 2 do
    local bj, kj = parse(all[j])
    redis.call('ZADD', key, all[j + 1], mk(tonumber(all[j + 1]), bj - base, kj))
  end
  if left > 0 then redis.call('PEXPIRE', key, left) end
end

-- the common cases: `g` is the newest granule (update it) or newer than all (append); under
-- the server clock the TTL is set when a granule is created: a granule stops counting at
-- most window + granularity after its first charge
local function add_newest(c, amount, top)
  local key, g = KEYS[c], g0[c]
  local total
  if top and top[1] == g then
    local b, k = parse(top[2])
    local after = k + amount
    if after < 0 then after = 0 end
    if after == k then return end
    -- add before removing: a sorted set left empty is deleted, and its TTL with it
    if after > 0 then redis.call('ZADD', key, num(g), mk(g, b, after)) end
    redis.call('ZREM', key, top[2])
    total = b + after
    if margin > 0 and after > 0 then redis.call('PEXPIRE', key, ttl[c]) end
  else
    if amount <= 0 then return end
    local before = 0
    if top then
      local b, k = parse(top[2])
      before = b + k
      redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. num(g - 2 * n[c] + 1))
    end
    redis.call('ZADD', key, num(g), mk(g, before, amount))
    total = before + amount
    redis.call('PEXPIRE', key, ttl[c])
  end
  if total > REBASE_AT then rebase(key) end
end

local function add(c, amount)
  local key, g = KEYS[c], g0[c]
  local top = load_newest(c)
  if not top or top[1] <= g then return add_newest(c, amount, top) end
  -- an older granule (an old timestamp): the general case
  local cur = redis.call('ZRANGEBYSCORE', key, num(g), num(g))
  local delta = 0
  if cur[1] then
    local b, k = parse(cur[1])
    local after = k + amount
    if after < 0 then after = 0 end
    delta = after - k
    if delta ~= 0 then
      if after > 0 then redis.call('ZADD', key, num(g), mk(g, b, after)) end
      redis.call('ZREM', key, cur[1])
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
      redis.call('ZADD', key, later[j + 1], mk(tonumber(later[j + 1]), b + delta, k))
      redis.call('ZREM', key, later[j])
    end
  end
  local top_now = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if top_now[1] then
    -- a new granule drops the old ones, never the window of the granule just charged (see
    -- core/quota.rs `Counter::add`)
    if not cur[1] and amount > 0 then
      local bound = tonumber(top_now[2]) - 2 * n[c] + 1
      if g - n[c] + 1 < bound then bound = g - n[c] + 1 end
      redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. num(bound))
    end
    local b, k = parse(top_now[1])
    if b + k > REBASE_AT then rebase(key) end
    redis.call('PEXPIRE', key, ttl[c])
  end
end

local WRONG_TYPE = -2
local out = { t }
if mode == 1 then
  assert(#ARGV == at - 1, 'quota: read takes no more arguments')
  if any_wrong() then return { WRONG_TYPE } end
  for c = 1, C do out[c + 1] = used(c) end
elseif mode == 3 then
  assert(#ARGV == at - 1 + C, 'quota: add takes one amount per counter')
  if any_wrong({ unpack(ARGV, at, at + C - 1) }) then return { WRONG_TYPE } end
  for c = 1, C do
    local amount = tonumber(ARGV[at + c - 1])
    if amount ~= 0 then add(c, amount) end
  end
else
  assert(mode == 2, 'quota: unknown mode')
  local base, charged = {}, {}
  local i = at
  while i <= #ARGV do
    local r = tonumber(ARGV[i])
    assert(r and r >= 0, 'quota: malformed call')
    i = i + 1
    -- every counter of the call is read before any of its requests is decided
    local bad, j0 = false, i
    for _ = 1, r do
      local q = tonumber(ARGV[j0 + 1])
      assert(tonumber(ARGV[j0]) and q and q >= 1 and j0 + 1 + 2 * q <= #ARGV, 'quota: malformed request')
      for j = 1, q do
        local c = tonumber(ARGV[j0 + 2 * j])
        assert(KEYS[c], 'quota: bad counter index')
        load_newest(c)
        if wrong[c] then bad = true end
      end
      j0 = j0 + 2 + 2 * q
    end
    for _ = 1, r do
      local requested, q = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
      local slot = #out + 1
      if bad then
        out[slot] = WRONG_TYPE
        for j = 1, q do out[slot + j] = 0 end
      else
        local granted = requested
        out[slot] = 0
        local mine = {}
        for j = 1, q do
          local c, limit = tonumber(ARGV[i + 2 * j]), tonumber(ARGV[i + 1 + 2 * j])
          if base[c] == nil then
            base[c] = used(c)
            charged[c] = 0
          end
          local left = limit - base[c] - charged[c]
          if left < 0 then left = 0 end
          if left < granted then granted = left end
          out[slot + j] = left
          mine[c] = true
        end
        out[slot] = granted
        for c in pairs(mine) do charged[c] = charged[c] + granted end
      end
      i = i + 2 + 2 * q
    end
  end
  for c = 1, C do
    if charged[c] and charged[c] > 0 then add(c, charged[c]) end
  end
end
return out
