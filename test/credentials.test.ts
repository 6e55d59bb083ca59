import t from 'tap'
import { connect } from 'node:net'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'

/** Sends raw request bytes, so repeated header lines reach the server exactly as written. */
function rawRequest(port: number, lines: string[]): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let data = ''
    socket.on('data', (chunk) => (data += chunk))
    socket.on('end', () => {
      const [head, ...rest] = data.split('\r\n\r\n')
      resolve({ status: Number(head.split(' ')[1]), text: rest.join('\r\n\r\n') })
    })
    socket.on('error', reject)
    socket.write([...lines, 'Host: 127.0.0.1', 'Connection: close', '', ''].join('\r\n'))
  })
}

function credentialsFor(service: Service, path = '/Api/Read/Acl') {
  return signedHeaders(service.admin, 'GET', path)
}

t.test('credentials in every form of D2', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const path = '/Api/Read/Acl'
    const url = `${service.base}${path}`
    const item = credentialsFor(service)

    await t.test('plain x-api* headers', async (t) => {
      t.equal((await fetch(url, { headers: item })).status, 200)
    })

    await t.test('several Authorization lines, over a raw socket', async (t) => {
      for (const separator of [' ', '   ', '=', ':', ': ']) {
        const answer = await rawRequest(service.port, [
          `GET /v1.0${path} HTTP/1.1`,
          `Authorization: x-apikey${separator}${item['x-apikey']}`,
          `Authorization: x-apidate${separator}${item['x-apidate']}`,
          `Authorization: X-ApiHmac${separator}${item['x-apihmac']}`,
        ])
        t.equal(answer.status, 200, `separator '${separator}'`)
      }
    })

    await t.test('one folded Authorization line (what fetch makes of appended headers)', async (t) => {
      const headers = new Headers()
      headers.append('Authorization', `x-apikey ${item['x-apikey']}`)
      headers.append('Authorization', `x-apidate ${item['x-apidate']}`)
      headers.append('Authorization', `x-apihmac ${item['x-apihmac']}`)
      t.equal((await fetch(url, { headers })).status, 200)
      const folded = `x-apikey ${item['x-apikey']}, x-apidate ${item['x-apidate']}, x-apihmac ${item['x-apihmac']}`
      t.equal((await fetch(url, { headers: { authorization: folded } })).status, 200)
    })

    await t.test('a mix of forms', async (t) => {
      const response = await fetch(url, { headers: { authorization: `x-apikey=${item['x-apikey']}`, 'x-apidate': item['x-apidate'], 'x-apihmac': item['x-apihmac'] } })
      t.equal(response.status, 200)
    })

    await t.test('an item given twice is refused, whichever copy is right', async (t) => {
      const cases: [string, string[]][] = [
        ['two Authorization lines with x-apikey', [`Authorization: x-apikey ${item['x-apikey']}`, `Authorization: x-apikey kg_forged`]],
        ['forged copy first', [`Authorization: x-apikey kg_forged`, `Authorization: x-apikey ${item['x-apikey']}`]],
        ['header and Authorization line', [`x-apikey: ${item['x-apikey']}`, `Authorization: x-apikey ${item['x-apikey']}`]],
        ['two plain headers', [`x-apikey: ${item['x-apikey']}`, `x-apikey: ${item['x-apikey']}`]],
      ]
      for (const [name, keyLines] of cases) {
        const answer = await rawRequest(service.port, [
          `GET /v1.0${path} HTTP/1.1`,
          ...keyLines,
          `x-apidate: ${item['x-apidate']}`,
          `x-apihmac: ${item['x-apihmac']}`,
        ])
        t.equal(answer.status, 401, name)
        t.match(answer.text, /^Error: Credential x-apikey was given more than once\.$/, name)
      }
      const twoDates = await rawRequest(service.port, [
        `GET /v1.0${path} HTTP/1.1`,
        `x-apikey: ${item['x-apikey']}`,
        `x-apidate: ${item['x-apidate']}`,
        `x-apidate: ${item['x-apidate']}`,
        `x-apihmac: ${item['x-apihmac']}`,
      ])
      t.equal(twoDates.status, 401)
      t.equal(twoDates.text, 'Error: Credential x-apidate was given more than once.', 'two plain x-apidate lines (joined by node with ", ")')
    })

    await t.test('missing items', async (t) => {
      const none = await fetch(url)
      t.equal(none.status, 401)
      t.equal(await none.text(), 'Error: Missing credentials: x-apikey, x-apidate and x-apihmac are required.')
      t.equal(none.headers.get('content-type'), 'text/plain; charset=utf-8')
      t.equal(none.headers.get('x-requestid'), null, 'no request id before authentication')
      const noKey = await fetch(url, { headers: { 'x-apidate': item['x-apidate'], 'x-apihmac': item['x-apihmac'] } })
      t.equal(noKey.status, 401)
      const noHmac = await fetch(url, { headers: { 'x-apikey': item['x-apikey'], 'x-apidate': item['x-apidate'] } })
      t.equal(await noHmac.text(), 'Error: Missing credential x-apihmac.')
      const unknown = await fetch(url, { headers: { ...item, 'x-apikey': 'kg_nobody' } })
      t.equal(unknown.status, 401)
      t.equal(await unknown.text(), 'Error: Unknown or inactive API key.')
      const otherScheme = await fetch(url, { headers: { ...item, authorization: 'Bearer something' } })
      t.equal(otherScheme.status, 200, 'an Authorization line of another scheme is ignored')
      const malformed = await fetch(url, { headers: { ...item, authorization: 'x-apikeyfoo' } })
      t.equal(malformed.status, 401, 'a malformed x-api item is refused')
    })
  }),
)
