/**
 * A plugin that cannot be loaded or served as declared: not found, misnamed, a route or
 * default group the kernel cannot take. Like a bad setting, it is the operator's (or the
 * plugin author's) to fix, so the start stops with one plain line naming the plugin
 * (`keygate: invalid setting plugins: ...`), not a stack trace.
 */
export class PluginError extends Error {
  override name = 'PluginError'
}
