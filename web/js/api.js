// api.js - the REST API (see /api/openapi.json). Times go out as integer
// Unix ns strings; JSON numbers above 2^53 come back rounded to a few
// hundred ns, which no figure on screen depends on.

export class ApiError extends Error {}

/** ns (a Number) as an exact integer string, rounded to the microsecond. */
export function nsParam(ns) {
  return (BigInt(Math.round(ns / 1000)) * 1000n).toString();
}

export async function get(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    q.set(k, typeof v === 'number' && (k === 'from' || k === 'to' || k === 't1' || k === 't2') ? nsParam(v) : String(v));
  }
  const url = path + (q.toString() ? `?${q}` : '');
  const res = await fetch(url, { headers: { Accept: 'application/json' } });
  let body;
  try { body = await res.json(); } catch { body = null; }
  if (!res.ok) throw new ApiError((body && body.error) || `${res.status} ${res.statusText}`);
  return body;
}
