// The dashboard page (API guide 9) at /dashboard: static files and one script, bundled from
// dashboard/main.tsx (and the files it imports) with esbuild when first asked for (Preact from npm, the
// world's land from world-atlas at three resolutions, Leaflet and its stylesheet: nothing comes from a CDN). The page needs no credential; every
// call it makes carries the one signed in with. A strict Content-Security-Policy: scripts, styles
// and connections only from this origin, no inline script, no framing; images from this origin
// too, and, when an operator configured street tiles (MAP_TILE_URL, tiles.ts), from the tile
// server's origin and nothing else.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { DASHBOARD_CLIENT_ID } from '../bootstrap.js';
import { type MapTiles, withTileOrigins } from './tiles.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dashboard');
const require = createRequire(import.meta.url);

export const DASHBOARD_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

// The land the fleet map draws, from coarse to fine: 110m (55 kB), 50m (546 kB) and 10m (3.1 MB;
// 0.8 MB gzipped). The files of one world-atlas version never change: cached for a day as
// immutable, then revalidated by their ETag. Sent gzipped when the browser takes it, compressed once and kept.
const LAND_LEVELS = ['110m', '50m', '10m'] as const;
const atlasDir = path.dirname(require.resolve('world-atlas/package.json'));
const atlasVersion = (JSON.parse(fs.readFileSync(path.join(atlasDir, 'package.json'), 'utf8')) as { version: string }).version;
const gzipped = new Map<string, Promise<Buffer>>();
function gzippedLand(file: string): Promise<Buffer> {
  let p = gzipped.get(file);
  if (!p) {
    p = fs.promises.readFile(file).then((raw) => promisify(zlib.gzip)(raw, { level: 9 }));
    p.catch(() => gzipped.delete(file));
    gzipped.set(file, p);
  }
  return p;
}

// The page's stylesheet: Leaflet's (its rules for the marker images and the layers control, which
// the map does not use, left out: nothing it asks for is missing) and then dashboard/app.css.
const leafletCss = fs
  .readFileSync(path.join(path.dirname(require.resolve('leaflet/package.json')), 'dist/leaflet.css'), 'utf8')
  .replace(/^[^\n]*url\([^)]*\)[^\n]*\n/gm, '');
const appCss = async () => `${leafletCss}\n${await fs.promises.readFile(path.join(ROOT, 'app.css'), 'utf8')}`;

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

export async function dashboardRoutes(
  app: FastifyInstance,
  { realm, tiles = null }: { realm: string; tiles?: MapTiles | null },
): Promise<void> {
  const opts = { config: { public: true }, schema: { hide: true } };
  const policy = withTileOrigins(DASHBOARD_CSP, tiles);
  const secure = (reply: FastifyReply) =>
    reply.header('Content-Security-Policy', policy).header('X-Content-Type-Options', 'nosniff').header('Referrer-Policy', 'no-referrer');

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
      .send(await appCss()),
  );
  app.get('/dashboard/app.js', opts, async (_req, reply) =>
    secure(reply)
      .type('text/javascript; charset=utf-8')
      .header('Cache-Control', 'no-cache')
      .send(await buildBundle()),
  );
  // Where the page signs users in: the issuer's endpoints on the origin the page was loaded from;
  // the street tiles its map draws (null: the built-in base map).
  app.get('/dashboard/config.json', opts, async (_req, reply) => {
    const base = `/auth/realms/${realm}/protocol/openid-connect`;
    return secure(reply)
      .header('Cache-Control', 'no-cache')
      .send({
        clientId: DASHBOARD_CLIENT_ID,
        authorizationEndpoint: `${base}/auth`,
        tokenEndpoint: `${base}/token`,
        logoutEndpoint: `${base}/logout`,
        map: { tiles },
      });
  });
  for (const level of LAND_LEVELS) {
    const file = path.join(atlasDir, `land-${level}.json`);
    const etag = `W/"world-atlas-${atlasVersion}-land-${level}"`;
    app.get(`/dashboard/land-${level}.json`, opts, async (req, reply) => {
      secure(reply)
        .type('application/json')
        .header('Cache-Control', 'public, max-age=86400, immutable')
        .header('ETag', etag)
        .header('Vary', 'Accept-Encoding');
      if (String(req.headers['if-none-match'] ?? '').includes(etag)) return reply.code(304).send();
      if (/\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))) {
        return reply.header('Content-Encoding', 'gzip').send(await gzippedLand(file));
      }
      return reply.send(fs.createReadStream(file));
    });
  }
}
