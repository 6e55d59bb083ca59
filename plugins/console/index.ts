import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Plugin } from '../../kernel/sdk.ts'

/**
 * The web console (issue 18): a browser app in web/, built by Vite into dist/console
 * (scripts/build.mjs, run by `npm install`), served at /console/ outside the base path.
 * It has no routes of its own and no back door: the page signs every call to the public
 * API itself (D4), with the key and secret its user signs in with.
 */

// The checkout's root from plugins/console/ and from the build's dist/plugins/console/ alike.
const here = dirname(fileURLToPath(import.meta.url))
const above = join(here, '..', '..')
const builtFolder = basename(above) === 'dist' ? join(above, 'console') : join(above, 'dist', 'console')

const consolePlugin: Plugin = {
  name: 'console',
  setup: () => [],
  staticFiles: (config) => config.console?.enabled === false
    ? null
    : {
        mount: '/console/',
        folder: builtFolder,
        missing: 'Error: The console is not built. Run npm install (or npm run build) in the service folder, then reload.',
        // The page calls the API under the base path, which only the config knows.
        generated: { 'settings.json': JSON.stringify({ basePath: config.basePath }) },
      },
}

export default consolePlugin
