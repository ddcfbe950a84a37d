-- pacer.lua: decides a batch of pacer calls (DistributedPacer, PacerComposite) atomically.
-- Mirrors src/core/pacer/mod.rs `step` / `step_group` operation for operation (same doubles).
--
-- KEYS[k]   pacer state: 24 bytes, struct '<ddd' = watermark, next_shot_us, last_drip_us
-- ARGV[1]   now_us: integer µs, or '' to use the server clock (TIME)
-- ARGV[2]   P, the number of parameter sets, then P quadruples
--           <qps> <max_burst> <factor> <weight> (one number per call below: parsing a number
--           costs ~900 instructions, and the calls of a batch mostly share their parameters)
-- then      entries. A single call: <(key index * 1048576 + parameter set) * 4 + mode>
--           (key index and parameter set 1-based). A composite: <-(members * 4 + mode)>, then
--           per member <key index * 1048576 + parameter set>.
--           mode: 1 pace, 0 rateLimit (the pacer kind's operation codes, src/store/kinds/pacer);
--           +2 = also return the raw state before and after
--           (single calls only; used to undo a cross-slot composite charge)
-- Returns   flat array, per member in order: delay_us (integer), watermark_before in
--           millionths of a weight unit (integer)
--           [, raw state before or '', raw state written or '']  when mode has +2
--           (admitted is implied: pace always; rate limit iff every delay of the entry is 0);
--           delay_us -2 (watermark 0, raw states ''): a key of the entry holds a value of
--           another type (another writer uses our key prefix): the entry is not applied (no
--           member charged), every member gets -2, and the other entries are decided as usual
-- Notes     every key is read at most once and written at most once per call, with
--           PX = time until its state no longer matters, in whole seconds, + 120 s (at most
--           10 years; delays at most 9e15 µs). A refused rate-limit entry writes nothing; a
--           rate-limit entry's members are charged all or none.
--           All KEYS share one hash slot: the caller groups entries by slot.
--           Keys are read with redis.pcall before anything is written (WRONGTYPE is an
--           entry's reply, any other error is raised); see limit.lua for the test's cost.
--           A batch of one single call (the server pattern's usual batch) takes a path of its
--           own that makes no table but its reply; the arithmetic is the same functions'.

local nargs = #ARGV
assert(nargs >= 3 and #KEYS >= 1, 'pacer: expected keys and entries')

-- @include clock
-- @include wrong_type
local MARGIN_MS = 120000
local MAX_TTL_MS = 315360000000 -- 10 years: Redis refuses expiries near 1e21 ms
local MAX_DELAY_US = 9e15 -- replies are 64-bit integers; a refusal's delay must stay > 0

-- one call; returns delay, watermark_before, admitted[, new watermark, tail, last drip]
local function step(water, stored_tail, last, qps, burst, factor, pace, weight)
  if water == nil then water, stored_tail, last = 0, 0, now end
  if stored_tail <= now then
    local since = stored_tail
    if last > stored_tail then since = last end
    if since < now then
      water = water - (now - since) * qps * factor / 1000000
      if water < 0 then water = 0 end
    end
  end
  local tail = now
  if stored_tail > now then tail = stored_tail end
  local before = water
  if weight == 0 then
    if water < burst or tail <= now then return 0, before, true end
    local delay = tail - now
    if delay > MAX_DELAY_US then delay = MAX_DELAY_US end
    return delay, before, pace
  end
  water = water + weight
  local shot, new_tail = now, tail
  if water > burst then
    shot, new_tail = tail, tail + math.ceil(weight * 1000000 / qps)
    water = burst
  end
  local delay = shot - now
  if delay > MAX_DELAY_US then delay = MAX_DELAY_US end
  if not (pace or shot <= now) then return delay, before, false end
  return delay, before, true, water, new_tail, now
end

local WRONG_TYPE = -2

-- a state string as it is stored, or nil: anything but 24 bytes of finite doubles is treated
-- as a fresh key (no value can leave a key unusable)
local function parse(v)
  if #v ~= 24 then return nil end
  local w, n, l = struct.unpack('<ddd', v)
  if w == w and n == n and l == l and w < math.huge and n < math.huge and l < math.huge
    and w > -math.huge and n > -math.huge and l > -math.huge then
    return w, n, l
  end
  return nil
end

-- the one-call path (a server's decisions arrive one per event-loop turn, so most batches
-- hold one call): one parameter set, one single call without the raw states; the same
-- arithmetic as the batch path below, without its tables
if nargs == 7 and ARGV[2] == '1' then
  local head = tonumber(ARGV[7])
  local mode = head and head >= 0 and head % 4
  if mode and mode < 2 then
    local kp = (head - mode) / 4
    local p = kp % 1048576
    local key = KEYS[(kp - p) / 1048576]
    assert(p == 1 and key, 'pacer: malformed entry')
    local qps, burst, factor, weight = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
    local v = redis.pcall('GET', key)
    -- (`err` tested first: the usual reply, a string or false, makes no call)
    if v and v.err and wrong_type(v) then return { WRONG_TYPE, 0 } end
    local w0, n0, l0
    if v then w0, n0, l0 = parse(v) end
    local delay, before, admitted, w, n, l = step(w0, n0, l0, qps, burst, factor, mode == 1, weight)
    if w then
      local busy = n - now
      local drain = burst * 1000000 / (qps * factor)
      if drain > busy then busy = drain end
      local ttl = math.ceil(busy / 1000000) * 1000 + MARGIN_MS
      if ttl > MAX_TTL_MS then ttl = MAX_TTL_MS end
      redis.call('SET', key, struct.pack('<ddd', w, n, l), 'PX', string.format('%.0f', ttl))
    end
    return { delay, before * 1000000 + 0.5 }
  end
end

local nparams = tonumber(ARGV[2])
assert(nparams and nparams >= 1 and nargs >= 2 + 4 * nparams, 'pacer: malformed parameter sets')
local pQ, pB, pF, pW = {}, {}, {}, {}
for p = 1, nparams do
  local a = 4 * p - 1
  pQ[p], pB[p], pF[p], pW[p] = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
end

-- state per key index; writer[k] = the parameter set of the last call that saved key k;
-- wrong[k]: the key holds another type
local sW, sN, sL, raw, loaded, writer, wrong = {}, {}, {}, {}, {}, {}, {}
local out, nout = {}, 0

-- GET, not one MGET for all keys: MGET answers nil for a key of another type, which would
-- then be overwritten; GET answers WRONGTYPE and the key's entries are refused.
local function load(k)
  loaded[k] = true
  local v = redis.pcall('GET', KEYS[k])
  if wrong_type(v) then
    wrong[k] = true
  elseif v then
    raw[k] = v
    local w, n, l = parse(v)
    if w then sW[k], sN[k], sL[k] = w, n, l end
  end
end

-- how long a key's state matters, ms, as the PX argument: until its queue drains and its
-- bucket leaks empty, in whole seconds, plus the margin. Redis formats a number argument with
-- snprintf (~2,500 instructions), so each distinct value is turned into a string once.
local px = {}
local function ttl_px(tail, p)
  local busy = tail - now
  local drain = pB[p] * 1000000 / (pQ[p] * pF[p])
  if drain > busy then busy = drain end
  local ttl = math.ceil(busy / 1000000) * 1000 + MARGIN_MS
  if ttl > MAX_TTL_MS then ttl = MAX_TTL_MS end
  local s = px[ttl]
  if not s then
    s = string.format('%.0f', ttl)
    px[ttl] = s
  end
  return s
end


local function state_string(k)
  return struct.pack('<ddd', sW[k], sN[k], sL[k])
end

local i = 3 + 4 * nparams
while i <= nargs do
  local head = tonumber(ARGV[i])
  if head >= 0 then
    -- a single call (the hot path: no tables, the state loaded inline)
    local mode = head % 4
    local kp = (head - mode) / 4
    local p = kp % 1048576
    local k = (kp - p) / 1048576
    local pace, report = mode % 2 == 1, mode >= 2
    if not loaded[k] then load(k) end
    i = i + 1
    if wrong[k] then
      out[nout + 1], out[nout + 2] = WRONG_TYPE, 0
      nout = nout + 2
      if report then
        out[nout + 1], out[nout + 2] = '', ''
        nout = nout + 2
      end
    else
      local delay, before, admitted, w, n, l = step(sW[k], sN[k], sL[k], pQ[p], pB[p], pF[p], pace, pW[p])
      local old
      if report then old = raw[k] or (sW[k] and state_string(k)) or '' end
      if w then
        sW[k], sN[k], sL[k], writer[k] = w, n, l, p
        raw[k] = nil
      end
      -- replies are integers: Redis truncates, which for a watermark >= 0 is floor
      out[nout + 1] = delay
      out[nout + 2] = before * 1000000 + 0.5
      nout = nout + 2
      if report then
        out[nout + 1] = old
        out[nout + 2] = w and state_string(k) or ''
        nout = nout + 2
      end
    end
  else
    -- a composite: decide every member on tentative state, commit only if all admitted
    local mode = (-head) % 4
    local count = (-head - mode) / 4
    local pace = mode % 2 == 1
    assert(count >= 1 and nargs >= i + count, 'pacer: malformed entry')
    i = i + 1
    local tW, tN, tL, tP = {}, {}, {}, {}
    local decided, all, bad = {}, true, false
    for m = 1, count do
      local kp = tonumber(ARGV[i])
      local p = kp % 1048576
      local k = (kp - p) / 1048576
      if not loaded[k] then load(k) end
      if wrong[k] then bad = true end
      local w0, n0, l0 = sW[k], sN[k], sL[k]
      if tP[k] then w0, n0, l0 = tW[k], tN[k], tL[k] end
      local delay, before, admitted, w, n, l = step(w0, n0, l0, pQ[p], pB[p], pF[p], pace, pW[p])
      i = i + 1
      if w then tW[k], tN[k], tL[k], tP[k] = w, n, l, p end
      all = all and admitted
      decided[2 * m - 1], decided[2 * m] = delay, before
    end
    if bad then
      all = false
      for m = 1, count do decided[2 * m - 1], decided[2 * m] = WRONG_TYPE, 0 end
    end
    if all then
      for k, p in pairs(tP) do
        sW[k], sN[k], sL[k], writer[k] = tW[k], tN[k], tL[k], p
        raw[k] = nil
      end
    end
    for m = 1, 2 * count, 2 do
      out[nout + 1] = decided[m]
      out[nout + 2] = decided[m + 1] * 1000000 + 0.5
      nout = nout + 2
    end
  end
end

for k, p in pairs(writer) do
  redis.call('SET', KEYS[k], state_string(k), 'PX', ttl_px(sN[k], p))
end
return out
