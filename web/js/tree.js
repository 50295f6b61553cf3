// tree.js - the caller tree the process page shows for a window's commit
// stacks and for a heap trace's stacks: a row per frame, outermost caller
// first, children rendered when a row is expanded, the heaviest path (the
// first child at each level: children come sorted by the chosen figure)
// opened down to its allocating call, like WPA's expanded stacks.

import { esc } from './fmt.js';

/** Renders root ({children: [{children, ...}]}) into el. opts: title (the
 * frame column's header), columns ([[header, (node) => text]]), name
 * ((node) => the frame's text), empty (the text when there is nothing). */
export function callerTree(el, root, opts) {
  el.innerHTML = '';
  if (!root || !root.children || !root.children.length) {
    el.innerHTML = `<p class="muted">${esc(opts.empty)}</p>`;
    return;
  }
  const head = document.createElement('div');
  head.className = 'trow thead';
  head.innerHTML = `<span class="tframe">${esc(opts.title)}</span>` +
    opts.columns.map(([h]) => `<span class="n">${esc(h)}</span>`).join('');
  el.appendChild(head);
  const ul = document.createElement('ul');
  el.appendChild(ul);
  const add = (parent, node, depth, first) => {
    const li = document.createElement('li');
    const row = document.createElement('div');
    const kids = node.children || [];
    const name = opts.name(node);
    row.className = 'trow';
    row.style.setProperty('--depth', depth);
    row.innerHTML = `<span class="tframe" title="${esc(name)}"><button type="button" class="tog" aria-label="expand" ${kids.length ? '' : 'disabled'}>${kids.length ? '▸' : '·'}</button>${esc(name)}</span>` +
      opts.columns.map(([, cell]) => `<span class="n">${cell(node)}</span>`).join('');
    li.appendChild(row);
    parent.appendChild(li);
    let open = false, sub = null;
    const toggle = () => {
      if (!kids.length) return;
      open = !open;
      row.querySelector('.tog').textContent = open ? '▾' : '▸';
      if (open && !sub) {
        sub = document.createElement('ul');
        kids.forEach((k, i) => add(sub, k, depth + 1, first && i === 0));
        li.appendChild(sub);
      }
      if (sub) sub.hidden = !open;
    };
    row.querySelector('.tog').onclick = toggle;
    if (kids.length && first) toggle();
  };
  root.children.forEach((c, i) => add(ul, c, 0, i === 0));
}
