// Street tiles an operator configured (MAP_TILE_URL, MAP_ATTRIBUTION; validated in config.ts): what
// the dashboard's map is told (GET /dashboard/config.json), the origins the pages' policies let
// images come from, and a tile's URL for the share page's server-drawn map. Unset, none of this
// applies: the pages draw the built-in base map and their policies stay as they were.
import { TILE_SUBDOMAINS } from '../config.js';

export interface MapTiles {
  /** The raster template: {z}, {x}, {y} (or {-y}), optionally {s} and {r}. */
  url: string;
  attribution: string;
  /** What {s} is filled with, in turn. */
  subdomains: string;
}

export function mapTiles(cfg: { MAP_TILE_URL?: string | undefined; MAP_ATTRIBUTION?: string | undefined }): MapTiles | null {
  if (!cfg.MAP_TILE_URL) return null;
  return { url: cfg.MAP_TILE_URL, attribution: cfg.MAP_ATTRIBUTION ?? '', subdomains: TILE_SUBDOMAINS.join('') };
}

/** The origins tiles come from: the template's, one per subdomain when it has {s}. */
export function tileOrigins(tiles: MapTiles | null): string[] {
  if (!tiles) return [];
  const subs = tiles.url.includes('{s}') ? [...tiles.subdomains] : [''];
  const origins = subs.map((s) => new URL(tiles.url.replaceAll('{s}', s).replace(/\{-?[zxyr]\}/g, '0')).origin);
  return [...new Set(origins)];
}

/** A policy's img-src with the tile origins added (none: the policy unchanged). */
export function withTileOrigins(csp: string, tiles: MapTiles | null): string {
  const origins = tileOrigins(tiles);
  if (!origins.length) return csp;
  return csp.replace(/img-src ([^;]*)/, (_m, sources: string) => `img-src ${sources} ${origins.join(' ')}`);
}

/** The URL of one tile, as Leaflet would ask for it ({r}: the standard density). */
export function tileUrl(tiles: MapTiles, z: number, x: number, y: number): string {
  const subs = tiles.subdomains;
  return tiles.url
    .replaceAll('{s}', subs[Math.abs(x + y) % subs.length] ?? '')
    .replaceAll('{z}', String(z))
    .replaceAll('{x}', String(x))
    .replaceAll('{y}', String(y))
    .replaceAll('{-y}', String(2 ** z - 1 - y))
    .replaceAll('{r}', '');
}
