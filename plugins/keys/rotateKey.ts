import { httpDate, type Call, type KernelServices } from '../../kernel/sdk.ts'
import type { RotateKeyBody } from './schemas.ts'
import { keyNotFound, namedKeyId } from './editKey.ts'
import { keyAnswer, type KeyAnswer } from './keyAnswer.ts'

export interface RotatedKeyAnswer extends KeyAnswer {
  /** Until this HTTP-date a call signed with the secret before the rotation still passes. */
  OldSecretEnds: string
}

/**
 * POST /Api/Rotate/Key (issue 16 item 1): a new secret for a key the caller created,
 * the old one still accepted for OldSecretValidFor seconds so the key's clients can
 * switch without downtime. The call log's `Secret` shows who still signs with the old one.
 */
export async function rotateKey(kernel: KernelServices, call: Call<RotateKeyBody>): Promise<RotatedKeyAnswer> {
  const { body, caller } = call
  const keyId = await namedKeyId(kernel, body)
  const rotated = await kernel.keys.rotate(keyId, caller.id, body.OldSecretValidFor * 1000, { requestId: call.requestId })
  if (!rotated) throw keyNotFound()
  const { record, secret, oldSecretEnds } = rotated
  return { ...keyAnswer(keyId, record.api_key, secret, record.display_name, record.max_hits ?? null), OldSecretEnds: httpDate(oldSecretEnds) }
}
