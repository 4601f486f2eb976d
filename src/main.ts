// Thin entry: read the configuration, build the app, listen; on SIGTERM/SIGINT let in-flight
// requests finish, close connections and the database (PGlite checkpoints), then exit.
// With HTTP_WORKERS > 1 (instance/processes.ts) this process is the coordinator and serves no HTTP:
// it forks the HTTP processes, which run this file again with HTTP_PROCESS_SLOT set.
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyListenOptions } from 'fastify';
import { buildApp, collectGarbage } from './app.js';
import { type Config, ConfigError, httpBase, loadConfig } from './config.js';
import { DataDirLockedError } from './db/db.js';
import { isAddressInUse, portInUse, portInUseLine } from './http/port.js';
import { Hub, Member } from './instance/link.js';
import { HttpProcesses } from './instance/processes.js';

/** One HTTP process of several: serve the API on the instance's port, stop with the coordinator. */
async function httpProcess(cfg: Config, slot: number): Promise<void> {
  const link = new Member(slot);
  const app = await buildApp(cfg, { link });
  // SO_REUSEPORT: every HTTP process of the instance listens on the one port (Linux spreads connections).
  const options: FastifyListenOptions & { reusePort: boolean } = { port: cfg.PORT, host: cfg.HOST, reusePort: true };
  await app.listen(options);
  process.send?.({ t: 'listening', port: (app.server.address() as AddressInfo).port });
  const stop = onSignals(app, cfg);
  // Ctrl-C reaches the whole process group: the coordinator's SIGTERM, or its exit, decides.
  process.removeAllListeners('SIGINT');
  process.on('SIGINT', () => {});
  // The coordinator gone: nothing it was asked will be answered (the limits admit), and this process stops.
  process.on('disconnect', () => {
    link.close();
    stop('coordinator gone');
  });
}

/** SIGTERM (and SIGINT) let in-flight requests finish, then close; `before` runs first. */
function onSignals(app: FastifyInstance, cfg: Config, before: () => Promise<unknown> = async () => {}): (why: string) => void {
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down: finishing in-flight requests');
    const timer = setTimeout(() => {
      app.log.error('shutdown timed out; exiting');
      process.exit(1);
    }, cfg.SHUTDOWN_TIMEOUT_MS);
    timer.unref();
    Promise.resolve()
      .then(before)
      .then(() => app.close())
      .then(
        () => process.exit(0),
        (e) => {
          app.log.error({ err: e }, 'error while closing');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  return shutdown;
}

async function main(): Promise<void> {
  let cfg;
  try {
    cfg = loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(e.message);
      process.exit(2);
    }
    throw e;
  }
  const slot = Number(process.env.HTTP_PROCESS_SLOT ?? 0);
  if (slot > 0) return httpProcess(cfg, slot);
  // A port in use is one line naming it, before the database is opened or a folder touched.
  const inUse = (): never => {
    console.error(portInUseLine(cfg.HOST, cfg.PORT, 'PORT'));
    process.exit(1);
  };
  if (await portInUse(cfg.HOST, cfg.PORT)) inUse();
  const hub = cfg.HTTP_WORKERS > 1 ? new Hub() : undefined;
  let app: FastifyInstance;
  try {
    app = await buildApp(cfg, { deliveryProcesses: true, ...(hub ? { link: hub } : {}) });
  } catch (e) {
    if (e instanceof DataDirLockedError) {
      console.error(e.message);
      process.exit(3);
    }
    throw e;
  }
  let port: number;
  let http: HttpProcesses | undefined;
  if (hub) {
    await app.ready();
    http = new HttpProcesses(cfg.HTTP_WORKERS, MAIN, hub, app.log, (s) => app.services.instance?.gone(s));
    try {
      port = await http.start(cfg.PORT);
    } catch (e) {
      console.error(`The HTTP processes did not start: ${(e as Error).message}`);
      await http.stop();
      await app.close();
      process.exit(1);
    }
    if (cfg.PORT === 0 && !cfg.PUBLIC_URL) cfg.publicUrl = cfg.publicUrl.replace(/:0$/, `:${port}`);
  } else {
    try {
      await app.listen({ port: cfg.PORT, host: cfg.HOST });
    } catch (e) {
      if (!isAddressInUse(e)) throw e;
      // Taken since the check: the database closed cleanly all the same.
      await app.close().catch(() => undefined);
      inUse();
    }
    port = (app.server.address() as AddressInfo).port;
  }
  const db = app.services.db.kind === 'pglite' ? `embedded PGlite in ${cfg.dataDir}` : 'PostgreSQL';
  // The address actually bound (PORT=0 picks a free port; tests read it from this line).
  const bound = httpBase(cfg.HOST, port);
  const processes = hub ? `, ${cfg.HTTP_WORKERS} HTTP processes` : '';
  console.log(`\nAsset tracking service listening on ${bound} (${db}${processes})`);
  if (cfg.publicUrl !== bound) console.log(`  Public URL: ${cfg.publicUrl}`);
  console.log(`  API:  ${cfg.publicUrl}/api/v1    docs: ${cfg.publicUrl}/docs`);
  console.log(`  Token endpoint: ${app.services.tokens.issuer}/protocol/openid-connect/token`);
  const boot = app.services.bootstrap;
  if (boot) {
    console.log('\nFirst start: operator created. Keep these; they are not shown again.');
    console.log(`  owner id:      ${boot.ownerId}`);
    console.log(`  client id:     ${boot.clientId}`);
    console.log(`  client secret: ${boot.clientSecret ?? '(from BOOTSTRAP_CLIENT_SECRET)'}`);
    console.log(`  username:      ${boot.username}`);
    console.log(`  password:      ${boot.password ?? '(from BOOTSTRAP_PASSWORD)'}`);
    const u = new URL(cfg.publicUrl);
    const pw = boot.password ?? '<PASSWORD>';
    const secret = boot.clientSecret ?? '<CLIENT_SECRET>';
    console.log('\n  Get a token:');
    console.log(
      `  curl -s -X POST '${u.protocol}//${boot.clientId}:${secret}@${u.host}/auth/realms/${cfg.AUTH_REALM}/protocol/openid-connect/token' \\\n` +
        `    -d 'grant_type=password&scope=openid+profile+read&username=${boot.username}&password=${pw}'\n`,
    );
  }

  // What starting left behind (schemas compiled, routes built, the database opened) goes before the
  // process idles: an idle process may not collect for hours (embedded, started again: 262 -> 210-215 MB resident).
  collectGarbage();
  // With several HTTP processes they stop first (they finish their requests), then delivery and the rest.
  onSignals(app, cfg, async () => http?.stop());
}

/** This file, as it runs (.ts under tsx, .js when built): the HTTP processes' entry too. */
const MAIN = fileURLToPath(import.meta.url);

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
