-- budget.lua: decides a batch of budget calls (Budget: reserve, settle, cancel, stats)
-- atomically. Mirrors src/core/budget.rs `step` operation for operation (same doubles).
--
-- KEYS[3b-2] budget b's state: doubles '<d...' = tail_us, open, expired, latest_deadline_us,
--            n, then tat_us x n, reserved x n (n = dimensions ever used)
-- KEYS[3b-1] its open reservations: hash id -> doubles deadline_us, amount x m
-- KEYS[3b]   their deadlines: sorted set, member id, score deadline_us
-- ARGV[1]    now_us: integer µs, or '' to use the server clock (TIME)
-- ARGV[2]    P, the number of dimension sets, then per set <n> and n triples <limit>
--            <interval_us> <max_burst> (sent once: the calls of a batch mostly share them)
-- then       per call: <(b * 1024 + set) * 8 + op> <id> <ttl_us> <max_wait_us> and n amounts
--            (its set's n; budget b and set 1-based); op: 1 reserve, 2 settle (amount = the
--            actual amount), 3 cancel, 4 stats (the budget kind's operation codes,
--            src/store/kinds/budget.rs)
-- Returns    flat array, per call: status (1 done, 0 refused, 3 not open, -2 a key of its
--            budget holds another type: nothing applied), delay_us, now_us (the decision's
--            time), open, expired, then per dimension used (level, rounded up), reserved; all
--            integers
-- Notes      a budget's keys are written with PX = the time its state matters (queue, levels,
--            deadlines) in whole seconds + 120 s (at most 10 years), and only when changed.
--            Expired reservations are removed earliest first, at most 64 per call.
--            All KEYS share one hash slot (the name's hash tag): the caller groups by slot.

local nargs = #ARGV
assert(nargs >= 8 and #KEYS >= 3 and #KEYS % 3 == 0, 'budget: expected keys and calls')

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local nowstr = string.format('%.0f', now)
local MARGIN_MS = 120000
local MAX_TTL_MS = 315360000000
local MAX_AHEAD_US = 4e15
local PRUNE = 64
local WRONG_TYPE = -2
local OK, REFUSED, NOT_OPEN = 1, 0, 3

-- per budget index: tail, open, expired, latest deadline, tats, reserved; loaded, wrong, dirty, clean
local T, O, E, L, tats, res = {}, {}, {}, {}, {}, {}
local loaded, wrong, dirty, clean = {}, {}, {}, {}

-- struct formats of k doubles, built once per k
local fmt = {}
local function doubles(k)
  local f = fmt[k]
  if not f then
    f = '<' .. string.rep('d', k)
    fmt[k] = f
  end
  return f
end

-- dimension sets: per set n, limit, interval, burst and tolerance per dimension
local nsets = tonumber(ARGV[2])
assert(nsets and nsets >= 1, 'budget: malformed dimension sets')
local setN, setL, setI, setB, setT = {}, {}, {}, {}, {}
local i = 3
for p = 1, nsets do
  local n = tonumber(ARGV[i])
  assert(n and n >= 1 and i + 3 * n <= nargs, 'budget: malformed dimension set')
  local lim, itv, bur, tol = {}, {}, {}, {}
  for d = 1, n do
    local a = i - 2 + 3 * d
    lim[d], itv[d], bur[d] = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    tol[d] = math.floor(bur[d] * itv[d] / lim[d])
  end
  setN[p], setL[p], setI[p], setB[p], setT[p] = n, lim, itv, bur, tol
  i = i + 1 + 3 * n
end

local function wrongtype(v)
  if type(v) == 'table' and v.err then
    if string.sub(v.err, 1, 10) ~= 'WRONGTYPE ' then error(v) end
    return true
  end
  return false
end

local function load(b)
  loaded[b] = true
  local v = redis.pcall('GET', KEYS[3 * b - 2])
  local bad = wrongtype(v)
  bad = wrongtype(redis.pcall('HLEN', KEYS[3 * b - 1])) or bad
  bad = wrongtype(redis.pcall('ZCARD', KEYS[3 * b])) or bad
  if bad then
    wrong[b] = true
    return
  end
  T[b], O[b], E[b], L[b], tats[b], res[b] = 0, 0, 0, 0, {}, {}
  if v and #v >= 40 then
    local n = struct.unpack('<d', v, 33)
    if n == math.floor(n) and n >= 0 and n <= 64 and #v == 40 + 16 * n then
      local f = { struct.unpack(doubles(5 + 2 * n), v) }
      T[b], O[b], E[b], L[b] = f[1], f[2], f[3], f[4]
      for d = 1, n do
        tats[b][d], res[b][d] = f[5 + d], f[5 + n + d]
      end
    end
  end
end

local function grow(b, n)
  local t, r = tats[b], res[b]
  for d = #t + 1, n do
    t[d], r[d] = 0, 0
  end
end

-- a stored reservation: deadline, amounts
local function unpack_reservation(v)
  local m = (#v - 8) / 8
  local f = { struct.unpack(doubles(1 + m), v) }
  local amounts = {}
  for d = 1, m do amounts[d] = f[1 + d] end
  return f[1], amounts
end

-- removes a reservation's amounts from the totals
local function untotal(b, amounts)
  grow(b, #amounts)
  local r = res[b]
  for d = 1, #amounts do r[d] = r[d] - amounts[d] end
  O[b] = O[b] - 1
end

local function prune(b)
  if clean[b] then return end
  local kr, kd = KEYS[3 * b - 1], KEYS[3 * b]
  local ids = redis.call('ZRANGEBYSCORE', kd, '-inf', nowstr, 'LIMIT', 0, PRUNE)
  for _, id in ipairs(ids) do
    local v = redis.call('HGET', kr, id)
    redis.call('HDEL', kr, id)
    redis.call('ZREM', kd, id)
    if v then
      local _, amounts = unpack_reservation(v)
      untotal(b, amounts)
      E[b] = E[b] + 1
    end
    dirty[b] = true
  end
  if #ids < PRUNE then clean[b] = true end
end

-- the open reservation `id` of b (not expired), removed; nil if none
local function take(b, id)
  local kr = KEYS[3 * b - 1]
  local v = redis.call('HGET', kr, id)
  if not v then return nil end
  local deadline, amounts = unpack_reservation(v)
  if deadline <= now then return nil end
  redis.call('HDEL', kr, id)
  redis.call('ZREM', KEYS[3 * b], id)
  untotal(b, amounts)
  return amounts
end

local function cap(x)
  if x > now + MAX_AHEAD_US then return now + MAX_AHEAD_US end
  return x
end

-- gives back `amount` of dimension d (negative: debt)
local function adjust(b, d, limit, interval, amount)
  local t = tats[b][d]
  if amount > 0 then
    local back = t - math.floor(amount * interval / limit)
    if back > now then tats[b][d] = back else tats[b][d] = now end
  elseif amount < 0 then
    local from = t
    if now > from then from = now end
    tats[b][d] = cap(from + math.ceil(-amount * interval / limit))
  end
end

local out, nout = {}, 0
while i <= nargs do
  local head = tonumber(ARGV[i])
  local op = head % 8
  local bp = (head - op) / 8
  local p = bp % 1024
  local b = (bp - p) / 1024
  local id = ARGV[i + 1]
  local ttl, max_wait = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  assert(b >= 1 and 3 * b <= #KEYS and p >= 1 and p <= nsets, 'budget: malformed call')
  local n = setN[p]
  assert(i + 3 + n <= nargs, 'budget: malformed call')
  local lim, itv, tol, amt = setL[p], setI[p], setT[p], {}
  for d = 1, n do
    amt[d] = tonumber(ARGV[i + 3 + d])
  end
  i = i + 4 + n
  if not loaded[b] then load(b) end
  if wrong[b] then
    out[nout + 1], out[nout + 2], out[nout + 3], out[nout + 4], out[nout + 5] = WRONG_TYPE, 0, 0, 0, 0
    nout = nout + 5
    for d = 1, n do
      out[nout + 1], out[nout + 2] = 0, 0
      nout = nout + 2
    end
  else
    prune(b)
    local status, delay = OK, 0
    if op == 1 then
      if redis.call('HEXISTS', KEYS[3 * b - 1], id) == 1 then
        status = NOT_OPEN
      else
        local s = now
        if T[b] > now then s = T[b] end
        for d = 1, n do
          if amt[d] > 0 then
            local at = (tats[b][d] or 0) - tol[d]
            if at > s then s = at end
          end
        end
        delay = s - now
        if delay > max_wait then
          status = REFUSED
        else
          grow(b, n)
          local t, r = tats[b], res[b]
          for d = 1, n do
            if amt[d] > 0 then
              local from = t[d]
              if s > from then from = s end
              t[d] = cap(from + math.ceil(amt[d] * itv[d] / lim[d]))
              r[d] = r[d] + amt[d]
            end
          end
          T[b] = s
          local deadline = s + ttl
          if deadline > L[b] then L[b] = deadline end
          O[b] = O[b] + 1
          redis.call('HSET', KEYS[3 * b - 1], id, struct.pack(doubles(1 + n), deadline, unpack(amt)))
          redis.call('ZADD', KEYS[3 * b], deadline, id)
          dirty[b] = true
        end
      end
    elseif op == 2 or op == 3 then
      local amounts = take(b, id)
      if not amounts then
        status = NOT_OPEN
      else
        grow(b, n)
        for d = 1, n do
          local reserved = amounts[d] or 0
          if op == 2 then
            adjust(b, d, lim[d], itv[d], reserved - amt[d])
          else
            adjust(b, d, lim[d], itv[d], reserved)
          end
        end
        dirty[b] = true
      end
    end
    out[nout + 1], out[nout + 2], out[nout + 3], out[nout + 4], out[nout + 5] = status, delay, now, O[b], E[b]
    nout = nout + 5
    for d = 1, n do
      local ahead = (tats[b][d] or 0) - now
      local used = 0
      if ahead > 0 then used = math.ceil(ahead * lim[d] / itv[d]) end
      out[nout + 1], out[nout + 2] = used, res[b][d] or 0
      nout = nout + 2
    end
  end
end

for b in pairs(dirty) do
  local busy = T[b] - now
  local t, r = tats[b], res[b]
  for d = 1, #t do
    if t[d] - now > busy then busy = t[d] - now end
  end
  if L[b] - now > busy then busy = L[b] - now end
  if busy < 0 then busy = 0 end
  local ttl = math.ceil(busy / 1000000) * 1000 + MARGIN_MS
  if ttl > MAX_TTL_MS then ttl = MAX_TTL_MS end
  local px = string.format('%.0f', ttl)
  local n = #t
  local f = { T[b], O[b], E[b], L[b], n }
  for d = 1, n do
    f[5 + d], f[5 + n + d] = t[d], r[d]
  end
  redis.call('SET', KEYS[3 * b - 2], struct.pack(doubles(5 + 2 * n), unpack(f)), 'PX', px)
  redis.call('PEXPIRE', KEYS[3 * b - 1], px)
  redis.call('PEXPIRE', KEYS[3 * b], px)
end
return out
