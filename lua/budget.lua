-- budget.lua: decides a batch of budget calls (Budget: reserve, settle, cancel, stats)
-- atomically. Mirrors src/core/budget/ `step` operation for operation (same doubles). Its
-- helpers are in lua/includes/budget/state.lua and tenants.lua, spliced in at the
-- `-- @include` lines by build.rs.
--
-- KEYS[5b-4] budget b's state: doubles '<d...' = tail_us, open, expired, latest_deadline_us,
--            n, shares (ppm), latest_tenant_us, active_shares (ppm), then tat_us x n,
--            reserved x n, borrowed_us x n, excess x n, committed_us x n (n = dimensions
--            ever used; a record without excess or committed_us: 0s)
-- KEYS[5b-3] its open reservations: hash id -> doubles deadline_us, m, path (0 no tenant,
--            1 lane, 2 borrowed), amount x m, then the tenant's id (raw bytes)
-- KEYS[5b-2] their deadlines: sorted set, member id, score deadline_us
-- KEYS[5b-1] its active tenants' records (an idle tenant has none): hash tenant id -> doubles
--            share, max (ppm), tail_us, active_until_us, n, open, last_us, lane_us x n,
--            ceiling_us x n, hold_us x n (a record without open and last_us: 0s)
-- KEYS[5b]   its active tenants: sorted set, member tenant id, score active_until_us
-- ARGV[1]    now_us: integer µs, or '' to use the server clock (TIME)
-- ARGV[2]    P, the number of dimension sets, then per set <n> and n quadruples <limit>
--            <interval_us> <max_burst> <max_debt> (sent once: the calls of a batch mostly
--            share them)
-- then       per call: <(b * 1024 + set) * 8 + op> <id> <ttl_us> <max_wait_us> and n amounts
--            (its set's n; budget b and set 1-based); op: 1 reserve, 2 settle (amount = the
--            actual amount), 3 cancel, 4 stats, 5 reserve through a tenant, 6 stats of a
--            tenant (the budget kind's operation codes, src/store/kinds/budget.rs); ops 5 and 6
--            add <tenant id> <share ppm> <max ppm> <ahead_us>
-- Returns    flat array, per call: status (1 done, 0 refused, 3 not open, -2 a key of its
--            budget holds another type: nothing applied), delay_us, now_us (the decision's
--            time), open, expired, then per dimension used (level, rounded up), reserved,
--            excess (settled past max_debt, counted, not charged); ops 5 and 6 then the
--            tenant's share, max and per dimension its lane's level (an idle tenant: as sent,
--            0s); op 4 then the number of active tenants, k the number listed, and 20 slots of
--            share, max and n lane levels (the first k used); all integers; after every call's
--            numbers, the ids of the tenants each op 4 listed (strings), in order
-- Notes      a budget's keys are written with PX = the time its state matters (queue, levels,
--            deadlines) in whole seconds + 120 s (at most 10 years), and only when changed.
--            Expired reservations are removed earliest first, at most 64 per call.
--            All KEYS share one hash slot (the name's hash tag): the caller groups by slot.

local nargs = #ARGV
assert(nargs >= 8 and #KEYS >= 5 and #KEYS % 5 == 0, 'budget: expected keys and calls')

-- @include clock
local nowstr = string.format('%.0f', now)
local MARGIN_MS = 120000
local MAX_TTL_MS = 315360000000
local MAX_AHEAD_US = 4e15
local PRUNE = 64
local WRONG_TYPE = -2
local OK, REFUSED, NOT_OPEN = 1, 0, 3
local PPM = 1000000

-- per budget index: tail, open, expired, latest deadline, tats, reserved, borrowed, shares,
-- latest tenant time, tenants read (id -> record), tenants changed; loaded, wrong, dirty, clean
local T, O, E, L, tats, res, bor, SH, LT, ten, tdirty = {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}
local AS, aclean, EX, CM = {}, {}, {}, {}
local loaded, wrong, dirty, clean = {}, {}, {}, {}

-- dimension sets: per set n, limit, interval, burst, most debt and tolerance per dimension
local nsets = tonumber(ARGV[2])
assert(nsets and nsets >= 1, 'budget: malformed dimension sets')
local setN, setL, setI, setB, setD, setT = {}, {}, {}, {}, {}, {}
local i = 3
for p = 1, nsets do
  local n = tonumber(ARGV[i])
  assert(n and n >= 1 and i + 4 * n <= nargs, 'budget: malformed dimension set')
  local lim, itv, bur, debt, tol = {}, {}, {}, {}, {}
  for d = 1, n do
    local a = i - 3 + 4 * d
    lim[d], itv[d], bur[d], debt[d] = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    tol[d] = math.floor(bur[d] * itv[d] / lim[d])
  end
  setN[p], setL[p], setI[p], setB[p], setD[p], setT[p] = n, lim, itv, bur, debt, tol
  i = i + 1 + 4 * n
end

-- set in budget/tenants.lua, used by prune in budget/state.lua
local closed
-- @include budget/state
-- @include budget/tenants

local out, nout, ids = {}, 0, {}
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
  local lim, itv, tol, debt, amt = setL[p], setI[p], setT[p], setD[p], {}
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
      out[nout + 1], out[nout + 2], out[nout + 3] = 0, 0, 0
      nout = nout + 3
    end
    if op >= 5 then nout = tenant_out(out, nout, n, nil) end
    if op == 4 then
      for j = 1, 2 + TOP * (2 + n) do out[nout + j] = 0 end
      nout = nout + 2 + TOP * (2 + n)
    end
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
      status, delay = reserve_as(b, n, lim, itv, tol, amt, id, ttl, max_wait, tid, tshare, tmax, tahead)
      who = tid
    elseif op == 6 then
      who = tid
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
          -- debt past the dimension's most is counted, not owed
          if -back[d] > debt[d] then
            EX[b][d] = EX[b][d] + (-back[d] - debt[d])
            back[d] = -debt[d]
          end
          adjust(b, d, lim[d], itv[d], back[d])
        end
        settle_tenant(b, n, lim, itv, back, path, rtid)
        if path ~= 1 then
          for d = 1, n do
            bor[b][d] = adjust_at(bor[b][d], lim[d], itv[d], PPM, back[d])
          end
        end
        if path ~= 0 then closed(b, rtid) end
        dirty[b] = true
      end
    end
    out[nout + 1], out[nout + 2], out[nout + 3], out[nout + 4], out[nout + 5] = status, delay, now, O[b], E[b]
    nout = nout + 5
    for d = 1, n do
      local ahead = (tats[b][d] or 0) - now
      local used = 0
      if ahead > 0 then used = math.ceil(ahead * lim[d] / itv[d]) end
      out[nout + 1], out[nout + 2], out[nout + 3] = used, res[b][d] or 0, EX[b][d] or 0
      nout = nout + 3
    end
    if op >= 5 then nout = tenant_out(out, nout, n, tenant_of(b, who), lim, itv, b, tshare, tmax) end
    if op == 4 then nout = list_tenants(out, nout, n, lim, itv, b, ids) end
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
    if CM[b][d] and CM[b][d] - now > busy then busy = CM[b][d] - now end
  end
  if L[b] - now > busy then busy = L[b] - now end
  if LT[b] - now > busy then busy = LT[b] - now end
  if busy < 0 then busy = 0 end
  local ttl = math.ceil(busy / 1000000) * 1000 + MARGIN_MS
  if ttl > MAX_TTL_MS then ttl = MAX_TTL_MS end
  local px = string.format('%.0f', ttl)
  grow(b, #t)
  local n = #t
  local f, x, c = { T[b], O[b], E[b], L[b], n, 0, LT[b], AS[b] }, EX[b], CM[b]
  for d = 1, n do
    f[8 + d], f[8 + n + d], f[8 + 2 * n + d], f[8 + 3 * n + d], f[8 + 4 * n + d] = t[d], r[d], o[d], x[d], c[d]
  end
  redis.call('SET', KEYS[5 * b - 4], struct.pack(doubles(8 + 5 * n), unpack(f)), 'PX', px)
  for tid in pairs(tdirty[b]) do
    local x = ten[b][tid]
    if x then
      local m = #x.lane
      local g = { x.share, x.max, x.tail, x.until_, m, x.open, x.last }
      for d = 1, m do
        g[7 + d], g[7 + m + d], g[7 + 2 * m + d] = x.lane[d], x.ceil[d], x.hold[d]
      end
      redis.call('HSET', KEYS[5 * b - 1], tid, struct.pack(doubles(7 + 3 * m), unpack(g)))
    else
      redis.call('HDEL', KEYS[5 * b - 1], tid)
    end
  end
  redis.call('PEXPIRE', KEYS[5 * b - 3], px)
  redis.call('PEXPIRE', KEYS[5 * b - 2], px)
  redis.call('PEXPIRE', KEYS[5 * b - 1], px)
  redis.call('PEXPIRE', KEYS[5 * b], px)
end
-- the ids the stats calls list, after every call's numbers
for k = 1, #ids do out[nout + k] = ids[k] end
return out
