import { badRequest, calendarDayAt, defineRoute, pagedListHeaders, type JsonText, type CachePolicy, type Call, type KernelServices, type Route } from '../../kernel/sdk.ts'
import { columnsFromInput, dayText, personRecordFields, type PersonInput } from './fields.ts'
import { PageStatements } from './pageStatements.ts'
import { listingRows, planListing, runListing, type ListedPage, type ListingParameters, type ListingSet, type ListingMemo } from './listing.ts'
import { changePerson, createPerson, findPerson, recallPerson, setPersonColumns, type ChangedPerson } from './queries.ts'
import { decodeImage, removePhotoFiles, storePhoto } from './photos.ts'
import { finishImport, importBatch, startImport } from './import.ts'
import { bulkWriter } from './bulkWrite.ts'
import { storedRecords } from './storedRecord.ts'
import { countPeople, dropCachedListings, listingPartition, peopleRoom, scopeOf, type PeopleDb, type Scope } from './scope.ts'
import { peopleToday } from './today.ts'
import { photoAnswer } from './photoAnswer.ts'
import type { PeopleTables } from './tables.ts'
import * as schemas from './schemas.ts'

/**
 * Every route of the people plugin: what each one takes (schemas.ts), who may call it
 * (the ACL paths of index.ts's default groups), how long its answer is cached, and the
 * handler. Handlers stay short: the work is in listing.ts, queries.ts, photos.ts and
 * import.ts; a handler's one extra duty is dropping the cached listings a write makes stale.
 */
/**
 * A 5 MiB image is about 6.7 MiB as base64 JSON, and 10,000 import rows 2-4 MB: these
 * two routes take up to 8 MiB whatever the service-wide bodyLimit (1 MiB) is.
 */
const largeBodyLimit = 8 * 1024 * 1024

export function peopleRoutes(kernel: KernelServices): Route[] {
  const db: PeopleDb = kernel.db.withTables<PeopleTables>()
  // Tenant limits (D14): the license counts our people, and every write that adds people checks MaxPeople.
  kernel.tenants.countUsage('People', countPeople)
  const room = peopleRoom(kernel)
  const bulk = bulkWriter(kernel.dialect)
  const records = storedRecords(kernel.dialect)
  const pages = new PageStatements(db, kernel.dialect)

  /**
   * Listings are cached an hour per scope (D11); the query string, body and format are
   * part of the cache key anyway. Every write below drops the partitions it affects.
   */
  const listingCache: CachePolicy<any, any> = {
    ttlSeconds: 3600,
    partition: (call) => listingPartition(scopeOf(call.caller)),
  }

  /** Today in the tenant's time zone, as a TermDate (D14: a tenant's "today" is its own calendar day). */
  const tenantToday = async (scope: Scope, now: number) => dayText(calendarDayAt(now, await kernel.tenants.timeZone(scope)))

  /** A listing's Total and page anchors, kept in the same partition as the cached pages (and dropped with them). */
  const listingMemo = (scope: Scope): ListingMemo => (name, compute) => kernel.cache.remember(listingPartition(scope), name, 3600, compute)

  /**
   * D12: a CSV listing is one row per person, so Total, Page and Next travel in headers.
   * The body is JSON text (a json answer sends it as it is; xml and csv get its value).
   */
  function answerListing(call: Call<any, any>, listed: ListedPage): JsonText {
    call.setHeader('X-Total-Count', String(listed.Total))
    call.setHeader('X-Page', listed.Page)
    if (listed.Next !== undefined) call.setHeader('X-Next', listed.Next)
    return listed.body
  }

  /**
   * After a single-person write: the person's customer may have changed (a parent-wide
   * key moving it), and a replaced upload of a version before 0.3.2 may have left a file.
   */
  async function changed(call: Call<any, any>, result: ChangedPerson) {
    dropCachedListings(kernel, call.caller.parent, [Number(result.before.custno), result.after.Custno])
    if (result.replacedPhoto !== null) await removePhotoFiles(kernel.config.dataDir, [result.replacedPhoto])
    return result.after
  }

  /**
   * /people/read/list|filtered|sorted: one listing; `required` names the parameter the
   * route is about. POST takes the parameters in its body or query string, GET (D11) in
   * its query string alone.
   */
  function listRoute(method: 'GET' | 'POST', path: string, required?: 'filter' | 'sort') {
    return defineRoute<ListingParameters | undefined, ListingParameters & { IncludeDeleted?: 0 | 1 | boolean }>({
      method,
      path,
      summary: required === 'filter' ? 'People matching a filter, paged' : required === 'sort' ? 'People in a chosen order, paged' : 'People, paged by number or cursor',
      ...(method === 'POST' ? { body: schemas.listBody, query: schemas.listQuery } : { query: schemas.listGetQuery }),
      cache: listingCache,
      answer: schemas.listingAnswer,
      answerHeaders: pagedListHeaders({ next: true }),
      xml: { root: 'People', item: 'Person', list: 'People' },
      csv: listingRows,
      csvColumns: personRecordFields,
      async handler(call) {
        const { IncludeDeleted: deletedInBody, ...fromBody } = call.body ?? {}
        const { IncludeDeleted: deletedInQuery, ...fromQuery } = call.query
        const IncludeDeleted = deletedInBody ?? deletedInQuery
        for (const name of Object.keys(fromBody)) {
          if (name in fromQuery) throw badRequest(`${name} is given both in the query string and in the body.`)
        }
        const parameters: ListingParameters = { ...fromQuery, ...fromBody }
        // Only commas and spaces ("," or " , ") name no field either: the route's point is missing.
        if (required && !/[^,\s]/.test(parameters[required] ?? '')) throw badRequest(`${required} is required on ${path}.`)
        const plan = planListing(parameters, { allowDeletedFilter: true })
        // Deleted people are listed only when asked: IncludeDeleted, or a filter on Deleted.
        const askedForDeleted = IncludeDeleted === 1 || IncludeDeleted === true || plan.conditions.some((condition) => condition.column === 'deleted')
        const set: ListingSet = askedForDeleted ? 'current and deleted' : 'current'
        const scope = scopeOf(call.caller)
        return answerListing(call, await runListing(db, pages.reads(scope, set, plan), set, plan, listingMemo(scope)))
      },
    })
  }

  return [
    defineRoute<undefined, ListingParameters>({
      method: 'GET',
      path: '/People/Read/Missing',
      summary: 'People without a photo, paged',
      query: schemas.missingQuery,
      cache: listingCache,
      answer: schemas.listingAnswer,
      answerHeaders: pagedListHeaders({ next: true }),
      xml: { root: 'People', item: 'Person', list: 'People' },
      csv: listingRows,
      csvColumns: personRecordFields,
      async handler(call) {
        const plan = planListing(call.query, { allowDeletedFilter: false })
        const scope = scopeOf(call.caller)
        return answerListing(call, await runListing(db, pages.reads(scope, 'missing photo', plan), 'missing photo', plan, listingMemo(scope)))
      },
    }),
    defineRoute<undefined, { dispgroup?: string }>({
      method: 'GET',
      path: '/People/Read/Today',
      summary: "Today's birthdays and work anniversaries in your tenant's time zone",
      query: schemas.todayQuery,
      answer: schemas.todayAnswer,
      xml: { root: 'Today', item: 'Person' },
      csvColumns: [...personRecordFields, 'Occasion', 'Years'],
      async handler(call) {
        const scope = scopeOf(call.caller)
        // A display player polls this route: the call itself is its sign of life.
        await kernel.tenants.playerSeen(call.caller.id)
        // Trimmed as the listing filters' values are: MariaDB's comparison ignores trailing
        // spaces and SQLite's does not, so "Lobby " would find Lobby on one of them only.
        const dispGroup = call.query.dispgroup?.trim()
        if (dispGroup === '') throw badRequest('dispgroup must not be empty.')
        const day = calendarDayAt(kernel.clock(), await kernel.tenants.timeZone(scope))
        return peopleToday(db, scope, day, dispGroup)
      },
    }),
    defineRoute<undefined, { Id: number }>({
      method: 'GET',
      path: '/People/Read/Photo',
      summary: "A person's stored photo",
      query: schemas.photoQuery,
      // The stored image's own type (JPEG, PNG or WebP), whatever format was asked for.
      rawContentType: 'image/*',
      etag: true,
      answerHeaders: {
        ETag: { description: 'The stored image\'s ETag: send it in If-None-Match to get 304 while the photo is unchanged.', schema: { type: 'string' } },
        'Cache-Control': { description: '`private`: a shared cache keeps no copy.', schema: { type: 'string' } },
        'X-Content-Type-Options': { description: '`nosniff`: the image is shown only as its own type.', schema: { type: 'string' } },
      },
      xml: { root: 'Photo' },
      handler: (call) => photoAnswer(db, kernel.config.dataDir, scopeOf(call.caller), call.query.Id, call),
    }),
    listRoute('POST', '/people/read/list'),
    listRoute('POST', '/people/read/filtered', 'filter'),
    listRoute('POST', '/people/read/sorted', 'sort'),
    listRoute('GET', '/people/read/list'),
    listRoute('GET', '/people/read/filtered', 'filter'),
    listRoute('GET', '/people/read/sorted', 'sort'),

    defineRoute<PersonInput & { Id?: number }>({
      method: 'POST',
      path: '/People/Update/OneChange',
      summary: 'Create or change one person',
      body: schemas.changeBody,
      // Id to change a person, LastName to create one: never nothing.
      bodyRequired: true,
      answer: schemas.personAnswer,
      xml: { root: 'Person' },
      async handler(call) {
        const { Id, ...input } = call.body
        const scope = scopeOf(call.caller)
        if (Id === undefined) {
          const created = await createPerson(db, scope, input, kernel.clock(), room, records)
          dropCachedListings(kernel, scope.parent, [created.Custno])
          return created
        }
        return changed(call, await changePerson(db, scope, Id, input, kernel.clock(), room, records))
      },
    }),
    defineRoute<{ Id: number; Photo?: string | null; Image?: string; Type?: string }>({
      method: 'POST',
      path: '/People/Update/OnePhoto',
      summary: "Set one person's photo (an image or a location)",
      body: schemas.photoBody,
      bodyLimit: largeBodyLimit,
      answer: schemas.personAnswer,
      xml: { root: 'Person' },
      async handler(call) {
        const { Id, Photo, Image, Type } = call.body
        if ((Photo === undefined) === (Image === undefined)) throw badRequest('Send either Photo (a location) or Image (a base64 JPEG, PNG or WebP image).')
        if (Type !== undefined && Image === undefined) throw badRequest('Type describes Image; it cannot go with Photo.')
        const scope = scopeOf(call.caller)
        const person = await findPerson(db, scope, Id)
        // A location keeps the text rule of every field (trailing white space dropped): "   " is no photo.
        const given = columnsFromInput({ Photo })
        if (typeof given === 'string') throw badRequest(given)
        let location = given.photo ?? null
        if (Image !== undefined) {
          const image = decodeImage(Image, Type)
          location = await storePhoto(db, { parent: Number(person.parent), custno: Number(person.custno) }, Id, image.bytes, image.type, kernel.clock())
        }
        return changed(call, await setPersonColumns(db, scope, Id, { photo: location, has_photo: location ? 1 : 0 }, kernel.clock(), records))
      },
    }),
    defineRoute<{ Id: number }>({
      method: 'POST',
      path: '/People/Update/OneRemove',
      summary: 'Delete one person',
      body: schemas.idBody,
      answer: schemas.personAnswer,
      xml: { root: 'Person' },
      handler: async (call) => changed(call, await setPersonColumns(db, scopeOf(call.caller), call.body.Id, { deleted: 1 }, kernel.clock(), records)),
    }),
    defineRoute<{ Id: number }>({
      method: 'POST',
      path: '/People/Update/OneRecall',
      summary: 'Undelete one person',
      body: schemas.idBody,
      answer: schemas.personAnswer,
      xml: { root: 'Person' },
      handler: async (call) => changed(call, await recallPerson(db, scopeOf(call.caller), call.body.Id, kernel.clock(), room, records)),
    }),
    defineRoute<{ Id: number; TermDate?: string | null }>({
      method: 'POST',
      path: '/People/Update/OneTerminate',
      summary: 'Terminate one person (TermDate)',
      body: schemas.terminateBody,
      answer: schemas.personAnswer,
      xml: { root: 'Person' },
      async handler(call) {
        const now = kernel.clock()
        const scope = scopeOf(call.caller)
        // "" would clear the termination this call exists to set: a date, or none for today.
        if (typeof call.body.TermDate === 'string' && call.body.TermDate.trim() === '') throw badRequest('TermDate must be a date (YYYY-MM-DD); leave it out for today.')
        const columns = columnsFromInput({ TermDate: call.body.TermDate ?? await tenantToday(scope, now) })
        if (typeof columns === 'string') throw badRequest(columns)
        return changed(call, await setPersonColumns(db, scope, call.body.Id, columns, now, records))
      },
    }),

    defineRoute<Record<string, never>>({
      method: 'POST',
      path: '/people/update/importinit',
      summary: 'Start a bulk import',
      body: schemas.importInitBody,
      answer: schemas.importStartAnswer,
      xml: { root: 'Import' },
      handler: (call) => startImport(db, scopeOf(call.caller), call.caller.id, kernel.clock()),
    }),
    defineRoute<{ ImportId: number; People?: unknown[]; Csv?: string }>({
      method: 'POST',
      path: '/people/update/importmass',
      summary: 'Import one batch of people (JSON or CSV)',
      body: schemas.importMassBody,
      bodyLimit: largeBodyLimit,
      answer: schemas.importBatchAnswer,
      xml: { root: 'ImportBatch', item: 'Rejection', list: 'Rejections' },
      async handler(call) {
        const scope = scopeOf(call.caller)
        const { answer, touchedCustnos, replacedPhotos } = await importBatch(db, scope, call.body, kernel.clock(), { room, bulk, readCommitted: kernel.dialect === 'mysql', records })
        if (touchedCustnos.length > 0) dropCachedListings(kernel, scope.parent, touchedCustnos)
        await removePhotoFiles(kernel.config.dataDir, replacedPhotos)
        return answer
      },
    }),
    defineRoute<{ ImportId: number }>({
      method: 'POST',
      path: '/people/update/importterm',
      summary: 'Finish a bulk import, terminating the people it did not name',
      body: schemas.importTermBody,
      answer: schemas.importSummaryAnswer,
      xml: { root: 'Import', item: 'Rejection', list: 'Rejections' },
      async handler(call) {
        const scope = scopeOf(call.caller)
        const now = kernel.clock()
        const { answer, touchedCustnos } = await finishImport(db, scope, call.body.ImportId, now, await tenantToday(scope, now), records, kernel.events, kernel.dialect === 'mysql')
        if (touchedCustnos.length > 0) dropCachedListings(kernel, scope.parent, touchedCustnos)
        return answer
      },
    }),
  ]
}
