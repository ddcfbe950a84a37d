// The built package loads through `require` and `import`, and its types check.
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = join(__dirname, '..')
const node = (args: string[]) => execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8' }).trim()

const PROGRAM = `
  const clock = new s.ManualClock(0)
  const p = new s.DistributedPacer(new s.MemoryStore({ clock }), { key: 'k', qps: 10 })
  p.pace().then(() => p.pace()).then((o) => {
    let code
    try { new s.DistributedPacer(new s.MemoryStore(), { key: '', qps: 1 }) } catch (e) { code = (e instanceof s.SluiceError) + ':' + e.code }
    console.log(o.delayMs + ' ' + code)
  })
`

describe('package', () => {
  it('loads with require', () => {
    expect(node(['-e', `const s = require('sluice'); ${PROGRAM}`])).toBe('100 true:ERR_INVALID_CONFIG')
  })

  it('loads with import, sharing the same classes', () => {
    const program = `import * as s from 'sluice'; import { createRequire } from 'node:module';
      const cjs = createRequire(import.meta.url)('sluice');
      if (cjs.SluiceError !== s.SluiceError) throw new Error('two copies');
      ${PROGRAM}`
    expect(node(['--input-type=module', '-e', program])).toBe('100 true:ERR_INVALID_CONFIG')
  })

  it('the HTTP and job doors load with require and with import', () => {
    const cjs = `const { rateLimit } = require('sluice/express'); const plugin = require('sluice/fastify');
      const { limitProcessor, FairQueues, weightedWorkers } = require('sluice/bullmq');
      const { FairTenant } = require('sluice');
      const { collectMetrics } = require('sluice/metrics');
      console.log(typeof rateLimit, typeof plugin, typeof plugin.default, typeof limitProcessor,
        typeof FairQueues, typeof weightedWorkers, typeof FairTenant, typeof collectMetrics)`
    expect(node(['-e', cjs])).toBe('function function function function function function function function')
    const esm = `import { rateLimit, ipKeyGenerator } from 'sluice/express'; import plugin from 'sluice/fastify';
      import { createRequire } from 'node:module';
      if (createRequire(import.meta.url)('sluice/fastify') !== plugin) throw new Error('two copies');
      import { limitProcessor, FairQueues, weightedWorkers } from 'sluice/bullmq';
      import { FairTenant } from 'sluice';
      import { collectMetrics } from 'sluice/metrics';
      console.log(typeof rateLimit, typeof plugin, ipKeyGenerator('::ffff:10.0.0.1'), typeof limitProcessor,
        typeof FairQueues, typeof weightedWorkers, typeof FairTenant, typeof collectMetrics)`
    expect(node(['--input-type=module', '-e', esm])).toBe(
      'function function 10.0.0.1 function function function function function',
    )
  })

  it('issue-37-esm-entries: every entry names in ESM exactly what its CommonJS module exports', () => {
    // the .mjs entries list no names: `export *` takes them from the CommonJS module through
    // Node's lexer, which gives up on an object it cannot read (a value not a name, ...); this
    // holds each entry's ESM names and values to the CommonJS ones, and its default export.
    // From Node 23 a CommonJS module's namespace also holds 'module.exports' (the module
    // itself, which `export *` passes on, so that require() of the ES module gives it): not a
    // name of the package's
    const program = `import { createRequire } from 'node:module'
      const require = createRequire(import.meta.url)
      const manifest = require('sluice/package.json')
      const out = []
      for (const entry of Object.keys(manifest.exports).filter((e) => e !== './package.json')) {
        const id = 'sluice' + entry.slice(1)
        const cjs = require(id)
        const esm = await import(id)
        const names = Object.keys(esm).filter((n) => n !== 'default' && n !== 'module.exports')
        const want = Object.keys(cjs).filter((n) => n !== 'default')
        const same = names.length === want.length && want.every((n) => n in esm && esm[n] === cjs[n])
        const def = !('default' in esm) ? 'none' : esm.default === cjs ? 'module' : esm.default === cjs.rateLimit ? 'rateLimit' : 'other'
        out.push(id + ':' + names.length + ':' + same + ':' + def)
      }
      console.log(out.join(' '))`
    expect(node(['--input-type=module', '-e', program]).split(' ')).toEqual([
      'sluice:20:true:module',
      'sluice/express:9:true:rateLimit',
      'sluice/fastify:4:true:module',
      'sluice/bullmq:5:true:none',
      'sluice/metrics:2:true:none',
      'sluice/dashboard:2:true:none',
      'sluice/fetch:2:true:none',
      'sluice/hono:2:true:none',
      'sluice/nestjs:8:true:none',
      'sluice/koa:1:true:none',
      'sluice/ws:2:true:none',
    ])
  })

  it('type-checks a consumer against index.d.ts', () => {
    execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], {
      cwd: root,
      stdio: 'pipe',
    })
  }, 180_000) // the whole project's tsc (tests, fixtures, Express' and Fastify's types): 20-50 s of CPU on a busy machine

  it('issue-24-nodenext-types: require and import forms of sluice, sluice/express and sluice/fastify type-check', () => {
    // TypeScript strict with "module": "nodenext": each entry's types match what it exports
    // (CommonJS: `export =` / exports; ES module: a default export), resolved through the
    // package's "exports" as a consumer resolves them
    const project = join('__tests__', 'fixtures', 'nodenext', 'tsconfig.json')
    try {
      execFileSync('npx', ['--no-install', 'tsc', '-p', project], { cwd: root, encoding: 'utf8', stdio: 'pipe' })
    } catch (err: any) {
      throw new Error(`tsc failed:\n${err.stdout}${err.stderr}`)
    }
    // and the same entries load at run time as the types say
    const cjs = `const f = require('sluice/fastify'); const e = require('sluice/express');
      console.log(typeof f, f.default === f, f.sluiceRateLimit === f, typeof f.ipKeyGenerator,
        typeof e.rateLimit, e.default === e.rateLimit)`
    expect(node(['-e', cjs])).toBe('function true true function function true')
    const esm = `import plugin, { sluiceRateLimit, ipKeyGenerator } from 'sluice/fastify';
      import rateLimit, { rateLimit as named } from 'sluice/express';
      console.log(typeof plugin, sluiceRateLimit === plugin, typeof ipKeyGenerator, typeof rateLimit, rateLimit === named)`
    expect(node(['--input-type=module', '-e', esm])).toBe('function true function function true')
  }, 180_000) // tsc checks Express' and Fastify's own types too: 15 s of CPU here

  it('native errors from async calls become SluiceError instances', async () => {
    const s = await import('../lib/entries/index.js')
    const err = await s.RedisStore.connect({ url: 'redis://127.0.0.1:1', connectTimeoutMs: 200 }).catch(
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(s.SluiceError)
    expect((err as InstanceType<typeof s.SluiceError>).code).toBe('ERR_STORE_UNAVAILABLE')
  })
})
