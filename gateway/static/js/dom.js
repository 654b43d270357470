// Building the page from data without ever parsing it as HTML: every string becomes a text node
// (textContent), so an answer, a document or an error message is shown, never run or loaded.

/**
 * An element: `el('p', {class: 'x', on: {click: fn}}, 'text', child)`. Attributes are set one by
 * one (never innerHTML); `text` children become text nodes; null and false children are skipped.
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'on') {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (name === 'class') {
      node.className = value;
    } else if (name === 'text') {
      node.textContent = String(value);
    } else if (name === 'style') {
      throw new Error('set styles through element.style, not attributes'); // CSP: no style=""
    } else if (name === 'href' && !String(value).startsWith('#')) {
      throw new Error('only in-page links are made'); // no link to anywhere a document names
    } else {
      node.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(node, ...children);
  return node;
}

export function append(node, ...children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
  return node;
}

export const $ = (selector, root = document) => root.querySelector(selector);

/** An RFC 3339 time as `2025-03-01 14:02` (UTC), or the text as it came. */
export function when(value) {
  if (!value) return '';
  const match = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})/.exec(value);
  return match ? `${match[1]} ${match[2]} UTC` : String(value);
}

export function percent(value) {
  return `${Math.round((Number(value) || 0) * 100)}%`;
}

export function pagesText(pages) {
  if (!pages || !pages.length) return '';
  return pages.length === 1 ? `page ${pages[0]}` : `pages ${pages[0]}–${pages[pages.length - 1]}`;
}

/** A table from a header row and rows of cells (strings or nodes). */
export function table(caption, headers, rows, attrs = {}) {
  return el('div', {class: 'table-wrap'},
    el('table', attrs,
      caption ? el('caption', {}, caption) : null,
      el('thead', {}, el('tr', {}, headers.map((h) => el('th', {scope: 'col'}, h)))),
      el('tbody', {}, rows.map((cells) => el('tr', {}, cells.map((c) => el('td', {}, c)))))));
}
