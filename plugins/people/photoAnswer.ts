import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { etagMatches, notFound, RawAnswer, type Call } from '../../kernel/sdk.ts'
import { photosFolder } from './photos.ts'
import { inScope, type PeopleDb, type Scope } from './scope.ts'

/**
 * GET /People/Read/Photo?Id=N (D14): the image OnePhoto stored, with its type, an ETag
 * and `Cache-Control: private`; a matching If-None-Match answers 304 without reading
 * the file. A person out of scope and a person without a stored image get the same
 * 404, so the answer never tells whether another tenant's person exists.
 */

const contentTypes: Record<string, string> = { jpg: 'image/jpeg', png: 'image/png', webp: 'image/webp' }

/** `photos/<parent>/<custno>/<id>-<hash16>.<ext>`: the name carries a hash of the bytes, so it is the ETag. */
const storedName = /^(\d+)-([0-9a-f]{16})\.(jpg|png|webp)$/

export async function photoAnswer(db: PeopleDb, dataDir: string, scope: Scope, id: number, call: Call<any, any>): Promise<RawAnswer> {
  const missing = () => notFound(`No stored image for person ${id}.`)
  const row = await db.selectFrom('people').select('photo').where('id', '=', id).where(inScope(scope)).executeTakeFirst()
  const location = row?.photo
  if (!location || !location.startsWith(`${photosFolder}/`) || location.includes('..')) throw missing()
  const name = storedName.exec(location.slice(location.lastIndexOf('/') + 1))
  if (name === null || Number(name[1]) !== id) throw missing()
  const etag = `"${name[2]}"`
  const contentType = contentTypes[name[3]]
  call.setHeader('ETag', etag)
  call.setHeader('Cache-Control', 'private')
  if (etagMatches(call.headers['if-none-match'], etag)) return new RawAnswer(contentType, Buffer.alloc(0), 304)
  const stored = await db.selectFrom('people_photos').select('image').where('location', '=', location).executeTakeFirst()
  let bytes: Buffer
  if (stored) bytes = stored.image
  else {
    // Stored by a version before 0.3.2, as a file in the data folder.
    try {
      bytes = await readFile(join(dataDir, ...location.split('/')))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw missing()
      throw error
    }
  }
  call.setHeader('X-Content-Type-Options', 'nosniff')
  return new RawAnswer(contentType, bytes)
}
