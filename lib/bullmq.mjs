import door from './bullmq.js'

export const { limitProcessor, sidekiqBackoff } = door
