// sluice/fetch while Redis is down, per whenDown: 'allow' lets calls out unpaced and counts them
// as degraded, 'local' paces them per process on the embedded store, 'deny' and 'error' reject
// them before anything is sent. These tests start and kill their own redis-server.
import { describe, expect, it } from 'vitest'
import { RedisStore, SluiceError } from '../lib/entries/index.js'
import { pacedFetch } from '../lib/entries/fetch.js'
import { freshPrefix } from './helpers/stores.js'
import { freePort, startRedis, stop } from './helpers/servers.js'
import { eventually } from './helpers/clock.js'

type Policy = 'error' | 'allow' | 'deny' | 'local'

async function down(whenDown: Policy) {
  const port = await freePort()
  const server = await startRedis(port)
  const store = await RedisStore.connect({
    url: `redis://127.0.0.1:${port}`,
    keyPrefix: freshPrefix(),
    commandTimeoutMs: 300,
    probeIntervalMs: 50,
    whenDown,
  })
  let sent = 0
  const fetch = pacedFetch({
    store,
    qps: 1,
    maxWaitMs: 100,
    fetch: async () => {
      sent++
      return new Response('ok')
    },
  })
  expect((await fetch('http://api.test/')).status).toBe(200) // through Redis
  await stop(server)
  // the first call after the kill finds Redis gone (under 'error' it fails; others may too)
  await eventually(async () => {
    await fetch('http://api.test/').catch(() => {})
    return store.status === 'down'
  })
  return { store, fetch, sent: () => sent }
}

const codeOf = async (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (e) => (e as SluiceError).code,
  )

describe('sluice/fetch while Redis is down', () => {
  it("'allow': calls go out unpaced, counted as degraded", async () => {
    const { store, fetch, sent } = await down('allow')
    const before = sent()
    const all = await Promise.all([1, 2, 3].map(() => fetch('http://api.test/')))
    expect(all.map((r) => r.status)).toEqual([200, 200, 200]) // qps 1 and maxWaitMs 100: only unpaced
    expect(sent() - before).toBe(3)
    expect((await fetch.stats())[0].degraded).toBeGreaterThanOrEqual(3)
    await store.close()
  }, 30_000)

  it("'local': calls are paced in this process", async () => {
    const { store, fetch, sent } = await down('local')
    const before = sent()
    // a key the outage has not charged yet: one call now, the next a second later (over maxWaitMs)
    const codes = await Promise.all([1, 2, 3].map(() => codeOf(fetch('http://fresh.test/'))))
    expect(codes.sort()).toEqual(['ERR_OVER_LIMIT', 'ERR_OVER_LIMIT', 'resolved'])
    expect(sent() - before).toBe(1)
    await store.close()
  }, 30_000)

  it.each(['deny', 'error'] as const)(
    "'%s': calls reject before anything is sent",
    async (policy) => {
      const { store, fetch, sent } = await down(policy)
      const before = sent()
      expect(await codeOf(fetch('http://api.test/'))).toMatch(/^ERR_(STORE_UNAVAILABLE|TIMEOUT)$/)
      expect(sent()).toBe(before)
      await store.close()
    },
    30_000,
  )
})
