'use strict'

// A job's reschedule state, kept in a field of its own BullMQ hash: read when a job comes
// back, written when it is moved back to delayed; and the reschedule counted in statistics.

const { SluiceError } = require('../../base/errors')
const { membersOf } = require('./roles')

/**
 * A job's reschedule state lives in its own BullMQ hash, in this field (JSON), so it survives
 * with the job and is deleted with it; `data` and `opts` are never touched. `c`: moves counted
 * toward `reschedule` so far; `r`: the run (`attemptsStarted`) the rest is for, so a retry,
 * a stalled restart or a later run never reuses it; `at`: the slot's time (ms); `h`: the slot
 * is already charged (a pacer's or a Leaky/Points reservation: the run must not charge again);
 * `b`: the run already waited once for its limiter to reopen.
 */
const MARK = 'sluice:reschedule'
/** Writes the field only while the job exists (an obliterated job leaves nothing behind). */
const SET_MARK =
  "if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end return -1"

/** The Redis client of the worker running `job` (BullMQ 6: its backend's). */
function clientOf(job) {
  const q = job.queue
  const backend = q && typeof q.getBackend === 'function' ? q.getBackend() : q
  if (!backend || !backend.client || typeof q.toKey !== 'function') {
    throw new SluiceError('ERR_INVALID_CONFIG', 'sluice/bullmq needs a Redis-backed BullMQ Worker (bullmq 6)')
  }
  return backend.client
}

const count = (v) => (Number.isSafeInteger(v) && v >= 0 ? v : 0)

/** The job's reschedule state, or null for a job never rescheduled by sluice (no read for a first run). */
async function readMark(job) {
  if (!((job.attemptsStarted || 0) > 1)) return null
  const client = await clientOf(job)
  const raw = await client.hget(job.queue.toKey(job.id), MARK)
  if (typeof raw !== 'string') return null
  let m
  try {
    m = JSON.parse(raw)
  } catch {
    return null
  }
  if (m === null || typeof m !== 'object') return null
  return { c: count(m.c), r: count(m.r), at: Number.isFinite(m.at) ? m.at : 0, h: m.h === 1, b: m.b === 1 }
}

/** Counts a reschedule in the statistics of `limiter` (each member of a composite). */
function countRescheduled(limiter) {
  for (const m of membersOf(limiter)) {
    const book = m._store && m._store._stats
    if (book && m._statsKind) book.rescheduled(m)
  }
}

/**
 * Moves `job` back to delayed (no attempt spent) until `at`, or `leadMs` before it to wait
 * for its slot itself, its state written first for the run that comes back; counts the
 * reschedule in `chosen`'s statistics.
 */
async function moveUntil(job, token, chosen, at, leadMs, mark) {
  const client = await clientOf(job)
  const slot = Math.ceil(at)
  const state = { c: mark.c, r: (job.attemptsStarted || 0) + 1, at: slot, h: mark.h ? 1 : 0, b: mark.b ? 1 : 0 }
  await client.eval(SET_MARK, 1, job.queue.toKey(job.id), MARK, JSON.stringify(state))
  await job.moveToDelayed(slot - leadMs, token)
  countRescheduled(chosen)
}

module.exports = { readMark, moveUntil }
