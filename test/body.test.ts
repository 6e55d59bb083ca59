import t from 'tap'
import { connect } from 'node:net'
import { forEachDatabase, startService } from './helpers/service.ts'
import { probePlugin } from './helpers/probePlugin.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'

t.test('request bodies', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin] })

    t.same((await service.call('POST', '/Probe/Body', { body: { Name: 'Zoë', Count: 3 } })).json, { Name: 'Zoë', Count: 3 })

    const badJson = await service.call('POST', '/Probe/Body', { rawBody: '{"Name": "x",' })
    t.equal(badJson.status, 400)
    t.equal(badJson.text, 'Error: The body is not valid JSON.')
    t.match(badJson.headers.get('x-requestid'), /^\d+$/)

    const wrongType = await service.call('POST', '/Probe/Body', { rawBody: 'Name=x', contentType: 'application/x-www-form-urlencoded' })
    t.equal(wrongType.status, 415)
    t.equal(wrongType.text, 'Error: The body must be JSON, sent with Content-Type: application/json.')
    t.equal((await service.call('POST', '/Probe/Body', { rawBody: '{"Name":"x"}', contentType: 'application/json; charset=utf-8' })).status, 200)
    t.equal((await service.call('POST', '/Probe/Body', { rawBody: '{"Name":"x"}', contentType: 'application/vnd.keygate+json' })).status, 200)
    // The body is read as UTF-8: another charset is refused, not misread.
    for (const charset of ['utf-16', 'UTF-16LE', 'iso-8859-1', '"latin1"', 'utf8', '']) {
      const other = await service.call('POST', '/Probe/Body', { rawBody: '{"Name":"x"}', contentType: `application/json; charset=${charset}` })
      t.equal(other.status, 415, `charset=${charset}`)
      t.equal(other.text, 'Error: The body must be JSON in UTF-8: Content-Type may name no charset but utf-8.')
    }
    for (const encoding of ['gzip', 'br', 'deflate, gzip']) {
      const compressed = await service.call('POST', '/Probe/Body', { rawBody: '{"Name":"x"}', headers: { 'content-encoding': encoding } })
      t.equal(compressed.status, 415, `Content-Encoding: ${encoding} is not read as plain JSON`)
      t.equal(compressed.text, 'Error: The body must be sent without Content-Encoding; compressed bodies are not accepted.')
    }
    t.equal((await service.call('POST', '/Probe/Body', { rawBody: '{"Name":"x"}', headers: { 'content-encoding': 'Identity' } })).status, 200, 'identity is no coding')
    const utf16 = await service.call('POST', '/Probe/Body', { rawBody: Buffer.from('\ufeff{"Name":"x"}', 'utf16le'), contentType: 'application/json; charset=utf-16' })
    t.equal(utf16.status, 415, 'a real UTF-16 body: 415, not "not valid JSON"')
    for (const contentType of ['application/json; charset="utf-8"', 'application/json;CHARSET=UTF-8', 'application/json;;;', 'application/json; ; charset=utf-8;', 'application/json; foo=bar']) {
      t.equal((await service.call('POST', '/Probe/Body', { rawBody: '{"Name":"x"}', contentType })).status, 200, contentType)
    }

    const missing = await service.call('POST', '/Probe/Body', { body: {} })
    t.equal(missing.status, 400)
    t.equal(missing.text, 'Error: Name is required.')
    const unknownField = await service.call('POST', '/Probe/Body', { body: { Name: 'x', Extra: 1 } })
    t.equal(unknownField.text, 'Error: Extra is not a known field.')
    t.equal((await service.call('POST', '/Probe/Body', { body: { Name: 'x', '': 1 } })).text, 'Error: A field name must not be empty.')
    const wrongFieldType = await service.call('POST', '/Probe/Body', { body: { Name: 'x', Count: 'many' } })
    t.equal(wrongFieldType.text, 'Error: Count must be an integer.')
    t.equal((await service.call('POST', '/Probe/Body', { body: [1, 2] })).status, 400, 'an array is not the object the route takes')
    const deep = '['.repeat(100_000) + ']'.repeat(100_000)
    t.equal((await service.call('POST', '/Probe/Body', { rawBody: deep })).status, 400, 'deep nesting')
    t.equal((await service.call('POST', '/Probe/Body', { rawBody: Buffer.from([0x7b, 0x22, 0x4e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]) })).status, 400, 'invalid UTF-8')

    const large = await service.call('POST', '/Probe/Body', { rawBody: JSON.stringify({ Name: 'x'.repeat(1024 * 1024) }) })
    t.equal(large.status, 413)
    t.equal(large.text, 'Error: Request body is larger than 1048576 bytes.')

    // A body over the limit without Content-Length (chunked) is cut off as it streams
    // (a known, active key: the body is read only for a caller the ACL admits).
    const streamed = (credentials: string) => new Promise<number>((resolve, reject) => {
      const socket = connect(service.port, '127.0.0.1')
      let data = ''
      socket.on('data', (chunk) => {
        data += chunk
        if (data.includes('\r\n')) {
          resolve(Number(data.split(' ')[1]))
          socket.destroy()
        }
      })
      socket.on('error', reject)
      socket.write(`POST /v1.0/Probe/Body HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${credentials}Transfer-Encoding: chunked\r\n\r\n`)
      const chunk = 'a'.repeat(64 * 1024)
      for (let index = 0; index < 20; index++) socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`)
    })
    const signedFor = `x-apikey: ${service.admin.apiKey}\r\nx-apidate: ${new Date().toUTCString()}\r\nx-apihmac: ${'0'.repeat(64)}\r\n`
    t.equal(await streamed(signedFor), 413)
    t.equal(await streamed(''), 401, 'without credentials the body is not read at all')
    t.equal((await service.call('GET', '/Probe/Echo')).status, 200, 'the service keeps answering')

    // HTTP/1.1 without Host: refused as every other error is, plain text (node:http's own
    // refusal had no body). HTTP/1.0 needs no Host and is served.
    const raw = (request: string) => new Promise<string>((resolve, reject) => {
      const socket = connect(service.port, '127.0.0.1')
      let data = ''
      socket.on('data', (chunk) => (data += chunk))
      socket.on('end', () => resolve(data))
      socket.on('error', reject)
      socket.write(request)
    })
    const noHost = await raw('GET /v1.0/Api/Read/Acl HTTP/1.1\r\nConnection: keep-alive\r\n\r\n')
    t.match(noHost, /^HTTP\/1\.1 400 /)
    t.match(noHost, /\r\ncontent-type: text\/plain; charset=utf-8\r\n/i)
    t.match(noHost, /\r\nconnection: close\r\n/i)
    t.match(noHost, /\r\n\r\nError: The Host header is required\.$/)
    const http10 = await raw('GET /v1.0/Api/Read/Acl HTTP/1.0\r\n\r\n')
    t.match(http10, /^HTTP\/1\.1 401 .*\r\n\r\nError: Missing credentials/s, 'HTTP/1.0 without Host reaches authentication')

    // Host given twice is refused (RFC 9112 3.2), not served by the first line.
    const twoHosts = await raw('GET /v1.0/Api/Read/Acl HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n')
    t.match(twoHosts, /^HTTP\/1\.1 400 .*\r\n\r\nError: The Host header must be given once\.$/s)
    // CONNECT gets an answer (node:http closed the socket without one).
    const tunnel = await raw('CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n')
    t.match(tunnel, /^HTTP\/1\.1 405 .*\r\n\r\nError: CONNECT is not supported\.$/s)

    const signed = (path: string) => Object.entries(signedHeaders(service.admin, 'GET', path)).map(([name, value]) => `${name}: ${value}\r\n`).join('')
    // The absolute form (through a forward proxy) is signed over the same path as the origin form.
    const absolute = await raw(`GET http://127.0.0.1:${service.port}/v1.0/Api/Read/Acl HTTP/1.1\r\nHost: 127.0.0.1\r\n${signed('/Api/Read/Acl')}Connection: close\r\n\r\n`)
    t.match(absolute, /^HTTP\/1\.1 200 /, 'absolute form, signed over the path')
    // A second x-apikey after a thousand header lines is still seen (node:http kept only
    // the first thousand lines, so a forged second value went unseen).
    const filler = 'a: b\r\n'.repeat(1200)
    const buried = await raw(`GET /v1.0/Api/Read/Acl HTTP/1.1\r\nHost: x\r\n${signed('/Api/Read/Acl')}${filler}x-apikey: kg_AAAAAAAAAAAAAAAAAAAAAA\r\nConnection: close\r\n\r\n`)
    t.match(buried, /^HTTP\/1\.1 401 .*\r\n\r\nError: Credential x-apikey was given more than once\.$/s)
  }),
)

t.test('formats (D12)', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin] })
    const xml = await service.call('GET', '/Probe/Echo?format=xml')
    t.equal(xml.headers.get('content-type'), 'application/xml; charset=utf-8')
    t.match(xml.text, /^<\?xml version="1.0" encoding="UTF-8"\?>\s*<Echo>\s*<Key>Root administrator<\/Key>/)
    const csv = await service.call('GET', '/Probe/Echo', { headers: { accept: 'text/csv' } })
    t.equal(csv.headers.get('content-type'), 'text/csv; charset=utf-8')
    t.equal(csv.text, 'Key,Acl\r\nRoot administrator,/Probe/Echo')
    const json = await service.call('GET', '/Probe/Echo', { headers: { accept: 'text/html, application/json' } })
    t.equal(json.headers.get('content-type'), 'application/json; charset=utf-8')
    // Accept's q-values (RFC 9110 12.5.1): the highest wins, q=0 is "not this one", and
    // the any-type range stands for the key's own format (json here).
    const formatFor = async (accept: string) => (await service.call('GET', '/Probe/Echo', { headers: { accept } })).headers.get('content-type')?.split(';')[0]
    t.equal(await formatFor('application/json;q=0.1, text/csv;q=0.9'), 'text/csv')
    t.equal(await formatFor('application/xml;q=0, application/json'), 'application/json')
    t.equal(await formatFor('text/csv;q=0'), 'application/json', 'only a refused one of ours: the key format')
    t.equal(await formatFor('text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'), 'application/xml', "a browser's Accept")
    t.equal(await formatFor('text/csv;q=0.5, */*'), 'application/json')
    t.equal(await formatFor('application/xml, text/csv'), 'application/xml', 'a tie: the first listed')
    t.equal(await formatFor('application/json;q=0, */*'), 'application/xml', 'a refused key format: */* stands for the next of ours')
    t.equal(await formatFor('application/json;q=0'), 'application/xml', 'the key format refused alone: another of ours')
    t.equal(await formatFor('*/*;q=0.1, application/json;q=0, text/csv;q=0.5'), 'text/csv')
    t.equal(await formatFor('application/*'), 'application/json', 'application/* covers json and xml: the key format')
    t.equal(await formatFor('text/*'), 'text/csv', 'text/* covers csv (and text/xml)')
    t.equal(await formatFor('text/*, text/csv;q=0'), 'application/xml', 'text/* with csv refused: XML')
    // q=0 on a wildcard refuses what it covers, unless a more specific range names it.
    t.equal(await formatFor('application/*;q=0'), 'text/csv', 'application/*;q=0 refuses json and xml')
    t.equal(await formatFor('*/*;q=0, text/csv'), 'text/csv', 'a full type beats the refusing any-type range')
    t.equal(await formatFor('application/*;q=0, application/xml;q=0.5'), 'application/xml')
    t.equal(await formatFor('image/png'), 'application/json', 'an Accept naming none of ours: the key format (README)')
    for (const accept of ['*/*;q=0', 'application/*;q=0, text/csv;q=0', 'text/*;q=0, application/json;q=0']) {
      const refused = await service.call('GET', '/Probe/Echo', { headers: { accept } })
      t.equal(`${refused.status} ${refused.text}`, '406 Error: The Accept header refuses every format of this service (json, xml, csv).', accept)
    }
    const noneOfOurs = await service.call('GET', '/Probe/Echo', { headers: { accept: 'application/json;q=0, application/xml;q=0, text/csv;q=0' } })
    t.equal(noneOfOurs.status, 406, 'all three refused: not forced on the client')
    t.equal(noneOfOurs.text, 'Error: The Accept header refuses every format of this service (json, xml, csv).')
    const twice = await service.call('GET', '/Probe/Echo?format=xml&format=csv')
    t.equal(twice.status, 400)
    t.equal(twice.text, 'Error: Query parameter format is given more than once.')
    // A route that declares no query takes none but format: a misspelt one is refused, not ignored.
    const misspelt = await service.call('GET', '/Probe/Echo?Format=xml')
    t.equal(misspelt.status, 400)
    t.equal(misspelt.text, 'Error: Format is not a known parameter.')
    for (const [method, path] of [['GET', '/Api/Read/Acl?foo=1'], ['POST', '/Api/Read/Acl?foo=1'], ['GET', '/Api/Read/Keys?page=2'], ['POST', '/account/read/user?x=']] as const) {
      const refused = await service.call(method, path, method === 'POST' ? { body: {} } : {})
      t.equal(`${refused.status} ${refused.text}`, `400 Error: ${path.split('?')[1].split('=')[0]} is not a known parameter.`, `${method} ${path}`)
    }
    t.equal((await service.call('GET', '/Api/Read/Acl?format=xml')).status, 200, 'format is every route\'s parameter')
    for (const name of ['constructor', '__proto__', 'toString']) {
      const once = await service.call('GET', `/People/Read/Missing?${name}=1`)
      t.equal(`${once.status} ${once.text}`, `400 Error: ${name} is not a known parameter.`, `?${name}= given once is not "given more than once"`)
    }
    const unknown = await service.call('GET', '/Probe/Echo?format=yaml')
    t.equal(unknown.status, 400)
    t.equal(unknown.text, 'Error: format must be one of json, xml, csv.')
    const formula = await service.call('POST', '/Probe/Body?format=csv', { body: { Name: '=HYPERLINK("http://evil")' } })
    t.equal(formula.text.split('\r\n')[1], `"'=HYPERLINK(""http://evil"")",0`, 'CSV cells that start a formula are neutralised')
    const error = await service.call('GET', '/Probe/Deep?format=xml')
    t.equal(error.headers.get('content-type'), 'text/plain; charset=utf-8', 'errors are plain text whatever the format')
  }),
)
