// Types of every-kind.js, for the TypeScript tests.
import type { Store } from '../../lib/entries/index.js'

export type KindName =
  'window' | 'leaky' | 'sliding' | 'sliding-counter' | 'pacer' | 'quota' | 'concurrent' | 'budget' | 'fair' | 'adaptive'

/** Per kind: a call on `name` (limit `limit`) that resolves true when admitted, false when refused. */
export declare const KINDS: Record<KindName, (store: Store, name: string, limit: number) => () => Promise<boolean>>

/** The hash tag of the keys of `kind`'s name `name`. */
export declare function hashTag(kind: KindName, name: string): string
