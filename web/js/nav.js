// nav.js - what the pages share: the hash's path and query, and the
// service's health with the data's time range.

import { get } from './api.js';

export function parseHash() {
  const h = location.hash.slice(1) || '/';
  const [path, qs] = h.split('?');
  return { parts: path.split('/').filter(Boolean), params: new URLSearchParams(qs || '') };
}

/** Replaces the hash's query without re-rendering the page. */
export function setParams(params) {
  const { parts } = parseHash();
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  history.replaceState(null, '', `#/${parts.join('/')}${q.toString() ? '?' + q : ''}`);
}

let cached = null;

/** /api/health, and the data's time range: end = the API's "now" (for a
 * replay, the end of the data: where tracking ended once its input has
 * ended; the same while the live source is down, so the pages show the
 * stored data rather than an empty last hour). Calls within a second
 * share one request, unless `fresh` asks for a new one (the Refresh
 * button: what was stored up to the click). */
export function health(fresh = false) {
  const now = Date.now();
  if (!fresh && cached && now - cached.at < 1000) return cached.p;
  const p = get('/api/health').then((h) => {
    const dataEnd = h.data_end_ns != null ? h.data_end_ns : h.last_bucket_end_ns;
    const sourceDown = h.source_state != null && h.source_state.up === false;
    h.end_ns = (h.data_clock || sourceDown) && dataEnd != null ? dataEnd : h.now_ns;
    return h;
  });
  p.catch(() => { cached = null; });
  cached = { at: now, p };
  return p;
}
