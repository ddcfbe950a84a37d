-- includes/budget/tenants.lua: the budget script's tenant helpers (included by lua/budget.lua,
-- after budget/state; mirrors src/core/budget/tenants.rs): tenant records (held only while
-- the tenant is active), activity, a reservation through a tenant, what a settlement gives
-- back on its lane and ceiling, the tenant part of a reply.

local ACTIVE_US, NEVER, TOP = 1000000, 9e15, 20

-- tenant `tid` of b: { share, max, tail, until_, open, last, lane = {}, ceil = {}, hold = {} },
-- or nil (idle: no record)
local function tenant_of(b, tid)
  local x = ten[b][tid]
  if x ~= nil then return x or nil end
  local v = redis.call('HGET', KEYS[5 * b - 1], tid)
  x = false
  if v and #v >= 40 then
    local n = struct.unpack('<d', v, 33)
    -- a record of an older version, without open and last: 40 + 24n bytes, read with 0s
    if n == math.floor(n) and n >= 0 and n <= 64 and (#v == 56 + 24 * n or #v == 40 + 24 * n) then
      local h = 5
      if #v == 56 + 24 * n then h = 7 end
      local f = { struct.unpack(doubles(h + 3 * n), v) }
      x = { share = f[1], max = f[2], tail = f[3], until_ = f[4], open = 0, last = 0, lane = {}, ceil = {}, hold = {} }
      if h == 7 then x.open, x.last = f[6], f[7] end
      for d = 1, n do
        x.lane[d], x.ceil[d], x.hold[d] = f[h + d], f[h + n + d], f[h + 2 * n + d]
      end
    end
  end
  ten[b][tid] = x
  return x or nil
end

-- a lane's rate (ppm) while the active shares sum to `active`: scaled down over 1e6
local function scaled(share, active)
  if active > PPM then return share * PPM / active end
  return share
end

-- moves tenant tid (record x) to `untilv` in the active set
local function rekey(b, tid, x, untilv)
  if x.until_ ~= untilv then
    x.until_ = untilv
    redis.call('ZADD', KEYS[5 * b], untilv, tid)
  end
  tdirty[b][tid] = true
end

-- tenant tid is no longer active: it leaves with its record and its share
local function leave(b, tid)
  redis.call('ZREM', KEYS[5 * b], tid)
  local x = tenant_of(b, tid)
  if x then AS[b] = AS[b] - x.share end
  ten[b][tid] = false
  tdirty[b][tid] = true
  dirty[b] = true
end

-- one of tid's reservations closed: with none open it stays active until a second after its
-- latest reservation and its lanes drained, and leaves at once if that is past
closed = function(b, tid)
  local x = tenant_of(b, tid)
  if not x then return end
  x.open = x.open - 1
  tdirty[b][tid] = true
  if x.open <= 0 then
    x.open = 0
    local untilv = x.last + ACTIVE_US
    for d = 1, #x.lane do untilv = later(untilv, x.lane[d]) end
    if untilv <= now then
      leave(b, tid)
    else
      rekey(b, tid, x, untilv)
    end
  end
end

-- tenants no longer active leave with their records, earliest first, at most 64 per call
local function expire_active(b)
  if aclean[b] then return end
  local ids = redis.call('ZRANGEBYSCORE', KEYS[5 * b], '-inf', nowstr, 'LIMIT', 0, PRUNE)
  for _, tid in ipairs(ids) do leave(b, tid) end
  if #ids < PRUNE then aclean[b] = true end
end

-- a tenant's share, max and per dimension its lane's level (at its scaled share now); an idle
-- one: as sent, 0s
local function tenant_out(out, nout, n, x, lim, itv, b, tshare, tmax)
  if not x then
    out[nout + 1], out[nout + 2] = tshare or 0, tmax or 0
    for d = 1, n do out[nout + 2 + d] = 0 end
    return nout + 2 + n
  end
  out[nout + 1], out[nout + 2] = x.share, x.max
  local rate = scaled(x.share, AS[b])
  for d = 1, n do
    local ahead = (x.lane[d] or 0) - now
    local used = 0
    if rate > 0 and ahead > 0 then used = math.ceil(ahead * lim[d] * rate / (itv[d] * PPM)) end
    out[nout + 2 + d] = used
  end
  return nout + 2 + n
end

-- a reservation of b through tenant tid (op 5): status, delay; nothing changes when refused
local function reserve_as(b, n, lim, itv, tol, amt, id, ttl, max_wait, tid, tshare, tmax, tahead)
  if redis.call('HEXISTS', KEYS[5 * b - 3], id) == 1 then return NOT_OPEN, 0 end
  local x = tenant_of(b, tid)
  local idle = x == nil
  local old = { share = 0, tail = 0, lane = {}, ceil = {}, hold = {} }
  if x then old = x end
  -- the active shares once this tenant is active with its share as sent
  local active = AS[b] - old.share + tshare
  local s0 = later(now, old.tail)
  local sg, sb = s0, s0
  for d = 1, n do
    if amt[d] > 0 then
      local borrowed = bor[b][d] or 0
      -- idle: its share was lent (and, scaling the active lanes down, what they committed at
      -- their former rates, drained at the full rate); active: what was lent before it became
      -- active
      local lent = borrowed
      if not idle then
        lent = math.min(old.hold[d] or 0, borrowed)
      elseif active > PPM then
        lent = later(borrowed, (CM[b][d] or 0) - tol[d])
      end
      sg = later(sg, later((old.lane[d] or 0) - tol[d], lent))
      sb = later(sb, later(later(old.ceil[d] or 0, tats[b][d] or 0), borrowed) - tol[d])
    end
  end
  local free = PPM - math.min(active, PPM)
  local borrow_ok = free > 0 and sb <= now + tahead
  local lane = tshare > 0 and (sg <= sb or not borrow_ok)
  local s
  if lane then
    s = sg
  elseif borrow_ok then
    s = sb
  else
    return REFUSED, sb - now
  end
  local delay = s - now
  if delay > max_wait then return REFUSED, delay end
  charge_shared(b, n, lim, itv, amt, s, 0)
  if idle then
    x = { share = 0, max = 0, tail = 0, until_ = 0, open = 0, last = 0, lane = {}, ceil = {}, hold = {} }
    for d = 1, n do x.hold[d] = bor[b][d] or 0 end
    ten[b][tid] = x
    AS[b] = AS[b] + tshare
  else
    AS[b] = active
  end
  local rate = scaled(tshare, AS[b])
  x.share, x.max = tshare, tmax
  for d = #x.lane + 1, n do x.lane[d], x.ceil[d] = 0, 0 end
  for d = #x.hold + 1, n do x.hold[d] = 0 end
  local latest = later(LT[b], s)
  for d = 1, n do
    if amt[d] > 0 then
      x.ceil[d] = cap(later(x.ceil[d], s) + math.ceil(amt[d] * itv[d] * PPM / (lim[d] * x.max)))
      latest = later(latest, x.ceil[d])
      if lane then
        x.lane[d] = cap(later(x.lane[d], s) + math.ceil(amt[d] * itv[d] * PPM / (lim[d] * rate)))
        CM[b][d] = cap(later(CM[b][d], s) + math.ceil(amt[d] * itv[d] / lim[d]))
        latest = later(latest, x.lane[d])
      else
        bor[b][d] = cap(later(bor[b][d], s) + math.ceil(amt[d] * itv[d] * PPM / (lim[d] * free)))
        latest = later(latest, bor[b][d])
      end
    end
  end
  x.tail = s
  x.open = x.open + 1
  x.last = now
  LT[b] = latest
  rekey(b, tid, x, NEVER)
  local path = 2
  if lane then path = 1 end
  record(b, id, n, amt, s, ttl, path, tid)
  return OK, delay
end

-- a settle or cancel (back: given back per dimension, negative: debt) on the tenant's ceiling
-- and, for a lane reservation (path 1), its lane at its scaled share now and the lanes'
-- commitments at the full rate
local function settle_tenant(b, n, lim, itv, back, path, rtid)
  if path == 0 then return end
  if path == 1 then
    for d = 1, n do CM[b][d] = adjust_at(CM[b][d], lim[d], itv[d], PPM, back[d]) end
  end
  local x = tenant_of(b, rtid)
  if not x then return end
  local latest = LT[b]
  local rate = scaled(x.share, AS[b])
  for d = 1, n do
    if d <= #x.ceil then
      x.ceil[d] = adjust_at(x.ceil[d], lim[d], itv[d], x.max, back[d])
      latest = later(latest, x.ceil[d])
      if path == 1 and rate > 0 then
        x.lane[d] = adjust_at(x.lane[d], lim[d], itv[d], rate, back[d])
        latest = later(latest, x.lane[d])
      end
    end
  end
  LT[b] = latest
  tdirty[b][rtid] = true
end

-- stats (op 4): the number of active tenants and the first TOP of them, with an open
-- reservation first, then the latest active (ZREVRANGEBYSCORE); their ids go after every call's numbers
local function list_tenants(out, nout, n, lim, itv, b, ids)
  -- those still active now (the others leave lazily, a few per call)
  local listed = redis.call('ZREVRANGEBYSCORE', KEYS[5 * b], '+inf', '(' .. nowstr, 'LIMIT', 0, TOP)
  out[nout + 1] = redis.call('ZCOUNT', KEYS[5 * b], '(' .. nowstr, '+inf')
  local k = 0
  local at = nout + 2
  for _, tid in ipairs(listed) do
    local x = tenant_of(b, tid)
    if x then
      k = k + 1
      ids[#ids + 1] = tid
      at = tenant_out(out, at, n, x, lim, itv, b)
    end
  end
  out[nout + 2] = k
  for j = 1, (TOP - k) * (2 + n) do out[at + j] = 0 end
  return nout + 2 + TOP * (2 + n)
end
