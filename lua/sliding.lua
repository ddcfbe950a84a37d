-- sliding.lua: decides a batch of sliding-window limiter calls atomically, in order. Each
-- call checks all of its limiter's windows and charges all or none. Mirrors
-- src/core/sliding.rs step for step.
--
-- KEYS[k]   the sliding log of one limiter: a sorted set, score = the call's time (µs),
--           member = '<before>:<weight>', before = the running total of the weight logged
--           before it, zero-padded to 17 digits (so equal scores sort in log order)
-- ARGV[1]   now_us: integer µs, or '' to use the server clock (TIME)
-- then      per call: <key index (1-based)> <op> <weight> <window count> then per window
--           <limit> <interval_us>; op (the sliding kind's operation codes,
--           src/store/kinds/sliding.rs) 0: take (charge every window if all have room),
--           1: peek (the answer of a take, charging nothing), 2: reset (delete the log),
--           3: block (nobody admitted for <weight> µs; the log is kept)
-- Returns   flat array per call: allowed (0/1), retry_after_us, then per window:
--           remaining, retry_after_us; or 0, -2, then 0, 0 per window when the call's key
--           holds a value of another type (another writer uses our key prefix): that call is
--           not applied (a reset deletes nothing), the batch's other calls are decided as usual
-- Notes     a window of interval I covers (now - I, now]; every call first drops the calls
--           that left the longest window. The log's TTL (PEXPIRE, whole ms) runs until its
--           newest call leaves the longest window, at most half a window later (it is set by
--           the first call of each half-window only); when now_us is given, exactly until
--           then plus 60 s (a test's ManualClock: Redis still expires keys on its own
--           clock). A block is the member 'b:<until_us>' at score -1, below every call
--           (times are >= 0): trims start above it, window reads exclude it; while it lies
--           ahead, a take is answered as a peek, refused, remaining 0, retry no earlier than
--           its end, and the key lives at least until then. All KEYS share one hash slot: the
--           caller groups calls by slot.
--           A take or a peek first trims its log with redis.pcall (the trim writes nothing to
--           a key of another type) and reads the two lowest members: the block, if any, and
--           the oldest call, which is the longest window's first. A block or a reset first
--           reads its key's block with redis.pcall (a reset only the first time its key is
--           seen). Either way a key of another type is found before anything of the call is
--           written.

local nargs = #ARGV
assert(nargs >= 5 and #KEYS >= 1, 'sliding: expected keys and calls')

-- @include clock
-- @include wrong_type
local MAX_DELAY_US = 9e15
local REBASE_AT = 1e15

local function num(x)
  return string.format('%.17g', x)
end

local function member(before, weight)
  return string.format('%017.0f:%.0f', before, weight)
end

-- the end of the block on `key`, or 0; nil when the key holds another type
local function blocked_until(key)
  local b = redis.pcall('ZRANGEBYSCORE', key, -1, -1)
  if wrong_type(b) then return nil end
  if b[1] then return tonumber(string.sub(b[1], 3)) or 0 end
  return 0
end

local function parse(m)
  local c = string.find(m, ':', 1, true)
  return tonumber(string.sub(m, 1, c - 1)), tonumber(string.sub(m, c + 1))
end

-- µs until `needed` units have left the window whose oldest call is `first` (its member),
-- with `start` = its before: binary search by rank for the first call whose running total
-- reaches `needed`; every call weighs at least 1, so it is at most `needed` ranks in.
local function retry_us(key, first, start, needed, interval)
  local lo = redis.call('ZRANK', key, first)
  local hi = redis.call('ZCARD', key)
  if lo + needed < hi then hi = lo + needed end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local e = redis.call('ZRANGE', key, mid, mid)
    local b, w = parse(e[1])
    if b + w - start < needed then lo = mid + 1 else hi = mid end
  end
  local e = redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
  if not e[1] then return MAX_DELAY_US end
  local r = tonumber(e[2]) + interval - now
  if r < 0 then r = 0 end
  return r
end

local out, nout = {}, 0
-- per key index: seen (read once by this script), wrong (holds another type)
local seen, wrong = {}, {}
local i = 2
while i <= nargs do
  local k, op, weight, nw = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  assert(KEYS[k] and op and weight and nw and nw >= 1 and i + 3 + 2 * nw <= nargs, 'sliding: malformed call')
  local key = KEYS[k]
  local limits, intervals = {}, {}
  local longest = 0
  for w = 1, nw do
    limits[w], intervals[w] = tonumber(ARGV[i + 2 + 2 * w]), tonumber(ARGV[i + 3 + 2 * w])
    if intervals[w] > longest then longest = intervals[w] end
  end
  i = i + 4 + 2 * nw
  local untl = 0
  -- takes and peeks: the oldest call left after the trim (the longest window's first)
  local oldest = nil
  if wrong[k] then
    untl = nil
  elseif op <= 1 then
    -- the trim is the type test (it writes nothing to a key of another type); then the two
    -- lowest members: the block (score -1, below every call) if any, and the oldest call
    local trimmed = redis.pcall('ZREMRANGEBYSCORE', key, '(-1', num(now - longest))
    if wrong_type(trimmed) then
      untl = nil
      wrong[k] = true
    else
      local low = redis.call('ZRANGE', key, 0, 1, 'WITHSCORES')
      oldest = low[1]
      if oldest and tonumber(low[2]) == -1 then
        untl = tonumber(string.sub(oldest, 3)) or 0
        oldest = low[3]
      end
    end
  elseif op ~= 2 or not seen[k] then
    untl = blocked_until(key)
    if untl == nil then wrong[k] = true end
  end
  seen[k] = true
  if untl == nil then
    out[nout + 1], out[nout + 2] = 0, -2
    nout = nout + 2
    for w = 1, nw do
      out[nout + 1], out[nout + 2] = 0, 0
      nout = nout + 2
    end
  elseif op == 3 then
    -- weight = the block's duration
    local left = now + weight
    if untl > left then left = untl end
    redis.call('ZREMRANGEBYSCORE', key, -1, -1)
    redis.call('ZADD', key, -1, 'b:' .. string.format('%.0f', left))
    local px = math.ceil((left - now) / 1000) + margin
    local pttl = redis.call('PTTL', key)
    if pttl > px then px = pttl end
    if px < 1 then px = 1 end
    redis.call('PEXPIRE', key, px)
    out[nout + 1], out[nout + 2] = 0, left - now
    nout = nout + 2
    for w = 1, nw do
      out[nout + 1], out[nout + 2] = 0, left - now
      nout = nout + 2
    end
  elseif op == 2 then
    redis.call('DEL', key)
    out[nout + 1], out[nout + 2] = 1, 0
    nout = nout + 2
    for w = 1, nw do
      out[nout + 1], out[nout + 2] = limits[w], 0
      nout = nout + 2
    end
  else
    local blocked = untl > now
    if blocked then op = 1 end
    local total, newest = 0, nil
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if last[1] and tonumber(last[2]) >= 0 then
      local b, w = parse(last[1])
      total, newest = b + w, tonumber(last[2])
    end
    local used, retry = {}, {}
    local allowed = true
    for w = 1, nw do
      local from = now - intervals[w]
      if from < -1 then from = -1 end
      -- after the trim every call left is in the longest window: its first is the oldest
      local first
      if intervals[w] == longest then
        first = { oldest }
      else
        first = redis.call('ZRANGEBYSCORE', key, '(' .. num(from), '+inf', 'LIMIT', 0, 1)
      end
      local u, start = 0, 0
      if first[1] then
        start = parse(first[1])
        u = total - start
      end
      used[w], retry[w] = u, 0
      if u + weight > limits[w] then
        allowed = false
        if first[1] then
          retry[w] = retry_us(key, first[1], start, u + weight - limits[w], intervals[w])
        else
          retry[w] = MAX_DELAY_US
        end
      end
    end
    local charged = 0
    if allowed and op == 0 then
      charged = weight
      if weight > 0 then
        local at = now
        if newest and newest > now then at = newest end
        redis.call('ZADD', key, num(at), member(total, weight))
        if total + weight > REBASE_AT then
          local all = redis.call('ZRANGEBYSCORE', key, 0, '+inf', 'WITHSCORES')
          local base = parse(all[1])
          local left = redis.call('PTTL', key)
          redis.call('ZREMRANGEBYSCORE', key, 0, '+inf')
          for j = 1, #all, 2 do
            local b, w = parse(all[j])
            redis.call('ZADD', key, all[j + 1], member(b - base, w))
          end
          if left > 0 then redis.call('PEXPIRE', key, left) end
        end
        -- under the server clock the TTL runs to the end of the current half-window plus the
        -- longest window, set by the first call of each half-window: later calls in it leave
        -- the log no later than that
        local half = longest / 2
        if margin > 0 then
          local ttl = math.ceil((at + longest - now) / 1000) + margin
          if ttl < 1 then ttl = 1 end
          redis.call('PEXPIRE', key, ttl)
        elseif not newest or math.floor(newest / half) ~= math.floor(at / half) then
          local ttl = math.ceil(((math.floor(at / half) + 1) * half + longest - now) / 1000)
          if ttl < 1 then ttl = 1 end
          redis.call('PEXPIRE', key, ttl)
        end
      end
    end
    local worst = 0
    if allowed then out[nout + 1] = 1 else out[nout + 1] = 0 end
    nout = nout + 2
    local at = nout
    for w = 1, nw do
      local r = limits[w] - used[w] - charged
      if r < 0 then r = 0 end
      if retry[w] > worst then worst = retry[w] end
      out[nout + 1], out[nout + 2] = r, retry[w]
      nout = nout + 2
    end
    if allowed then out[at] = 0 else out[at] = worst end
    if blocked then
      -- refused until the block's end; no window reports room
      local left = untl - now
      left = left + (-left) % 1
      out[at - 1] = 0
      if out[at] < left then out[at] = left end
      for w = 1, nw do
        out[at + 2 * w - 1] = 0
        if out[at + 2 * w] < left then out[at + 2 * w] = left end
      end
    end
  end
end
return out
