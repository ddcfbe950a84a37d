// Every example in README.md and docs/*.md runs (issue 38): each ```js / ```mjs / ```cjs / ```ts
// block is extracted and run as a whole program, so a stale example fails `npm test`.
//
// - ```cjs runs as CommonJS, ```mjs as an ES module; ```js as an ES module when it has an
//   `import` or `export` statement, else as CommonJS.
// - ```ts is type-checked (strict, nodenext, all blocks in one program) and then run as an
//   ES module with its types stripped.
// - Programs are written under test-artifacts/docs/ inside the repository, so `require('sluice')`
//   and `import ... from 'sluice'` resolve through the package's self-reference (its "exports"),
//   as they do in an app that installed it; the frameworks come from the devDependencies.
// - Each runs in its own process with a timeout: it must exit 0 by itself (so it closes what it
//   opens). They get this process's environment: SLUICE_REDIS_URL and SLUICE_REDIS_CLUSTER
//   (scripts/test.sh), which the examples that need a Redis read. An example that reads
//   SLUICE_REDIS_CLUSTER needs the cluster: against a given server (no cluster, HAS_CLUSTER
//   false) it is not started, and its test shows as skipped.
// - A block that cannot run whole is a fragment: `<!-- fragment -->` on the line before its
//   fence. Fragments are only parsed, are listed, and are at most 20 % of the blocks.
import { spawn } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import ts from 'typescript'
import { beforeAll, describe, expect, it } from 'vitest'
import { HAS_CLUSTER } from './helpers/stores.js'

const ROOT = join(__dirname, '..')
const OUT = join(ROOT, 'test-artifacts', 'docs')
const RUN_TIMEOUT_MS = 20_000
const MAX_FRAGMENT_SHARE = 0.2
const CONCURRENCY = 4

interface Block {
  /** `docs/http.md:42`: the page and the line of the opening fence. */
  where: string
  lang: 'js' | 'mjs' | 'cjs' | 'ts'
  code: string
  fragment: boolean
}

const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
]

/** The code blocks of one page, fences indented or not (a block inside a list item). */
function blocksOf(page: string): Block[] {
  const lines = readFileSync(join(ROOT, page), 'utf8').split('\n')
  const blocks: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)```(\S*)\s*$/.exec(lines[i])
    if (!open) continue
    const indent = open[1].length
    const start = i
    const body: string[] = []
    for (i++; i < lines.length && !/^ *```\s*$/.test(lines[i]); i++) body.push(lines[i].slice(indent))
    if (i === lines.length) throw new Error(`${page}:${start + 1}: a code block is not closed`)
    const lang = open[2]
    if (lang !== 'js' && lang !== 'mjs' && lang !== 'cjs' && lang !== 'ts') continue
    let prev = start - 1
    while (prev >= 0 && lines[prev].trim() === '') prev--
    blocks.push({
      where: `${page}:${start + 1}`,
      lang,
      code: body.join('\n') + '\n',
      fragment: prev >= 0 && lines[prev].trim() === '<!-- fragment -->',
    })
  }
  return blocks
}

const BLOCKS = PAGES.flatMap(blocksOf)
const WHOLE = BLOCKS.filter((b) => !b.fragment)
const FRAGMENTS = BLOCKS.filter((b) => b.fragment)
/** The whole examples on the suite's Redis Cluster (they read its seeds): run only with one. */
const onCluster = (b: Block) => /SLUICE_REDIS_CLUSTER/.test(b.code)

const isModule = (code: string) => /^\s*(import\s[^(]|import\{|export\s)/m.test(code)
const fileName = (b: Block, ext: string) => `${b.where.replace(/[/:.]/g, '-')}.${ext}`

/** Where each whole block was written, and the file that runs. */
const files = new Map<Block, { source: string; run: string }>()

function writeBlocks() {
  rmSync(OUT, { recursive: true, force: true })
  mkdirSync(OUT, { recursive: true })
  for (const b of WHOLE) {
    if (b.lang === 'ts') {
      const source = join(OUT, fileName(b, 'mts'))
      writeFileSync(source, b.code)
      const js = ts.transpileModule(b.code, {
        // NestJS's decorators are TypeScript's (experimentalDecorators), with their metadata
        compilerOptions: {
          module: ts.ModuleKind.ESNext,
          target: ts.ScriptTarget.ES2022,
          experimentalDecorators: true,
          emitDecoratorMetadata: true,
        },
      }).outputText
      const run = join(OUT, fileName(b, 'run.mjs'))
      writeFileSync(run, js)
      files.set(b, { source, run })
    } else {
      const ext = b.lang === 'js' ? (isModule(b.code) ? 'mjs' : 'cjs') : b.lang
      const source = join(OUT, fileName(b, ext))
      writeFileSync(source, b.code)
      files.set(b, { source, run: source })
    }
  }
}

/** The ts blocks' type errors, one program for all of them. */
function typeErrors(): Map<string, string[]> {
  const tsFiles = WHOLE.filter((b) => b.lang === 'ts').map((b) => files.get(b)!.source)
  const errors = new Map<string, string[]>()
  if (tsFiles.length === 0) return errors
  const program = ts.createProgram(tsFiles, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    // the package's own declarations are checked without it by tsconfig.json; the frameworks'
    // declarations are not what these examples test, and cost most of the time
    skipLibCheck: true,
    types: ['node'],
  })
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const file = d.file?.fileName ?? '(program)'
    const pos = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined
    const text = `${pos ? `line ${pos.line + 1}: ` : ''}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`
    errors.set(file, [...(errors.get(file) ?? []), text])
  }
  return errors
}

interface Run {
  code: number | null
  signal: string | null
  stdout: string
  stderr: string
  timedOut: boolean
  ms: number
}

function runFile(file: string): Promise<Run> {
  return new Promise((resolve) => {
    const started = Date.now()
    const child = spawn(process.execPath, [file], { cwd: OUT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    let timedOut = false
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => {
      timedOut = true
      child.kill('SIGKILL')
    }, RUN_TIMEOUT_MS)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, timedOut, ms: Date.now() - started })
    })
  })
}

const runs = new Map<Block, Promise<Run>>()
let tsErrors = new Map<string, string[]>()

describe('issue-38-docs-examples', () => {
  beforeAll(() => {
    writeBlocks()
    tsErrors = typeErrors()
    // every program starts now, at most CONCURRENCY at once; each test awaits its own
    const queue = WHOLE.filter((b) => HAS_CLUSTER || !onCluster(b))
    const gates: Array<() => void> = []
    let running = 0
    const next = () => {
      running--
      gates.shift()?.()
    }
    for (const b of queue) {
      runs.set(
        b,
        (async () => {
          if (running >= CONCURRENCY) await new Promise<void>((r) => gates.push(r))
          running++
          try {
            return await runFile(files.get(b)!.run)
          } finally {
            next()
          }
        })(),
      )
    }
  }, 60_000)

  it('finds the examples, and at most 20 % of them are fragments (listed)', () => {
    expect(WHOLE.length).toBeGreaterThan(0)
    const list = FRAGMENTS.map((b) => `  ${b.where}`).join('\n')
    console.log(
      `docs examples: ${BLOCKS.length} blocks in ${PAGES.length} pages, ${WHOLE.length} run whole, ` +
        `${FRAGMENTS.length} fragments${FRAGMENTS.length ? `:\n${list}` : ''}`,
    )
    expect(FRAGMENTS.length / BLOCKS.length).toBeLessThanOrEqual(MAX_FRAGMENT_SHARE)
  })

  it('the README has a whole ESM and a whole CommonJS Quick start', () => {
    const readme = WHOLE.filter((b) => b.where.startsWith('README.md'))
    expect(readme.some((b) => b.lang === 'mjs' || (b.lang === 'js' && isModule(b.code)))).toBe(true)
    expect(readme.some((b) => b.lang === 'cjs' || (b.lang === 'js' && !isModule(b.code)))).toBe(true)
  })

  it('each page opens with a whole example', () => {
    for (const page of PAGES.filter((p) => p.startsWith('docs/'))) {
      const first = BLOCKS.find((b) => b.where.startsWith(`${page}:`))
      expect(first, `${page} has no example`).toBeDefined()
      expect(first!.fragment, `${page} opens with a fragment`).toBe(false)
    }
  })

  it('every link between the pages points at a file and a heading that exist', () => {
    // GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens
    const slug = (h: string) =>
      h
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, '')
        .replace(/\s/g, '-')
    const anchors = (page: string) =>
      new Set(
        readFileSync(join(ROOT, page), 'utf8')
          .replace(/^ *```[\s\S]*?^ *```/gm, '')
          .split('\n')
          .filter((l) => /^#{1,6} /.test(l))
          .map((l) => slug(l.replace(/^#+ /, ''))),
      )
    const broken: string[] = []
    for (const page of PAGES) {
      const text = readFileSync(join(ROOT, page), 'utf8').replace(/^ *```[\s\S]*?^ *```/gm, '')
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue
        const [file, anchor] = target.split('#')
        const resolved = file ? relative(ROOT, join(ROOT, page, '..', file)) : page
        let exists = true
        try {
          readFileSync(join(ROOT, resolved))
        } catch (err) {
          exists = (err as NodeJS.ErrnoException).code === 'EISDIR'
        }
        if (!exists) broken.push(`${page}: ${target} (no such file)`)
        else if (anchor && resolved.endsWith('.md') && !anchors(resolved).has(anchor))
          broken.push(`${page}: ${target} (no such heading)`)
      }
    }
    expect(broken).toEqual([])
  })

  it.each(FRAGMENTS.map((b) => [b.where, b] as const))('fragment %s parses', (_where, b) => {
    const out = ts.transpileModule(b.code, {
      reportDiagnostics: true,
      fileName: b.lang === 'ts' ? 'fragment.mts' : 'fragment.mjs',
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, allowJs: true },
    })
    const errors = (out.diagnostics ?? []).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
    expect(errors).toEqual([])
  })

  const exitsZero = async (_where: string, b: Block) => {
    const f = files.get(b)!
    if (b.lang === 'ts') expect(tsErrors.get(f.source) ?? [], `type errors in ${b.where}`).toEqual([])
    const r = await runs.get(b)!
    const why = r.timedOut
      ? `did not exit within ${RUN_TIMEOUT_MS} ms (something left open?)`
      : `exited with ${r.code ?? r.signal}`
    expect(
      r.code === 0 && !r.timedOut,
      `${b.where} (${relative(ROOT, f.source)}) ${why}\n--- stderr\n${r.stderr}\n--- stdout\n${r.stdout}`,
    ).toBe(true)
  }
  const cases = (blocks: Block[]) => blocks.map((b) => [b.where, b] as const)
  it.each(cases(WHOLE.filter((b) => !onCluster(b))))('%s runs', exitsZero, RUN_TIMEOUT_MS * 3)
  it.skipIf(!HAS_CLUSTER).each(cases(WHOLE.filter(onCluster)))(
    '%s runs (on the cluster)',
    exitsZero,
    RUN_TIMEOUT_MS * 3,
  )
})
