// diff.js - UMDH-style diff of one process between two times: per stack,
// bytes delta (new - old), count delta, new bytes and count, like
// `umdh -d` prints "+ BYTES_DELTA ( NEW - OLD) NEW_COUNT allocs BackTrace".

import { get } from './api.js';
import { health, setParams } from './nav.js';
import { bytes, delta, count, esc, toLocalInput, fromLocalInput, time } from './fmt.js';

// The summary line of a stack names its innermost frame outside the OS's
// allocation plumbing (the rest is one click away).
const SYSTEM = /^(ntdll|kernelbase|kernel32|ucrtbase|msvcrt|libc[.-]|ld-linux|\[kernel)/i;

export async function diffPage(main, params) {
  const h = await health();
  const end = Math.ceil(h.end_ns / 1e9) * 1e9;
  const first = h.first_bucket_ns != null ? Math.floor(h.first_bucket_ns / 1e9) * 1e9 : end - 3600e9;
  const procs = h.last_bucket_end_ns != null
    ? (await get('/api/processes', { from: first, to: Math.max(end, first + 1e9), sort: 'impacting', limit: 500 })).processes : [];
  main.innerHTML = `
    <h1>Diff <small class="muted">outstanding commit per stack between two times (UMDH-style)</small></h1>
    <section class="controls">
      <label class="grow">Process <select id="proc">${procs.map((p) =>
        `<option value="${p.id}">${esc(p.name)} (pid ${p.pid}, #${p.id})</option>`).join('')}</select></label>
      <label>Old (t1) <input id="t1" type="datetime-local" step="1"></label>
      <label>New (t2) <input id="t2" type="datetime-local" step="1"></label>
      <button id="go" type="button">Compare</button>
    </section>
    <p id="sum" class="summary"></p>
    <div class="tablewrap"><table id="diff" class="data">
      <thead><tr><th class="n">Bytes delta</th><th class="n">Count delta</th><th class="n">New bytes</th><th class="n">New count</th>
      <th class="n">Old bytes</th><th>Tag</th><th>Stack (innermost own frame; open for all, allocating call first)</th></tr></thead><tbody></tbody></table></div>`;
  const $ = (x) => main.querySelector('#' + x);
  if (params.get('process')) $('proc').value = params.get('process');
  $('t1').value = toLocalInput(params.get('t1') ? Number(params.get('t1')) : first);
  $('t2').value = toLocalInput(params.get('t2') ? Number(params.get('t2')) : end);

  let gen = 0;
  async function run() {
    const my = ++gen; // only the latest Compare writes the page
    const t1 = fromLocalInput($('t1').value), t2 = fromLocalInput($('t2').value), process = $('proc').value;
    if (!process) { $('sum').textContent = 'No process stored yet.'; return; }
    setParams({ process, t1, t2 });
    try {
      const d = await get('/api/diff', { process, t1, t2 });
      if (my !== gen) return;
      $('sum').innerHTML = `<b>${esc(d.process.name)}</b> (pid ${d.process.pid}): ${esc(time(d.t1_ns))} → ${esc(time(d.t2_ns))}: ` +
        `${bytes(d.old_bytes)} → ${bytes(d.new_bytes)}, <b data-fig="bytes_delta">${delta(d.bytes_delta)}</b>` + (d.note ? ` <span class="note">${esc(d.note)}</span>` : '');
      $('diff').tBodies[0].innerHTML = d.stacks.map((s) => {
        const frames = [...s.frames].reverse();
        const own = frames.find((f) => !SYSTEM.test(f)) || frames[0];
        return `<tr><td class="n">${delta(s.bytes_delta)}</td><td class="n">${s.count_delta > 0 ? '+' : ''}${count(s.count_delta)}</td>
          <td class="n">${bytes(s.new_bytes)}</td><td class="n">${count(s.new_count)}</td><td class="n">${bytes(s.old_bytes)}</td>
          <td>${esc(s.tag)}</td><td><details><summary>${esc(own || '(no stack)')}</summary><pre>${frames.map(esc).join('\n')}</pre></details></td></tr>`;
      }).join('') || '<tr><td colspan="7" class="muted">No outstanding commit at either time.</td></tr>';
    } catch (e) {
      if (my !== gen) return;
      $('sum').innerHTML = `<span class="error">${esc(e.message)}</span>`;
    }
  }
  $('go').onclick = run;
  if (procs.length) await run();
  return {};
}
