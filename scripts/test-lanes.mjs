// What each lane of the test suite is for, kept where the runner (scripts/test.mjs), the quick loop
// (scripts/test-quick.mjs) and the unit test that guards the compatibility set
// (test/unit/compat-set.test.ts) all read it. docs/TESTING.md says the same in prose.

/**
 * The compatibility set: the database files the oldest Node.js line that package.json's engines
 * admits runs (CI: lane `compat` of TEST_OTHER_NODES, beside that Node's unit lane). The PostgreSQL
 * and PGlite lanes, on the newest LTS, run every file for what it tests; this set is there to catch
 * what differs between Node lines, so it holds the few files that together load every Node API the
 * service and its tests use. test/unit/compat-set.test.ts fails when a file of src/, test/, sim/ or
 * dashboard/ imports a `node:` module that no file of this set (nor of the unit lane, which runs on
 * that Node too) loads, directly or through what it imports.
 *
 * Each entry: the file, the database lane it runs in there, and why it is in the set.
 */
export const COMPAT = [
  {
    file: 'test/lifecycle.test.ts',
    lane: 'postgres',
    why: 'the service as a child process (spawn, signals, SIGTERM with requests in flight), node:net and a port in use, node:os',
  },
  {
    file: 'test/auth.test.ts',
    lane: 'postgres',
    why: 'node:crypto at the default scrypt cost and timing-safe comparison, jose tokens, node:http as a raw client, execFile',
  },
  {
    file: 'test/result-stream.test.ts',
    lane: 'postgres',
    why: 'node:stream back-pressure of a long response, node:worker_threads (a second tenant in a thread), server-sent events',
  },
  {
    file: 'test/push-shapes.test.ts',
    lane: 'postgres',
    why: 'undici webhook requests with node:dns address checks, every pushed object type, Ajv on the OpenAPI document',
  },
  {
    file: 'test/mqtt.test.ts',
    lane: 'postgres',
    why: 'node:tls (password over TLS, a customer CA, client certificates) to a real Mosquitto, the mqtt client',
  },
  {
    file: 'test/security.test.ts',
    lane: 'postgres',
    why: 'raw node:net sockets against the HTTP server (slow and malformed requests), node:events',
  },
  {
    file: 'test/openapi-client.test.ts',
    lane: 'postgres',
    why: 'node:fs/promises, node:util, and the TypeScript compiler run as a child process',
  },
  {
    file: 'test/http-processes.test.ts',
    lane: 'postgres',
    why: 'HTTP served from several processes on one port (child_process with handle passing), restarts',
  },
  {
    file: 'test/ops.test.ts',
    lane: 'postgres',
    why: "node:zlib (the map's land files gzipped when asked), node:module (packaged assets found by createRequire), fetch, /metrics",
  },
  {
    file: 'test/pglite-thread.test.ts',
    lane: 'pglite',
    why: 'the embedded database (PGlite, WebAssembly) in its own node:worker_threads thread, node:vm',
  },
];

/**
 * The CPU-seconds that the test processes of one full run (CI's `npm test`, every lane on both
 * Nodes) should stay within: two cores give 1,200 in ten minutes, and PostgreSQL, Kafka, Keycloak,
 * the two installs, lint and the type check need the rest. The runner's closing lines show the
 * run's total against it.
 */
export const CPU_BUDGET_SECONDS = 800;

/** A file whose CPU-seconds (its process and the processes it started) pass this is named at the end of a run. */
export const FILE_CPU_LIMIT_SECONDS = 60;
