// The code of the SluiceError a synchronous call throws (undefined when it does not throw).
import { expect } from 'vitest'
import { SluiceError } from '../../lib/entries/index.js'

export function codeOf(fn: () => unknown): string | undefined {
  try {
    fn()
  } catch (err) {
    expect(err).toBeInstanceOf(SluiceError)
    return (err as SluiceError).code
  }
  return undefined
}
