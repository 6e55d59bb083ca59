import type { AnswerHeader } from '../plugin.ts'

/**
 * The headers of a paged listing's answer, for `Route.answerHeaders` (D12: a CSV listing is
 * its records alone, so its Total and Page travel in headers).
 * - `csvOnly`: sent with CSV answers only (json and xml carry Total and Page in the body);
 * - `page`: X-Page is sent too (default true);
 * - `next`: the listing also pages by cursor and sends X-Next.
 */
export function pagedListHeaders(options: { csvOnly?: boolean; page?: boolean; next?: boolean } = {}): Readonly<Record<string, AnswerHeader>> {
  const when = options.csvOnly ? ' Sent with CSV answers.' : ''
  return {
    'X-Total-Count': { description: `The answer's Total: how many records the listing holds, whatever the page.${when}`, schema: { type: 'string', pattern: '^[0-9]+$' } },
    ...(options.page === false ? {} : { 'X-Page': { description: `The answer's Page.${when}`, schema: { type: 'string' } } }),
    ...(options.next ? { 'X-Next': { description: `The answer's Next: the cursor of the page after this one (\`after=\`); absent on the last page.${when}`, schema: { type: 'string' } } } : {}),
  }
}
