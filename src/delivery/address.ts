// Customer endpoint address rules (API guide 9): https unless PUSH_ALLOW_HTTP; a host
// that resolves to a private, loopback, link-local, metadata or otherwise non-public address
// (IPv4-mapped, IPv4-translated, NAT64 and 6to4 forms included, classified by ipaddr.js) is refused
// when saved and again when dialled, unless inside PUSH_ALLOWED_NETWORKS. The vetted address is the one connected to (no second lookup).
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { badRequest } from '../http/errors.js';

export interface AddressPolicy {
  allowHttp: boolean;
  /** PUSH_ALLOW_PLAINTEXT_BROKERS: broker credentials may travel without TLS. */
  allowPlaintextBrokers: boolean;
  allowed: net.BlockList;
  /**
   * The service's own brokers, never a destination whatever `allowed` says: the broker devices
   * publish to (INGEST_MQTT_URL), or a customer's MQTT integration could publish as another fleet's
   * devices; and the event log's Kafka brokers (EVENT_LOG_KAFKA_BROKERS), or a customer's Kafka
   * integration could write into the event log's topic.
   */
  reserved: ReservedBroker[];
}

/** A broker of the service's own, and the setting that names it (said in the refusal). */
export interface ReservedBroker {
  host: string;
  port: number;
  what: string;
}

/** The default port of a URL's scheme (mqtt 1883, mqtts 8883, http 80, https 443). */
export function portOf(url: URL): number {
  if (url.port) return Number(url.port);
  return ({ 'mqtt:': 1883, 'mqtts:': 8883, 'http:': 80, 'https:': 443 } as Record<string, number>)[url.protocol] ?? 0;
}

export function addressPolicy(
  allowHttp: boolean,
  allowedCidrs: string[],
  allowPlaintextBrokers = false,
  ingestMqttUrl?: string,
  eventLogBrokers: string[] = [],
): AddressPolicy {
  const allowed = new net.BlockList();
  for (const c of allowedCidrs) {
    const [addr, bits] = c.split('/');
    allowed.addSubnet(addr!, Number(bits), net.isIPv6(addr!) ? 'ipv6' : 'ipv4');
  }
  const reserved: ReservedBroker[] = [];
  if (ingestMqttUrl) {
    const u = new URL(ingestMqttUrl);
    reserved.push({ host: u.hostname.replace(/^\[|\]$/g, ''), port: portOf(u), what: 'the broker devices publish to (INGEST_MQTT_URL)' });
  }
  for (const b of eventLogBrokers)
    reserved.push({ ...parseHostPort(b), what: "a broker of the service's event log (EVENT_LOG_KAFKA_BROKERS)" });
  return { allowHttp, allowPlaintextBrokers, allowed, reserved };
}

/** The policy the configuration sets (every process of the service builds the same). */
export function policyOf(cfg: {
  PUSH_ALLOW_HTTP: boolean;
  PUSH_ALLOWED_NETWORKS: string[];
  PUSH_ALLOW_PLAINTEXT_BROKERS: boolean;
  INGEST_MQTT_URL?: string;
  EVENT_LOG: string;
  EVENT_LOG_KAFKA_BROKERS?: string[];
}): AddressPolicy {
  return addressPolicy(
    cfg.PUSH_ALLOW_HTTP,
    cfg.PUSH_ALLOWED_NETWORKS,
    cfg.PUSH_ALLOW_PLAINTEXT_BROKERS,
    cfg.INGEST_MQTT_URL,
    // Named even while the event log is in PostgreSQL: a cluster once used for it stays out of reach.
    cfg.EVENT_LOG_KAFKA_BROKERS ?? [],
  );
}

/**
 * One name for the ways an address reaches a host: an IPv6 form carrying an IPv4 address is that
 * address, and every loopback or unspecified address is "this machine" (a broker listening on
 * 127.0.0.1 is also reached at 127.0.0.2, ::1 or 0.0.0.0).
 */
function hostKey(ip: string): string {
  const v4 = embeddedIpv4(ip) ?? ip;
  if (!ipaddr.isValid(v4)) return v4;
  const range = ipaddr.parse(v4).range();
  return range === 'loopback' || range === 'unspecified' ? 'this machine' : ipaddr.parse(v4).toNormalizedString();
}

/** Refuses `addrs` at `port` when one of the service's own brokers listens there (names resolved anew each time). */
async function refuseReserved(host: string, addrs: { address: string }[], port: number, policy: AddressPolicy): Promise<void> {
  for (const broker of policy.reserved) {
    if (broker.port !== port) continue;
    const brokerAddrs = net.isIP(broker.host)
      ? [broker.host]
      : (await dns.promises.lookup(broker.host, { all: true, verbatim: true }).catch(() => [])).map((a) => a.address);
    const keys = new Set(brokerAddrs.map(hostKey));
    if (broker.host === host || addrs.some((a) => keys.has(hostKey(a.address)))) {
      throw new AddressRefused(`${host}:${port} is ${broker.what}: no integration may send there`);
    }
  }
}

/**
 * The IPv4 address an IPv6 address carries, for the forms that route to it: IPv4-mapped
 * (::ffff:a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d), NAT64
 * (64:ff9b::/96 and 64:ff9b:1::/48) and 6to4 (2002:AABB:CCDD::/48).
 */
export function embeddedIpv4(ip: string): string | undefined {
  if (!ipaddr.IPv6.isValid(ip)) return undefined;
  const a = ipaddr.IPv6.parse(ip);
  const p = a.parts;
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  switch (a.range()) {
    case 'ipv4Mapped':
    case 'rfc6145':
    case 'rfc6052':
      return v4(p[6]!, p[7]!);
    case '6to4':
      return v4(p[1]!, p[2]!);
    default:
      return undefined;
  }
}

/**
 * Public means ipaddr.js's 'unicast' range: every special-purpose block (private, loopback,
 * link-local and the 169.254.169.254 metadata address, carrier-grade NAT, documentation,
 * benchmarking, multicast, reserved, unique-local, Teredo, ORCHID, discard...) is something else.
 * An IPv6 form that carries an IPv4 address is judged by that address.
 */
function isPublic(ip: string): boolean {
  const inner = embeddedIpv4(ip);
  if (inner !== undefined) return ipaddr.IPv4.parse(inner).range() === 'unicast';
  return ipaddr.parse(ip).range() === 'unicast';
}

/**
 * Ranges refused by prefix, whatever name the classifying library gives them (it once called
 * ::127.0.0.1 "ipv4Mapped" and judged it by 127.0.0.1): the IPv4-compatible block ::/96, which
 * is deprecated and on a real host routes to the default gateway, not to the IPv4 address it
 * seems to carry; and the deprecated site-local block fec0::/10.
 */
const DEPRECATED_V6 = new net.BlockList();
DEPRECATED_V6.addSubnet('::', 96, 'ipv6');
DEPRECATED_V6.addSubnet('fec0::', 10, 'ipv6');

/** True when the address may be dialled: public, or inside the operator's allowlist. */
export function isAllowedAddress(ip: string, policy: AddressPolicy): boolean {
  if (!ipaddr.isValid(ip)) return false;
  const family = net.isIPv6(ip) ? 'ipv6' : 'ipv4';
  if (policy.allowed.check(ip, family)) return true;
  if (family === 'ipv6' && DEPRECATED_V6.check(ip, 'ipv6')) return false;
  const inner = embeddedIpv4(ip);
  if (inner !== undefined && policy.allowed.check(inner, 'ipv4')) return true;
  return isPublic(ip);
}

export class AddressRefused extends Error {
  readonly code = 'ADDRESS_REFUSED';
}

/** Runs an address check for a request: a refusal is a 400 naming `field`; other errors pass through. */
export async function refusedAs400<T>(field: string, check: () => T | Promise<T>): Promise<T> {
  try {
    return await check();
  } catch (e) {
    if (e instanceof AddressRefused) throw badRequest(`${field}: ${e.message}`, field);
    throw e;
  }
}

/** Checks a URL's shape as saving does: parseable, https (or http when allowed), no user info. */
export function checkUrlShape(raw: string, policy: AddressPolicy): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AddressRefused('not a valid URL');
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && policy.allowHttp)) {
    throw new AddressRefused(policy.allowHttp ? 'the URL must use http or https' : 'the URL must use https (PUSH_ALLOW_HTTP is off)');
  }
  if (url.username || url.password) throw new AddressRefused('credentials in the URL are not accepted; configure auth instead');
  return url;
}

/** Checks the URL's shape and every address its host resolves to. */
export async function vetUrl(raw: string, policy: AddressPolicy): Promise<URL> {
  const url = checkUrlShape(raw, policy);
  await resolveVetted(url.hostname.replace(/^\[|\]$/g, ''), policy, portOf(url));
  return url;
}

/** A broker address `host:port` (Kafka) as host and port; IPv6 hosts in brackets. */
export function parseHostPort(raw: string): { host: string; port: number } {
  const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(raw);
  const port = Number(m?.[2]);
  if (!m || port < 1 || port > 65535) throw new AddressRefused('not a host:port address');
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
}

/**
 * Resolves a host and returns its addresses, refusing if any of them is not allowed, or (given the
 * port) if they are one of the service's own brokers'.
 */
export async function resolveVetted(host: string, policy: AddressPolicy, port?: number): Promise<{ address: string; family: number }[]> {
  const addrs = net.isIP(host)
    ? [{ address: host, family: net.isIP(host) }]
    : await dns.promises.lookup(host, { all: true, verbatim: true }).catch((e: Error) => {
        throw new AddressRefused(`the host ${host} does not resolve (${(e as NodeJS.ErrnoException).code ?? e.message})`);
      });
  const bad = addrs.find((a) => !isAllowedAddress(a.address, policy));
  if (bad)
    throw new AddressRefused(
      `the host ${host} resolves to ${bad.address}, which is not a public address; ` +
        'an operator allows local or private receivers with PUSH_ALLOWED_NETWORKS (comma-separated CIDRs, e.g. 127.0.0.0/8) and, for http, PUSH_ALLOW_HTTP=true',
    );
  if (port !== undefined) await refuseReserved(host, addrs, port, policy);
  return addrs;
}

/**
 * A `lookup` for http(s).request that vets what it resolves, so the address connected to is
 * exactly the one checked (a DNS answer cannot change between the check and the connect).
 */
export function vettedLookup(policy: AddressPolicy): net.LookupFunction {
  return ((
    hostname: string,
    options: dns.LookupOptions,
    callback: (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void,
  ) => {
    resolveVetted(hostname, policy).then(
      (addrs) => {
        if (options.all) callback(null, addrs);
        else callback(null, addrs[0]!.address, addrs[0]!.family);
      },
      (e: Error) => callback(Object.assign(e, { code: 'ADDRESS_REFUSED' }) as NodeJS.ErrnoException, ''),
    );
  }) as net.LookupFunction;
}
