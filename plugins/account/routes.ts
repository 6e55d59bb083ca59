import { defineRoute, notFound, type GroupRecord, type KernelServices, type Route } from '../../kernel/sdk.ts'
import { groupsAnswerSchema, licenseAnswer, licenseAnswerSchema, playersAnswerSchema, userAnswer, userAnswerSchema, type LicenseAnswer } from './answers.ts'

/** The POST reads take no parameters: an empty body or `{}`. */
const emptyBody = { type: 'object', additionalProperties: false, properties: {} } as const

/** Declared in D14's spelling; paths match case-insensitively anyway (D1). */
export function accountRoutes(kernel: KernelServices): Route[] {
  return [
    defineRoute<Record<string, never>>({
      method: 'POST',
      path: '/account/read/user',
      summary: 'Your own key, never its secret',
      body: emptyBody,
      answer: userAnswerSchema,
      xml: { root: 'User' },
      async handler(call) {
        const id = call.caller.id
        const [row, groups] = await Promise.all([kernel.keys.find(id), kernel.keys.groupsOf(id)])
        // Only when the key was removed between authentication and now.
        if (row === undefined) throw notFound('Key not found.')
        return userAnswer(row, groups)
      },
    }),
    defineRoute<Record<string, never>>({
      method: 'POST',
      path: '/account/read/group',
      summary: 'Your groups and their paths',
      body: emptyBody,
      answer: groupsAnswerSchema,
      xml: { root: 'Groups', item: 'Group' },
      // One CSV row per group; its paths in one cell, comma-separated.
      csv: (groups: GroupRecord[]) => groups.map((group) => ({ ...group, Paths: group.Paths.join(',') })),
      handler: (call) => kernel.keys.groupsOf(call.caller.id),
    }),
    defineRoute({
      method: 'GET',
      path: '/account/read/license',
      summary: "Your tenant's maxima and what it uses",
      answer: licenseAnswerSchema,
      xml: { root: 'License' },
      // One CSV row; the plugin names in one cell, comma-separated.
      csv: (license: LicenseAnswer) => [{ ...license, Plugins: license.Plugins.join(',') }],
      async handler(call) {
        // The maxima that bound the caller (its own or its parent's), each with its count.
        const license = await kernel.tenants.license({ parent: call.caller.parent, custno: call.caller.custno })
        return licenseAnswer(call.caller, kernel.plugins, license)
      },
    }),
    defineRoute<Record<string, never>>({
      method: 'POST',
      path: '/account/read/player',
      summary: "Your tenant's display players",
      body: emptyBody,
      answer: playersAnswerSchema,
      xml: { root: 'Players', item: 'Player' },
      csvColumns: ['Id', 'Name', 'DispGroup', 'Location', 'Last_Seen'],
      handler: (call) => kernel.tenants.players({ parent: call.caller.parent, custno: call.caller.custno }),
    }),
  ]
}
