// Types of import-graph.mjs (the runner's scripts stay plain JavaScript, run by node itself).
export interface Imports {
  /** The files it imports by relative path. */
  local: Set<string>;
  /** The `node:` modules it imports. */
  node: Set<string>;
}
export function sourcesUnder(dir: string): string[];
export function specifiers(text: string): string[];
export function importGraph(roots: string[]): Map<string, Imports>;
export function loadedBy(graph: Map<string, Imports>, roots: string[]): Set<string>;
export function importersOf(graph: Map<string, Imports>, changed: string[], stops?: Set<string>): Set<string>;
