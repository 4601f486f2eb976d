// Thin entry: read the configuration, build the app, listen; on SIGTERM/SIGINT let in-flight
// requests finish, close connections and the database (PGlite checkpoints), then exit.
import type { AddressInfo } from 'node:net';
import { buildApp } from './app.js';
import { ConfigError, httpBase, loadConfig } from './config.js';
import { DataDirLockedError } from './db/db.js';

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
  let app;
  try {
    app = await buildApp(cfg, { deliveryProcesses: true });
  } catch (e) {
    if (e instanceof DataDirLockedError) {
      console.error(e.message);
      process.exit(3);
    }
    throw e;
  }
  await app.listen({ port: cfg.PORT, host: cfg.HOST });
  const db = app.services.db.kind === 'pglite' ? `embedded PGlite in ${cfg.dataDir}` : 'PostgreSQL';
  // The address actually bound (PORT=0 picks a free port; tests read it from this line).
  const { port } = app.server.address() as AddressInfo;
  const bound = httpBase(cfg.HOST, port);
  console.log(`\nAsset tracking service listening on ${bound} (${db})`);
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
    app.close().then(
      () => process.exit(0),
      (e) => {
        app.log.error({ err: e }, 'error while closing');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
