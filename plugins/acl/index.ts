import { defineRoute, recordListSchema, type Call, type CachePolicy, type Plugin } from '../../kernel/sdk.ts'

/**
 * The ACL plugin: GET /Api/Read/Acl (interface 4.3), the entries that apply to the
 * caller, and POST /Api/Read/Acl (D14), the same answer for clients that only POST.
 * ACL paths carry no method, so the one entry covers both. Cached an hour per key;
 * both routes cache in the key's partition, which the kernel drops when the key is
 * edited, so an edit shows on the very next call of either.
 */
const aclPath = '/Api/Read/Acl'

function aclAnswer(call: Call<unknown, unknown>) {
  return call.caller.acl.map((entry) => ({
    Path: entry.path,
    Display_Name: entry.displayName,
    Id: entry.id,
    Is_Public: entry.isPublic,
    Require_Https: entry.requireHttps,
    Require_Hash: entry.requireHash,
  }))
}

/** The answer (Route.answer): the entries in the order they apply, the first match winning. */
const aclAnswerSchema = recordListSchema({
  Path: { type: 'string', description: 'An ACL path; `*` as the last segment covers that level and every deeper one.' },
  Display_Name: { type: 'string' },
  Id: { type: 'integer' },
  Is_Public: { type: 'integer', description: '1: callable without credentials.' },
  Require_Https: { type: 'integer', description: '1: refused over plain HTTP.' },
  Require_Hash: { type: 'integer', description: 'The HMAC hash the entry requires: 1 md5, 2 sha1, 3 sha256, 4 sha384, 5 sha512; 0 = any.' },
})

/** The POST takes no parameters: an empty JSON object, or no body at all. */
const emptyBody = { type: 'object', additionalProperties: false, properties: {} }

const aclPlugin: Plugin = {
  name: 'acl',
  defaultGroups: [
    { name: 'Access list reader', paths: [{ path: aclPath, displayName: 'Read the ACL entries that apply to your key' }] },
  ],
  setup(kernel) {
    const cache: CachePolicy<any, any> = { ttlSeconds: 3600, partition: (call) => kernel.cache.keyPartition(call.caller.id) }
    const xml = { root: 'Acl', item: 'Entry' }
    return [
      defineRoute({ method: 'GET', path: aclPath, cache, xml, answer: aclAnswerSchema, handler: aclAnswer }),
      defineRoute<Record<string, never>>({ method: 'POST', path: aclPath, body: emptyBody, cache, xml, answer: aclAnswerSchema, handler: aclAnswer }),
    ]
  },
}

export default aclPlugin
