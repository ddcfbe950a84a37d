import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['__tests__/**/*.test.ts'],
    // Native addons and worker threads do not mix.
    pool: 'forks',
    testTimeout: 30000,
    hookTimeout: 30000,
  },
})
