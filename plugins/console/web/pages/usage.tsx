import { useEffect, useRef, useState } from 'preact/hooks'
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'
import type { Api } from '../api.ts'
import { ErrorText, Field, PageTitle, TableFrame, useLoad } from '../components.tsx'

interface UsageAnswer {
  KeyId: number | null
  Range: '24h' | '30d'
  Step: string
  From: string
  To: string
  Total: number
  Calls: { Time: string; Status: number; Count: number }[]
  Windows: { Window: string; Limit: number | null; Remain: number; ResetDate: string | null; TimeLeft: string | null }[]
}
interface KeyListing { Id: number; Display_Name: string }

/** Colours with at least 3:1 contrast on white, told apart by line style too. */
const statusColours: Record<string, string> = { '2xx': '#1a7f37', '4xx': '#b35900', '5xx': '#cf222e', '3xx': '#0550ae', '1xx': '#6e7781' }

/** Buckets from From to To (UTC), and per status class the calls of each bucket. */
function series(usage: UsageAnswer): { times: number[]; classes: [string, number[]][] } {
  const step = usage.Step === '1Day' ? 86_400 : 3600
  const from = Date.parse(usage.From) / 1000
  const count = usage.Range === '30d' ? 30 : 24
  const times = Array.from({ length: count }, (_, index) => from + index * step)
  const byClass = new Map<string, number[]>()
  for (const row of usage.Calls) {
    const name = `${String(row.Status)[0]}xx`
    if (!byClass.has(name)) byClass.set(name, new Array(count).fill(0))
    const index = Math.round((Date.parse(row.Time) / 1000 - from) / step)
    if (index >= 0 && index < count) byClass.get(name)![index] += row.Count
  }
  return { times, classes: [...byClass.entries()].sort(([a], [b]) => a.localeCompare(b)) }
}

/** Credits have a gauge when they refill (Limit: the refill's Amount) and do not stand above it (a top-up); else they are a count. */
function creditsGauge(window: { Limit: number | null; Remain: number }): number | null {
  return window.Limit !== null && window.Limit > 0 && window.Remain <= window.Limit ? window.Limit : null
}

function Chart({ usage }: { usage: UsageAnswer }) {
  const holder = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const element = holder.current
    if (!element) return
    const { times, classes } = series(usage)
    const widthNow = () => Math.max(280, Math.min(900, element.clientWidth || 600))
    const plot = new uPlot({
      width: widthNow(),
      height: 260,
      scales: { x: { time: true } },
      // The buckets are UTC hours and days (as the table below says): label them in UTC, not in
      // the browser's zone, which would put today's calls under yesterday west of Greenwich.
      tzDate: (seconds) => uPlot.tzDate(new Date(seconds * 1000), 'Etc/UTC'),
      axes: [{ stroke: '#24292f' }, { stroke: '#24292f', label: 'calls' }],
      series: [{}, ...classes.map(([name], index) => ({ label: name, stroke: statusColours[name] ?? '#24292f', width: 2, dash: index % 2 ? [6, 3] : undefined, points: { show: true } }))],
    }, [times, ...classes.map(([, values]) => values)], element)
    // The chart follows its box (a window narrowed to a phone's width): never wider than the page, so nothing scrolls sideways.
    const resized = new ResizeObserver(() => {
      if (plot.width !== widthNow()) plot.setSize({ width: widthNow(), height: 260 })
    })
    resized.observe(element)
    return () => {
      resized.disconnect()
      plot.destroy()
    }
  }, [usage])
  return <div ref={holder} class="chart" role="img" aria-label={`Calls per ${usage.Step === '1Day' ? 'day' : 'hour'} by status, ${usage.Total} in all`} />
}

/**
 * A window's gauge: what was used of its limit. Credits (`left`) are a balance, not a count
 * of calls: a key that starts with fewer credits than its refill Amount has used nothing of
 * the difference, so their gauge shows what is left against the limit.
 */
function Gauge({ label, limit, remain, detail, left = false }: { label: string; limit: number | null; remain: number; detail: string; left?: boolean }) {
  const used = limit === null ? null : Math.max(0, limit - remain)
  const text = limit === null ? `${remain} left` : left ? `${remain} left of ${limit}` : `${used} of ${limit} used, ${remain} left`
  return (
    <div class="gauge">
      <span class="gauge-label">{label}</span>
      {limit === null ? null : left
        ? <meter min={0} max={limit} value={remain} low={limit * 0.1} high={limit * 0.3} optimum={limit} aria-label={`${label}: ${text}`} />
        : <meter min={0} max={limit} value={used!} low={limit * 0.7} high={limit * 0.9} optimum={0} aria-label={`${label}: ${text}`} />}
      <span>{text}{detail ? `; ${detail}` : ''}</span>
    </div>
  )
}

/** Usage: calls per hour (24 h) or day (30 days) and status, and the limits as gauges. */
export function UsagePage({ api }: { api: Api }) {
  const [keyId, setKeyId] = useState<string>('')
  const [range, setRange] = useState<'24h' | '30d'>('24h')
  const keys = useLoad(() => api.may('GET', '/Api/Read/Keys') ? api.call<KeyListing[]>('GET', '/Api/Read/Keys') : Promise.resolve([]))
  const usage = useLoad(() => api.call<UsageAnswer>('POST', '/Api/Read/Usage', keyId === '' ? { Range: range } : { KeyId: Number(keyId), Range: range }), [keyId, range])
  const data = usage.data
  return (
    <>
      <PageTitle>Usage</PageTitle>
      <div class="toolbar">
        <Field label="Whose calls">
          <select name="key" value={keyId} onChange={(event) => setKeyId(event.currentTarget.value)}>
            <option value="">The whole tenant</option>
            {(keys.data ?? []).map((key) => <option key={key.Id} value={String(key.Id)}>{key.Display_Name}</option>)}
          </select>
        </Field>
        <Field label="Period">
          <select name="range" value={range} onChange={(event) => setRange(event.currentTarget.value as '24h' | '30d')}>
            <option value="24h">Last 24 hours, per hour</option>
            <option value="30d">Last 30 days, per day</option>
          </select>
        </Field>
        <button type="button" class="secondary" onClick={usage.reload}>Refresh</button>
      </div>
      <ErrorText error={usage.error ?? keys.error} />
      {data && (
        <>
          <section aria-labelledby="calls-title">
            <h2 id="calls-title">Calls: <span data-testid="usage-total">{data.Total}</span></h2>
            <p>From {data.From} to {data.To} (UTC buckets).</p>
            <Chart usage={data} />
            <TableFrame label="Calls by status">
              <caption>Calls per {data.Step === '1Day' ? 'day' : 'hour'} and status</caption>
              <thead><tr><th scope="col">From</th><th scope="col">Status</th><th scope="col">Calls</th></tr></thead>
              <tbody>{data.Calls.map((row) => <tr key={`${row.Time} ${row.Status}`}><td>{row.Time}</td><td>{row.Status}</td><td>{row.Count}</td></tr>)}</tbody>
            </TableFrame>
          </section>
          <section aria-labelledby="limits-title">
            <h2 id="limits-title">Limits now</h2>
            {data.Windows.length === 0 && <p>No rate limit, tenant quota or credits apply.</p>}
            {data.Windows.map((window) => (
              <Gauge key={window.Window} label={window.Window === 'Credits' ? 'Credits' : `Window ${window.Window}`}
                limit={window.Window === 'Credits' ? creditsGauge(window) : window.Limit} remain={window.Remain} left={window.Window === 'Credits'}
                detail={window.TimeLeft ? `resets in ${window.TimeLeft}` : ''} />
            ))}
          </section>
        </>
      )}
    </>
  )
}
