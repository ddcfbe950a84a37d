// Issue 28, item 6: evicting servers found at connect. Under a maxmemory-policy that may evict
// sluice's keys the store emits a 'warning' (ERR_CONFIG_RISK) and keeps working, or refuses to
// start with evictingServer: 'refuse'; a server that will not say its policy (INFO refused to an
// ACL user, as managed services refuse CONFIG) gets one warning, never a failure.
import { execFileSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RedisStore, SluiceError, WindowLimiter } from '../lib/entries/index.js'
import { freePort, startRedis, stop } from './helpers/servers.js'
import { REDIS_KINDS, clusterNodes, freshPrefix, redisUrl } from './helpers/stores.js'

describe('evicting servers', () => {
  let port: number
  let server: Awaited<ReturnType<typeof startRedis>>
  const url = () => `redis://127.0.0.1:${port}`
  const cli = (...a: string[]) => execFileSync('redis-cli', ['-p', String(port), ...a], { encoding: 'utf8' }).trim()
  beforeAll(async () => {
    port = await freePort()
    server = await startRedis(port, ['--maxmemory', '100mb', '--maxmemory-policy', 'allkeys-lru'])
    cli('ACL', 'SETUSER', 'noinfo', 'on', '>pw', '~*', '&*', '+@all', '-info')
  })
  afterAll(async () => {
    if (server) await stop(server)
  })

  it("allkeys-lru: a 'warning' (ERR_CONFIG_RISK) naming the policy and what evictions do; the store works", async () => {
    const store = await RedisStore.connect({ url: url(), keyPrefix: freshPrefix() })
    try {
      const heard: SluiceError[] = []
      store.on('warning', (w) => heard.push(w))
      await new Promise((r) => setImmediate(r))
      expect(heard).toHaveLength(1)
      expect(store.warnings).toEqual(heard)
      expect(heard[0]).toBeInstanceOf(SluiceError)
      expect(heard[0].code).toBe('ERR_CONFIG_RISK')
      expect(heard[0].message).toMatch(/maxmemory-policy allkeys-lru/)
      expect(heard[0].message).toMatch(/fencing token/)
      expect((await new WindowLimiter(store, { name: 'w', limit: 1, interval: 1000 }).check()).allowed).toBe(true)
    } finally {
      await store.close()
    }
  })

  it("evictingServer: 'refuse': connect rejects with ERR_INVALID_CONFIG", async () => {
    const err = await RedisStore.connect({ url: url(), evictingServer: 'refuse' }).catch((e) => e)
    expect(err.code).toBe('ERR_INVALID_CONFIG')
    expect(err.message).toMatch(/allkeys-lru/)
    await expect(RedisStore.connect({ url: url(), evictingServer: 'maybe' as never })).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
    })
  })

  it('volatile-lru evicts sluice keys too (each has a TTL); noeviction: no warning', async () => {
    cli('CONFIG', 'SET', 'maxmemory-policy', 'volatile-lru')
    const volatile = await RedisStore.connect({ url: url() })
    expect(volatile.warnings.map((w) => w.message).join()).toMatch(/volatile-lru/)
    await volatile.close()
    cli('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    const safe = await RedisStore.connect({ url: url(), evictingServer: 'refuse' })
    expect(safe.warnings).toEqual([])
    await safe.close()
    cli('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru')
  })

  it("a user that may not run INFO: one warning saying so, never a failure (even with 'refuse')", async () => {
    const store = await RedisStore.connect({ url: `redis://noinfo:pw@127.0.0.1:${port}`, evictingServer: 'refuse' })
    try {
      expect(store.warnings).toHaveLength(1)
      expect(store.warnings[0].code).toBe('ERR_CONFIG_RISK')
      expect(store.warnings[0].message).toMatch(/could not read the maxmemory-policy/)
      expect(store.warnings[0].message).not.toContain(':pw@')
      expect((await new WindowLimiter(store, { name: 'w', limit: 1, interval: 1000 }).check()).allowed).toBe(true)
    } finally {
      await store.close()
    }
  })

  it('the suite servers (noeviction, standalone and cluster): no warning', async () => {
    for (const kind of REDIS_KINDS) {
      const store = await RedisStore.connect(kind === 'redis' ? { url: redisUrl() } : { cluster: clusterNodes() })
      expect(store.warnings).toEqual([])
      await store.close()
    }
  })
})
