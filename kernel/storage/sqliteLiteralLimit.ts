import { LimitNode, ValueNode, type KyselyPlugin, type PluginTransformQueryArgs, type PluginTransformResultArgs, type QueryResult, type RootOperationNode, type UnknownRow } from 'kysely'

/**
 * Writes a query's LIMIT into its SQL text as a number instead of binding it (SQLite only).
 *
 * SQLite (3.53 with STAT4, as better-sqlite3 builds it) reads a bound LIMIT's value when it
 * plans the statement, so it marks the statement to be planned again whenever that
 * parameter is bound; better-sqlite3 binds every parameter on every run, so every run of a
 * statement with `limit ?` was compiled again, though it came from the statement cache
 * (database.ts). Alone, on 100,000 people: a people page 134 µs with `limit ?` and 104 µs
 * with `limit 101`, a page after a key 200 against 115 µs, a one-row `limit ?` 28 against
 * 9 µs. A whole number is safe to write into the text; anything else
 * stays bound. Each distinct limit is a statement of its own in the cache (bounded there).
 * Only the outer query's LIMIT: OFFSET is not affected (a bound OFFSET is not re-planned).
 */
export const sqliteLiteralLimit: KyselyPlugin = {
  transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
    if (node.kind !== 'SelectQueryNode' || node.limit === undefined) return node
    const limit = node.limit.limit
    if (!ValueNode.is(limit) || limit.immediate || !Number.isSafeInteger(limit.value) || (limit.value as number) < 0) return node
    return { ...node, limit: LimitNode.create(ValueNode.createImmediate(limit.value)) }
  },
  async transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return result
  },
}
