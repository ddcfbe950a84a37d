// Issue 24 item 6: a key of another type under our prefix (another writer's) fails only the
// call on it, and that call writes nothing; the other calls of the same script call are
// decided as usual and written. Each scenario fires 20 healthy calls and the bad one in one
// tick (one batch: one script call on a standalone server; on a cluster the healthy names are
// picked in the bad name's hash slot, so they share its script call there too), then reads
// Redis directly.
import { describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  FairTenant,
  LeakyLimiter,
  PacerComposite,
  PointsLimiter,
  QuotaLimiter,
  SlidingWindowLimiter,
  WindowLimiter,
  type RedisStore,
  type SlidingDecision,
} from '../lib/entries/index.js'
import { useStore, REDIS_KINDS } from './helpers/stores.js'

const HEALTHY = 20
const PLANTED_TTL_MS = 600_000

/** CRC16/XMODEM, as Redis Cluster hashes keys. */
function crc16(s: string): number {
  let crc = 0
  for (const byte of Buffer.from(s)) {
    crc ^= byte << 8
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc
}

/** The cluster slot of `key` (its hash tag when it has one). */
function slotOf(key: string): number {
  const open = key.indexOf('{')
  const close = open >= 0 ? key.indexOf('}', open + 1) : -1
  return crc16(close > open + 1 ? key.slice(open + 1, close) : key) % 16384
}

/** `count` names whose key (`keyOf(name)`) is in the slot of `keyOf(bad)`. */
function namesBeside(bad: string, keyOf: (name: string) => string, count: number, stem: string): string[] {
  const slot = slotOf(keyOf(bad))
  const out: string[] = []
  for (let i = 0; out.length < count; i++) {
    const name = `${stem}${i}`
    if (slotOf(keyOf(name)) === slot) out.push(name)
  }
  return out
}

type Settled<T> = PromiseSettledResult<T>

/** The bad call rejected with ERR_SCRIPT, naming neither its key nor its name. */
function expectWrongType(result: Settled<unknown>, ...secrets: string[]) {
  expect(result.status).toBe('rejected')
  const error = (result as PromiseRejectedResult).reason
  expect(error.code).toBe('ERR_SCRIPT')
  for (const secret of secrets) expect(error.message).not.toContain(secret)
}

function values<T>(results: Settled<T>[]): T[] {
  for (const r of results) if (r.status === 'rejected') throw r.reason
  return results.map((r) => (r as PromiseFulfilledResult<T>).value)
}

describe.each(REDIS_KINDS)('issue-24 keys of another type on %s', (kind) => {
  const ctx = useStore(kind)
  const redis = () => ctx.raw!
  const store = () => ctx.store as RedisStore
  let n = 0
  const unique = (stem: string) => `${stem}${n++}x${Math.random().toString(36).slice(2, 8)}`

  /** Plants another writer's list at `key`, with a TTL. */
  async function plantList(key: string) {
    await redis().rpush(key, 'theirs')
    await redis().pexpire(key, PLANTED_TTL_MS)
  }

  /** The planted list is untouched: same type, content and (about) TTL. */
  async function expectUntouched(key: string) {
    expect(await redis().type(key)).toBe('list')
    expect(await redis().lrange(key, 0, -1)).toEqual(['theirs'])
    expect(await redis().pttl(key)).toBeGreaterThan(PLANTED_TTL_MS - 60_000)
  }

  /** Runs `fire` in one tick and checks that its calls went out as one batch. */
  async function oneBatch<T>(fire: () => Promise<T>[]): Promise<Settled<T>[]> {
    const before = store().batching
    const results = await Promise.allSettled(fire())
    const after = store().batching
    expect(after.batches - before.batches).toBe(1)
    return results
  }

  const limiters = [
    ['bucket', (name: string) => new BucketLimiter(ctx.store, { name, limit: 5, interval: 'minute' })],
    ['window', (name: string) => new WindowLimiter(ctx.store, { name, limit: 5, interval: 'minute' })],
    ['leaky', (name: string) => new LeakyLimiter(ctx.store, { name, limit: 5, interval: 'minute' })],
    ['points', (name: string) => new PointsLimiter(ctx.store, { name, points: 5, interval: 'minute' })],
  ] as const

  describe.each(limiters)('%s limiter', (segment, make) => {
    it(`issue-24-wrongtype-${segment}: only the call on the bad key fails, and it writes nothing`, async () => {
      const keyOf = (name: string) => `${ctx.prefix}:${segment}:{${name}}`
      const bad = unique('bad')
      const good = namesBeside(bad, keyOf, HEALTHY, unique('ok'))
      await plantList(keyOf(bad))
      const healthy = good.map(make)
      const badLimiter = make(bad)
      // the bad call in the middle: healthy calls before it are written, and after it too
      const results = await oneBatch(() => [
        ...healthy.slice(0, 10).map((l) => l.check()),
        badLimiter.check(),
        ...healthy.slice(10).map((l) => l.check()),
      ])
      expectWrongType(results[10], bad, keyOf(bad))
      const decisions = values([...results.slice(0, 10), ...results.slice(11)])
      for (const d of decisions) expect(d).toMatchObject({ allowed: true, remaining: 4 })
      for (const name of good) expect(await redis().strlen(keyOf(name))).toBe(16)
      await expectUntouched(keyOf(bad))
      // a reset deletes nothing, a block writes nothing, and the others still work
      const more = await oneBatch<unknown>(() => [badLimiter.reset(), healthy[0].check(), badLimiter.block(1000)])
      expectWrongType(more[0], bad)
      expectWrongType(more[2], bad)
      expect(more[1]).toMatchObject({ status: 'fulfilled', value: { allowed: true, remaining: 3 } })
      await expectUntouched(keyOf(bad))
    })
  })

  it('issue-24-wrongtype-pacer: single calls and composites fail alone and charge nothing', async () => {
    const keyOf = (key: string) => `${ctx.prefix}:pacer:{${key}}`
    const bad = unique('bad')
    const [fresh, ...good] = namesBeside(bad, keyOf, HEALTHY + 1, unique('ok'))
    await plantList(keyOf(bad))
    const pacer = (key: string) => new DistributedPacer(ctx.store, { key, qps: 1, maxBurst: 2 })
    const healthy = good.map(pacer)
    const badPacer = pacer(bad)
    const other = unique('other') // another slot on a cluster: a composite across slots
    const results = await oneBatch(() => [
      ...healthy.slice(0, 10).map((p) => p.rateLimit()),
      badPacer.rateLimit(),
      new PacerComposite([pacer(fresh), badPacer]).pace(),
      new PacerComposite([pacer(other), badPacer]).rateLimit(),
      badPacer.pace(),
      ...healthy.slice(10).map((p) => p.pace()),
    ])
    for (const i of [10, 11, 12, 13]) expectWrongType(results[i], bad, keyOf(bad))
    const outcomes = values([...results.slice(0, 10), ...results.slice(14)])
    for (const o of outcomes) expect(o.delayMs).toBe(0)
    for (const key of good) expect(await redis().strlen(keyOf(key))).toBe(24)
    // the composites' healthy members were not charged (same slot: never written; another
    // slot on a cluster: charged on its node, then taken back)
    expect(await redis().exists(keyOf(fresh))).toBe(0)
    expect(await redis().exists(keyOf(other))).toBe(0)
    await expectUntouched(keyOf(bad))
    await expect(badPacer.block(1000)).rejects.toMatchObject({ code: 'ERR_SCRIPT' })
    await expectUntouched(keyOf(bad))
  })

  it('issue-24-wrongtype-concurrent: a tryAcquire on the bad limiter fails and holds no slot; the others do', async () => {
    const keyOf = (name: string) => `${ctx.prefix}:concurrent:{${name}}`
    // one bad limiter whose info hash is a string, one (in the same slot) whose holders
    // zset is a list
    const badInfo = unique('badi')
    const [sibling] = namesBeside(badInfo, keyOf, 1, unique('badh'))
    const good = namesBeside(badInfo, keyOf, HEALTHY, unique('ok'))
    await redis().set(`${keyOf(badInfo)}:i`, 'theirs', 'PX', PLANTED_TTL_MS)
    await plantList(`${keyOf(sibling)}:h`)
    const limiter = (name: string) => new ConcurrentLimiter(ctx.store, { name, limit: 1, lockTimeoutMs: 60_000 })
    const healthy = good.map(limiter)
    const results = await oneBatch(() => [
      ...healthy.slice(0, 10).map((l) => l.tryAcquire()),
      limiter(badInfo).tryAcquire(),
      limiter(sibling).tryAcquire(),
      ...healthy.slice(10).map((l) => l.tryAcquire()),
    ])
    expectWrongType(results[10], badInfo, keyOf(badInfo))
    expectWrongType(results[11], sibling, keyOf(sibling))
    const leases = values([...results.slice(0, 10), ...results.slice(12)])
    for (const lease of leases) expect(lease).not.toBeNull()
    // each healthy limiter holds its lease (plus the '~' member)
    for (const name of good) expect(await redis().zcard(`${keyOf(name)}:h`)).toBe(2)
    // the bad limiters got nothing: no lease, no counts, no queue
    expect(await redis().get(`${keyOf(badInfo)}:i`)).toBe('theirs')
    expect(await redis().exists(`${keyOf(badInfo)}:h`, `${keyOf(badInfo)}:q`)).toBe(0)
    await expectUntouched(`${keyOf(sibling)}:h`)
    expect(await redis().exists(`${keyOf(sibling)}:i`, `${keyOf(sibling)}:q`)).toBe(0)
    for (const lease of leases) await lease!.release()
  })

  it('issue-24-wrongtype-sliding: the bad charge fails and is not logged; the others are', async () => {
    const keyOf = (name: string) => `${ctx.prefix}:sliding:{${name}}`
    const bad = unique('bad')
    const good = namesBeside(bad, keyOf, HEALTHY, unique('ok'))
    await plantList(keyOf(bad))
    const make = (name: string) =>
      new SlidingWindowLimiter(ctx.store, {
        name,
        windows: [
          { limit: 3, intervalMs: 1000 },
          { limit: 10, intervalMs: 60_000 },
        ],
      })
    const healthy = good.map(make)
    const badLimiter = make(bad)
    const results = await oneBatch<unknown>(() => [
      ...healthy.slice(0, 10).map((l) => l.check()),
      badLimiter.check(),
      badLimiter.reset(),
      ...healthy.slice(10).map((l) => l.check()),
    ])
    expectWrongType(results[10], bad, keyOf(bad))
    expectWrongType(results[11], bad, keyOf(bad))
    for (const d of values([...results.slice(0, 10), ...results.slice(12)]) as SlidingDecision[]) {
      expect(d.allowed).toBe(true)
      expect(d.windows.map((w) => w.remaining)).toEqual([2, 9])
    }
    for (const name of good) expect(await redis().zcard(keyOf(name))).toBe(1)
    await expectUntouched(keyOf(bad))
  })

  it('issue-24-wrongtype-quota: a call naming a bad counter fails whole and charges none of its requests', async () => {
    const quota = { windowSeconds: 60, granularitySeconds: 10, limit: 5 }
    const keyOf = (prefix: string) => `${ctx.prefix}:quota:{${prefix}}:60:10`
    const bad = unique('bad')
    const [mixed, ...good] = namesBeside(bad, keyOf, HEALTHY + 1, unique('ok'))
    await plantList(keyOf(bad))
    const q = new QuotaLimiter(ctx.store)
    const t = Math.floor(Date.now() / 1000)
    const request = (prefix: string) => ({ prefix, requested: 1, quotas: [quota] })
    // consecutive checkAndUse calls on one slot at one timestamp: one script call
    const results = await oneBatch(() => [
      ...good.slice(0, 10).map((p) => q.checkAndUseQuotas([request(p)], t)),
      q.checkAndUseQuotas([request(mixed), request(bad)], t),
      ...good.slice(10).map((p) => q.checkAndUseQuotas([request(p)], t)),
    ])
    expectWrongType(results[10], bad, keyOf(bad))
    for (const grants of values([...results.slice(0, 10), ...results.slice(11)])) {
      expect(grants.map((g) => g.granted)).toEqual([1])
    }
    for (const p of good) expect(await redis().zcard(keyOf(p))).toBe(1)
    // the failed call's healthy request was not charged
    expect(await redis().exists(keyOf(mixed))).toBe(0)
    await expectUntouched(keyOf(bad))
    // a read and an unconditional use fail too, and use adds nothing to the call's other
    // counters (on a cluster, `other` is in another slot: added there, then taken back)
    const other = unique('other')
    await expect(q.checkWithinQuotas([request(bad)], t)).rejects.toMatchObject({ code: 'ERR_SCRIPT' })
    await expect(q.checkWithinQuotas([request(mixed), request(bad)])).rejects.toMatchObject({ code: 'ERR_SCRIPT' })
    const grants = [request(mixed), request(other), request(bad)].map((r) => ({ ...r, granted: 1, reachedQuotas: [] }))
    await expect(q.useQuotas([request(mixed), request(other), request(bad)], grants, t)).rejects.toMatchObject({
      code: 'ERR_SCRIPT',
    })
    const whole = (prefix: string) => ({ ...request(prefix), requested: 5 })
    const after = await q.checkWithinQuotas([whole(mixed), whole(other)], t)
    expect(after.grants.map((g) => g.granted)).toEqual([5, 5])
    expect(await redis().zcard(keyOf(mixed))).toBe(0)
    expect(await redis().zcard(keyOf(other))).toBe(0)
    await expectUntouched(keyOf(bad))
  })

  describe.each(['exact', 'approximate'] as const)('fair tenants (%s)', (mode) => {
    it(`issue-24-wrongtype-fair-${mode}: the bad tenant's job fails and is not counted; the others are`, async () => {
      const name = unique('fair')
      const segment = mode === 'exact' ? 'fair' : 'fair-approx'
      const keyOf = (tenant: string) => `${ctx.prefix}:${segment}:{${name}:${tenant}}`
      const bad = unique('bad')
      const good = namesBeside(bad, keyOf, HEALTHY, unique('ok'))
      await plantList(keyOf(bad))
      const fair = new FairTenant(ctx.store, {
        name,
        mode,
        rules: [{ queue: 'slow', threshold: 5, perMs: 60_000 }],
        maxWindowMs: 60_000,
      })
      const results = await oneBatch(() => [
        ...good.slice(0, 10).map((tenant, i) => fair.route(tenant, `job${i}`, 'default')),
        fair.route(bad, 'jobx', 'default'),
        ...good.slice(10).map((tenant, i) => fair.route(tenant, `job${i}`, 'default')),
      ])
      expectWrongType(results[10], bad, keyOf(bad))
      for (const route of values([...results.slice(0, 10), ...results.slice(11)])) {
        expect(route).toMatchObject({ queue: 'default', counts: [1] })
      }
      for (const tenant of good) expect(await redis().exists(keyOf(tenant))).toBe(1)
      await expectUntouched(keyOf(bad))
    })
  })
})
