// Types of test-lanes.mjs (the runner's scripts stay plain JavaScript, run by node itself).
export interface CompatFile {
  file: string;
  lane: 'postgres' | 'pglite';
  why: string;
}
export const COMPAT: CompatFile[];
export const CPU_BUDGET_SECONDS: number;
export const FILE_CPU_LIMIT_SECONDS: number;
