import { defineRoute, pagedListHeaders, type KernelServices, type Route } from '../../kernel/sdk.ts'
import { auditAnswerSchema, createKeyBodySchema, editKeyBodySchema, groupsAnswerSchema, keyAnswerSchema, keysAnswerSchema, readGroupsBodySchema, rotateKeyBodySchema, rotatedKeyAnswerSchema, type CreateKeyBody, type EditKeyBody, type RotateKeyBody } from './schemas.ts'
import { rotateKey } from './rotateKey.ts'
import { readAuditTrail } from './readAudit.ts'
import { readAuditBodySchema, type ReadAuditBody } from './schemas.ts'
import { createKey } from './createKey.ts'
import { editKey } from './editKey.ts'
import { groupRows, keyListingColumns, keysWithGroupItems, readGroups, readKeys } from './listings.ts'

/**
 * The routes of the keys plugin. None is cached: create and edit change state, and the
 * listings must show a create or edit on the very next call.
 */
export function keyRoutes(kernel: KernelServices): Route[] {
  return [
    defineRoute<CreateKeyBody>({
      method: 'POST',
      path: '/Api/Create/Key',
      dayCode: true,
      body: createKeyBodySchema,
      answer: keyAnswerSchema,
      xml: { root: 'Key' },
      handler: (call) => createKey(kernel, call),
    }),
    defineRoute<EditKeyBody>({
      method: 'POST',
      path: '/Api/Edit/Key',
      dayCode: true,
      body: editKeyBodySchema,
      // KeyId or ApiKey, which no schema keyword says with our error texts.
      bodyRequired: true,
      answer: keyAnswerSchema,
      xml: { root: 'Key' },
      handler: (call) => editKey(kernel, call),
    }),
    defineRoute<RotateKeyBody>({
      method: 'POST',
      path: '/Api/Rotate/Key',
      dayCode: true,
      body: rotateKeyBodySchema,
      answer: rotatedKeyAnswerSchema,
      xml: { root: 'Key' },
      handler: (call) => rotateKey(kernel, call),
    }),
    defineRoute<ReadAuditBody>({
      method: 'POST',
      path: '/Api/Read/Audit',
      body: readAuditBodySchema,
      answer: auditAnswerSchema,
      xml: { root: 'Audit', item: 'Record', list: 'Records' },
      csvColumns: ['Id', 'At', 'Who', 'Parent', 'Custno', 'Action', 'KeyId', 'Before', 'After', 'RequestId'],
      // CSV is one row per record; the totals go to headers as for other paged lists (D12).
      answerHeaders: pagedListHeaders({ csvOnly: true }),
      csv: (result: Awaited<ReturnType<typeof readAuditTrail>>, call) => {
        call.setHeader('X-Total-Count', String(result.Total))
        call.setHeader('X-Page', String(result.Page))
        return result.Records
      },
      handler: (call) => readAuditTrail(kernel, call),
    }),
    defineRoute({
      method: 'GET',
      path: '/Api/Read/Groups',
      answer: groupsAnswerSchema,
      xml: { root: 'Groups', item: 'Group' },
      csv: groupRows,
      handler: (call) => readGroups(kernel, call),
    }),
    defineRoute<Record<string, never>>({
      method: 'POST',
      path: '/Api/Read/Groups',
      body: readGroupsBodySchema,
      answer: groupsAnswerSchema,
      xml: { root: 'Groups', item: 'Group' },
      csv: groupRows,
      handler: (call) => readGroups(kernel, call),
    }),
    defineRoute({
      method: 'GET',
      path: '/Api/Read/Keys',
      answer: keysAnswerSchema,
      xml: { root: 'Keys', item: 'Key' },
      csvColumns: keyListingColumns,
      xmlValue: keysWithGroupItems,
      handler: (call) => readKeys(kernel, call),
    }),
  ]
}
