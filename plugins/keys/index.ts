import type { Plugin } from '../../kernel/plugin.ts'

/** Placeholder until the keys plugin lands; it mounts no routes yet. */
const plugin: Plugin = {
  name: 'keys',
  setup: () => [],
}

export default plugin
