-- limit.lua: decides a batch of rate-limiter calls (bucket, window, leaky/points)
-- atomically, in order. Mirrors src/core/limit/mod.rs and src/core/{bucket,window,leaky}.rs operation for
-- operation (same doubles, same order).
--
-- KEYS[k]   limiter state: 16 bytes, struct '<dd' = a, b (see core/limit/mod.rs `State`), or 24
--           bytes '<ddd' = a, b, blocked_until_us while the key is blocked
-- ARGV[1]   now_us: integer µs, or '' to use the server clock (TIME)
-- then      5 numbers per call: <key index (1-based) * 4 + kind> <weight> <limit>
--           <interval_us> <max_wait_us>
--           (the codes are the limit kind's operation codes, src/store/kinds/limit.rs)
--           kind: 0 bucket, 1 window, 2 leaky; max_wait_us >= 0: take (charge if it fits
--           now, or for leaky within max_wait_us by reserving a later slot), -1: adjust
--           (charge unconditionally, negative refunds), -2: reset (delete the key),
--           -3: peek (the answer of a take with max_wait_us 0, charging nothing), -4: block
--           (nobody admitted for <weight> µs; the counts are kept). While blocked, takes and
--           peeks are refused (remaining 0, retry no earlier than the block's end).
--           -5: group (a take with max wait 0, all or nothing with the -6 calls right after
--           it: -6 member): every member is peeked first; only if all admit are all taken,
--           else nothing is written and each member answers its peek. A group's keys are
--           distinct (the caller checks). -7: backoff (window only, weight >= 1: every call
--           charged, admitted while within the limit; a call that takes the count `over` it
--           ends the window interval * 2^(over - 1) from now, at most 10 years); -8: the same,
--           the window ending one interval from such a call. -9: tally (window only, right
--           after a take, a backoff count or a group, on a key of its own): charged
--           unconditionally (as -1) when that call (any member of that group) was refused,
--           else a peek (an HTTP door's `ban` counting refusals in the decision's own call).
--           -10: throttle (window only; weight = a block's duration, µs, >= 0; a cost of 1):
--           @nestjs/throttler's storage, mirroring core/limit/mod.rs `throttle`: counted while
--           not blocked; the call that takes the count over the limit blocks the key for the
--           duration (refused); while blocked, refused and not counted (retry = the block's
--           end, reset = the window's); after a block, a new window counting 1. A zero block:
--           that call counts 1 in the window in place, admitted.
-- Returns   flat array, 4 integers per call: allowed (0/1), remaining, retry_after_us,
--           reset_after_us; or 0, -2, 0, 0 when the call's key holds a value of another type
--           (another writer uses our key prefix): that call is not applied (a reset does not
--           delete the key), and the batch's other calls are decided as usual
-- Notes     every key is read at most once and written (SET PX, or DEL) at most once, with
--           PX = the time until its state no longer matters (end of the bucket or window,
--           or until the leaky bucket has drained), in whole ms, at least 1; plus 60 s when
--           now_us is given (a test's ManualClock: Redis still expires keys on its own
--           clock, and a frozen or slow test clock must not lose state to it).
--           All KEYS share one hash slot: the caller groups calls by slot.
--           Keys are read with redis.pcall, so WRONGTYPE is a reply per call, not a failed
--           script (any other error is raised); reads come before writes, so nothing of a
--           call is written unless its key was read. The type test costs no command: an error
--           is a table with `err`, and indexing a string (a value) with 'err' gives nil.
--           Cost: a server's calls arrive one per event-loop turn, so most batches hold one
--           call, and for those the interpreter's own work is as large as the three commands
--           (TIME, GET, SET). Hence a path for one call that allocates nothing but its reply
--           and makes no C call but the commands, struct and the PX format; one closure
--           without upvalues (`step`) shared with the batch path; floor and ceil as
--           arithmetic (x - x % 1 is exactly math.floor(x) for every double, x + (-x) % 1
--           math.ceil(x)); strings made numbers by arithmetic (tonumber parses twice), or by
--           comparison for the usual weight 1 and max_wait 0 (interned strings: a pointer
--           test); the PX value formatted with '%d' (Redis formats a number argument with
--           '%.17g', twice the cost).

local argv = ARGV
local nargs = #argv
if nargs < 6 or (nargs - 1) % 5 ~= 0 then error('limiter: expected keys and calls') end

-- @include clock
-- @include wrong_type

-- One call (not a reset) on state a, b (a nil: fresh): allowed (0/1), remaining,
-- retry_after_us, reset_after_us, then, if the call changed the state, the new a, b and the
-- key's PX (ms).
local function step(kind, a, b, weight, limit, interval, max_wait, now, margin)
  local allowed, remaining, retry, reset_after, span = 1, 0, 0, 0, nil
  if kind == 2 then
    -- leaky: a = the time the bucket will be empty
    local per_unit = interval / limit
    local tat = now
    if a ~= nil and a > now then tat = a end
    local wait, after = 0, tat
    if max_wait == -1 then
      after = tat + weight * per_unit
      if after < now then after = now end
    else
      wait = tat + weight * per_unit - now - interval
      if max_wait == -3 then
        if wait > 0 then allowed = 0 end
      elseif wait <= max_wait then
        after = tat + weight * per_unit
      else
        allowed = 0
      end
    end
    local backlog = after - now
    if after ~= tat then a, b, span = after, 0, backlog end
    remaining = (interval - backlog) / per_unit
    remaining = remaining - remaining % 1
    if remaining < 0 then remaining = 0 end
    if wait < 0 then wait = 0 end
    retry = wait + (-wait) % 1
    reset_after = backlog + (-backlog) % 1
  else
    -- bucket and window: `used` of `limit` in [start, finish)
    local start, used = now, 0
    if kind == 0 then
      start = now / interval
      start = (start - start % 1) * interval
      if a == start then used = b end
    elseif a ~= nil and now < a + interval then
      start, used = a, b
    end
    local finish = start + interval
    local after = used
    if max_wait == -7 or max_wait == -8 then
      -- backoff (window only): every call charged; one that takes the count `over` the
      -- limit ends the window interval * 2^(over - 1) from now (-8: one interval), at most
      -- 10 years
      after = used + weight
      local over = after - limit
      if over > 0 then
        local doublings = 0
        if max_wait == -7 then doublings = over - 1 end
        if doublings > 64 then doublings = 64 end
        local len = interval * 2 ^ doublings
        if len > 315360000000000 then len = 315360000000000 end
        finish = now + len
        allowed = 0
      end
      reset_after = finish - now
      reset_after = reset_after + (-reset_after) % 1
      if allowed == 0 then retry = reset_after end
      a, b, span = finish - interval, after, finish - now
    else
      reset_after = finish - now
      reset_after = reset_after + (-reset_after) % 1
      if max_wait == -1 then
        after = used + weight
        if after < 0 then after = 0 end
      elseif used + weight > limit then
        allowed = 0
        if weight > limit then retry = 9e15 else retry = reset_after end
      elseif max_wait ~= -3 then
        after = used + weight
      end
      if after ~= used then a, b, span = start, after, finish - now end
    end
    remaining = limit - after
    if remaining < 0 then remaining = 0 end
  end
  if not span then return allowed, remaining, retry, reset_after end
  -- whole ms, plus the margin, within [1 ms, 10 years]
  local px = span / 1000
  px = px + (-px) % 1 + margin
  if px < 1 then px = 1 elseif px > 315360000000 then px = 315360000000 end
  return allowed, remaining, retry, reset_after, a, b, px
end

-- A key's PX (ms) for a block ending at u, at least `px`: whole ms, plus the margin, at most
-- 10 years.
local function block_px(u, px)
  local bpx = (u - now) / 1000
  bpx = bpx + (-bpx) % 1 + margin
  if px and px > bpx then bpx = px end
  if bpx < 1 then bpx = 1 elseif bpx > 315360000000 then bpx = 315360000000 end
  return bpx
end

-- One call on a blocked key (u > now), or a block (max_wait -4: weight = its duration, µs),
-- with the key's current PTTL. Writes the key when it must; returns the call's reply.
-- Mirrors core/limit/mod.rs `step` (blocked) and `block`.
local function blocked(key, kind, a, b, u, weight, limit, interval, max_wait, pttl)
  if max_wait == -4 then
    local untl = now + weight
    if u and u > untl then untl = u end
    if a == nil then a, b = -1, 0 end
    local keep = nil
    if pttl > 0 then keep = pttl end
    redis.call('SET', key, struct.pack('<ddd', a, b, untl), 'PX', string.format('%d', block_px(untl, keep)))
    return { 0, 0, untl - now, untl - now }
  end
  if max_wait == -1 then
    -- an adjustment applies, and keeps the block
    local allowed, remaining, retry, reset_after, na, nb, px =
      step(kind, a, b, weight, limit, interval, max_wait, now, margin)
    if px then
      redis.call('SET', key, struct.pack('<ddd', na, nb, u), 'PX', string.format('%d', block_px(u, px)))
    end
    return { allowed, remaining, retry, reset_after }
  end
  local _, _, retry, reset_after = step(kind, a, b, weight, limit, interval, -3, now, margin)
  local left = u - now
  left = left + (-left) % 1
  if retry < left then retry = left end
  if reset_after < left then reset_after = left end
  return { 0, 0, retry, reset_after }
end

-- One call (the usual batch).
if nargs == 6 and argv[6] ~= '-10' then
  local code = argv[2]
  local kind
  if code == '4' then kind = 0 elseif code == '5' then kind = 1 elseif code == '6' then kind = 2 end
  if kind then
    local weight, max_wait = argv[3], argv[6]
    if weight == '1' then weight = 1 else weight = weight + 0 end
    if max_wait == '0' or max_wait == '-5' then max_wait = 0 else max_wait = max_wait + 0 end
    local limit, interval = argv[4] + 0, argv[5] + 0
    local key = KEYS[1]
    -- a key of another type is that call's error; a value of another shape, or not finite,
    -- is a fresh key, so no value can leave a key unusable
    local a, b, u
    local v = redis.pcall('GET', key)
    if v then
      -- (`err` tested first: the usual reply, a string, makes no call)
      if v.err and wrong_type(v) then return { 0, -2, 0, 0 } end
      if #v == 16 then
        local x, y = struct.unpack('<dd', v)
        if x - x == 0 and y - y == 0 then a, b = x, y end
      elseif #v == 24 then
        local x, y, z = struct.unpack('<ddd', v)
        if x - x == 0 and y - y == 0 and z - z == 0 then a, b, u = x, y, z end
      end
    end
    if max_wait == -2 then
      redis.call('DEL', key)
      return { 1, limit, 0, 0 }
    end
    if max_wait == -4 or (u and u > now) then
      return blocked(key, kind, a, b, u, weight, limit, interval, max_wait, redis.call('PTTL', key))
    end
    local allowed, remaining, retry, reset_after, na, nb, px =
      step(kind, a, b, weight, limit, interval, max_wait, now, margin)
    if px then redis.call('SET', key, struct.pack('<dd', na, nb), 'PX', string.format('%d', px)) end
    return { allowed, remaining, retry, reset_after }
  end
end

-- A batch: each key read once, its state kept in sA, sB[key index], written once at the end;
-- wrong[k]: the key holds another type (its calls are answered 0, -2, 0, 0 and not applied).
local sA, sB, sU, loaded, dirty, ttl, wrong = {}, {}, {}, {}, {}, {}, {}

-- A throttle on key index k (its state in sA, sB, sU, changed there), blocking for `block`
-- µs: its four answers. Mirrors core/limit/mod.rs `throttle`.
local function throttle(k, block, limit, interval)
  local a, b, u = sA[k], sB[k], sU[k]
  local start, used = now, 0
  -- the window in place: a block that ended ends its window too (the count starts over)
  if a ~= nil and now < a + interval and (u == nil or u > now) then start, used = a, b end
  local finish = start + interval
  local reset_after = finish - now
  reset_after = reset_after + (-reset_after) % 1
  if u and u > now then
    local left = u - now
    return 0, 0, left + (-left) % 1, reset_after
  end
  local px = (finish - now) / 1000
  px = px + (-px) % 1 + margin
  if px < 1 then px = 1 elseif px > 315360000000 then px = 315360000000 end
  if used + 1 <= limit or block <= 0 then
    local after = 1
    if used + 1 <= limit then after = used + 1 end
    sA[k], sB[k], sU[k], dirty[k], ttl[k] = start, after, nil, true, px
    return 1, limit - after, 0, reset_after
  end
  local untl = now + block
  sA[k], sB[k], sU[k], dirty[k], ttl[k] = start, used + 1, untl, true, block_px(untl, px)
  return 0, 0, block + (-block) % 1, reset_after
end

-- One call on key index k (its state in sA, sB, sU, changed there): its four answers.
local function decide(k, kind, weight, limit, interval, max_wait)
  local key = KEYS[k]
  if not key then error('limiter: malformed call') end
  if not loaded[k] then
    loaded[k] = true
    local v = redis.pcall('GET', key)
    if wrong_type(v) then
      wrong[k] = true
    elseif v then
      if #v == 16 then
        local x, y = struct.unpack('<dd', v)
        if x - x == 0 and y - y == 0 then sA[k], sB[k] = x, y end
      elseif #v == 24 then
        local x, y, z = struct.unpack('<ddd', v)
        if x - x == 0 and y - y == 0 and z - z == 0 then sA[k], sB[k], sU[k] = x, y, z end
      end
    end
  end
  if wrong[k] then return 0, -2, 0, 0 end
  if max_wait == -10 then return throttle(k, weight, limit, interval) end
  if max_wait == -2 then
    sA[k], sB[k], sU[k], dirty[k] = nil, nil, nil, true
    return 1, limit, 0, 0
  end
  if max_wait == -4 then
    local untl = now + weight
    if sU[k] and sU[k] > untl then untl = sU[k] end
    if sA[k] == nil then sA[k], sB[k] = -1, 0 end
    if not dirty[k] then
      local pttl = redis.call('PTTL', key)
      if pttl > 0 then ttl[k] = pttl end
    end
    sU[k], dirty[k], ttl[k] = untl, true, block_px(untl, ttl[k])
    return 0, 0, untl - now, untl - now
  end
  if sU[k] and sU[k] > now and max_wait ~= -1 then
    local _, _, retry, reset_after = step(kind, sA[k], sB[k], weight, limit, interval, -3, now, margin)
    local left = sU[k] - now
    left = left + (-left) % 1
    if retry < left then retry = left end
    if reset_after < left then reset_after = left end
    return 0, 0, retry, reset_after
  end
  local allowed, remaining, retry, reset_after, na, nb, px =
    step(kind, sA[k], sB[k], weight, limit, interval, max_wait, now, margin)
  if px then
    -- a block that ended is dropped with the write (as the model saves a state without it)
    if sU[k] and sU[k] > now then px = block_px(sU[k], px) else sU[k] = nil end
    sA[k], sB[k], dirty[k], ttl[k] = na, nb, true, px
  end
  return allowed, remaining, retry, reset_after
end

-- The call at argv[i..i+4] with max wait `max_wait` instead of its own: its four answers.
local function call_at(i, max_wait)
  local code = argv[i] + 0
  local kind = code % 4
  return decide((code - kind) / 4, kind, argv[i + 1] + 0, argv[i + 2] + 0, argv[i + 3] + 0, max_wait)
end

local out, nout, refused = {}, 0, false
local i = 2
while i <= nargs do
  local max_wait = argv[i + 4] + 0
  local j = i + 5
  if max_wait == -5 then
    -- a group: this call and the members right after it; peeked, then all taken or none
    while j <= nargs and argv[j + 4] + 0 == -6 do j = j + 5 end
    local all = true
    for m = i, j - 5, 5 do
      local allowed, remaining, retry, reset_after = call_at(m, -3)
      if allowed ~= 1 then all = false end
      out[nout + 1], out[nout + 2], out[nout + 3], out[nout + 4] = allowed, remaining, retry, reset_after
      nout = nout + 4
    end
    if all then
      nout = nout - 4 * (j - i) / 5
      for m = i, j - 5, 5 do
        out[nout + 1], out[nout + 2], out[nout + 3], out[nout + 4] = call_at(m, 0)
        nout = nout + 4
      end
    end
    refused = not all
  elseif max_wait == -6 or max_wait == -9 then
    error('limiter: malformed call')
  else
    local allowed
    allowed, out[nout + 2], out[nout + 3], out[nout + 4] = call_at(i, max_wait)
    out[nout + 1] = allowed
    nout = nout + 4
    refused = allowed ~= 1
  end
  if j <= nargs and argv[j + 4] + 0 == -9 then
    -- a tally of that call's refusal: charged when refused, else peeked
    local tally = -3
    if refused then tally = -1 end
    out[nout + 1], out[nout + 2], out[nout + 3], out[nout + 4] = call_at(j, tally)
    nout = nout + 4
    j = j + 5
  end
  i = j
end

for k in pairs(dirty) do
  if sA[k] == nil then
    redis.call('DEL', KEYS[k])
  elseif sU[k] and sU[k] > now then
    redis.call('SET', KEYS[k], struct.pack('<ddd', sA[k], sB[k], sU[k]), 'PX', string.format('%d', ttl[k]))
  else
    redis.call('SET', KEYS[k], struct.pack('<dd', sA[k], sB[k]), 'PX', string.format('%d', ttl[k]))
  end
end
return out
