import { createHash } from 'node:crypto'
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { badRequest, isUniqueViolation } from '../../kernel/sdk.ts'
import type { PeopleDb, Scope } from './scope.ts'

/**
 * Uploaded photos (D13 OnePhoto): a base64 image of at most 5 MiB, accepted only when
 * its own bytes say JPEG, PNG or WebP (a declared type or file name proves nothing),
 * stored in the `people_photos` table, which every process shares (D16). The person's
 * Photo is then its location, e.g. `photos/1/0/42-3f9a0c1b2d4e5f60.jpg` (before 0.3.2
 * the path of a file under the data folder; such files are still served and removed).
 */

export const maxPhotoBytes = 5 * 1024 * 1024
/** Base64 of maxPhotoBytes; longer text cannot decode to an acceptable image. */
const maxBase64Length = Math.ceil(maxPhotoBytes / 3) * 4

export type ImageType = 'jpeg' | 'png' | 'webp'

const extensions: Record<ImageType, string> = { jpeg: 'jpg', png: 'png', webp: 'webp' }

/** Names a client may give in `Type`, each meaning one image type. */
const declaredTypes: Record<string, ImageType> = {
  jpeg: 'jpeg', jpg: 'jpeg', 'image/jpeg': 'jpeg',
  png: 'png', 'image/png': 'png',
  webp: 'webp', 'image/webp': 'webp',
}

const pngSignature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

/** The image type by magic bytes, or null when the bytes are none of ours. */
export function detectImageType(bytes: Buffer): ImageType | null {
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'jpeg'
  if (bytes.length >= 8 && bytes.subarray(0, 8).equals(pngSignature)) return 'png'
  if (bytes.length >= 12 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return 'webp'
  return null
}

const base64Text = /^[A-Za-z0-9+/_-]*={0,2}$/
const dataUrlPrefix = /^data:[\w.+/-]*;base64,/i

/** Decodes and checks an uploaded image; 400 with the reason for anything else. */
export function decodeImage(image: string, declaredType: string | undefined): { bytes: Buffer; type: ImageType } {
  // Accept a data: URL as browsers produce it, and line-wrapped (MIME) base64.
  const text = image.replace(dataUrlPrefix, '').replace(/\s+/g, '')
  if (text.length > maxBase64Length + 4) throw badRequest(`Image is larger than ${maxPhotoBytes} bytes (5 MiB).`)
  if (text.length === 0 || !base64Text.test(text)) throw badRequest('Image must be base64 text.')
  const bytes = Buffer.from(text, 'base64')
  if (bytes.length > maxPhotoBytes) throw badRequest(`Image is larger than ${maxPhotoBytes} bytes (5 MiB).`)
  const type = detectImageType(bytes)
  if (type === null) throw badRequest('Image is not a JPEG, PNG or WebP image.')
  if (declaredType !== undefined) {
    // Own keys only: 'constructor' is not a type.
    const declared = Object.hasOwn(declaredTypes, declaredType.toLowerCase()) ? declaredTypes[declaredType.toLowerCase()] : undefined
    if (declared === undefined) throw badRequest(`Type must be one of jpeg, png, webp, got '${declaredType}'.`)
    if (declared !== type) throw badRequest(`Type says ${declared} but the image is ${type}.`)
  }
  return { bytes, type }
}

/** The first part of every stored photo's location (and the data folder's subfolder of the files of earlier versions). */
export const photosFolder = 'photos'

/**
 * Stores the image and returns its location. The name carries a hash of the content,
 * so a new upload never replaces the image an older (possibly cached) answer names;
 * the same image uploaded again for the same person is the row already there.
 */
export async function storePhoto(db: PeopleDb, scope: Scope, personId: number, bytes: Buffer, type: ImageType, now: number): Promise<string> {
  const hash = createHash('sha256').update(bytes).digest('hex').slice(0, 16)
  const location = [photosFolder, String(scope.parent), String(scope.custno), `${personId}-${hash}.${extensions[type]}`].join('/')
  await db.insertInto('people_photos').values({ location, image: bytes, created: now }).execute()
    .catch((error) => { if (!isUniqueViolation(error)) throw error })
  return location
}

/**
 * The location of this person's own uploaded image that a change of Photo from `before`
 * to `after` replaces, or null. Only the exact name storePhoto gives this person's
 * images counts: a client can name any location (a URL, another path, another person's
 * stored image), and no such name may lead to a deletion. The Custno part is any
 * customer's, since a person moved between customers keeps the image stored before.
 */
export function replacedStoredPhoto(before: string | null, after: string | null | undefined, owner: { parent: number; personId: number }): string | null {
  if (!before || after === undefined || after === before) return null
  const own = new RegExp(`^${photosFolder}/${owner.parent}/\\d+/${owner.personId}-[0-9a-f]{16}\\.(?:jpg|png|webp)$`)
  return own.test(before) ? before : null
}

/** Deletes replaced images' rows, in the transaction that changes their people's Photo. */
export async function forgetStoredPhotos(trx: PeopleDb, locations: readonly string[]): Promise<void> {
  for (let at = 0; at < locations.length; at += 1000) {
    await trx.deleteFrom('people_photos').where('location', 'in', locations.slice(at, at + 1000)).execute()
  }
}

/** Removes the files that versions before 0.3.2 stored for replaced images (after the change is committed; most have none). */
export async function removePhotoFiles(dataDir: string, locations: readonly string[]): Promise<void> {
  for (const location of locations) await rm(join(dataDir, ...location.split('/')), { force: true }).catch(() => undefined)
}
