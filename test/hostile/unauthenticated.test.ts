// The hostile-tenant suite, what nobody signed in can do: a burst of sign-ins with made-up names
// and client ids, and thousands of guessed device ids, while tenant B is timed; then the rows they
// wrote (audit log, ingest error log) are counted: bounded by the catalogue, not by the burst. Guessed
// e-mail links (the pages need no sign-in) are each refused and write nothing.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';
import { BOUNDS } from '../../src/bounds.js';
import { hostileService, whileBWorks } from './tenants.js';

// The throttle keys on username and address: made-up names are each new, so it never stops them.
const h = await hostileService({ AUTH_THROTTLE_FAILURES: '1000' });
const b = await h.tenant('tenant-b');
const TOKEN_PATH = '/auth/realms/tracking/protocol/openid-connect/token';
const form = { 'content-type': 'application/x-www-form-urlencoded' };
/** Rows of a list (at most a page of 1000: the bounds keep them far fewer). */
const count = async (path: string) => {
  const r = await h.api('GET', path);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.length as number;
};

test('a burst of unauthenticated sign-ins and device guesses writes a bounded number of rows and does not hold B', async () => {
  const auditBefore = await count('/audit?action=signInFailed&limit=1000');
  const errorsBefore = await count('/ingest/errors?limit=1000');
  const SIGN_INS = 40;
  const CLIENTS = 200;
  const GUESSES = 1000;
  const seen = await whileBWorks(h, b, async () => {
    // Made-up usernames (each costs a password hash: fewer) and made-up client ids.
    for (let i = 0; i < SIGN_INS; i++) {
      const r = await h.call('POST', TOKEN_PATH, {
        raw: `grant_type=password&username=guess-${i}&password=p${i}&client_id=tracking-cli&client_secret=child-secret`,
        headers: form,
      });
      assert.ok([400, 401].includes(r.status), `${r.status} ${r.text.slice(0, 200)}`);
    }
    for (let i = 0; i < CLIENTS; i++) {
      const r = await h.call('POST', TOKEN_PATH, {
        raw: `grant_type=client_credentials&client_id=made-up-${i}&client_secret=x`,
        headers: form,
      });
      assert.ok([400, 401].includes(r.status), `${r.status} ${r.text.slice(0, 200)}`);
    }
    // Guessed device ids, a few at a time.
    for (let i = 0; i < GUESSES; i += 20) {
      const batch = Array.from({ length: 20 }, (_, k) => h.call('GET', `/ingest/osmand?id=guess${i + k}&lat=1&lon=2`));
      for (const r of await Promise.all(batch)) assert.ok(r.status >= 400 && r.status < 500, `${r.status}`);
    }
  });
  console.log(`unauthenticated burst: ${JSON.stringify(seen)}`);
  const audit = (await count('/audit?action=signInFailed&limit=1000')) - auditBefore;
  const errors = (await count('/ingest/errors?limit=1000')) - errorsBefore;
  console.log(`rows written: audit ${audit} for ${SIGN_INS + CLIENTS} sign-ins, ingest errors ${errors} for ${GUESSES} guesses`);
  // One entry per address, kind (user or client) and window.
  assert.ok(audit <= 2, `audit rows: ${audit}`);
  // The per-address budget a minute, for each minute the guesses spanned (at most a few).
  assert.ok(errors <= BOUNDS.ingestUnknownErrorsPerAddress.value * 3, `ingest error rows: ${errors}`);
  assert.ok(errors >= 1, 'the first guesses are logged');
});

test('guessed e-mail links (acknowledgement and confirmation), pages and their buttons: each a 404 that writes nothing, and B is not held', async () => {
  const acksBefore = await count('/audit?action=acknowledge&limit=1000');
  const GUESSES = 500;
  const sig = () => crypto.randomBytes(24).toString('base64url');
  const seen = await whileBWorks(h, b, async () => {
    for (let i = 0; i < GUESSES; i += 20) {
      const batch = Array.from({ length: 20 }, (_, k) => {
        // A well-formed link with a signature the service did not make; a well-formed confirmation token.
        const path =
          (i + k) % 2 ? `/email/ack/${crypto.randomUUID()}.${sig()}` : `/email/confirm/${crypto.randomBytes(32).toString('base64url')}`;
        return (i + k) % 4 < 2 ? h.call('GET', path) : h.call('POST', path, { raw: '', headers: form });
      });
      for (const r of await Promise.all(batch)) assert.equal(r.status, 404, r.text.slice(0, 200));
    }
  });
  console.log(`guessed e-mail links: ${JSON.stringify(seen)}`);
  assert.equal(await count('/audit?action=acknowledge&limit=1000'), acksBefore, 'nothing acknowledged');
});
