import door from './dashboard.js'

export const { dashboard, defaultGroup } = door
