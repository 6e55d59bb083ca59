import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { RawAnswer, defineRoute, type Call, type Route } from '../../kernel/sdk.ts'

/**
 * The API reference page: Swagger UI (swagger-ui-dist, from node_modules) rendering
 * GET /Api/Read/OpenApi. Everything it loads comes from this service, and the page's
 * Content-Security-Policy lets it load nothing else.
 */

// No inline script or style element: the page's own script is a file like the others.
// Swagger UI sets style properties from script, which a CSP does not restrict.
const contentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ')

// Relative URLs: the page is <base>/Api/Read/Reference, its files <base>/Api/Read/Reference/<file>.
const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>keygate API reference</title>
<link rel="stylesheet" href="Reference/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="Reference/swagger-ui-bundle.js"></script>
<script src="Reference/reference.js"></script>
</body>
</html>
`

// validatorUrl null: Swagger UI would otherwise send the document to validator.swagger.io.
// No "Try it out": a browser cannot sign calls with a secret it must not hold.
const starter = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: 'OpenApi',
    dom_id: '#swagger-ui',
    validatorUrl: null,
    supportedSubmitMethods: [],
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
  })
})
`

interface Asset {
  path: string
  contentType: string
  read(): Buffer
}

const swaggerUiFolder = () => dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))

const assets: Asset[] = [
  { path: '/Api/Read/Reference', contentType: 'text/html; charset=utf-8', read: () => Buffer.from(page) },
  { path: '/Api/Read/Reference/reference.js', contentType: 'text/javascript; charset=utf-8', read: () => Buffer.from(starter) },
  { path: '/Api/Read/Reference/swagger-ui.css', contentType: 'text/css; charset=utf-8', read: () => readFileSync(join(swaggerUiFolder(), 'swagger-ui.css')) },
  { path: '/Api/Read/Reference/swagger-ui-bundle.js', contentType: 'text/javascript; charset=utf-8', read: () => readFileSync(join(swaggerUiFolder(), 'swagger-ui-bundle.js')) },
]

/** GET /Api/Read/Reference and its three files: public. Each file is read on its first call and kept. */
export function referenceRoutes(): Route[] {
  return assets.map((asset) => {
    let body: Buffer | null = null
    return defineRoute({
      method: 'GET',
      path: asset.path,
      xml: { root: 'Reference' },
      rawContentType: asset.contentType,
      answerHeaders: {
        'Content-Security-Policy': { description: 'The page loads only its own files from this service.', schema: { type: 'string' } },
        'X-Content-Type-Options': { description: '`nosniff`.', schema: { type: 'string' } },
        'Cache-Control': { description: '`public, max-age=3600`.', schema: { type: 'string' } },
      },
      handler: (call: Call) => {
        body ??= asset.read()
        call.setHeader('Content-Security-Policy', contentSecurityPolicy)
        call.setHeader('X-Content-Type-Options', 'nosniff')
        call.setHeader('Cache-Control', 'public, max-age=3600')
        return new RawAnswer(asset.contentType, body)
      },
    })
  })
}
