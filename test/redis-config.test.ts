/** The redisUrl setting (D16): REDIS_URL, validated, its password never printed. */
import t from 'tap'
import { loadConfig, ConfigError } from '../kernel/boot/config.ts'

t.test('redisUrl: null by default, set by REDIS_URL or the file', async (t) => {
  t.equal(loadConfig({}, {}).redisUrl, null)
  t.equal(loadConfig({}, { REDIS_URL: 'redis://:pw@cache:6379/2' }).redisUrl, 'redis://:pw@cache:6379/2')
  t.equal(loadConfig({ redisUrl: 'rediss://cache:6380/0' }, {}).redisUrl, 'rediss://cache:6380/0')
})

t.test('a bad redisUrl is a config error that never shows the password', async (t) => {
  const cases: [Record<string, string>, string][] = [
    [{ REDIS_URL: 'http://user:s3cret@cache:6379' }, 'invalid setting redisUrl: must match pattern "^rediss?://" (got "http://user:***@cache:6379")'],
    [{ REDIS_URL: 'redis://user:s3cret@cache:notaport' }, 'invalid setting redisUrl: not a valid URL (got "redis://user:***@cache:notaport")'],
  ]
  for (const [env, message] of cases) {
    t.throws(() => loadConfig({}, env), new ConfigError(message))
    try {
      loadConfig({}, env)
    } catch (error) {
      t.notMatch((error as Error).message, /s3cret/, 'no password in the message')
    }
  }
})
