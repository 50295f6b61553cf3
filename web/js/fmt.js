// fmt.js - how the dashboard writes numbers and times: sizes in human
// units (powers of 1024 labelled KB/MB/GB, as WPA and `analyze` do), rates
// per hour, times in the browser's local time zone.

const UNITS = ['B', 'KB', 'MB', 'GB', 'TB'];

/** "12.3 MB" like cw_format_bytes(): 2 decimals under 10, 1 under 100. */
export function bytes(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  const neg = n < 0;
  let v = Math.abs(n);
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) { v /= 1024; u++; }
  const s = u === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${UNITS[u]}`;
  return (neg ? '-' : '') + s;
}

/** Signed size, "+10.0 MB". */
export function delta(n) {
  return (n > 0 ? '+' : '') + bytes(n);
}

/** bytes over a window of ns, per hour: "+1.20 MB/h". */
export function perHour(n, windowNs) {
  if (!windowNs) return '–';
  return delta(n * 3.6e12 / windowNs) + '/h';
}

export function count(n) {
  return n === null || n === undefined ? '–' : Number(n).toLocaleString();
}

const pad = (x, n = 2) => String(x).padStart(n, '0');

/** Local time "2026-11-29 10:15:30.250" (ms only when not whole). */
export function time(ns) {
  if (ns === null || ns === undefined) return '–';
  const d = new Date(ns / 1e6);
  const ms = d.getMilliseconds();
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}` + (ms ? `.${pad(ms, 3)}` : '');
}

/** A duration of ns as "1 h 5 min", "30 s", "250 ms". */
export function span(ns) {
  const s = ns / 1e9;
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${+s.toFixed(s < 10 ? 2 : 1)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${+(s / 3600).toFixed(1)} h`;
  return `${+(s / 86400).toFixed(1)} d`;
}

/** Value for <input type="datetime-local" step="1">. */
export function toLocalInput(ns) {
  const d = new Date(ns / 1e6);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** ns from a datetime-local value (local time), or null. */
export function fromLocalInput(v) {
  const t = new Date(v).getTime();
  return Number.isNaN(t) ? null : t * 1e6;
}

export function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) =>
    ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}
