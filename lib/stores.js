'use strict'
// Transitional (issue 25): lib/http.js and lib/metrics.js still require './stores'; deleted as
// soon as they require './store'.
module.exports = require('./store')
