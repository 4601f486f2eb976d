// The dashboard page (API guide 9) at /dashboard: static files and one script, bundled from
// dashboard/main.tsx (and the files it imports) with esbuild when first asked for (Preact and topojson-client from npm, the
// world's land from world-atlas: nothing comes from a CDN). The page needs no credential; every
// call it makes carries the one signed in with. A strict Content-Security-Policy: scripts, styles
// and connections only from this origin, no inline script, no framing.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { DASHBOARD_CLIENT_ID } from '../bootstrap.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dashboard');
const require = createRequire(import.meta.url);

export const DASHBOARD_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

let bundle: Promise<string> | undefined;
/** The page's script: dashboard/main.tsx and its npm imports in one minified ES module, built once. */
function buildBundle(): Promise<string> {
  bundle ??= (async () => {
    const esbuild = await import('esbuild');
    const out = await esbuild.build({
      entryPoints: [path.join(ROOT, 'main.tsx')],
      bundle: true,
      format: 'esm',
      minify: true,
      write: false,
      target: 'es2022',
      jsx: 'automatic',
      jsxImportSource: 'preact',
      legalComments: 'none',
      logLevel: 'silent',
    });
    return out.outputFiles[0]!.text;
  })();
  bundle.catch(() => {
    bundle = undefined; // a failed build is tried again at the next request
  });
  return bundle;
}

export async function dashboardRoutes(app: FastifyInstance, { realm }: { realm: string }): Promise<void> {
  const opts = { config: { public: true }, schema: { hide: true } };
  const secure = (reply: FastifyReply) =>
    reply
      .header('Content-Security-Policy', DASHBOARD_CSP)
      .header('X-Content-Type-Options', 'nosniff')
      .header('Referrer-Policy', 'no-referrer');
  const landFile = path.join(path.dirname(require.resolve('world-atlas/package.json')), 'land-110m.json');

  app.get('/dashboard', opts, async (_req, reply) => reply.redirect('/dashboard/'));
  app.get('/dashboard/', opts, async (_req, reply) =>
    secure(reply)
      .type('text/html; charset=utf-8')
      .header('Cache-Control', 'no-cache')
      .send(fs.createReadStream(path.join(ROOT, 'index.html'))),
  );
  app.get('/dashboard/app.css', opts, async (_req, reply) =>
    secure(reply)
      .type('text/css; charset=utf-8')
      .send(fs.createReadStream(path.join(ROOT, 'app.css'))),
  );
  app.get('/dashboard/app.js', opts, async (_req, reply) =>
    secure(reply)
      .type('text/javascript; charset=utf-8')
      .header('Cache-Control', 'no-cache')
      .send(await buildBundle()),
  );
  // Where the page signs users in: the issuer's endpoints on the origin the page was loaded from.
  app.get('/dashboard/config.json', opts, async (_req, reply) => {
    const base = `/auth/realms/${realm}/protocol/openid-connect`;
    return secure(reply)
      .header('Cache-Control', 'no-cache')
      .send({
        clientId: DASHBOARD_CLIENT_ID,
        authorizationEndpoint: `${base}/auth`,
        tokenEndpoint: `${base}/token`,
        logoutEndpoint: `${base}/logout`,
      });
  });
  app.get('/dashboard/land-110m.json', opts, async (_req, reply) =>
    secure(reply).type('application/json').header('Cache-Control', 'public, max-age=86400').send(fs.createReadStream(landFile)),
  );
}
