/** `npm start`: load config, start the kernel, print the first admin key once, stop cleanly on SIGTERM/SIGINT. */
import { loadConfig, ConfigError } from './config.ts'
import { createKernel } from './server.ts'
import { join } from 'node:path'

async function main(): Promise<void> {
  let config
  try {
    config = loadConfig()
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`keygate: ${error.message}`)
      process.exit(1)
    }
    throw error
  }
  const kernel = await createKernel({ config })
  const { url } = await kernel.listen()
  const database = config.databaseUrl ? `MySQL (${new URL(config.databaseUrl).host})` : `SQLite in ${config.dataDir}`
  console.log(`keygate listening on ${url} - ${database}, plugins: ${config.plugins.join(', ')}`)
  if (kernel.createdRootKey) {
    const root = kernel.createdRootKey
    console.log(
      `\nFirst start: created the root admin key (shown once; also in ${join(config.dataDir, 'admin-key.json')}, mode 0600)\n` +
        `  Id:         ${root.id}\n  Api_Key:    ${root.apiKey}\n  Api_Secret: ${root.secret}\n` +
        `Try it: npm run --silent call -- GET /Api/Read/Acl\n`,
    )
  }
  let stopping = false
  const stop = (signal: string) => {
    if (stopping) return
    stopping = true
    console.log(`keygate: ${signal}, finishing in-flight calls and flushing the call log`)
    kernel.close().then(
      () => process.exit(0),
      (error) => {
        console.error('keygate: error while stopping', error)
        process.exit(1)
      },
    )
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
}

main().catch((error) => {
  console.error(`keygate: could not start: ${(error as Error).message ?? error}`)
  process.exit(1)
})
