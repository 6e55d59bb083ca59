import type { Plugin } from '../../kernel/plugin.ts'

/** Placeholder until the people plugin lands; it mounts no routes yet. */
const plugin: Plugin = {
  name: 'people',
  setup: () => [],
}

export default plugin
