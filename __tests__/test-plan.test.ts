// `npm test` off a Debian laptop (issue 38): scripts/test-plan.js decides what scripts/test.sh
// installs with apt-get, what it cannot have, and which files it leaves out; test.sh stops with
// a reason when it cannot run at all. With a given server (SLUICE_TEST_REDIS_URL, no cluster)
// no file is left out for the cluster: its tests are skipped inside the files
// (issue-38-given-redis; the one test there that runs a suite file needs SLUICE_REDIS_URL).
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { redisUrl } from './helpers/stores.js'

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prerequisites, skips, onPath } = require('../scripts/test-plan.js')

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

  it('leaves out what needs a missing tool, and nothing for the cluster', () => {
    const files = {
      'a.test.ts': "describe.each(STORE_KINDS)('x on %s', () => {})",
      'b.test.ts': "describe.each(REDIS_KINDS)('y', () => {})",
      'c.test.ts': "describe.skipIf(!HAS_CLUSTER)('z', () => { RedisStore.connect({ cluster: clusterNodes() }) })",
      'd.test.ts': "import { startRedis } from './helpers/servers.js'",
      'e.test.ts': "execFileSync('openssl', args)",
      'f.test.ts': "import { startCluster } from './helpers/servers.js'",
    }
    const names = (s: Array<{ file: string }>) => s.map((x) => x.file)
    expect(skips(files, { missing: [] })).toEqual([])
    expect(names(skips(files, { missing: ['redis-server', 'openssl'] }))).toEqual([
      'd.test.ts',
      'e.test.ts',
      'f.test.ts',
    ])
    expect(skips(files, { missing: ['redis-server'] })[0].why).toMatch(/starts redis-server itself/)
  })

  it('lists the skipped files of this repository with a given server and no redis-server', () => {
    // a PATH with node only: no redis-server, no openssl
    const bare = mkdtempSync(join(tmpdir(), 'sluice-bare-'))
    try {
      symlinkSync(process.execPath, join(bare, 'node'))
      const out = spawnSync(process.execPath, ['scripts/test-plan.js', 'skips'], {
        cwd: ROOT,
        env: { ...process.env, PATH: bare, SLUICE_TEST_REDIS_URL: 'redis://127.0.0.1:1' },
        encoding: 'utf8',
      })
      expect(out.status).toBe(0)
      const skipped = out.stdout.trim().split('\n')
      expect(skipped).toContain('__tests__/http-cluster.test.ts') // starts a server of its own
      expect(skipped).toContain('__tests__/whendown.test.ts') // and clusters of its own
      expect(skipped).not.toContain('__tests__/limiters.test.ts') // STORE_KINDS: memory and redis
      expect(skipped).not.toContain('__tests__/multiprocess.test.ts') // REDIS_KINDS: redis
      expect(out.stderr).toMatch(/skipped __tests__\/http-cluster\.test\.ts: starts redis-server itself/)
      expect(out.stderr).not.toMatch(/Cluster/)
    } finally {
      rmSync(bare, { recursive: true, force: true })
    }
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

// Issue 38 (a gap): `SLUICE_TEST_REDIS_URL=redis://host:port npm test` left out every test file
// whose text mentioned the cluster (26 of 71), standalone tests and all. Now the plan leaves
// out none for that, and the cluster tests are skipped inside the files.
describe('issue-38-given-redis', () => {
  const TESTS = join(ROOT, '__tests__')
  const texts = Object.fromEntries(
    readdirSync(TESTS)
      .filter((f) => f.endsWith('.test.ts') && f !== 'test-plan.test.ts')
      .map((f) => [f, readFileSync(join(TESTS, f), 'utf8')]),
  )

  it('with a given server and the tools on PATH, the plan leaves out no file', () => {
    const out = spawnSync(process.execPath, ['scripts/test-plan.js', 'skips'], {
      cwd: ROOT,
      env: { ...process.env, SLUICE_TEST_REDIS_URL: 'redis://127.0.0.1:1', SLUICE_CHROMIUM: '/x' },
      encoding: 'utf8',
    })
    expect(out.status).toBe(0)
    // what test.sh cannot have here (a redis-server, openssl) is all it may leave out for
    const { missing } = prerequisites({
      has: (c: string) => onPath(c),
      root: false,
      givenUrl: 'x',
      chromium: '/x',
    })
    if (missing.length === 0) expect(out.stdout).toBe('')
    expect(out.stderr).not.toMatch(/Cluster/)
  })

  it("every file that reaches the suite's cluster does so through HAS_CLUSTER, REDIS_KINDS or STORE_KINDS", () => {
    // the suite's cluster (not one a file starts itself with startCluster)
    const reaches = /clusterNodes\(|SLUICE_REDIS_CLUSTER|rawClient\(|(makeStores?|useStore)\(\s*'cluster'/
    const guard = /import \{[^}]*\b(HAS_CLUSTER|REDIS_KINDS|STORE_KINDS)\b[^}]*\} from '\.\/helpers\/stores\.js'/
    // both topologies written out run the cluster's case whatever the flag says, unless the file
    // skips that case by it or starts the cluster itself
    const literal = /\[\s*'redis',\s*'cluster'\s*\]|\[\s*'cluster',\s*'redis'\s*\]/
    const unguarded: string[] = []
    const literals: string[] = []
    for (const [file, text] of Object.entries(texts)) {
      if (reaches.test(text) && !guard.test(text)) unguarded.push(file)
      if (literal.test(text) && !/skipIf\([^)]*HAS_CLUSTER|startCluster\(/.test(text)) literals.push(file)
    }
    expect(unguarded).toEqual([])
    expect(literals).toEqual([])
    // and the check sees something: the files of the old plan's list that use the suite's cluster
    expect(Object.values(texts).filter((t) => reaches.test(t)).length).toBeGreaterThan(20)
  })

  // injection.test.ts starts a server of its own too (as npm test does it needs redis-server)
  it.skipIf(!onPath('redis-server'))(
    'a given server, no cluster: a file of standalone and cluster tests runs the first, shows the second skipped',
    () => {
      const env: NodeJS.ProcessEnv = {}
      for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('VITEST') && k !== 'NODE_OPTIONS') env[k] = v
      delete env.SLUICE_REDIS_CLUSTER
      env.SLUICE_TEST_REDIS_URL = env.SLUICE_REDIS_URL = redisUrl()
      const vitest = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs')
      const run = spawnSync(
        process.execPath,
        [vitest, 'run', '__tests__/injection.test.ts', '--reporter=json', '--silent'],
        { cwd: ROOT, env, encoding: 'utf8', maxBuffer: 64 << 20 },
      )
      const report = JSON.parse(run.stdout.slice(run.stdout.indexOf('{')))
      const tests = report.testResults.flatMap((f: { assertionResults: object[] }) => f.assertionResults)
      const by = (status: string) =>
        tests.filter((t: { status: string }) => t.status === status).map((t: { fullName: string }) => t.fullName)
      expect(by('failed')).toEqual([])
      expect(by('passed').length).toBeGreaterThan(0)
      expect(by('skipped').length).toBeGreaterThan(0)
      for (const name of by('skipped')) expect(name).toMatch(/cluster/)
      expect(run.status).toBe(0)
    },
    120_000,
  )
})
