// Issue 38: sluice's types work in every module mode an application may compile with, as the
// application gets them: from the packed tarball installed into a project (not the checkout),
// strict and without skipLibCheck, on the oldest TypeScript Fastify 5's types accept (5.4), on
// the last of 5 (5.9) and on the newest (7, the native compiler). The fixture (one program that
// imports every entry in ES syntax, one that requires each, and the nodenext fixtures) is in
// __tests__/fixtures/types-modes/, one tsconfig per mode. The frameworks' types (express,
// fastify, bullmq, prom-client, undici, hono, koa, @nestjs/common, node) are linked from this checkout's node_modules (its
// devDependencies); the compilers come from the npm registry once and are kept under the
// system's temporary folder, as install.test.ts keeps its Node binaries.
import { spawn, spawnSync } from 'node:child_process'
import {
  copyFileSync,
  cpSync,
  readFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { availableParallelism, tmpdir } from 'node:os'
import { join, sep } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const root = join(__dirname, '..')
const hostPack = createRequire(__filename)('../scripts/pack-host.js') as {
  pack(out: string): { main: string; platform: string }
  hostPlatform(): string
}

/** The compilers: exact versions, so that a run is the same run wherever it happens. */
const VERSIONS = ['5.4.5', '5.9.3', '7.0.2']
/** The modes (a tsconfig.<mode>.json each); node10 was removed in TypeScript 7 (TS5108). */
const MODES = ['node10', 'commonjs', 'node16', 'nodenext', 'bundler']
const CELLS = VERSIONS.flatMap((version) =>
  MODES.filter((mode) => !(mode === 'node10' && version.startsWith('7.'))).map((mode) => ({ version, mode })),
)
/** What each mode resolves the subpaths to: the `require` side (.d.ts) or, under bundler, the `import` side. */
const ENTRY_FILES: Record<string, string[]> = {
  cjs: ['index', 'express', 'fastify', 'fetch', 'metrics', 'dashboard', 'bullmq', 'hono', 'koa', 'ws', 'nestjs'].map(
    (e) => `${e}.d.ts`,
  ),
  esm: ['express.d.mts', 'fastify.d.mts'],
}
const MODE_FILES: Record<string, string[]> = {
  node10: ENTRY_FILES.cjs,
  commonjs: ENTRY_FILES.cjs,
  node16: [...ENTRY_FILES.cjs, ...ENTRY_FILES.esm],
  nodenext: [...ENTRY_FILES.cjs, ...ENTRY_FILES.esm],
  bundler: [
    'index.d.ts',
    'fetch.d.ts',
    'metrics.d.ts',
    'dashboard.d.ts',
    'bullmq.d.ts',
    'hono.d.ts',
    'koa.d.ts',
    'ws.d.ts',
    'nestjs.d.ts',
    ...ENTRY_FILES.esm,
  ],
}
/** The types the fixture needs besides sluice's: this checkout's devDependencies. */
const LINKED = ['@types/node', '@types/express', 'fastify', 'bullmq', 'prom-client', 'undici', 'hono', '@nestjs/common']
/**
 * Installed into the project from npm's cache (the versions of this checkout) rather than linked:
 * linked, @types/koa would resolve `content-disposition` from this checkout's node_modules, where
 * express 5 hoists a version whose own types it does not match; an app of Koa has its own.
 */
const INSTALLED = ['@types/koa']
/** Checked on every compiler but the oldest: Hono 4's own types need TypeScript 5.7 or later. */
const NEWER_ONLY = ['hono.ts', 'hono.cts', 'hono.mts']
const OLDEST = VERSIONS[0]

/** TypeScript `version`'s tsc, installed from the registry into a cache folder the first time. */
function typescript(version: string): string {
  const dir = join(tmpdir(), `sluice-typescript-${process.platform}-${process.arch}-${version}`)
  const tsc = join(dir, 'node_modules', 'typescript', 'bin', 'tsc')
  if (existsSync(join(dir, 'complete'))) return tsc
  // installed beside it and renamed into place: another run installing it at the same time
  // finds it whole or not at all
  const stage = mkdtempSync(`${dir}-stage-`)
  try {
    writeFileSync(join(stage, 'package.json'), JSON.stringify({ private: true }))
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--no-save', `typescript@${version}`], {
      cwd: stage,
      encoding: 'utf8',
    })
    if (r.status !== 0) throw new Error(`npm install typescript@${version} failed:\n${r.stdout}\n${r.stderr}`)
    writeFileSync(join(stage, 'complete'), version)
    try {
      renameSync(stage, dir)
    } catch (err: any) {
      if (!existsSync(join(dir, 'complete'))) throw err
    }
  } finally {
    rmSync(stage, { recursive: true, force: true })
  }
  return tsc
}

/** Runs `node args` with no more than `limit` at once; answers each one's exit code and output. */
function runAll(jobs: string[][], cwd: string, limit: number): Promise<Array<{ status: number | null; out: string }>> {
  const results: Array<{ status: number | null; out: string }> = []
  let next = 0
  const worker = async () => {
    while (next < jobs.length) {
      const i = next++
      results[i] = await new Promise((resolve) => {
        const child = spawn(process.execPath, jobs[i], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
        let out = ''
        child.stdout.on('data', (d) => (out += d))
        child.stderr.on('data', (d) => (out += d))
        child.on('close', (status) => resolve({ status, out }))
      })
    }
  }
  return Promise.all(Array.from({ length: limit }, worker)).then(() => results)
}

const temporary: string[] = []
afterAll(() => {
  for (const d of temporary) rmSync(d, { recursive: true, force: true })
})

describe('issue-38-types-modes', () => {
  let project = ''
  const results = new Map<string, { status: number | null; out: string; files: string[] }>()

  beforeAll(async () => {
    const t0 = Date.now()
    const tarballs = mkdtempSync(join(tmpdir(), 'sluice-tgz-'))
    project = mkdtempSync(join(tmpdir(), 'sluice-types-'))
    temporary.push(tarballs, project)
    const { main, platform } = hostPack.pack(tarballs)
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({
        name: 'consumer',
        private: true,
        dependencies: {
          sluice: `file:${main}`,
          [`sluice-${hostPack.hostPlatform()}`]: `file:${platform}`,
          ...Object.fromEntries(
            INSTALLED.map((name) => [name, createRequire(__filename)(`${name}/package.json`).version]),
          ),
        },
      }),
    )
    const install = spawnSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], {
      cwd: project,
      encoding: 'utf8',
    })
    if (install.status !== 0) throw new Error(`npm install failed:\n${install.stdout}\n${install.stderr}`)
    for (const name of LINKED) {
      mkdirSync(join(project, 'node_modules', name, '..'), { recursive: true })
      // one an installed package brought along (@types/koa's @types/node) gives way to this checkout's
      rmSync(join(project, 'node_modules', name), { recursive: true, force: true })
      symlinkSync(realpathSync(join(root, 'node_modules', name)), join(project, 'node_modules', name), 'dir')
    }
    for (const fixture of ['types-modes', 'nodenext', 'nodenext-fetch']) {
      cpSync(join(__dirname, 'fixtures', fixture), join(project, fixture), { recursive: true })
    }
    // node16/nodenext: the same program as CommonJS and as an ES module
    const modes = join(project, 'types-modes')
    copyFileSync(join(modes, 'entries.ts'), join(modes, 'entries.cts'))
    copyFileSync(join(modes, 'entries.ts'), join(modes, 'entries.mts'))
    copyFileSync(join(modes, 'require.ts'), join(modes, 'require.cts'))
    copyFileSync(join(modes, 'hono.ts'), join(modes, 'hono.cts'))
    copyFileSync(join(modes, 'hono.ts'), join(modes, 'hono.mts'))
    copyFileSync(join(modes, 'nestjs.ts'), join(modes, 'nestjs.cts'))
    copyFileSync(join(modes, 'nestjs.ts'), join(modes, 'nestjs.mts'))
    // the oldest compiler: each mode's program without what needs a newer one (NEWER_ONLY)
    for (const mode of MODES) {
      const config = JSON.parse(readFileSync(join(modes, `tsconfig.${mode}.json`), 'utf8'))
      config.files = config.files.filter((f: string) => !NEWER_ONLY.includes(f))
      writeFileSync(join(modes, `tsconfig.${mode}.oldest.json`), JSON.stringify(config))
    }
    const t1 = Date.now()

    const tscs = Object.fromEntries(VERSIONS.map((v) => [v, typescript(v)]))
    const t2 = Date.now()
    const runs = await runAll(
      CELLS.map(({ version, mode }) => [
        tscs[version],
        '-p',
        version === OLDEST ? `tsconfig.${mode}.oldest.json` : `tsconfig.${mode}.json`,
        '--listFiles',
      ]),
      modes,
      Math.max(2, availableParallelism()),
    )
    CELLS.forEach(({ version, mode }, i) => {
      const lines = runs[i].out.split('\n').filter(Boolean)
      // --listFiles: the program's files (absolute paths) after the diagnostics
      const files = lines.filter((l) => l.startsWith(sep))
      const out = lines.filter((l) => !l.startsWith(sep)).join('\n')
      results.set(`${version} ${mode}`, { status: runs[i].status, out, files })
    })
    console.log(
      `issue-38-types-modes: pack and install ${t1 - t0} ms, compilers ${t2 - t1} ms, ${CELLS.length} checks ${Date.now() - t2} ms`,
    )
  }, 300_000)

  it('sluice is installed from its tarball, not linked to this checkout', () => {
    const installed = join(project, 'node_modules', 'sluice')
    expect(lstatSync(installed).isSymbolicLink()).toBe(false)
    expect(realpathSync(installed).startsWith(realpathSync(root) + sep)).toBe(false)
  })

  it.each(CELLS)(
    '$mode on TypeScript $version: every entry type-checks, strict, without skipLibCheck',
    ({ version, mode }) => {
      const r = results.get(`${version} ${mode}`)!
      expect(r.out).toBe('')
      expect(r.status).toBe(0)
      // the entries checked are the installed tarball's, as this mode resolves them
      const entries = join(realpathSync(project), 'node_modules', 'sluice', 'lib', 'entries') + sep
      const seen = r.files.filter((f) => f.startsWith(entries)).map((f) => f.slice(entries.length))
      const expected = MODE_FILES[mode].filter((f) => version !== OLDEST || f !== 'hono.d.ts')
      expect(seen).toEqual(expect.arrayContaining(expected))
      if (mode === 'node10' || mode === 'commonjs') expect(seen.filter((f) => f.endsWith('.d.mts'))).toEqual([])
      // and nothing of this checkout's lib/
      expect(r.files.filter((f) => f.startsWith(join(realpathSync(root), 'lib') + sep))).toEqual([])
    },
  )
})
