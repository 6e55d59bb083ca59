/** Scrapes a metrics listener and parses it with a Prometheus text-format parser from npm. */
// @ts-expect-error parse-prometheus-text-format ships no types
import parsePrometheusTextFormat from 'parse-prometheus-text-format'

export interface MetricFamily {
  name: string
  help: string
  type: string
  metrics: { value?: string; labels?: Record<string, string>; buckets?: Record<string, string>; count?: string; sum?: string }[]
}

/**
 * The parser merges the label sets of a labelled histogram into one; tests read a
 * histogram's `_count` lines from `text` instead.
 */
export async function scrape(url: string): Promise<{ status: number; contentType: string | null; families: Map<string, MetricFamily>; text: string }> {
  const response = await fetch(url)
  const text = await response.text()
  const families = new Map<string, MetricFamily>()
  if (response.status === 200) for (const family of parsePrometheusTextFormat(text) as MetricFamily[]) families.set(family.name, family)
  return { status: response.status, contentType: response.headers.get('content-type'), families, text }
}

/** The value of one sample whose labels include `labels` (0 when absent). */
export function sample(families: Map<string, MetricFamily>, name: string, labels: Record<string, string> = {}): number {
  const family = families.get(name)
  if (!family) return 0
  let total = 0
  for (const metric of family.metrics) {
    if (Object.entries(labels).every(([label, value]) => metric.labels?.[label] === value)) total += Number(metric.value ?? metric.count ?? 0)
  }
  return total
}
