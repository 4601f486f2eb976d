// Customer endpoint address rules (spec 5.2, API.md section 9): https unless PUSH_ALLOW_HTTP; a host
// that resolves to a private, loopback, link-local, metadata or otherwise non-public address
// (IPv4-mapped, NAT64 and 6to4 forms included) is refused when saved and again when dialled, unless
// inside PUSH_ALLOWED_NETWORKS. The vetted address is the one connected to (no second lookup).
import dns from 'node:dns';
import net from 'node:net';

export interface AddressPolicy {
  allowHttp: boolean;
  allowed: net.BlockList;
}

export function addressPolicy(allowHttp: boolean, allowedCidrs: string[]): AddressPolicy {
  const allowed = new net.BlockList();
  for (const c of allowedCidrs) {
    const [addr, bits] = c.split('/');
    allowed.addSubnet(addr!, Number(bits), net.isIPv6(addr!) ? 'ipv6' : 'ipv4');
  }
  return { allowHttp, allowed };
}

const NON_PUBLIC = new net.BlockList();
for (const [a, b] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  NON_PUBLIC.addSubnet(a, b, 'ipv4');
for (const [a, b] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
  ['2001:db8::', 32],
  ['100::', 64],
  ['2001::', 32],
  ['2001:10::', 28],
  ['2001:20::', 28],
] as const)
  NON_PUBLIC.addSubnet(a, b, 'ipv6');

/** The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4), if any. */
export function embeddedIpv4(ip: string): string | undefined {
  if (!net.isIPv6(ip)) return undefined;
  const words = expandIpv6(ip);
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zero = (from: number, to: number) => words.slice(from, to).every((w) => w === 0);
  if (zero(0, 5) && words[5] === 0xffff) return v4(words[6]!, words[7]!); // ::ffff:a.b.c.d
  if (zero(0, 6) && (words[6] !== 0 || words[7]! > 1)) return v4(words[6]!, words[7]!); // ::a.b.c.d (deprecated)
  if (words[0] === 0x64 && words[1] === 0xff9b && zero(2, 6)) return v4(words[6]!, words[7]!); // 64:ff9b::/96 NAT64
  if (words[0] === 0x64 && words[1] === 0xff9b && words[2] === 1) return v4(words[6]!, words[7]!); // 64:ff9b:1::/48 local NAT64
  if (words[0] === 0x2002) return v4(words[1]!, words[2]!); // 2002::/16 6to4
  return undefined;
}

function expandIpv6(ip: string): number[] {
  let s = ip.toLowerCase().split('%')[0]!;
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (tail) {
    const p = tail[1]!.split('.').map(Number);
    s = `${s.slice(0, -tail[1]!.length)}${((p[0]! << 8) | p[1]!).toString(16)}:${((p[2]! << 8) | p[3]!).toString(16)}`;
  }
  const [head, rest] = s.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const r = rest !== undefined && rest !== '' ? rest.split(':') : [];
  const fill = rest !== undefined ? Array(8 - h.length - r.length).fill('0') : [];
  return [...h, ...fill, ...r].map((x) => parseInt(x, 16));
}

/** True when the address may be dialled: public, or inside the operator's allowlist. */
export function isAllowedAddress(ip: string, policy: AddressPolicy): boolean {
  const family = net.isIPv6(ip) ? 'ipv6' : 'ipv4';
  if (policy.allowed.check(ip, family)) return true;
  const inner = embeddedIpv4(ip);
  if (inner !== undefined) return policy.allowed.check(inner, 'ipv4') || !NON_PUBLIC.check(inner, 'ipv4');
  return !NON_PUBLIC.check(ip, family);
}

export class AddressRefused extends Error {
  readonly code = 'ADDRESS_REFUSED';
}

/** Checks the URL's scheme and every address its host resolves to. */
export async function vetUrl(raw: string, policy: AddressPolicy): Promise<URL> {
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
  await resolveVetted(url.hostname.replace(/^\[|\]$/g, ''), policy);
  return url;
}

/** Resolves a host and returns its addresses, refusing if any of them is not allowed. */
export async function resolveVetted(host: string, policy: AddressPolicy): Promise<{ address: string; family: number }[]> {
  const addrs = net.isIP(host)
    ? [{ address: host, family: net.isIP(host) }]
    : await dns.promises.lookup(host, { all: true, verbatim: true }).catch((e: Error) => {
        throw new AddressRefused(`the host ${host} does not resolve (${(e as NodeJS.ErrnoException).code ?? e.message})`);
      });
  const bad = addrs.find((a) => !isAllowedAddress(a.address, policy));
  if (bad) throw new AddressRefused(`the host ${host} resolves to ${bad.address}, which is not a public address`);
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
