// Issue 24: connecting to a port that refuses connections. A store that may start down
// (whenDown other than 'error') answered only after its whole connectTimeoutMs; it now answers
// as soon as the refusal is known, and keeps dialling in the background. Store errors read as
// sentences, not Rust debug text.
import { describe, expect, it } from 'vitest'
import { RedisStore } from '../lib/entries/index.js'
import { freePort } from './helpers/servers.js'

describe('issue-24-connect-refused', () => {
  it("whenDown 'local' to a refusing port answers at once, down, not after connectTimeoutMs", async () => {
    const port = await freePort() // nothing listens there
    const start = performance.now()
    const store = await RedisStore.connect({
      url: `redis://127.0.0.1:${port}`,
      whenDown: 'local',
      connectTimeoutMs: 20_000,
    })
    const ms = performance.now() - start
    try {
      expect(ms).toBeLessThan(10_000) // was the whole 20 s
      expect(store.status).toBe('down')
    } finally {
      await store.close()
    }
  })

  it("whenDown 'error': a typed error whose message is a sentence", async () => {
    const port = await freePort()
    const err = await RedisStore.connect({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 2000 }).catch((e) => e)
    expect(err.code).toBe('ERR_STORE_UNAVAILABLE')
    expect(err.message).not.toMatch(/Os \{|kind:/)
  })
})
