/**
 * A small plugin as a team would write it in its own folder: one table with a sealed
 * column it declares in `sealedColumns` (master-key rotation tests).
 */
import { portableTable, type Plugin } from '../../kernel/sdk.ts'

export const vaultPlugin: Plugin = {
  name: 'vault',
  migrations: {
    '0001-vault': {
      async up(db, dialect) {
        await portableTable(dialect, db.schema.createTable('vault_items'))
          .addColumn('id', 'bigint', (c) => c.primaryKey())
          .addColumn('token_enc', 'varchar(512)')
          .execute()
      },
    },
  },
  sealedColumns: [{ table: 'vault_items', idColumn: 'id', column: 'token_enc', contextPrefix: 'vault:' }],
  setup: () => [],
}
