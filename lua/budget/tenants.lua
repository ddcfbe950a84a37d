-- budget/tenants.lua: the budget script's tenant helpers (included by lua/budget.lua, after
-- budget/state.lua): tenant records, registration, activity, the tenant part of a reply.

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

-- a reservation of b through tenant tid (op 5): status, delay, and the tenant to report (nil:
-- none, its shares refused)
local function reserve_as(b, n, lim, itv, tol, amt, id, ttl, max_wait, tid, tshare, tmax, tahead)
  local status, delay, who = OK, 0, nil
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
  return status, delay, who
end

-- a settle or cancel (back: given back per dimension, negative: debt) on the tenant's ceiling and,
-- for a lane reservation (path 1), its lane
local function settle_tenant(b, n, lim, itv, back, path, rtid)
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
end
