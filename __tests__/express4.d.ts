// express@4 is installed under the alias `express4` (next to express@5) to test both.
declare module 'express4' {
  import express = require('express')
  export = express
}
