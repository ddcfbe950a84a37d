-- includes/budget/state.lua: the budget script's state helpers (included by lua/budget.lua, whose
-- locals they use): loading a budget's keys, the totals, expired reservations, tats.

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

-- @include wrong_type

local function load(b)
  loaded[b] = true
  local v = redis.pcall('GET', KEYS[5 * b - 4])
  local bad = wrong_type(v)
  bad = wrong_type(redis.pcall('HLEN', KEYS[5 * b - 3])) or bad
  bad = wrong_type(redis.pcall('ZCARD', KEYS[5 * b - 2])) or bad
  bad = wrong_type(redis.pcall('HLEN', KEYS[5 * b - 1])) or bad
  bad = wrong_type(redis.pcall('ZCARD', KEYS[5 * b])) or bad
  if bad then
    wrong[b] = true
    return
  end
  T[b], O[b], E[b], L[b], tats[b], res[b], bor[b], SH[b], LT[b], ten[b], tdirty[b] = 0, 0, 0, 0, {}, {}, {}, 0, 0, {}, {}
  AS[b], EX[b], CM[b] = 0, {}, {}
  if v and #v >= 64 then
    local n = struct.unpack('<d', v, 33)
    -- a record written before the excess counts (3 doubles per dimension) or the lanes'
    -- commitments (4) reads them as 0s
    local k = 5
    if n >= 1 then k = (#v - 64) / (8 * n) end
    if n == math.floor(n) and n >= 0 and n <= 64 and (k == 3 or k == 4 or k == 5) then
      local f = { struct.unpack(doubles(8 + k * n), v) }
      T[b], O[b], E[b], L[b], SH[b], LT[b], AS[b] = f[1], f[2], f[3], f[4], f[6], f[7], f[8]
      for d = 1, n do
        tats[b][d], res[b][d], bor[b][d], EX[b][d], CM[b][d] = f[8 + d], f[8 + n + d], f[8 + 2 * n + d], 0, 0
        if k >= 4 then EX[b][d] = f[8 + 3 * n + d] end
        if k == 5 then CM[b][d] = f[8 + 4 * n + d] end
      end
    end
  end
end

local function grow(b, n)
  local t, r, o, x, c = tats[b], res[b], bor[b], EX[b], CM[b]
  for d = #t + 1, n do
    t[d], r[d] = 0, 0
  end
  for d = #o + 1, n do
    o[d] = 0
  end
  for d = #x + 1, n do
    x[d] = 0
  end
  for d = #c + 1, n do
    c[d] = 0
  end
end

local function later(a, x)
  if x > a then return x end
  return a
end

-- a stored reservation: deadline, amounts, path (0 none, 1 lane, 2 borrowed), tenant id
local function unpack_reservation(v)
  local m = struct.unpack('<d', v, 9)
  local f = { struct.unpack(doubles(3 + m), v) }
  local amounts = {}
  for d = 1, m do amounts[d] = f[3 + d] end
  return f[1], amounts, f[3], string.sub(v, 25 + 8 * m)
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
  local kr, kd = KEYS[5 * b - 3], KEYS[5 * b - 2]
  local ids = redis.call('ZRANGEBYSCORE', kd, '-inf', nowstr, 'LIMIT', 0, PRUNE)
  for _, id in ipairs(ids) do
    local v = redis.call('HGET', kr, id)
    redis.call('HDEL', kr, id)
    redis.call('ZREM', kd, id)
    if v then
      local _, amounts, path, tid = unpack_reservation(v)
      untotal(b, amounts)
      E[b] = E[b] + 1
      if path ~= 0 then closed(b, tid) end
    end
    dirty[b] = true
  end
  if #ids < PRUNE then clean[b] = true end
end

-- the open reservation `id` of b (not expired), removed: amounts, path, tenant id; nil if none
local function take(b, id)
  local kr = KEYS[5 * b - 3]
  local v = redis.call('HGET', kr, id)
  if not v then return nil end
  local deadline, amounts, path, tid = unpack_reservation(v)
  if deadline <= now then return nil end
  redis.call('HDEL', kr, id)
  redis.call('ZREM', KEYS[5 * b - 2], id)
  untotal(b, amounts)
  return amounts, path, tid
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

-- the same on a tat at ppm of the rate: returns the new tat
local function adjust_at(t, limit, interval, ppm, amount)
  if amount > 0 then
    return later(t - math.floor(amount * interval * PPM / (limit * ppm)), now)
  elseif amount < 0 then
    return cap(later(t, now) + math.ceil(-amount * interval * PPM / (limit * ppm)))
  end
  return t
end

-- records an admitted reservation of b starting at s
local function record(b, id, n, amt, s, ttl, path, tid)
  if path == 0 then T[b] = s end
  local deadline = s + ttl
  if deadline > L[b] then L[b] = deadline end
  O[b] = O[b] + 1
  redis.call('HSET', KEYS[5 * b - 3], id, struct.pack(doubles(3 + n), deadline, n, path, unpack(amt)) .. tid)
  redis.call('ZADD', KEYS[5 * b - 2], deadline, id)
  dirty[b] = true
end

-- charges the shared tats (and borrowed, at free ppm, when free > 0) from s
local function charge_shared(b, n, lim, itv, amt, s, free)
  grow(b, n)
  local t, r, o = tats[b], res[b], bor[b]
  for d = 1, n do
    if amt[d] > 0 then
      t[d] = cap(later(t[d], s) + math.ceil(amt[d] * itv[d] / lim[d]))
      r[d] = r[d] + amt[d]
      if free > 0 then
        o[d] = cap(later(o[d], s) + math.ceil(amt[d] * itv[d] * PPM / (lim[d] * free)))
      end
    end
  end
end
