-- concurrent.lua: one operation on a concurrent limiter (distributed semaphore).
-- Mirrors src/core/concurrent.rs `Semaphore::apply` operation for operation.
--
-- KEYS[1]   holders: zset, member = lease id, score = expiry µs
-- KEYS[2]   queue: zset, member = waiter id, score = arrival number
-- KEYS[3]   info: hash; 'm' = struct '<ddddddddd' (seq, qseq, held, held_us, immediate,
--           waited, wait_us, overages, reclaimed); 'h:<id>' = '<dd' (token, acquired_us);
--           'w:<id>' = '<ddd' (deadline_us, enqueued_us, lock_us)
-- ARGV[1]   op: 1 acquire, 2 release, 3 extend, 4 poll, 5 cancel, 6 stats
-- ARGV[2]   now_us: integer µs, or '' to use the server clock (TIME)
-- ARGV[3]   lease or waiter id (string)
-- ARGV[4]   limit (integer)          ARGV[5] lock_us (integer)
-- ARGV[6]   wait_us (integer, acquire: 0 = do not queue)
-- ARGV[7]   ttl_ms (integer): expiry of all three keys after a change
-- ARGV[8]   channel: grants are published there as '<waiter id> <token>'
-- Returns   acquire / poll / cancel: {status (1 acquired, 0 queued, -1 not waiting), token,
--           earliest lease expiry µs (0 when acquired or none held), now µs}; release: {1 if the lease was valid, 0, 0};
--           extend: {1 if extended, 0, 0}; stats: {held, held_us, immediate, waited,
--           wait_us, overages, reclaimed, current holders, waiters}
-- Notes     the three keys share the limiter's hash tag (one slot). Every change refreshes
--           the TTL of holders and info, and of the queue when it was written (an emptied
--           zset is deleted by Redis and comes back with a TTL on its next write).
--           Counts are read once and tracked, so an uncontended acquire is 8 commands.

assert(#KEYS == 3 and #ARGV == 8, 'concurrent: expected 3 keys and 8 arguments')
local HOLDERS, QUEUE, INFO = KEYS[1], KEYS[2], KEYS[3]
local op = tonumber(ARGV[1])
local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
end
local id, limit, lock, wait, ttl, channel =
  ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], ARGV[8]
assert(op and limit and lock and wait, 'concurrent: malformed arguments')

-- seq, qseq, held, held_us, immediate, waited, wait_us, overages, reclaimed
local m = { 0, 0, 0, 0, 0, 0, 0, 0, 0 }
local raw = redis.call('HGET', INFO, 'm')
if raw and #raw == 72 then
  m = { struct.unpack('<ddddddddd', raw) }
  m[10] = nil -- struct.unpack also returns the next position
end

local function earliest()
  local first = redis.call('ZRANGE', HOLDERS, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return 0
end

if op == 6 then
  local live = redis.call('ZCOUNT', HOLDERS, '(' .. string.format('%.17g', now), '+inf')
  return { m[3], m[4], m[5], m[6], m[7], m[8], m[9], live, redis.call('ZCARD', QUEUE) }
end

local changed, queue_written = false, false
local count -- holders, read once then tracked
local function holders()
  if count == nil then count = redis.call('ZCARD', HOLDERS) end
  return count
end

local function take(who, lock_us)
  holders()
  m[1] = m[1] + 1
  m[3] = m[3] + 1
  redis.call('ZADD', HOLDERS, now + lock_us, who)
  redis.call('HSET', INFO, 'h:' .. who, struct.pack('<dd', m[1], now))
  count = count + 1
  changed = true
  return m[1]
end

-- reclaim expired leases
local expired = redis.call('ZRANGEBYSCORE', HOLDERS, '-inf', now, 'WITHSCORES')
if #expired > 0 then
  local fields = {}
  for i = 1, #expired, 2 do fields[#fields + 1] = 'h:' .. expired[i] end
  local infos = redis.call('HMGET', INFO, unpack(fields))
  for i = 1, #expired, 2 do
    local expires = tonumber(expired[i + 1])
    local acquired = expires
    local info = infos[(i + 1) / 2]
    if info and #info == 16 then
      local _, at = struct.unpack('<dd', info)
      acquired = at
    end
    m[4] = m[4] + expires - acquired
    m[8] = m[8] + 1
    m[9] = m[9] + 1
  end
  redis.call('HDEL', INFO, unpack(fields))
  redis.call('ZREMRANGEBYSCORE', HOLDERS, '-inf', now)
  changed = true
end

-- hands free slots to the queue's head (dropping waiters past their deadline); returns
-- whether the queue is now empty
local function grant()
  while true do
    local head = redis.call('ZRANGE', QUEUE, 0, 0)[1]
    if not head then return true end
    if holders() >= limit then return false end
    redis.call('ZREM', QUEUE, head)
    local w = 'w:' .. head
    local info = redis.call('HGET', INFO, w)
    redis.call('HDEL', INFO, w)
    changed, queue_written = true, true
    if info and #info == 24 then
      local deadline, enqueued, lock_us = struct.unpack('<ddd', info)
      if deadline >= now then
        local token = take(head, lock_us)
        m[6] = m[6] + 1
        m[7] = m[7] + now - enqueued
        redis.call('PUBLISH', channel, head .. ' ' .. string.format('%.17g', token))
      end
    end
  end
end

local function status()
  local info = redis.call('HGET', INFO, 'h:' .. id)
  if info and #info == 16 then return { 1, (struct.unpack('<dd', info)), 0, now } end
  if redis.call('ZSCORE', QUEUE, id) then return { 0, 0, earliest(), now } end
  return { -1, 0, earliest(), now }
end

local reply
if op == 1 then
  if grant() and holders() < limit then
    local token = take(id, lock)
    m[5] = m[5] + 1
    reply = { 1, token, 0, now }
  elseif wait > 0 then
    m[2] = m[2] + 1
    redis.call('ZADD', QUEUE, m[2], id)
    redis.call('HSET', INFO, 'w:' .. id, struct.pack('<ddd', now + wait, now, lock))
    changed, queue_written = true, true
    reply = { 0, 0, earliest(), now }
  else
    reply = { -1, 0, earliest(), now }
  end
elseif op == 2 then
  local valid = 0
  local h = 'h:' .. id
  local info = redis.call('HGET', INFO, h)
  if info then
    local acquired = now
    if #info == 16 then
      local _, at = struct.unpack('<dd', info)
      acquired = at
    end
    m[4] = m[4] + now - acquired
    redis.call('ZREM', HOLDERS, id)
    redis.call('HDEL', INFO, h)
    changed = true
    valid = 1
  end
  grant()
  reply = { valid, 0, 0 }
elseif op == 3 then
  if redis.call('ZSCORE', HOLDERS, id) then
    redis.call('ZADD', HOLDERS, 'XX', now + lock, id)
    changed = true
    reply = { 1, 0, 0 }
  else
    reply = { 0, 0, 0 }
  end
elseif op == 4 then
  grant()
  reply = status()
elseif op == 5 then
  if redis.call('ZREM', QUEUE, id) == 1 then
    redis.call('HDEL', INFO, 'w:' .. id)
    changed, queue_written = true, true
  end
  grant()
  reply = status()
else
  error('concurrent: unknown op ' .. tostring(op))
end

if changed then
  redis.call('HSET', INFO, 'm', struct.pack('<ddddddddd', m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8], m[9]))
  redis.call('PEXPIRE', INFO, ttl)
  redis.call('PEXPIRE', HOLDERS, ttl)
  if queue_written then redis.call('PEXPIRE', QUEUE, ttl) end
end
return reply
