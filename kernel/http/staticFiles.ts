import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { extname, join, relative, sep } from 'node:path'
import type { StaticFiles } from '../plugin.ts'
import { etagMatches } from './etag.ts'

/**
 * A plugin's static files (the web console), served outside the base path like
 * /healthz: GET and HEAD only, no credentials, never from outside the built folder.
 * The folder is listed once (when first asked, so a build finished after the start is
 * found); only files of that listing are ever sent, so no path can reach further.
 * Every answer carries a strict Content-Security-Policy: the page may load only its
 * own scripts, styles and images and talk only to this origin.
 */

const securityHeaders: Record<string, string> = {
  'Content-Security-Policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
}

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
}

interface StoredFile {
  body: Buffer
  contentType: string
  etag: string
  /** Vite names built assets by their content hash: they never change under their name. */
  immutable: boolean
}

function stored(name: string, body: Buffer): StoredFile {
  return {
    body,
    contentType: contentTypes[extname(name).toLowerCase()] ?? 'application/octet-stream',
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
    immutable: name.startsWith('assets/'),
  }
}

function listFiles(mount: StaticFiles): Map<string, StoredFile> {
  const files = new Map<string, StoredFile>()
  for (const entry of readdirSync(mount.folder, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue
    const file = join(entry.parentPath, entry.name)
    const name = relative(mount.folder, file).split(sep).join('/')
    files.set(name, stored(name, readFileSync(file)))
  }
  for (const [name, text] of Object.entries(mount.generated ?? {})) files.set(name, stored(name, Buffer.from(text)))
  return files
}

/** A sub-path that could step out of the folder or is not a plain file name: refused. */
function unsafe(path: string): boolean {
  return path.split('/').some((segment) => segment === '..' || segment === '.') || /[\\\0]/.test(path)
}

/**
 * Static files are looked up before the router, so a route whose full path falls under
 * a mount (`BASE_PATH=/console`) would get the folder's index.html, never its handler:
 * the start is refused instead. Routes match case-insensitively, so the test is too.
 */
/** A base path inside a mount (`/console`, `/console/v1` under `/console/`): every route would be hidden behind its files. */
export function basePathUnderMount(basePath: string, mounts: readonly StaticFiles[]): string | null {
  const mount = mounts.find((candidate) => `${basePath}/`.toLowerCase().startsWith(candidate.mount.toLowerCase()))
  return mount ? `invalid setting basePath: '${basePath}' puts every route under ${mount.mount}, where static files are served; choose another basePath` : null
}

export function hiddenRoute(basePath: string, mounts: readonly StaticFiles[], routes: readonly { plugin: string; route: { method: string; path: string } }[]): string | null {
  for (const mount of mounts) {
    const under = mount.mount.toLowerCase()
    const hidden = routes.find(({ route }) => (basePath + route.path).toLowerCase().startsWith(under))
    if (hidden) return `invalid setting basePath: '${basePath}' puts ${hidden.route.method} ${basePath}${hidden.route.path} (plugin ${hidden.plugin}) under ${mount.mount}, where static files are served; choose another basePath`
  }
  return null
}

export function staticFilesResponder(mounts: readonly StaticFiles[]): (request: IncomingMessage, response: ServerResponse) => boolean {
  const listings = new Map<StaticFiles, Map<string, StoredFile>>()

  function listing(mount: StaticFiles): Map<string, StoredFile> | null {
    const known = listings.get(mount)
    if (known) return known
    if (!existsSync(join(mount.folder, 'index.html'))) return null
    const files = listFiles(mount)
    listings.set(mount, files)
    return files
  }

  function text(request: IncomingMessage, response: ServerResponse, status: number, message: string, extra: Record<string, string> = {}): void {
    response.writeHead(status, { ...securityHeaders, 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': String(Buffer.byteLength(message)), 'Cache-Control': 'no-store', ...extra })
    response.end(request.method === 'HEAD' ? undefined : message)
  }

  function send(request: IncomingMessage, response: ServerResponse, file: StoredFile): void {
    const cacheControl = file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache'
    if (etagMatches(request.headers['if-none-match'], file.etag)) {
      response.writeHead(304, { ...securityHeaders, ETag: file.etag, 'Cache-Control': cacheControl })
      response.end()
      return
    }
    response.writeHead(200, { ...securityHeaders, 'Content-Type': file.contentType, 'Content-Length': String(file.body.length), ETag: file.etag, 'Cache-Control': cacheControl })
    response.end(request.method === 'HEAD' ? undefined : file.body)
  }

  return (request, response) => {
    const url = request.url ?? '/'
    const queryAt = url.indexOf('?')
    const rawPath = queryAt === -1 ? url : url.slice(0, queryAt)
    const mount = mounts.find((candidate) => rawPath.startsWith(candidate.mount) || rawPath === candidate.mount.slice(0, -1))
    if (!mount) return false
    request.resume()
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      text(request, response, 405, 'Error: Method not allowed.', { Allow: 'GET, HEAD' })
      return true
    }
    if (rawPath === mount.mount.slice(0, -1)) {
      text(request, response, 301, `Moved to ${mount.mount}`, { Location: mount.mount + (queryAt === -1 ? '' : url.slice(queryAt)) })
      return true
    }
    let path: string
    try {
      path = decodeURIComponent(rawPath.slice(mount.mount.length))
    } catch {
      text(request, response, 400, 'Error: Malformed path.')
      return true
    }
    if (unsafe(path)) {
      text(request, response, 404, 'Error: Not found.')
      return true
    }
    const files = listing(mount)
    if (!files) {
      text(request, response, 503, mount.missing)
      return true
    }
    const file = files.get(path === '' ? 'index.html' : path)
    if (file) send(request, response, file)
    // A missing built asset is a 404; any other path is a page of the app (SPA), its index.
    else if (path.startsWith('assets/') || extname(path) !== '') text(request, response, 404, 'Error: Not found.')
    else send(request, response, files.get('index.html')!)
    return true
  }
}
