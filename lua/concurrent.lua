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
--           earliest lease expiry µs or 0, now µs}; release: {1 if the lease was valid, 0, 0};
--           extend: {1 if extended, 0, 0}; stats: {held, held_us, immediate, waited,
--           wait_us, overages, reclaimed, current holders, waiters}
-- Notes     the three keys share the limiter's hash tag (one slot). Every change refreshes
--           the TTL of all three (an emptied zset is deleted by Redis and comes back with a
--           TTL on its next write).

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
if raw and #raw == 72 then m = { struct.unpack('<ddddddddd', raw) } m[10] = nil end

local function earliest()
  local first = redis.call('ZRANGE', HOLDERS, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return 0
end

if op == 6 then
  local live = redis.call('ZCOUNT', HOLDERS, '(' .. string.format('%.17g', now), '+inf')
  return { m[3], m[4], m[5], m[6], m[7], m[8], m[9], live, redis.call('ZCARD', QUEUE) }
end

local changed = false

local function take(who, lock_us)
  m[1] = m[1] + 1
  m[3] = m[3] + 1
  redis.call('ZADD', HOLDERS, now + lock_us, who)
  redis.call('HSET', INFO, 'h:' .. who, struct.pack('<dd', m[1], now))
  return m[1]
end

-- reclaim expired leases
local expired = redis.call('ZRANGEBYSCORE', HOLDERS, '-inf', now, 'WITHSCORES')
for i = 1, #expired, 2 do
  local h = 'h:' .. expired[i]
  local info = redis.call('HGET', INFO, h)
  local acquired = tonumber(expired[i + 1])
  if info and #info == 16 then local _ _, acquired = struct.unpack('<dd', info) end
  m[4] = m[4] + tonumber(expired[i + 1]) - acquired
  m[8] = m[8] + 1
  m[9] = m[9] + 1
  redis.call('HDEL', INFO, h)
  redis.call('ZREM', HOLDERS, expired[i])
  changed = true
end

-- hand free slots to the queue's head
local function grant()
  local count = redis.call('ZCARD', HOLDERS)
  while count < limit do
    local head = redis.call('ZRANGE', QUEUE, 0, 0)[1]
    if not head then break end
    changed = true
    redis.call('ZREM', QUEUE, head)
    local info = redis.call('HGET', INFO, 'w:' .. head)
    redis.call('HDEL', INFO, 'w:' .. head)
    if info and #info == 24 then
      local deadline, enqueued, lock_us = struct.unpack('<ddd', info)
      if deadline >= now then
        local token = take(head, lock_us)
        m[6] = m[6] + 1
        m[7] = m[7] + now - enqueued
        redis.call('PUBLISH', channel, head .. ' ' .. string.format('%.17g', token))
        count = count + 1
      end
    end
  end
end

local function token_of(who)
  local info = redis.call('HGET', INFO, 'h:' .. who)
  if info and #info == 16 then return (struct.unpack('<dd', info)) end
  return 0
end

local function status()
  if redis.call('ZSCORE', HOLDERS, id) then return { 1, token_of(id), earliest(), now } end
  if redis.call('ZSCORE', QUEUE, id) then return { 0, 0, earliest(), now } end
  return { -1, 0, earliest(), now }
end

local reply
if op == 1 then
  grant()
  if redis.call('ZCARD', HOLDERS) < limit and redis.call('ZCARD', QUEUE) == 0 then
    local token = take(id, lock)
    m[5] = m[5] + 1
    changed = true
    reply = { 1, token, earliest(), now }
  elseif wait > 0 then
    m[2] = m[2] + 1
    redis.call('ZADD', QUEUE, m[2], id)
    redis.call('HSET', INFO, 'w:' .. id, struct.pack('<ddd', now + wait, now, lock))
    changed = true
    reply = { 0, 0, earliest(), now }
  else
    reply = { -1, 0, earliest(), now }
  end
elseif op == 2 then
  local valid = 0
  local info = redis.call('HGET', INFO, 'h:' .. id)
  if redis.call('ZREM', HOLDERS, id) == 1 then
    local acquired = now
    if info and #info == 16 then local _ _, acquired = struct.unpack('<dd', info) end
    m[4] = m[4] + now - acquired
    redis.call('HDEL', INFO, 'h:' .. id)
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
    changed = true
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
  redis.call('PEXPIRE', QUEUE, ttl)
end
return reply
