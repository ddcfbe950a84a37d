// HTTP as a DNS-rebinding page sends it (any Host header, which fetch() cannot set), and
// `npx sluice dashboard` started and stopped by a test.
import { spawn } from 'node:child_process'
import http from 'node:http'
import net from 'node:net'
import { join } from 'node:path'

const BIN = join(__dirname, '..', '..', 'bin', 'sluice.js')

export interface Answer {
  status: number
  headers: http.IncomingHttpHeaders
  text: string
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any
}

/** A request to `base` + `path` with the Host header `host` (default: the address's own). */
export function request(
  base: string,
  path: string,
  o: { method?: string; host?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const url = new URL(base)
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path,
        method: o.method ?? 'GET',
        headers: { ...(o.host === undefined ? {} : { host: o.host }), ...o.headers },
        setHost: o.host === undefined,
      },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (d) => (text += d))
        res.on('end', () =>
          resolve({
            status: res.statusCode!,
            headers: res.headers,
            text,
            json: text.startsWith('{') ? JSON.parse(text) : null,
          }),
        )
      },
    )
    req.on('error', reject)
    req.end()
  })
}

/** An HTTP/1.0 GET with no Host header at all; the raw answer. */
export function withoutHost(base: string, path: string): Promise<string> {
  const url = new URL(base)
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(`GET ${path} HTTP/1.0\r\n\r\n`)
    })
    let text = ''
    socket.setEncoding('utf8')
    socket.on('data', (d) => (text += d))
    socket.on('end', () => resolve(text))
    socket.on('error', reject)
  })
}

/** `npx sluice dashboard ...args --port 0` until its URL is printed: the URL, its output so far, stop(). */
export async function startCliDashboard(args: string[]) {
  const child = spawn(process.execPath, [BIN, 'dashboard', '--port', '0', ...args], {
    env: { ...process.env, SLUICE_REDIS_URL: '' },
  })
  const io = { out: '', err: '' }
  child.stdout.on('data', (d) => (io.out += d))
  child.stderr.on('data', (d) => (io.err += d))
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)))
  for (let i = 0; i < 200 && !/http:\/\/\S+\//.test(io.out) && child.exitCode === null; i++) {
    await new Promise((r) => setTimeout(r, 50))
  }
  const m = /(http:\/\/\S+\/)/.exec(io.out)
  if (m === null) {
    child.kill('SIGTERM')
    throw new Error(`npx sluice dashboard did not start: ${io.out} ${io.err}`)
  }
  return {
    url: m[1],
    io,
    stop: async () => {
      child.kill('SIGTERM')
      return exited
    },
  }
}
