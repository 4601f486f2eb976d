// Secrets at rest: AES-256-GCM with SECRETS_KEY for what must be read back (token signing keys,
// later push credentials); one-way digests for what only needs checking (API keys, client secrets,
// passwords).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Config } from '../config.js';
import type { Queryable } from '../db/db.js';

const scrypt = promisify(crypto.scrypt) as (
  password: string,
  salt: Buffer,
  keylen: number,
  options: crypto.ScryptOptions,
) => Promise<Buffer>;

/** SECRETS_KEY, or on the embedded database a key generated once into DATA_DIR/secrets.key. */
export function loadSecretsKey(cfg: Config, inMemory: boolean): Buffer {
  if (cfg.SECRETS_KEY) return cfg.SECRETS_KEY;
  if (inMemory) return crypto.randomBytes(32);
  const file = path.join(cfg.dataDir, 'secrets.key');
  fs.mkdirSync(cfg.dataDir, { recursive: true });
  try {
    fs.writeFileSync(file, `${crypto.randomBytes(32).toString('hex')}\n`, { flag: 'wx', mode: 0o600 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  return Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'hex');
}

export function encrypt(key: Buffer, plaintext: string): string {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, iv);
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return `v1:${Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64')}`;
}

export function decrypt(key: Buffer, sealed: string): string {
  if (!sealed.startsWith('v1:')) throw new Error('unknown secret format');
  const raw = Buffer.from(sealed.slice(3), 'base64');
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}

/** SHA-256 digest of a high-entropy secret (API keys, client secrets): fast to check per request. */
export const digest = (secret: string) => crypto.createHash('sha256').update(secret, 'utf8').digest('hex');

export function randomSecret(prefix: string, bytes = 32): string {
  return `${prefix}${crypto.randomBytes(bytes).toString('base64url')}`;
}

export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && crypto.timingSafeEqual(ab, bb);
}

// Passwords are low-entropy: scrypt (N=2^cost, r=8, p=1), stored as scrypt$N$r$p$salt$hash, so a
// hash keeps the cost it was made with and a change of PASSWORD_HASH_COST applies to new passwords
// (and to a user's next sign-in, which stores the password again at the new cost).
/** log2 of scrypt's N by default (PASSWORD_HASH_COST): 16 MiB and some 50-100 ms of one core per hash. */
export const DEFAULT_PASSWORD_COST = 14;
const SCRYPT = { r: 8, p: 1 };
/** What scrypt may allocate for N and r: the 128 * N * r bytes it needs, doubled. */
const maxmem = (n: number, r = SCRYPT.r) => 2 * 128 * n * r;
export async function hashPassword(password: string, cost: number): Promise<string> {
  const N = 2 ** cost;
  const salt = crypto.randomBytes(16);
  const hash = await scrypt(password, salt, 32, { N, ...SCRYPT, maxmem: maxmem(N) });
  return ['scrypt', N, SCRYPT.r, SCRYPT.p, salt.toString('base64'), hash.toString('base64')].join('$');
}

const unknownHashes = new Map<number, Promise<string>>();
/**
 * A hash of nothing anyone knows, at `cost`: checked in place of an unknown user's, so that a refusal
 * takes the time of a wrong password (no enumeration by timing).
 */
export function unknownPasswordHash(cost: number): Promise<string> {
  let h = unknownHashes.get(cost);
  if (!h) {
    h = hashPassword(crypto.randomBytes(32).toString('hex'), cost);
    unknownHashes.set(cost, h);
  }
  return h;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [alg, n, r, p, salt, hash] = stored.split('$');
  if (alg !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const actual = await scrypt(password, Buffer.from(salt, 'base64'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: maxmem(Number(n), Number(r)),
  });
  return crypto.timingSafeEqual(actual, expected);
}

/**
 * After a sign-in with the right password: a hash made at another cost than PASSWORD_HASH_COST is
 * stored again at the setting's cost (unless the password changed meanwhile).
 */
export async function refreshPasswordHash(q: Queryable, user: { id: string; password_hash: string }, password: string, cost: number) {
  if (user.password_hash.split('$')[1] === String(2 ** cost)) return;
  await q.query('UPDATE users SET password_hash = $2 WHERE id = $1 AND password_hash = $3', [
    user.id,
    await hashPassword(password, cost),
    user.password_hash,
  ]);
}
