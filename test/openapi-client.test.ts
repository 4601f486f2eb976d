// Client generators need a clean OpenAPI document. The served document names
// every operation with a unique camelCase operationId, documents a 2xx answer for each and carries
// the license; the types openapi-typescript generates from it, and a small client written against
// them, type-check with the project's TypeScript compiler.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { generateTypes } from 'openapi-gen';
import { atEnd, startApp } from './helpers.js';

const ta = await startApp(undefined);
const TSC = fileURLToPath(new URL('../node_modules/.bin/tsc', import.meta.url));
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** The document as a client fetches it: over HTTP from the running service. */
async function servedDocument(): Promise<any> {
  const r = await fetch(`${ta.url}/api/v1/openapi.json`);
  assert.equal(r.status, 200);
  return r.json();
}

test('every operation has a unique camelCase operationId and a 2xx answer; the document names its license', async () => {
  const doc = await servedDocument();
  assert.equal(doc.info?.license?.name, 'Apache-2.0');
  assert.match(doc.info.license.url, /^https:\/\/www\.apache\.org\/licenses\/LICENSE-2\.0/);
  const seen = new Map<string, string>();
  let operations = 0;
  for (const [p, item] of Object.entries<Record<string, any>>(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (!METHODS.includes(method)) continue;
      operations++;
      const where = `${method.toUpperCase()} ${p}`;
      assert.match(String(op.operationId), /^[a-z][A-Za-z0-9]*$/, `${where}: camelCase operationId`);
      assert.equal(seen.get(op.operationId), undefined, `${where}: operationId ${op.operationId} also used by ${seen.get(op.operationId)}`);
      seen.set(op.operationId, where);
      assert.ok(
        Object.keys(op.responses ?? {}).some((code) => /^2/.test(code)),
        `${where}: documents a 2xx response (has ${Object.keys(op.responses ?? {})})`,
      );
    }
  }
  assert.ok(operations >= 70, `only ${operations} operations: did the document lose routes?`);
  // Names clients rely on, derived from method and path.
  for (const [id, where] of [
    ['listAssets', 'GET /api/v1/assets'],
    ['createAsset', 'POST /api/v1/assets'],
    ['getAsset', 'GET /api/v1/assets/{id}'],
    ['replaceAsset', 'PUT /api/v1/assets/{id}'],
    ['updateAsset', 'PATCH /api/v1/assets/{id}'],
    ['deleteAsset', 'DELETE /api/v1/assets/{id}'],
    ['listSensorData', 'GET /api/v1/sensor-data'],
    ['listIntegrationDeliveries', 'GET /api/v1/integrations/{id}/deliveries'],
    ['redeliverDelivery', 'POST /api/v1/integrations/{id}/deliveries/{deliveryId}/redeliver'],
    ['redeliverDeliveries', 'POST /api/v1/integrations/{id}/deliveries/redeliver'],
    ['streamDeliveries', 'GET /api/v1/deliveries/stream'],
    ['requestToken', 'POST /auth/realms/{realm}/protocol/openid-connect/token'],
  ]) {
    assert.equal(seen.get(id!), where, `operationId ${id}`);
  }
});

// A client written against the generated types: each call names an operation and its path, so a
// renamed operationId, a lost path or a loosened schema fails the type-check; each @ts-expect-error
// fails it too if the types stopped refusing that mistake (for instance if everything became `any`).
const CLIENT = `import type { operations, paths } from './schema.js';

type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : never;
type Ok<Op extends keyof operations> = operations[Op]['responses'] extends infer R ? JsonOf<R[Extract<keyof R, 200 | 201 | 202>]> : never;
type Body<Op extends keyof operations> = operations[Op] extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;
type Query<Op extends keyof operations> = NonNullable<operations[Op]['parameters']['query']>;
export type ApiError = JsonOf<operations['getAsset']['responses']['4XX']>;
type AssetId = paths['/api/v1/assets/{id}']['get']['parameters']['path']['id'];

export class TrackingClient {
  constructor(private readonly baseUrl: string, private readonly token: string) {}

  private async call<T>(method: string, path: string, opts: { query?: object; body?: unknown } = {}): Promise<T> {
    const url = new URL(path, this.baseUrl);
    for (const [k, v] of Object.entries(opts.query ?? {})) {
      for (const item of Array.isArray(v) ? v : v === undefined ? [] : [v]) url.searchParams.append(k, String(item));
    }
    const headers: Record<string, string> = { authorization: 'Bearer ' + this.token };
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(url, { method, headers, body: opts.body === undefined ? null : JSON.stringify(opts.body) });
    const data: unknown = res.status === 204 ? undefined : await res.json();
    if (!res.ok) throw new Error((data as ApiError).message);
    return data as T;
  }

  listAssets(query: Query<'listAssets'> = {}) {
    return this.call<Ok<'listAssets'>>('GET', '/api/v1/assets', { query });
  }
  createAsset(body: Body<'createAsset'>) {
    return this.call<Ok<'createAsset'>>('POST', '/api/v1/assets', { body });
  }
  getAsset(id: AssetId) {
    return this.call<Ok<'getAsset'>>('GET', '/api/v1/assets/' + encodeURIComponent(id));
  }
  deleteAsset(id: AssetId) {
    return this.call<void>('DELETE', '/api/v1/assets/' + encodeURIComponent(id));
  }
  createLocations(body: Body<'createLocation'>) {
    return this.call<Ok<'createLocation'>>('POST', '/api/v1/locations', { body });
  }
  redeliverDeliveries(integrationId: string, body: Body<'redeliverDeliveries'>) {
    return this.call<Ok<'redeliverDeliveries'>>('POST', '/api/v1/integrations/' + integrationId + '/deliveries/redeliver', { body });
  }
}

export async function example(c: TrackingClient): Promise<string> {
  const asset = await c.createAsset({ name: 'MSKU1234565' });
  const again = await c.getAsset(asset.id);
  const list = await c.listAssets({ limit: 10, order: 'desc' });
  const first: string | undefined = list[0]?.name;
  const { count } = await c.redeliverDeliveries('x', { from: '2026-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z', status: 'FAILED' });
  await c.deleteAsset(again.id);
  // @ts-expect-error name is required to create an asset
  await c.createAsset({});
  // @ts-expect-error an asset has no lat
  void asset.lat;
  // @ts-expect-error order is asc or desc
  await c.listAssets({ order: 'newest' });
  // @ts-expect-error a redelivery status is one of the documented values
  await c.redeliverDeliveries('x', { from: '', to: '', status: 'DONE' });
  return String(first) + String(count);
}
`;

test('openapi-typescript generates types from the served document, and a client using them type-checks', async () => {
  const doc = await servedDocument();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'openapi-client-'));
  atEnd(() => fs.rm(dir, { recursive: true, force: true }));
  const types = await generateTypes(doc);
  assert.match(types, /export interface operations/);
  await fs.writeFile(path.join(dir, 'schema.d.ts'), types);
  await fs.writeFile(path.join(dir, 'client.ts'), CLIENT);
  await fs.writeFile(path.join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  await fs.writeFile(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: ['ES2022', 'DOM'],
        types: [],
        strict: true,
        noUncheckedIndexedAccess: true,
        skipLibCheck: false,
        noEmit: true,
      },
      include: ['*.ts'],
    }),
  );
  const result = await promisify(execFile)(TSC, ['--noEmit', '-p', path.join(dir, 'tsconfig.json')], { maxBuffer: 16 * 1024 * 1024 }).then(
    (r) => ({ code: 0, out: r.stdout + r.stderr }),
    (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }),
  );
  assert.equal(result.code, 0, `tsc on the generated client:\n${result.out.slice(0, 4000)}`);
});
