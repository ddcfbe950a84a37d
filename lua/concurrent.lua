-- concurrent.lua: a batch of operations on concurrent limiters (distributed semaphores),
-- decided in order. Mirrors src/core/concurrent.rs `Semaphore::apply` operation for
-- operation (the replies are identical; the layout below is the script's own).
--
-- KEYS[3g-2] holders of limiter g: zset, member = lease '<id>|<token>|<acquired_us>', score =
--            expiry µs, plus the member '~' at +inf that keeps the zset (and its TTL) alive
-- KEYS[3g-1] queue of limiter g: zset, member = waiter id, score = arrival number
-- KEYS[3g]   info of limiter g: hash; 'm' = struct of 12 doubles (seq, qseq, held, held_us,
--            immediate, waited, wait_us, overages, reclaimed, holders, waiters, a lower
--            bound of the earliest lease expiry, when the TTLs were last set);
--            'h:<id>' = the lease of a waiter that was handed a slot (it knows only its id);
--            'w:<id>' = '<ddd' (deadline_us, enqueued_us, lock_us)
-- ARGV[1]    now_us: integer µs, or '' to use the server clock (TIME)
-- ARGV[2]    G, the number of limiters; then G channels (grants of limiter g are published
--            on its channel as '<waiter id> <token>')
-- ARGV[3+G] P, the number of parameter sets, then P quadruples <limit> <lock_us> <wait_us>
--            <ttl_ms> (the operations of a batch mostly share them: one number to parse per
--            operation instead of four); wait_us: 0 = do not queue; ttl_ms: the expiry of the
--            limiter's keys
-- then       2 values per operation: <(g * 1024 + parameter set) * 8 + op> <id> (g and the
--            set 1-based); op: 1 acquire, 2 release, 3 extend, 4 poll, 5 cancel, 6 stats (the
--            concurrent kind's operation codes, src/store/kinds/concurrent.rs).
--            Release and extend name a
--            lease taken at once by '<id>|<token>|<acquired_us>' (from the acquire reply),
--            one handed over from the queue by its id
-- Returns    flat array, per operation: acquire / poll / cancel {status (1 acquired,
--            0 queued, -1 not waiting), token, earliest lease expiry µs (0 when acquired or
--            none held), now µs}; release {1 if the lease was valid, 0, 0, 0}; extend {1 if
--            extended, 0, 0, 0}; stats {held, held_us, immediate, waited, wait_us, overages,
--            reclaimed, current holders, waiters}; then one string '<waiter id> <token>' per
--            grant made by the batch (also published), so the caller wakes its own waiters
--            without waiting for the message. An operation on a limiter one of whose keys
--            holds a value of another type (another writer uses our key prefix) is answered
--            -2 then zeros (4 values, 9 for stats) and not applied; the others go on.
-- Notes      a limiter's three keys share its hash tag; all KEYS share one slot (the caller
--            groups operations by slot). Counts and the expiry bound are tracked in 'm', so
--            an uncontended acquire or release is three commands (HGET m, ZADD or ZREM,
--            HSET m). 'm' and the zsets are written together, and a
--            missing or foreign 'm' is rebuilt from the zsets. TTLs: set when a key is
--            created (the queue when it gets its first waiter; the holders zset never empties
--            thanks to '~'), on an extension, and otherwise at most every ttl/2 on the server
--            clock (every change under an explicit clock); the caller keeps ttl_ms at least
--            2 * (lock + wait), so keys outlive every lease and waiter they hold.
--            Types: a limiter's keys are checked on its first operation of the batch, before
--            anything of it is written: HGET m with redis.pcall (no extra command), TYPE of the
--            two zsets (two commands per limiter and batch: they are not read by every
--            operation, and a write that failed half-way would leave the batch half applied).

local nargs = #ARGV
-- @include clock
-- @include wrong_type
local G = tonumber(ARGV[2])
assert(G and G >= 1 and #KEYS == 3 * G, 'concurrent: malformed arguments')
local P = tonumber(ARGV[3 + G])
assert(P and P >= 1 and (nargs - 3 - G - 4 * P) % 2 == 0, 'concurrent: malformed parameter sets')
local pL, pK, pW, pT = {}, {}, {}, {}
for p = 1, P do
  local a = 4 + G + 4 * (p - 1)
  pL[p], pK[p], pW[p], pT[p] = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
end

-- m fields
local SEQ, QSEQ, HELD, HELD_US, IMMEDIATE, WAITED, WAIT_US, OVERAGES, RECLAIMED, COUNT, QLEN, BOUND, REFRESHED =
  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13
local FORMAT = '<ddddddddddddd'
local explicit_clock = ARGV[1] ~= ''
local function int(x)
  return string.format('%.17g', x)
end
local now_s = int(now)
-- a lease name: id, token, acquired_us
local function parse(lease)
  local who, token, at = string.match(lease, '^([^|]*)|([^|]*)|([^|]*)$')
  return who, tonumber(token), tonumber(at)
end

local M, changed, ttl, refresh, wrong = {}, {}, {}, {}, {}
local WRONG_TYPE = -2
local grants = {}

-- whether `key` is a sorted set or absent (nothing of another type): a zset read, which
-- errors WRONGTYPE on another type (ZSCORE, not TYPE: the documented ACL has no +type)
local function zset_or_none(key)
  return not wrong_type(redis.pcall('ZSCORE', key, ''))
end

-- the counts of limiter g, or nil (and wrong[g]) when one of its keys holds another type
local function load(g)
  local info = KEYS[3 * g]
  local raw = redis.pcall('HGET', info, 'm')
  if wrong_type(raw) then
    wrong[g] = true
    return nil
  end
  if not (zset_or_none(KEYS[3 * g - 2]) and zset_or_none(KEYS[3 * g - 1])) then
    wrong[g] = true
    return nil
  end
  local m
  if raw and #raw == 104 then
    m = { struct.unpack(FORMAT, raw) }
    m[14] = nil -- struct.unpack also returns the next position
  else
    local holders = KEYS[3 * g - 2]
    m = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
    redis.call('ZADD', holders, 'inf', '~')
    m[COUNT] = redis.call('ZCARD', holders) - 1
    m[QLEN] = redis.call('ZCARD', KEYS[3 * g - 1])
    local q = redis.call('ZRANGE', KEYS[3 * g - 1], -1, -1, 'WITHSCORES')
    if q[2] then m[QSEQ] = tonumber(q[2]) end
    changed[g], refresh[g] = true, true
  end
  M[g] = m
  return m
end

local function earliest(g)
  local first = redis.call('ZRANGE', KEYS[3 * g - 2], 0, 0, 'WITHSCORES')
  if first[2] and first[1] ~= '~' then return tonumber(first[2]) end
  return 0
end

-- a lease for `who`; one handed over from the queue is also recorded under its id
local function take(g, m, who, lock_us, granted)
  local expires = now + lock_us
  m[SEQ] = m[SEQ] + 1
  m[HELD] = m[HELD] + 1
  local lease = who .. '|' .. int(m[SEQ]) .. '|' .. now_s
  redis.call('ZADD', KEYS[3 * g - 2], expires, lease)
  if granted then redis.call('HSET', KEYS[3 * g], 'h:' .. who, lease) end
  if m[COUNT] == 0 or expires < m[BOUND] then m[BOUND] = expires end
  m[COUNT] = m[COUNT] + 1
  changed[g] = true
  return m[SEQ]
end

-- the lease a release or extend names: '<id>|<token>|<acquired>', or the id of one handed
-- over from the queue
local function named(g, name)
  if string.find(name, '|', 1, true) then return name, false end
  return redis.call('HGET', KEYS[3 * g], 'h:' .. name), true
end

-- takes back expired leases; skipped while no lease can have expired
local function reclaim(g, m)
  if m[COUNT] == 0 or now < m[BOUND] then return end
  local holders, info = KEYS[3 * g - 2], KEYS[3 * g]
  local expired = redis.call('ZRANGEBYSCORE', holders, '-inf', now, 'WITHSCORES')
  if #expired > 0 then
    local fields = {}
    for i = 1, #expired, 2 do
      local who, _, acquired = parse(expired[i])
      local expires = tonumber(expired[i + 1])
      fields[#fields + 1] = 'h:' .. (who or '')
      m[HELD_US] = m[HELD_US] + expires - (acquired or expires)
      m[OVERAGES] = m[OVERAGES] + 1
      m[RECLAIMED] = m[RECLAIMED] + 1
    end
    redis.call('HDEL', info, unpack(fields))
    redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
    m[COUNT] = m[COUNT] - #fields
    changed[g] = true
  end
  m[BOUND] = earliest(g)
end

-- hands free slots to the queue's head, dropping waiters past their deadline
local function grant(g, m, limit, channel)
  local queue, info = KEYS[3 * g - 1], KEYS[3 * g]
  while m[QLEN] > 0 and m[COUNT] < limit do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then
      m[QLEN] = 0
      break
    end
    redis.call('ZREM', queue, head)
    local w = 'w:' .. head
    local data = redis.call('HGET', info, w)
    redis.call('HDEL', info, w)
    m[QLEN] = m[QLEN] - 1
    changed[g] = true
    if data and #data == 24 then
      local deadline, enqueued, lock_us = struct.unpack('<ddd', data)
      if deadline >= now then
        local token = take(g, m, head, lock_us, true)
        m[WAITED] = m[WAITED] + 1
        m[WAIT_US] = m[WAIT_US] + now - enqueued
        local message = head .. ' ' .. int(token)
        redis.call('PUBLISH', channel, message)
        grants[#grants + 1] = message
      end
    end
  end
end

local function status(g, id)
  local lease = redis.call('HGET', KEYS[3 * g], 'h:' .. id)
  if lease then
    local _, token = parse(lease)
    return 1, token, 0, now
  end
  if redis.call('ZSCORE', KEYS[3 * g - 1], id) then return 0, 0, earliest(g), now end
  return -1, 0, earliest(g), now
end

local out, n = {}, 0
local function reply(a, b, c, d)
  out[n + 1], out[n + 2], out[n + 3], out[n + 4] = a, b, c, d
  n = n + 4
end

-- Grants are published on each limiter's channel. A script's writes are not rolled back when
-- it fails, so a user who may not publish there (Redis 7's default for a new ACL user) must be
-- refused before anything is written: otherwise a release would hand its slot to a waiter that
-- is never told. (redis.acl_check_cmd exists from Redis 7.0.)
if redis.acl_check_cmd then
  for g = 1, G do
    if not redis.acl_check_cmd('PUBLISH', ARGV[2 + g], '') then
      return redis.error_reply('NOPERM this user has no permissions to publish on the concurrent limiter channel '
        .. ARGV[2 + g] .. ': allow it (&<keyPrefix>:*); nothing was changed')
    end
  end
end

for i = 4 + G + 4 * P, nargs, 2 do
  local code, id = tonumber(ARGV[i]), ARGV[i + 1]
  local op = code % 8
  local gp = (code - op) / 8
  local set = gp % 1024
  local g = (gp - set) / 1024
  local limit, lock, wait, op_ttl = pL[set], pK[set], pW[set], pT[set]
  assert(KEYS[3 * g] and limit and lock and wait and op_ttl, 'concurrent: malformed operation')
  local channel = ARGV[2 + g]
  local m = M[g]
  if m == nil and not wrong[g] then m = load(g) end
  if not ttl[g] or op_ttl > ttl[g] then ttl[g] = op_ttl end
  if not m then
    reply(WRONG_TYPE, 0, 0, 0)
    if op == 6 then
      out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = 0, 0, 0, 0, 0
      n = n + 5
    end
  elseif op == 6 then
    local live = redis.call('ZCOUNT', KEYS[3 * g - 2], '(' .. now_s, '(inf')
    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = m[HELD], m[HELD_US], m[IMMEDIATE], m[WAITED], m[WAIT_US]
    out[n + 6], out[n + 7], out[n + 8], out[n + 9] = m[OVERAGES], m[RECLAIMED], live, redis.call('ZCARD', KEYS[3 * g - 1])
    n = n + 9
  else
    reclaim(g, m)
    if op == 1 then
      grant(g, m, limit, channel)
      if m[QLEN] == 0 and m[COUNT] < limit then
        local token = take(g, m, id, lock, false)
        m[IMMEDIATE] = m[IMMEDIATE] + 1
        reply(1, token, 0, now)
      elseif wait > 0 then
        if m[QLEN] == 0 then refresh[g] = true end -- the queue zset is created
        m[QSEQ] = m[QSEQ] + 1
        m[QLEN] = m[QLEN] + 1
        redis.call('ZADD', KEYS[3 * g - 1], m[QSEQ], id)
        redis.call('HSET', KEYS[3 * g], 'w:' .. id, struct.pack('<ddd', now + wait, now, lock))
        changed[g] = true
        reply(0, 0, earliest(g), now)
      else
        reply(-1, 0, earliest(g), now)
      end
    elseif op == 2 then
      local valid = 0
      local lease, granted = named(g, id)
      if lease and redis.call('ZREM', KEYS[3 * g - 2], lease) == 1 then
        local _, _, acquired = parse(lease)
        m[HELD_US] = m[HELD_US] + now - (acquired or now)
        if granted then redis.call('HDEL', KEYS[3 * g], 'h:' .. id) end
        m[COUNT] = m[COUNT] - 1
        changed[g] = true
        valid = 1
      end
      grant(g, m, limit, channel)
      reply(valid, 0, 0, 0)
    elseif op == 3 then
      local lease = named(g, id)
      if lease and redis.call('ZSCORE', KEYS[3 * g - 2], lease) then
        redis.call('ZADD', KEYS[3 * g - 2], 'XX', now + lock, lease)
        if now + lock < m[BOUND] then m[BOUND] = now + lock end
        changed[g], refresh[g] = true, true
        reply(1, 0, 0, 0)
      else
        reply(0, 0, 0, 0)
      end
    elseif op == 4 then
      grant(g, m, limit, channel)
      reply(status(g, id))
    elseif op == 5 then
      if redis.call('ZREM', KEYS[3 * g - 1], id) == 1 then
        redis.call('HDEL', KEYS[3 * g], 'w:' .. id)
        m[QLEN] = m[QLEN] - 1
        changed[g] = true
      end
      grant(g, m, limit, channel)
      reply(status(g, id))
    else
      error('concurrent: unknown op ' .. tostring(op))
    end
  end
end

for g, _ in pairs(changed) do
  local m = M[g]
  local due = refresh[g] or explicit_clock or now >= m[REFRESHED] + ttl[g] * 500
  if due then m[REFRESHED] = now end
  -- written before the PEXPIREs: this may be what creates the hash
  redis.call('HSET', KEYS[3 * g], 'm',
    struct.pack(FORMAT, m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8], m[9], m[10], m[11], m[12], m[13]))
  if due then
    redis.call('PEXPIRE', KEYS[3 * g], ttl[g])
    redis.call('PEXPIRE', KEYS[3 * g - 2], ttl[g])
    if m[QLEN] > 0 then redis.call('PEXPIRE', KEYS[3 * g - 1], ttl[g]) end
  end
end
for i = 1, #grants do out[n + i] = grants[i] end
return out
