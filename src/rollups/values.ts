// The temperature members of a reefer or genset record's data, as the store adds them to the
// rollups: the same rule as the SQL function rollup_temperatures (migration 0020), which sums the
// stored rows (the fill, the tests' recomputation). Computed here because the store has the
// records in hand: reading them back out of the inserted JSON in SQL cost more than the rest of
// the rollup (56 µs a record, measured). A key is read where the alert engine reads it: `data.<key>`
// when present, else under its group's sensors (cargo or hardware, as specifications place it),
// else, for a key of neither group, under cargo's then hardware's sensors. Numbers only.
import { CARGO_SENSORS, HARDWARE_SENSORS } from '../alerts/model.js';

const CARGO: ReadonlySet<string> = new Set(CARGO_SENSORS);
const HARDWARE: ReadonlySet<string> = new Set(HARDWARE_SENSORS);
const TEMPERATURE = /temperature/i;
/** Whether a member's name holds "temperature", remembered: payloads repeat a handful of names. */
const named = new Map<string, boolean>();
const isTemperature = (k: string) => {
  let t = named.get(k);
  if (t === undefined) {
    t = TEMPERATURE.test(k);
    if (named.size < 10_000) named.set(k, t);
  }
  return t;
};

type Obj = Record<string, unknown>;
const object = (v: unknown): Obj | undefined => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : undefined);
const has = (o: Obj | undefined, k: string): o is Obj => o !== undefined && Object.hasOwn(o, k);

/** Each temperature member's value, by key (a key whose value is not a number is left out). */
export function temperatureValues(data: unknown, out: (key: string, value: number) => void): void {
  const top = object(data);
  if (!top) return;
  const cargo = object(object(top.cargo)?.sensors);
  const hardware = object(object(top.hardware)?.sensors);
  const keys = new Set<string>();
  for (const o of [top, cargo, hardware]) if (o) for (const k of Object.keys(o)) if (isTemperature(k)) keys.add(k);
  for (const k of keys) {
    const v = has(top, k) ? top[k] : HARDWARE.has(k) ? hardware?.[k] : CARGO.has(k) ? cargo?.[k] : has(cargo, k) ? cargo[k] : hardware?.[k];
    if (typeof v === 'number' && Number.isFinite(v) && Math.abs(v) < 1e300) out(k, v);
  }
}
