// koa@2 is installed under the alias `koa2` (next to koa@3) to test both.
declare module 'koa2' {
  import Koa = require('koa')
  export = Koa
}
