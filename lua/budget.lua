-- budget.lua: decides a batch of budget calls (Budget: reserve, settle, cancel, stats)
-- atomically. Mirrors src/core/budget.rs `step` operation for operation (same doubles).
--
-- KEYS[5b-4] budget b's state: doubles '<d...' = tail_us, open, expired, latest_deadline_us,
--            n, shares (ppm), latest_tenant_us, active_shares (ppm), then tat_us x n,
--            reserved x n, borrowed_us x n (n = dimensions ever used)
-- KEYS[5b-3] its open reservations: hash id -> doubles deadline_us, m, path (0 no tenant,
--            1 lane, 2 borrowed), amount x m, then the tenant's id (raw bytes)
-- KEYS[5b-2] their deadlines: sorted set, member id, score deadline_us
-- KEYS[5b-1] its tenants: hash tenant id -> doubles share, max (ppm), tail_us, active_until_us
--            (0: idle), n, lane_us x n, ceiling_us x n, hold_us x n (a record without hold_us:
--            0s)
-- KEYS[5b]   its active tenants: sorted set, member tenant id, score active_until_us
-- ARGV[1]    now_us: integer µs, or '' to use the server clock (TIME)
-- ARGV[2]    P, the number of dimension sets, then per set <n> and n triples <limit>
--            <interval_us> <max_burst> (sent once: the calls of a batch mostly share them)
-- then       per call: <(b * 1024 + set) * 8 + op> <id> <ttl_us> <max_wait_us> and n amounts
--            (its set's n; budget b and set 1-based); op: 1 reserve, 2 settle (amount = the
--            actual amount), 3 cancel, 4 stats, 5 reserve through a tenant, 6 stats of a
--            tenant (the budget kind's operation codes, src/store/kinds/budget.rs); ops 5 and 6
--            add <tenant id> <share ppm> <max ppm> <ahead_us>
-- Returns    flat array, per call: status (1 done, 0 refused, 3 not open, -2 a key of its
--            budget holds another type: nothing applied), delay_us, now_us (the decision's
--            time), open, expired, then per dimension used (level, rounded up), reserved; ops 5
--            and 6 then the tenant's share, max and per dimension its lane's level (0s when status 4:
--            the shares would sum over 1e6 ppm, nothing changed); all integers
-- Notes      a budget's keys are written with PX = the time its state matters (queue, levels,
--            deadlines) in whole seconds + 120 s (at most 10 years), and only when changed.
--            Expired reservations are removed earliest first, at most 64 per call.
--            All KEYS share one hash slot (the name's hash tag): the caller groups by slot.

local nargs = #ARGV
assert(nargs >= 8 and #KEYS >= 5 and #KEYS % 5 == 0, 'budget: expected keys and calls')

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
local OK, REFUSED, NOT_OPEN, INVALID_SHARES = 1, 0, 3, 4
local PPM = 1000000

-- per budget index: tail, open, expired, latest deadline, tats, reserved, borrowed, shares,
-- latest tenant time, tenants read (id -> record), tenants changed; loaded, wrong, dirty, clean
local T, O, E, L, tats, res, bor, SH, LT, ten, tdirty = {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}
local AS, aclean = {}, {}
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
  local v = redis.pcall('GET', KEYS[5 * b - 4])
  local bad = wrongtype(v)
  bad = wrongtype(redis.pcall('HLEN', KEYS[5 * b - 3])) or bad
  bad = wrongtype(redis.pcall('ZCARD', KEYS[5 * b - 2])) or bad
  bad = wrongtype(redis.pcall('HLEN', KEYS[5 * b - 1])) or bad
  bad = wrongtype(redis.pcall('ZCARD', KEYS[5 * b])) or bad
  if bad then
    wrong[b] = true
    return
  end
  T[b], O[b], E[b], L[b], tats[b], res[b], bor[b], SH[b], LT[b], ten[b], tdirty[b] = 0, 0, 0, 0, {}, {}, {}, 0, 0, {}, {}
  AS[b] = 0
  if v and #v >= 64 then
    local n = struct.unpack('<d', v, 33)
    if n == math.floor(n) and n >= 0 and n <= 64 and #v == 64 + 24 * n then
      local f = { struct.unpack(doubles(8 + 3 * n), v) }
      T[b], O[b], E[b], L[b], SH[b], LT[b], AS[b] = f[1], f[2], f[3], f[4], f[6], f[7], f[8]
      for d = 1, n do
        tats[b][d], res[b][d], bor[b][d] = f[8 + d], f[8 + n + d], f[8 + 2 * n + d]
      end
    end
  end
end

local function grow(b, n)
  local t, r, o = tats[b], res[b], bor[b]
  for d = #t + 1, n do
    t[d], r[d] = 0, 0
  end
  for d = #o + 1, n do
    o[d] = 0
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

-- tenant `tid` of b: { share, max, tail, lane = {}, ceil = {}, hold = {} }, or nil
local function tenant_of(b, tid)
  local x = ten[b][tid]
  if x ~= nil then return x or nil end
  local v = redis.call('HGET', KEYS[5 * b - 1], tid)
  x = false
  if v and #v >= 40 then
    local n = struct.unpack('<d', v, 33)
    if n == math.floor(n) and n >= 0 and n <= 64 and (#v == 40 + 24 * n or #v == 40 + 16 * n) then
      local held = #v == 40 + 24 * n
      local f
      if held then
        f = { struct.unpack(doubles(5 + 3 * n), v) }
      else
        f = { struct.unpack(doubles(5 + 2 * n), v) }
      end
      x = { share = f[1], max = f[2], tail = f[3], until_ = f[4], lane = {}, ceil = {}, hold = {} }
      for d = 1, n do
        x.lane[d], x.ceil[d] = f[5 + d], f[5 + n + d]
        if held then x.hold[d] = f[5 + 2 * n + d] else x.hold[d] = 0 end
      end
    end
  end
  ten[b][tid] = x
  return x or nil
end

-- registers a tenant (or updates its share and max); nil when the shares would pass 1e6 ppm
local function register(b, tid, share, max, n)
  local x = tenant_of(b, tid)
  local old = 0
  if x then old = x.share end
  local sum = SH[b] - old + share
  if sum > PPM then return nil end
  SH[b] = sum
  if not x then
    x = { share = 0, max = 0, tail = 0, until_ = 0, lane = {}, ceil = {}, hold = {} }
    ten[b][tid] = x
  end
  if x.until_ > 0 then AS[b] = AS[b] + share - old end
  x.share, x.max = share, max
  for d = #x.lane + 1, n do
    x.lane[d], x.ceil[d], x.hold[d] = 0, 0, 0
  end
  tdirty[b][tid] = true
  return x
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
      local _, amounts = unpack_reservation(v)
      untotal(b, amounts)
      E[b] = E[b] + 1
    end
    dirty[b] = true
  end
  if #ids < PRUNE then clean[b] = true end
end

-- tenants whose lanes drained stop being active, earliest first, at most 64 per call
local function expire_active(b)
  if aclean[b] then return end
  local ka = KEYS[5 * b]
  local ids = redis.call('ZRANGEBYSCORE', ka, '-inf', nowstr, 'LIMIT', 0, PRUNE)
  for _, tid in ipairs(ids) do
    redis.call('ZREM', ka, tid)
    local x = tenant_of(b, tid)
    if x then
      AS[b] = AS[b] - x.share
      x.until_ = 0
      tdirty[b][tid] = true
    end
    dirty[b] = true
  end
  if #ids < PRUNE then aclean[b] = true end
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

local function tenant_out(out, nout, n, x, lim, itv)
  if not x then
    for k = 1, 2 + n do out[nout + k] = 0 end
    return nout + 2 + n
  end
  out[nout + 1], out[nout + 2] = x.share, x.max
  for d = 1, n do
    local ahead = (x.lane[d] or 0) - now
    local used = 0
    if x.share > 0 and ahead > 0 then used = math.ceil(ahead * lim[d] * x.share / (itv[d] * PPM)) end
    out[nout + 2 + d] = used
  end
  return nout + 2 + n
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
  assert(b >= 1 and 5 * b <= #KEYS and p >= 1 and p <= nsets and op >= 1 and op <= 6, 'budget: malformed call')
  local n = setN[p]
  assert(i + 3 + n <= nargs, 'budget: malformed call')
  local lim, itv, tol, amt = setL[p], setI[p], setT[p], {}
  for d = 1, n do
    amt[d] = tonumber(ARGV[i + 3 + d])
  end
  i = i + 4 + n
  local tid, tshare, tmax, tahead
  if op >= 5 then
    assert(i + 3 <= nargs, 'budget: malformed tenant call')
    tid, tshare, tmax, tahead = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
    i = i + 4
  end
  if not loaded[b] then load(b) end
  if wrong[b] then
    out[nout + 1], out[nout + 2], out[nout + 3], out[nout + 4], out[nout + 5] = WRONG_TYPE, 0, 0, 0, 0
    nout = nout + 5
    for d = 1, n do
      out[nout + 1], out[nout + 2] = 0, 0
      nout = nout + 2
    end
    if op >= 5 then nout = tenant_out(out, nout, n, nil) end
  else
    prune(b)
    expire_active(b)
    local status, delay = OK, 0
    local who = nil
    if op == 1 then
      if redis.call('HEXISTS', KEYS[5 * b - 3], id) == 1 then
        status = NOT_OPEN
      else
        local s = now
        if T[b] > now then s = T[b] end
        for d = 1, n do
          if amt[d] > 0 then
            local at = later(tats[b][d] or 0, bor[b][d] or 0) - tol[d]
            if at > s then s = at end
          end
        end
        local free = PPM - AS[b]
        delay = s - now
        if delay > max_wait or free <= 0 then
          status = REFUSED
        else
          charge_shared(b, n, lim, itv, amt, s, free)
          record(b, id, n, amt, s, ttl, 0, '')
        end
      end
    elseif op == 5 then
      who = tid
      if redis.call('HEXISTS', KEYS[5 * b - 3], id) == 1 then
        status = NOT_OPEN
      else
        local x = register(b, tid, tshare, tmax, n)
        if not x then
          who = nil
          status = INVALID_SHARES
        else
          dirty[b] = true
          local s0 = later(now, x.tail)
          local sg, sb = s0, s0
          local idle = x.until_ == 0
          for d = 1, n do
            if amt[d] > 0 then
              -- idle: its share was lent; active: what was lent before it became active
              local lent = bor[b][d] or 0
              if not idle then lent = math.min(x.hold[d], lent) end
              sg = later(sg, later(x.lane[d] - tol[d], lent))
              sb = later(sb, later(later(x.ceil[d], tats[b][d] or 0), bor[b][d] or 0) - tol[d])
            end
          end
          local lane_ok = x.share > 0
          local free = PPM - AS[b]
          local borrow_ok = free > 0 and sb <= now + tahead
          local lane = lane_ok and (sg <= sb or not borrow_ok)
          local s
          if lane then
            s = sg
          elseif borrow_ok then
            s = sb
          end
          if not s then
            status, delay = REFUSED, sb - now
          else
            delay = s - now
            if delay > max_wait then
              status = REFUSED
            else
              charge_shared(b, n, lim, itv, amt, s, 0)
              local latest = later(LT[b], s)
              local untilv = 0
              for d = 1, n do
                if amt[d] > 0 then
                  x.ceil[d] = cap(later(x.ceil[d], s) + math.ceil(amt[d] * itv[d] * PPM / (lim[d] * x.max)))
                  latest = later(latest, x.ceil[d])
                  if lane then
                    x.lane[d] = cap(later(x.lane[d], s) + math.ceil(amt[d] * itv[d] * PPM / (lim[d] * x.share)))
                    latest = later(latest, x.lane[d])
                    untilv = later(untilv, x.lane[d])
                  else
                    bor[b][d] = cap(later(bor[b][d], s) + math.ceil(amt[d] * itv[d] * PPM / (lim[d] * free)))
                    latest = later(latest, bor[b][d])
                  end
                end
              end
              x.tail = s
              if untilv > x.until_ then
                if x.until_ == 0 then
                  AS[b] = AS[b] + x.share
                  -- a lane call leaves borrowed as it was: what was lent until now
                  for d = 1, #x.hold do x.hold[d] = bor[b][d] or 0 end
                end
                x.until_ = untilv
                redis.call('ZADD', KEYS[5 * b], untilv, tid)
              end
              LT[b] = latest
              local path = 2
              if lane then path = 1 end
              record(b, id, n, amt, s, ttl, path, tid)
            end
          end
        end
      end
    elseif op == 6 then
      if register(b, tid, tshare, tmax, n) then
        dirty[b] = true
        who = tid
      else
        status = INVALID_SHARES
      end
    elseif op == 2 or op == 3 then
      local amounts, path, rtid = take(b, id)
      if not amounts then
        status = NOT_OPEN
      else
        grow(b, n)
        local back = {}
        for d = 1, n do
          local reserved = amounts[d] or 0
          if op == 2 then back[d] = reserved - amt[d] else back[d] = reserved end
          adjust(b, d, lim[d], itv[d], back[d])
        end
        local borrowed = path ~= 1
        if path ~= 0 then
          local x = tenant_of(b, rtid)
          if x then
            local latest = LT[b]
            for d = 1, n do
              if d <= #x.ceil then
                x.ceil[d] = adjust_at(x.ceil[d], lim[d], itv[d], x.max, back[d])
                latest = later(latest, x.ceil[d])
                if path == 1 and x.share > 0 then
                  x.lane[d] = adjust_at(x.lane[d], lim[d], itv[d], x.share, back[d])
                  latest = later(latest, x.lane[d])
                end
              end
            end
            LT[b] = latest
            tdirty[b][rtid] = true
          end
        end
        if borrowed then
          for d = 1, n do
            bor[b][d] = adjust_at(bor[b][d], lim[d], itv[d], PPM, back[d])
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
    if op >= 5 then
      local x = nil
      if who then x = tenant_of(b, who) end
      nout = tenant_out(out, nout, n, x, lim, itv)
    end
  end
end

for b in pairs(dirty) do
  local busy = T[b] - now
  local t, r, o = tats[b], res[b], bor[b]
  for d = 1, #t do
    if t[d] - now > busy then busy = t[d] - now end
  end
  for d = 1, #o do
    if o[d] - now > busy then busy = o[d] - now end
  end
  if L[b] - now > busy then busy = L[b] - now end
  if LT[b] - now > busy then busy = LT[b] - now end
  if busy < 0 then busy = 0 end
  local ttl = math.ceil(busy / 1000000) * 1000 + MARGIN_MS
  if ttl > MAX_TTL_MS then ttl = MAX_TTL_MS end
  local px = string.format('%.0f', ttl)
  grow(b, #t)
  local n = #t
  local f = { T[b], O[b], E[b], L[b], n, SH[b], LT[b], AS[b] }
  for d = 1, n do
    f[8 + d], f[8 + n + d], f[8 + 2 * n + d] = t[d], r[d], o[d]
  end
  redis.call('SET', KEYS[5 * b - 4], struct.pack(doubles(8 + 3 * n), unpack(f)), 'PX', px)
  for tid in pairs(tdirty[b]) do
    local x = ten[b][tid]
    local m = #x.lane
    local g = { x.share, x.max, x.tail, x.until_, m }
    for d = 1, m do
      g[5 + d], g[5 + m + d], g[5 + 2 * m + d] = x.lane[d], x.ceil[d], x.hold[d]
    end
    redis.call('HSET', KEYS[5 * b - 1], tid, struct.pack(doubles(5 + 3 * m), unpack(g)))
  end
  redis.call('PEXPIRE', KEYS[5 * b - 3], px)
  redis.call('PEXPIRE', KEYS[5 * b - 2], px)
  redis.call('PEXPIRE', KEYS[5 * b - 1], px)
  redis.call('PEXPIRE', KEYS[5 * b], px)
end
return out
