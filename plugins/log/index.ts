import type { Plugin } from '../../kernel/plugin.ts'

/** Placeholder until the log plugin lands; it mounts no routes yet. */
const plugin: Plugin = {
  name: 'log',
  setup: () => [],
}

export default plugin
