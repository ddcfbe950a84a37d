-- sliding_counter.lua: decides a batch of approximate sliding-window calls (two counters per
-- window, Cloudflare's estimate) atomically, in order. Each call checks all of its limiter's
-- windows and charges all or none. Mirrors src/core/sliding_counter.rs step for step (the same
-- doubles in the same order).
--
-- KEYS[k]   the state of one limiter: a string of little-endian doubles (struct.pack '<d'):
--           the end of a block (µs, 0 when never blocked), then per window the start of the
--           current calendar window (µs, a multiple of the interval), the weight of the
--           calendar window before it, the weight since that start: 8 + 24 bytes per window
--           (one read and one write per call: GET, SET ... PX)
-- ARGV[1]   now_us: integer µs, or '' to use the server clock (TIME)
-- ARGV[2]   P, the number of parameter sets, then P sets: <weight> <window count n> then per
--           window <limit> <interval_us> (a batch's calls mostly share their parameters, and
--           parsing a number costs ~900 instructions: each set is read once)
-- then      one number per call: <(key index * 1048576 + parameter set) * 8 + op> (both
--           1-based); op (the kind's operation codes, src/store/kinds): 0 take
--           (charge every window if all have room), 1 peek (a take's answer, charging
--           nothing), 2 reset (delete the state), 3 block (nobody admitted for <weight> µs;
--           the counts are kept), 4 adjust (charge <weight> unconditionally; negative
--           refunds, from the previous calendar window first, never below zero)
-- Returns   flat array per call: allowed (0/1), retry_after_us, then per window: remaining,
--           retry_after_us, reset_after_us; or 0, -2 and zeros when the call's key holds a
--           value of another type (another writer uses our prefix): that call is not applied,
--           the batch's other calls are decided as usual
-- Notes     the estimate of a window of interval I at now is prev × (I − elapsed) / I + curr,
--           elapsed = now − start clamped to [0, I]; it only falls as time passes, so a refused
--           call's retry is exact: the first whole µs that fits, from the closed form checked
--           against the estimate itself. The TTL (SET PX, whole ms) runs until every window's
--           estimate is 0 and any block has ended; when now_us is given, plus 60 s (a test's
--           ManualClock: Redis expires keys on its own clock), rounded up to whole seconds (each
--           distinct PX is formatted once per script call). While a block lies ahead, a take
--           is answered as a peek, refused, remaining 0, retry no earlier than its end. Every
--           call reads its key with redis.pcall before writing. All KEYS share one hash slot.

local nargs = #ARGV
assert(nargs >= 5 and #KEYS >= 1, 'sliding_counter: expected keys and calls')

-- @include clock
-- @include wrong_type
local MAX_DELAY_US = 9e15

-- counters rolled forward to the calendar window holding t (kept when the clock stepped back)
local function rolled(s, p, c, interval, t)
  local start = math.floor(t / interval) * interval
  if start <= s then return s, p, c end
  if start == s + interval then return start, c, 0 end
  return start, 0, 0
end

local function estimate(s, p, c, interval, t)
  local elapsed = t - s
  if elapsed < 0 then elapsed = 0 end
  if elapsed > interval then elapsed = interval end
  return p * (interval - elapsed) / interval + c
end

local function fits(s, p, c, limit, interval, weight, t)
  local rs, rp, rc = rolled(s, p, c, interval, t)
  return estimate(rs, rp, rc, interval, t) + weight <= limit
end

-- µs until weight fits this window (its stored counters s, p, c); 0 if it fits now
local function retry_us(s, p, c, limit, interval, weight)
  if fits(s, p, c, limit, interval, weight, now) then return 0 end
  if weight > limit then return MAX_DELAY_US end
  local rs, rp, rc = rolled(s, p, c, interval, now)
  local room = limit - weight - rc
  local guess
  if room >= 0 and rp > 0 then
    guess = rs + math.ceil(interval - room * interval / rp)
  else
    local nxt = rs + interval
    room = limit - weight
    if rc > 0 then
      local e = math.ceil(interval - room * interval / rc)
      if e < 0 then e = 0 end
      guess = nxt + e
    else
      guess = nxt
    end
  end
  local at = guess
  if at < now + 1 then at = now + 1 end
  if fits(s, p, c, limit, interval, weight, at)
    and (at - 1 <= now or not fits(s, p, c, limit, interval, weight, at - 1)) then
    return at - now
  end
  local lo, hi, step = now, at, 1
  while not fits(s, p, c, limit, interval, weight, hi) do
    lo = hi
    hi = hi + step
    step = step * 2
  end
  while hi - lo > 1 do
    local mid = lo + math.floor((hi - lo) / 2)
    if fits(s, p, c, limit, interval, weight, mid) then hi = mid else lo = mid end
  end
  return hi - now
end

local function reset_us(s, p, c, interval)
  local rs, rp, rc = rolled(s, p, c, interval, now)
  if rc > 0 then return rs + 2 * interval - now end
  if rp > 0 then return rs + interval - now end
  return 0
end

local out, nout = {}, 0
local function push(a, b)
  out[nout + 1], out[nout + 2] = a, b
  nout = nout + 2
end

-- the parameter sets: weight, window count, limits and intervals
local nsets = tonumber(ARGV[2])
assert(nsets and nsets >= 1, 'sliding_counter: malformed parameter sets')
local setW, setN, setL, setI = {}, {}, {}, {}
local a = 3
for p = 1, nsets do
  local weight, nw = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  assert(weight and nw and nw >= 1 and a + 1 + 2 * nw <= nargs, 'sliding_counter: malformed parameter set')
  local limits, intervals = {}, {}
  for w = 1, nw do
    limits[w], intervals[w] = tonumber(ARGV[a + 2 * w]), tonumber(ARGV[a + 1 + 2 * w])
  end
  setW[p], setN[p], setL[p], setI[p] = weight, nw, limits, intervals
  a = a + 2 + 2 * nw
end

-- one call's state (reused from call to call): the block's end, per window S, P, C
local untl, S, P, C, retry = 0, {}, {}, {}, {}
local pxs = {}

-- writes the state of KEYS[k] with its TTL: the span until every window's estimate is 0 or
-- the block ends (whole seconds), or deletes it when nothing is left to remember
local function save(key, nw, intervals)
  local span = untl - now
  local packed
  if nw == 1 then
    packed = struct.pack('<dddd', untl, S[1], P[1], C[1])
  else
    local parts = { struct.pack('<d', untl) }
    for w = 1, nw do
      parts[w + 1] = struct.pack('<ddd', S[w], P[w], C[w])
    end
    packed = table.concat(parts)
  end
  for w = 1, nw do
    local r = reset_us(S[w], P[w], C[w], intervals[w])
    if r > span then span = r end
  end
  if span > 0 then
    local px = math.ceil(span / 1000000) * 1000 + margin
    local text = pxs[px]
    if not text then
      text = string.format('%.0f', px)
      pxs[px] = text
    end
    redis.call('SET', key, packed, 'PX', text)
  else
    redis.call('DEL', key)
  end
end

local wrong = {}
for i = a, nargs do
  local head = tonumber(ARGV[i])
  local op = head % 8
  local kp = (head - op) / 8
  local p = kp % 1048576
  local k = (kp - p) / 1048576
  local key = KEYS[k]
  assert(key and setN[p], 'sliding_counter: malformed call')
  local weight, nw, limits, intervals = setW[p], setN[p], setL[p], setI[p]
  untl = 0
  if not wrong[k] then
    local v = redis.pcall('GET', key)
    if wrong_type(v) then
      wrong[k] = true
    elseif v and (#v < 8 or (#v - 8) % 24 ~= 0) then
      -- a string that is not ours (another writer uses the prefix)
      wrong[k] = true
    else
      local stored = 0
      if v then
        untl = struct.unpack('<d', v, 1)
        stored = (#v - 8) / 24
      end
      for w = 1, nw do
        if w <= stored then
          S[w], P[w], C[w] = struct.unpack('<ddd', v, 9 + 24 * (w - 1))
        else
          S[w], P[w], C[w] = 0, 0, 0
        end
      end
    end
  end
  if wrong[k] then
    push(0, -2)
    for w = 1, nw do
      push(0, 0)
      out[nout + 1] = 0
      nout = nout + 1
    end
  else
    if op == 2 then
      redis.call('DEL', key)
      push(1, 0)
      for w = 1, nw do
        push(limits[w], 0)
        out[nout + 1] = 0
        nout = nout + 1
      end
    elseif op == 3 then
      -- weight = the block's duration
      local left = now + weight
      if untl > left then left = untl end
      untl = left
      save(key, nw, intervals)
      push(0, left - now)
      for w = 1, nw do
        push(0, left - now)
        local r = reset_us(S[w], P[w], C[w], intervals[w])
        if r < left - now then r = left - now end
        out[nout + 1] = r
        nout = nout + 1
      end
    else
      local blocked = untl > now and op ~= 4
      if blocked then op = 1 end
      local allowed = true
      for w = 1, nw do
        local ok = op == 4 or fits(S[w], P[w], C[w], limits[w], intervals[w], weight, now)
        if not ok then allowed = false end
        if ok then retry[w] = 0 else retry[w] = retry_us(S[w], P[w], C[w], limits[w], intervals[w], weight) end
      end
      if op == 4 or (allowed and op == 0 and weight > 0) then
        for w = 1, nw do
          local rs, rp, rc = rolled(S[w], P[w], C[w], intervals[w], now)
          local curr
          if weight >= 0 then
            curr = rc + weight
          else
            -- a refund comes off the previous window first (admits less, never more)
            local from_prev = -weight
            if rp < from_prev then from_prev = rp end
            rp = rp - from_prev
            curr = rc + weight + from_prev
            if curr < 0 then curr = 0 end
          end
          S[w], P[w], C[w] = rs, rp, curr
        end
        save(key, nw, intervals)
      end
      allowed = allowed and not blocked
      local worst = 0
      push(allowed and 1 or 0, 0)
      local at = nout
      for w = 1, nw do
        local rs, rp, rc = rolled(S[w], P[w], C[w], intervals[w], now)
        local left = math.floor(limits[w] - estimate(rs, rp, rc, intervals[w], now))
        if left < 0 or blocked then left = 0 end
        local r = retry[w]
        local reset = reset_us(rs, rp, rc, intervals[w])
        if blocked then
          local b = untl - now
          b = b + (-b) % 1
          if r < b then r = b end
          if reset < b then reset = b end
        end
        if r > worst then worst = r end
        push(left, r)
        out[nout + 1] = reset
        nout = nout + 1
      end
      if not allowed then out[at] = worst end
    end
  end
end
return out
