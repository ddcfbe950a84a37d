// MONITOR on a local server, for tests that count or read the commands sluice sends: `monitor(port)`
// records every line until `stop()`; `args(line)` reads a line's quoted arguments.
import net from 'node:net'

/**
 * The quoted arguments of a MONITOR line (sdscatrepr's escapes). Valkey 8 leaves a double quote
 * inside an argument unescaped (Redis writes `\"`): a quote closes an argument only where the
 * next one opens (`" "`) or the line ends.
 */
export function args(text: string): string[] {
  const out: string[] = []
  let i = 0
  const closes = (at: number) => at + 1 >= text.length || (text[at + 1] === ' ' && text[at + 2] === '"')
  while (i < text.length) {
    if (text[i] !== '"') {
      i++
      continue
    }
    let s = ''
    for (i++; text[i] !== '"' || !closes(i); i++) {
      // a line without its closing quote: say which, rather than reading past its end
      if (i >= text.length) throw new Error(`unterminated MONITOR argument in ${JSON.stringify(text.slice(0, 200))}`)
      if (text[i] !== '\\') {
        s += text[i]
        continue
      }
      const c = text[++i]
      if (c === 'x') {
        s += String.fromCharCode(parseInt(text.slice(i + 1, i + 3), 16))
        i += 2
      } else s += ({ n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' } as Record<string, string>)[c] ?? c
    }
    i++
    out.push(s)
  }
  return out
}

/** MONITOR on `port`: every line until `stop()`. */
export async function monitor(port: number) {
  const socket = net.connect({ port, host: '127.0.0.1' })
  let text = ''
  socket.on('data', (c) => (text += c.toString('latin1')))
  await new Promise<void>((resolve) => {
    socket.once('connect', () => socket.write('MONITOR\r\n'))
    const check = setInterval(() => text.includes('+OK') && (clearInterval(check), resolve()), 5)
  })
  return {
    stop: async () => {
      await new Promise((r) => setTimeout(r, 200))
      socket.destroy()
      return text.split('\r\n').filter((l) => l.startsWith('+') && !l.startsWith('+OK'))
    },
  }
}
