import { createHash } from 'node:crypto'
import { parse as toXml } from 'js2xmlparser'
import { RawAnswer, defineRoute, httpDate, type HistoryEntry, type KernelServices } from '../../kernel/sdk.ts'
import { changesAnswerSchema } from './schemas.ts'

export const rssContentType = 'application/rss+xml; charset=utf-8'

/**
 * A guid that stays the same for an entry as long as it exists: what it is (one day may
 * change one operation twice, so its description is part of it), not where it sits.
 */
export function changeGuid(entry: HistoryEntry): string {
  const digest = createHash('sha256').update(`${entry.Date}\n${entry.Version}\n${entry.Kind}\n${entry.Operation}\n${entry.Description}`).digest('hex')
  return `keygate-change-${digest.slice(0, 32)}`
}

export function changeTitle(entry: HistoryEntry): string {
  return `${entry.Kind}: ${entry.Operation}${entry.Breaking === 1 ? ' [breaking]' : ''}`
}

/** The entry's day at midnight UTC as an RFC 822 date (RSS 2.0 allows the four-digit year). */
export function changePubDate(entry: HistoryEntry): string {
  return httpDate(Date.parse(`${entry.Date}T00:00:00Z`))
}

/** The RSS 2.0 feed of the history (D15): one item per entry, newest first. */
function rssFeed(entries: readonly HistoryEntry[], link: string): string {
  return toXml('rss', {
    '@': { version: '2.0' },
    channel: {
      title: 'keygate API changes',
      link,
      description: 'Operations added, modified and removed in this keygate service, newest first.',
      language: 'en',
      ...(entries.length ? { lastBuildDate: changePubDate(entries[0]) } : {}),
      item: entries.map((entry) => ({
        title: changeTitle(entry),
        description: entry.Description,
        category: entry.Kind,
        pubDate: changePubDate(entry),
        guid: { '@': { isPermaLink: 'false' }, '#': changeGuid(entry) },
      })),
    },
  }, { declaration: { include: true, encoding: 'UTF-8' }, format: { doubleQuotes: true } })
}

// A Host header as a browser or proxy sends it; anything else is not echoed into the feed.
const plainHost = /^[A-Za-z0-9.-]+(?::[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?$/

/** GET /Api/Read/Changes (json, xml, csv) and GET /Api/Read/Changes/Rss: public (D15). */
export function changeRoutes(kernel: KernelServices) {
  const { config } = kernel
  const scheme = config.tls ? 'https' : 'http'
  const configuredHost = `${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`
  // The feed's <link> names the host the reader used; a few hosts at most, each built once.
  const feeds = new Map<string, Buffer>()

  function feedFor(host: string | undefined): Buffer {
    const name = host !== undefined && plainHost.test(host) ? host.toLowerCase() : configuredHost
    let feed = feeds.get(name)
    if (feed === undefined) {
      feed = Buffer.from(rssFeed(kernel.history(), `${scheme}://${name}${config.basePath}/Api/Read/Changes`))
      if (feeds.size < 16) feeds.set(name, feed)
    }
    return feed
  }

  return [
    defineRoute({
      method: 'GET',
      path: '/Api/Read/Changes',
      // The history is part of the code: it changes only with a new start. No query
      // schema, so no parameter but format (and Query null in /Api/Read/List): anonymous
      // callers cannot fill the cache with variants.
      cache: { ttlSeconds: 86_400, partition: () => 'api:changes' },
      answer: changesAnswerSchema,
      xml: { root: 'Changes', item: 'Change' },
      handler: () => kernel.history(),
    }),
    defineRoute({
      method: 'GET',
      path: '/Api/Read/Changes/Rss',
      xml: { root: 'rss' },
      rawContentType: rssContentType,
      handler: (call) => new RawAnswer(rssContentType, feedFor(call.headers.host)),
    }),
  ]
}
