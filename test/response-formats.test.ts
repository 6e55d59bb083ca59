/**
 * Every operation answers in json, xml and csv (D12): each mounted route is called once
 * per format with a sample input that succeeds, and each answer is parsed by a real
 * parser (JSON.parse, fast-xml-parser, papaparse). Routes of their own content type
 * (RawAnswer) answer that type whatever the format. A route that answers 200 neither to
 * a bare call (GET, or POST with `{}`) nor to a sample below fails here: add its sample.
 */
import t from 'tap'
import { XMLParser, XMLValidator } from 'fast-xml-parser'
import Papa from 'papaparse'
import { forEachDatabase, startService, type CallOptions, type Service } from './helpers/service.ts'
import type { ResponseFormat } from '../kernel/plugin.ts'
import { insertKey } from './helpers/keys.ts'

/** The call's options, and a query string to put before `format=` when the route needs one. */
type Sample = (service: Service, format: ResponseFormat) => Promise<CallOptions & { query?: string }>

async function person(service: Service, name: string): Promise<number> {
  const created = await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Format', LastName: name } })
  if (created.status !== 200) throw new Error(`person: ${created.status} ${created.text}`)
  return created.json.Id
}

async function importId(service: Service): Promise<number> {
  const started = await service.call('POST', '/people/update/importinit', { body: {} })
  if (started.status !== 200) throw new Error(`importinit: ${started.status} ${started.text}`)
  return started.json.ImportId
}

/** A call that succeeds, per operation (lower-case "METHOD /path"), where a bare one does not. */
const samples: Record<string, Sample> = {
  'post /api/create/key': async (service, format) => {
    const groups = (await service.call('GET', '/Api/Read/Groups')).json as { Id: number }[]
    return { today: true, body: { Display_Name: `Formats ${format} ${service.kind}`, GroupId: groups[0].Id, Require_Https: 0 } }
  },
  'post /api/edit/key': async (service, format) => {
    const groups = (await service.call('GET', '/Api/Read/Groups')).json as { Id: number }[]
    const created = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: `Edited ${format}`, GroupId: groups[0].Id, Require_Https: 0 } })
    return { today: true, body: { KeyId: created.json.Id, LogLevel: 1 } }
  },
  'post /api/rotate/key': async (service, format) => {
    const groups = (await service.call('GET', '/Api/Read/Groups')).json as { Id: number }[]
    const created = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: `Rotated ${format}`, GroupId: groups[0].Id, Require_Https: 0 } })
    return { today: true, body: { KeyId: created.json.Id, OldSecretValidFor: 60 } }
  },
  // A public address literal (TEST-NET-1): nothing to resolve, and no event in this test makes a delivery to it.
  'post /api/create/webhook': async () => ({ today: true, body: { Url: 'https://192.0.2.10/hook', Events: ['key.expiring'] } }),
  'post /api/edit/webhook': async (service) => {
    const created = await service.call('POST', '/Api/Create/Webhook', { today: true, body: { Url: 'https://192.0.2.10/hook', Events: ['key.expiring'] } })
    return { today: true, body: { Id: created.json.Id, Disabled: 1 } }
  },
  'post /api/read/log': async (service) => {
    const earlier = await service.call('GET', '/Api/Read/Acl')
    return { body: { LogRequestId: earlier.headers.get('x-requestid') } }
  },
  'post /people/update/onechange': async (_service, format) => ({ body: { FirstName: 'Format', LastName: format } }),
  'post /people/update/onephoto': async (service, format) => ({ body: { Id: await person(service, `photo ${format}`), Photo: 'photos/format.jpg' } }),
  'post /people/update/oneremove': async (service, format) => ({ body: { Id: await person(service, `remove ${format}`) } }),
  'post /people/update/onerecall': async (service, format) => ({ body: { Id: await person(service, `recall ${format}`) } }),
  'post /people/update/oneterminate': async (service, format) => ({ body: { Id: await person(service, `terminate ${format}`) } }),
  'post /people/update/importmass': async (service) => ({ body: { ImportId: await importId(service), People: [{ Source_Id: 'format-1', FirstName: 'Imported', LastName: 'Person' }] } }),
  'post /people/update/importterm': async (service, format) => {
    const id = await importId(service)
    await service.call('POST', '/people/update/importmass', { body: { ImportId: id, People: [{ Source_Id: `term-${format}`, FirstName: 'Kept', LastName: 'Person' }] } })
    return { body: { ImportId: id } }
  },
  // A key with rate limits, so there are windows to show.
  'get /api/read/limits': async (service) => ({ key: await insertKey(service, { max_hits: '100/1Min,1000/1Day' }) }),
  'post /people/read/filtered': async () => ({ body: { filter: 'LastName=Listed' } }),
  'post /people/read/sorted': async () => ({ body: { sort: '-LastName' } }),
  'get /people/read/filtered': async () => ({ query: 'filter=LastName%3DListed' }),
  'get /people/read/sorted': async () => ({ query: 'sort=-LastName' }),
  // A stored image: its own bytes and type whatever format is asked for.
  'get /people/read/photo': async (service, format) => {
    const id = await person(service, `photo read ${format}`)
    const stored = await service.call('POST', '/People/Update/OnePhoto', { body: { Id: id, Image: onePixelPng } })
    if (stored.status !== 200) throw new Error(`OnePhoto: ${stored.status} ${stored.text}`)
    return { query: `Id=${id}` }
  },
}

const onePixelPng = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='

const contentTypes: Record<ResponseFormat, RegExp> = { json: /^application\/json; charset=utf-8$/, xml: /^application\/xml; charset=utf-8$/, csv: /^text\/csv; charset=utf-8$/ }

t.test('every operation in json, xml and csv', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    // Something to list: a person without a photo.
    await person(service, 'Listed')
    const xmlParser = new XMLParser()
    for (const route of service.kernel.services.routes()) {
      const operation = `${route.method} ${route.path}`
      const sample = samples[operation.toLowerCase()]
      for (const format of ['json', 'xml', 'csv'] as const) {
        const { query, ...options }: CallOptions & { query?: string } = sample ? await sample(service, format) : route.method === 'POST' ? { body: {} } : {}
        const answer = await service.call(route.method, `${route.path}?${query ? `${query}&` : ''}format=${format}`, options)
        if (answer.status !== 200) {
          t.fail(`${operation} (${format}) answered ${answer.status} ${answer.text.slice(0, 200)}: add a sample call for it to test/response-formats.test.ts`)
          continue
        }
        const type = answer.headers.get('content-type')!
        if (route.rawContentType !== null) {
          // A media range (`image/*`) declares the family; the answer names the exact type.
          if (route.rawContentType.endsWith('/*')) t.ok(type.startsWith(route.rawContentType.slice(0, -1)), `${operation}: its own type (${type}) whatever the format (${format})`)
          else t.equal(type, route.rawContentType, `${operation}: its own type whatever the format (${format})`)
          continue
        }
        t.match(type, contentTypes[format], `${operation} as ${format}`)
        if (format === 'json') t.doesNotThrow(() => JSON.parse(answer.text), `${operation}: JSON`)
        if (format === 'xml') {
          t.equal(XMLValidator.validate(answer.text), true, `${operation}: well-formed XML`)
          t.ok(Object.keys(xmlParser.parse(answer.text)).length > 0, `${operation}: XML with a root element`)
        }
        if (format === 'csv') {
          const parsed = Papa.parse<Record<string, string>>(answer.text, { header: true, skipEmptyLines: true, delimiter: ',' })
          t.same(parsed.errors, [], `${operation}: CSV without errors`)
          t.ok((parsed.meta.fields ?? []).length > 0, `${operation}: CSV with a header row`)
        }
      }
    }
  }),
)

t.test('a list with nothing in it is still a CSV header row', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const unlimited = await insertKey(service)
    const empties: [string, string, CallOptions, string][] = [
      ['POST', '/Api/Read/History', { body: { Function: '/Nothing/Called' } }, 'Id,RequestTime,Request_Method,Api_Function,Api_Acl,Response_Code,Seconds,Bandwidth'],
      ['GET', '/Api/Read/Limits', { key: unlimited }, 'Window,Limit,Remain,ResetDate,TimeLeft'],
      ['POST', '/Api/Read/Audit', { body: { KeyId: 999_999 } }, 'Id,At,Who,Parent,Custno,Action,KeyId,Before,After,RequestId'],
      ['GET', '/Api/Read/Keys', {}, 'Id,Api_Key,Display_Name,Email,Phone,Parent,Custno,StartDate,EndDate,Active,DayPass,Require_Https,AllowHours,ResponseFormat,LogLevel,LogRaw,MaxHits,Require_Hash,Groups,Created,Credits,Refill'],
    ]
    for (const [method, path, options, header] of empties) {
      const json = await service.call(method, path, options)
      t.equal(json.status, 200, `${path}: ${json.text}`)
      const csv = await service.call(method, `${path}?format=csv`, options)
      t.equal(csv.status, 200)
      t.equal(csv.text, `${header}\r\n`, `${method} ${path}: the header row alone`)
    }
  }),
)
