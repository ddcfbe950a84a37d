// The dashboard page's DOM helpers: elements built from tag, attributes and children (text
// always as text nodes, never parsed as HTML), SVG elements, lookups by id, the page's <meta>
// settings. A module the page script imports (lib/doors/dashboard/browser/app.js).

const SVG = 'http://www.w3.org/2000/svg'

export const $ = (id) => document.getElementById(id)

/** A setting the server wrote into the page's <meta name="..."> tags. */
export const meta = (name) => document.querySelector(`meta[name="${name}"]`).getAttribute('content')

function build(el, attrs, kids) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v)
    else el.setAttribute(k, v === true ? '' : String(v))
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)))
  }
  return el
}

/** An HTML element. */
export const h = (tag, attrs, ...kids) => build(document.createElement(tag), attrs, kids)
/** An SVG element. */
export const s = (tag, attrs, ...kids) => build(document.createElementNS(SVG, tag), attrs, kids)
