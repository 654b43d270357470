// The RAGStack web UI: hash routes (#/ask, #/libraries[/name], #/trace[/id]), the login with an
// API key, and the views. Plain ES modules, no framework, no build step; everything from the
// server is shown as text (see dom.js).

import {ApiError, apiKey, getJson, onUnauthorized, setApiKey} from './api.js';
import {loadLibraries, setupAsk} from './ask.js';
import {$} from './dom.js';
import {setupEvidence} from './evidence.js';
import {setAdmin, setupLibraries, showLibraries} from './libraries.js';
import {setupTrace, showTrace} from './trace.js';

let signedIn = false;

function showView(name) {
  for (const view of document.querySelectorAll('.view')) view.hidden = view.id !== `view-${name}`;
  for (const link of document.querySelectorAll('nav a')) {
    if (link.dataset.view === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  document.querySelector('nav').hidden = name === 'login';
}

/** Forgets the key and everything shown with it (answers, evidence, libraries, traces: what only
 * that key may see), by loading the page afresh; the login then says why. */
function startOver(message) {
  setApiKey('');
  sessionStorage.setItem(LOGIN_MESSAGE, message);
  history.replaceState(null, '', '/ui/');
  location.reload();
}

const LOGIN_MESSAGE = 'ragstack-login-message';

function showLogin(message) {
  const carried = sessionStorage.getItem(LOGIN_MESSAGE);
  sessionStorage.removeItem(LOGIN_MESSAGE);
  message = message || carried || '';
  signedIn = false;
  showView('login');
  $('#sign-out').hidden = true;
  $('#who').textContent = '';
  $('#login-error').textContent = message || '';
  $('#login-key').focus();
}

async function route() {
  if (!signedIn) return;
  $('#notice').textContent = '';
  const [, view = 'ask', arg = ''] = location.hash.split('/');
  const what = decodeURIComponent(arg);
  if (view === 'libraries') {
    showView('libraries');
    await showLibraries(what);
  } else if (view === 'trace') {
    showView('trace');
    await showTrace(what);
  } else {
    showView('ask');
    await loadLibraries();
  }
}

/** Whether this key (or no key) may use the API; with it, whether it is an admin's. */
async function start() {
  try {
    await getJson('/v1/libraries');
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return; // the login is shown

    $('#notice').textContent = `The gateway did not answer: ${error.message}`;
  }
  signedIn = true;
  $('#sign-out').hidden = !apiKey();
  let admin = false;
  try {
    await getJson('/v1/feedback', {limit: 1}); // admins only: a harmless probe of the role
    admin = true;
  } catch {
    admin = false;
  }
  setAdmin(admin);
  $('#who').textContent = apiKey() ? `Signed in${admin ? ' (admin)' : ''}` : 'No key needed (local)';
  await route();
}

function setupLogin() {
  $('#login-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const key = $('#login-key').value.trim();
    if (!key) {
      $('#login-error').textContent = 'Enter your API key.';
      return;
    }
    setApiKey(key);
    $('#login-key').value = '';
    await start();
  });
  $('#sign-out').addEventListener('click', () => startOver('Signed out.'));
  onUnauthorized((message) => {
    const had = apiKey();
    if (had) startOver(`The key was refused: ${message}`);
    else showLogin('');
  });
}

setupLogin();
setupAsk();
setupEvidence();
setupLibraries();
setupTrace();
window.addEventListener('hashchange', () => route());
start();
