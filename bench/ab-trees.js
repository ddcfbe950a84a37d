'use strict'
// Two trees in one process, the way users call: a limiter made per decision, one decision per
// event-loop turn, on a MemoryStore; blocks of the two alternated, so the machine's noise falls
// on both. Each tree is a checkout with its addon built.
// Usage: node bench/ab-trees.js <before tree> <after tree>
const path = require('node:path')
const A = require(path.resolve(process.argv[2]))
const B = require(path.resolve(process.argv[3]))
const kinds = {
  bucket: (S, s, i) => new S.BucketLimiter(s, { name: `k${i % 10000}`, limit: 1e9, interval: 'second' }).check(),
  pacer: (S, s, i) => new S.DistributedPacer(s, { key: `k${i % 10000}`, qps: 1e6, maxBurst: 1e6 }).rateLimit(),
  sliding: (S, s, i) =>
    new S.SlidingWindowLimiter(s, { name: `k${i % 10000}`, windows: [{ limit: 1e9, intervalMs: 1000 }] }).check(),
}
const turn = () => new Promise((r) => setImmediate(r))
async function block(S, s, f, n) {
  const t = process.hrtime.bigint()
  for (let i = 0; i < n; i++) {
    await f(S, s, i)
    await turn()
  }
  return Number(process.hrtime.bigint() - t) / n
}
;(async () => {
  for (const [name, f] of Object.entries(kinds)) {
    const sa = new A.MemoryStore(),
      sb = new B.MemoryStore()
    await block(A, sa, f, 20000)
    await block(B, sb, f, 20000) // warm
    const ra = [],
      rb = [],
      ratio = []
    for (let r = 0; r < 15; r++) {
      const a = await block(A, sa, f, 10000),
        b = await block(B, sb, f, 10000)
      ra.push(a)
      rb.push(b)
      ratio.push(b / a)
    }
    const med = (x) => x.slice().sort((p, q) => p - q)[Math.floor(x.length / 2)]
    console.log(
      `${name}: before ${med(ra).toFixed(0)} ns, after ${med(rb).toFixed(0)} ns per decision; after/before median ${med(ratio).toFixed(3)} (range ${Math.min(...ratio).toFixed(3)}-${Math.max(...ratio).toFixed(3)}), 15 alternated blocks of 10,000`,
    )
    await sa.close()
    await sb.close()
  }
})()
