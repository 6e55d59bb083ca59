/** What Vite puts into the app at build time. */
interface ImportMeta {
  readonly env: { readonly BASE_URL: string }
}

/** Stylesheets imported for their side effect; Vite bundles them. */
declare module '*.css'
