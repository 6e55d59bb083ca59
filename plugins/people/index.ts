import type { Plugin } from '../../kernel/sdk.ts'
import { peopleMigrations } from './migrations.ts'
import { peopleRoutes } from './routes.ts'

/**
 * The people plugin: a tenant's directory of people (interface 2.4), who is missing a
 * photo (4.5, D11), and the updates and imports that keep it current (4.6, D13).
 *
 * Where to look:
 * - tables.ts / migrations.ts   the tables this plugin owns and how they are created
 * - fields.ts                   the person record: API names <-> columns, input checks
 * - scope.ts                    the tenant of a call (D9) and the cache partitions
 * - listing.ts                  paging, sorting, filtering and the listing answer
 * - queries.ts                  single-person reads and writes
 * - photos.ts                   checking and storing uploaded images
 * - import.ts                   bulk import: init, batches, term
 * - schemas.ts / routes.ts      what each route takes, and its handler
 * See docs/writing-a-plugin.md.
 */
const peoplePlugin: Plugin = {
  name: 'people',
  migrations: peopleMigrations,
  // Created at first start (or when the plugin is enabled later) and given to the root admin key.
  defaultGroups: [
    {
      name: 'People directory readers',
      paths: [{ path: '/People/Read/*', displayName: 'List people and who is missing a photo' }],
    },
    {
      name: 'People directory editors',
      paths: [{ path: '/People/Update/*', displayName: 'Change people and their photos, and import people in bulk' }],
    },
  ],
  setup: peopleRoutes,
}

export default peoplePlugin
