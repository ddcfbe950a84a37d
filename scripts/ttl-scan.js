'use strict'
// After the Redis suites (scripts/test.sh): scans the standalone server and every cluster node
// for keys sluice writes (`<prefix>:<segment>[:v<n>]:{...}`, lib/store/keys.js) that have no TTL. Every key sluice writes
// must carry one; a key without is a leak that lives forever. Exit 1 (listing them) if any.
const Redis = require('ioredis')

// the layout's one owner: every segment sluice writes, versioned or not (`:pacer:v2:{`)
const { KEY_PATTERN: SLUICE_KEY } = require('../lib/store/keys.js')

async function scan(url) {
  const r = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 1 })
  const found = []
  let checked = 0
  let cursor = '0'
  try {
    do {
      const [next, keys] = await r.scan(cursor, 'COUNT', 1000)
      cursor = next
      const ours = keys.filter((k) => SLUICE_KEY.test(k))
      if (ours.length === 0) continue
      const ttls = await Promise.all(ours.map((k) => r.pttl(k)))
      checked += ours.length
      ours.forEach((k, i) => ttls[i] === -1 && found.push(k))
    } while (cursor !== '0')
  } finally {
    r.disconnect()
  }
  return { checked, found }
}

async function main() {
  const urls = [process.env.SLUICE_REDIS_URL, ...(process.env.SLUICE_REDIS_CLUSTER || '').split(',')].filter(Boolean)
  let checked = 0
  const without = []
  for (const url of urls) {
    const r = await scan(url)
    checked += r.checked
    without.push(...r.found)
  }
  console.log(`keyspace scan: ${checked} sluice keys on ${urls.length} servers, ${without.length} without a TTL`)
  if (without.length > 0) {
    console.error(without.slice(0, 50).join('\n'))
    process.exitCode = 1
  }
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
