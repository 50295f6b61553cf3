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

/** A state-changing request (POST, DELETE) with the token and a JSON body. */
export async function send(method, path, body, token) {
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let out;
  try { out = await res.json(); } catch { out = null; }
  if (!res.ok) {
    const e = new ApiError((out && out.error) || `${res.status} ${res.statusText}`);
    e.status = res.status;
    throw e;
  }
  return out;
}

/** send() with the service's token, asked once per tab (the prompt says
 * what for: `why`); a 401 forgets it so the next try asks again. */
export async function sendAuth(method, path, body, why) {
  let t = sessionStorage.getItem('cwToken');
  if (!t) {
    t = window.prompt(`Token of the commitwatch service (needed ${why}):`) || '';
    if (t) sessionStorage.setItem('cwToken', t);
  }
  try {
    return await send(method, path, body, t);
  } catch (e) {
    if (e.status === 401) sessionStorage.removeItem('cwToken');
    throw e;
  }
}
