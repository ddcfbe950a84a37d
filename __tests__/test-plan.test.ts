// `npm test` off a Debian laptop (issue 38): scripts/test-plan.js decides what scripts/test.sh
// installs with apt-get, what it cannot have, and which files it leaves out; test.sh stops with
// a reason when it cannot run at all. No Redis needed.
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prerequisites, skips } = require('../scripts/test-plan.js')

const ROOT = join(__dirname, '..')

/** A machine with these commands on PATH. */
const machine = (cmds: string[], o: { root?: boolean; givenUrl?: string; chromium?: string } = {}) => ({
  has: (c: string) => cmds.includes(c),
  root: o.root ?? false,
  givenUrl: o.givenUrl ?? '',
  chromium: o.chromium ?? '',
})
const ALL = ['redis-server', 'redis-cli', 'chromium', 'openssl']

describe('issue-38-contributor-commands', () => {
  it('installs with apt-get only what is missing, and only where apt-get can run', () => {
    // CI: a fresh Debian machine, as root
    expect(prerequisites(machine(['apt-get'], { root: true }))).toMatchObject({
      apt: true,
      install: ['redis-server', 'chromium', 'openssl'],
      missing: [],
      fatal: null,
    })
    // a Debian laptop with sudo and Redis already there
    expect(prerequisites(machine(['apt-get', 'sudo', 'redis-server', 'redis-cli']))).toMatchObject({
      install: ['chromium', 'openssl'],
      missing: [],
    })
    // apt-get without root nor sudo cannot install
    expect(prerequisites(machine(['apt-get', ...ALL.slice(0, 2)]))).toMatchObject({
      apt: false,
      install: [],
      missing: ['chromium', 'openssl'],
      fatal: null,
    })
    // everything on PATH (a Mac with Homebrew's redis): nothing to install, nothing missing
    expect(prerequisites(machine(ALL))).toMatchObject({ install: [], missing: [], fatal: null })
    // SLUICE_CHROMIUM names a browser elsewhere
    expect(
      prerequisites(machine(['redis-server', 'redis-cli', 'openssl'], { chromium: '/opt/chrome' })).missing,
    ).toEqual([])
  })

  it('stops with a reason when there is no redis-server and no way to get one, unless a server is given', () => {
    const p = prerequisites(machine(['chromium', 'openssl']))
    expect(p.missing).toEqual(['redis-server'])
    expect(p.fatal).toMatch(/SLUICE_TEST_REDIS_URL/)
    // a given server: no local one needed, and none installed even where apt-get could
    for (const cmds of [
      ['chromium', 'openssl'],
      ['apt-get', 'chromium', 'openssl'],
    ]) {
      const given = prerequisites(machine(cmds, { root: true, givenUrl: 'redis://10.0.0.5:6379' }))
      expect(given).toMatchObject({ install: [], missing: ['redis-server'], fatal: null })
    }
  })

  it('leaves out what needs a cluster with a given server, and what needs a missing tool', () => {
    const files = {
      'a.test.ts': "describe.each(STORE_KINDS)('x on %s', () => {})",
      'b.test.ts': "describe.each(['redis', 'cluster'] as const)('y', () => {})",
      'c.test.ts': 'RedisStore.connect({ cluster: clusterNodes() })',
      'd.test.ts': "import { startRedis } from './helpers/servers.js'",
      'e.test.ts': "execFileSync('openssl', args)",
    }
    const names = (s: Array<{ file: string }>) => s.map((x) => x.file)
    expect(skips(files, { cluster: true, missing: [] })).toEqual([])
    expect(names(skips(files, { cluster: false, missing: [] }))).toEqual(['b.test.ts', 'c.test.ts'])
    expect(names(skips(files, { cluster: false, missing: ['redis-server', 'openssl'] }))).toEqual([
      'b.test.ts',
      'c.test.ts',
      'd.test.ts',
      'e.test.ts',
    ])
    expect(skips(files, { cluster: false, missing: [] })[0].why).toMatch(/Redis Cluster/)
  })

  it('lists the skipped files of this repository with a given server', () => {
    const out = spawnSync(process.execPath, ['scripts/test-plan.js', 'skips'], {
      cwd: ROOT,
      env: { ...process.env, SLUICE_TEST_REDIS_URL: 'redis://127.0.0.1:1' },
      encoding: 'utf8',
    })
    expect(out.status).toBe(0)
    const skipped = out.stdout.trim().split('\n')
    expect(skipped).toContain('__tests__/http-cluster.test.ts')
    expect(skipped).not.toContain('__tests__/limiters.test.ts') // STORE_KINDS: memory and redis
    expect(out.stderr).toMatch(/skipped __tests__\/http-cluster\.test\.ts: needs a Redis Cluster/)
  })

  const fake = mkdtempSync(join(tmpdir(), 'sluice-path-'))
  afterAll(() => rmSync(fake, { recursive: true, force: true }))

  it('npm test on a machine without apt-get nor redis-server stops before building, and says why', () => {
    // a PATH with node and what test.sh needs before its first decision, and nothing else
    symlinkSync(process.execPath, join(fake, 'node'))
    symlinkSync(execFileSync('sh', ['-c', 'command -v dirname'], { encoding: 'utf8' }).trim(), join(fake, 'dirname'))
    const bash = execFileSync('sh', ['-c', 'command -v bash'], { encoding: 'utf8' }).trim()
    const run = spawnSync(bash, ['scripts/test.sh'], { cwd: ROOT, env: { PATH: fake, HOME: fake }, encoding: 'utf8' })
    expect(run.status).toBe(1)
    expect(run.stderr).toMatch(/no redis-server on PATH and no apt-get/)
    expect(run.stdout).not.toMatch(/installing|npm ci|building/)
  })
})
