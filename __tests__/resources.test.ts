// Issue 15: bounded resources. Every limiter kind, many rounds on a MemoryStore, in a fresh
// process: the RSS after a full GC must stop growing (a native leak grows it round after
// round, with the JS heap flat: 380 B per call on one key was the report).
import { fork } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const WORKER = join(__dirname, 'helpers', 'leak-worker.js')

function rounds(cfg: { rounds: number; calls: number; keys: number; yieldBetween: boolean }) {
  return new Promise<{ rss: number[]; heap: number[] }>((resolve, reject) => {
    const child = fork(WORKER, [JSON.stringify(cfg)], { execArgv: ['--expose-gc'] })
    child.once('message', (m) => resolve(m as { rss: number[]; heap: number[] }))
    child.once('exit', (code) => code !== 0 && reject(new Error(`leak worker exited with ${code}`)))
  })
}

describe('no native leak on any path of the memory store', () => {
  it('every kind, 8 rounds of 20,000 calls each on 100 keys, never leaving the microtask queue: RSS flat', async () => {
    const { rss, heap } = await rounds({ rounds: 8, calls: 20_000, keys: 100, yieldBetween: false })
    // each round makes 200,000 native calls (10 kinds); 380 B per call would be 76 MB a round
    const growth = rss.at(-1)! - rss[2]
    console.log(
      `RSS per round (MB): ${rss.map((x) => x.toFixed(1)).join(', ')}; heap: ${heap.map((x) => x.toFixed(1)).join(', ')}`,
    )
    expect(growth, `RSS grew ${growth.toFixed(1)} MB over rounds 3-8`).toBeLessThan(12)
  }, 300_000)

  it('every kind on 20,000 keys each, rounds with event-loop turns between: RSS bounded', async () => {
    // every call of a round on its own key, the same keys each round: the state of 200,000
    // live keys, which must not grow round after round
    const { rss } = await rounds({ rounds: 6, calls: 20_000, keys: 20_000, yieldBetween: true })
    console.log(`RSS per round, distinct keys (MB): ${rss.map((x) => x.toFixed(1)).join(', ')}`)
    expect(rss.at(-1)! - rss[2]).toBeLessThan(40)
  }, 300_000)
})
