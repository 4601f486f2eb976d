// DCSA Track & Trace 3.0.0 events (API guide 18) made from the service's records: pure mapping,
// one source row to one event. The codes are those of the schema pinned in
// vendor/dcsa-tnt-3.0.0/ (DCSA Conformance-Gateway 283bf7a1): REEFER with reeferEventTypeCode
// MEAS (a reefer data record) or ADJU (an acknowledged set-point command); IOT with
// iotEventTypeCode DETC and iotDetails.iotEventCode LOC (a location), DRO or DRC (a door sensor
// record); every event ACT (actual). Members without a source are left out, never invented.
import { Type, type Static } from '@sinclair/typebox';

export const API_VERSION = '3.0.0';
/** The event types of the standard; the service produces IOT and REEFER events. */
export const EVENT_TYPES = ['SHIPMENT', 'TRANSPORT', 'EQUIPMENT', 'IOT', 'REEFER'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** What a source row is: the order of the kinds within an asset in a page (producer.ts). */
export const KINDS = ['MEAS', 'ADJU', 'LOC', 'DOOR'] as const;
export type Kind = (typeof KINDS)[number];
export const KIND_TYPE: Record<Kind, EventType> = { MEAS: 'REEFER', ADJU: 'REEFER', LOC: 'IOT', DOOR: 'IOT' };

/** The publisher in eventRouting.originatingParty (settings DCSA_PARTY_*); null: no eventRouting. */
export interface Party {
  partyCode: string;
  codeListProvider: string;
  codeListName?: string;
}

/** One source row as the sources read it (sources.ts). */
export interface SourceRow {
  kind: Kind;
  /** The record's (or command's) id. */
  id: string;
  equipmentReference: string;
  isoEquipmentCode: string;
  /** The real-world time: the record's whenCreated; an acknowledgement's time for ADJU. */
  time: Date;
  /** When it was stored (a command: when it was acknowledged). */
  stored: Date;
  /** MEAS: the record's data. ADJU: the command's type and parameters. LOC: latitude, longitude. DOOR: the value. */
  data: unknown;
}

// ---- The response's shape: the members the service fills, each as the standard types it ----
const Num = Type.Number();
const Bool = Type.Boolean();
const ReeferParameters = Type.Object(
  {
    o2Percentage: Type.Optional(Num),
    co2Percentage: Type.Optional(Num),
    humidityPercentage: Type.Optional(Num),
    airExchangeValue: Type.Optional(Num),
    airExchangeUnit: Type.Optional(Type.Literal('MQH')),
    isVentilationOpen: Type.Optional(Bool),
    isDrainholesOpen: Type.Optional(Bool),
    isBulbMode: Type.Optional(Bool),
    isColdTreatmentRequired: Type.Optional(Bool),
    isControlledAtmosphereRequired: Type.Optional(Bool),
  },
  { additionalProperties: false },
);
const Probe = Type.Object(
  {
    measuredTemperatureValue: Num,
    USDAProbeNumber: Type.Optional(Type.Integer({ minimum: 1, maximum: 3 })),
    COAProbeUDMKey: Type.Optional(Type.String()),
    probeLabel: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);
const PartySchema = Type.Object(
  { partyCode: Type.String(), codeListProvider: Type.String(), codeListName: Type.Optional(Type.String()) },
  { additionalProperties: false },
);
export const DcsaEvent = Type.Object(
  {
    eventRouting: Type.Optional(Type.Object({ originatingParty: PartySchema }, { additionalProperties: false })),
    eventID: Type.String({ description: 'Stable for the same record: <type>-<code>-<record id>' }),
    eventDateTime: Type.String({ format: 'date-time', description: "The record's time (ADJU: when the command was acknowledged)" }),
    eventUpdatedDateTime: Type.String({ format: 'date-time', description: 'When the service stored it' }),
    eventLocation: Type.Optional(
      Type.Object(
        { geoCoordinate: Type.Object({ latitude: Type.String(), longitude: Type.String() }, { additionalProperties: false }) },
        { additionalProperties: false },
      ),
    ),
    eventClassification: Type.Object(
      {
        eventTypeCode: Type.Union([Type.Literal('IOT'), Type.Literal('REEFER')]),
        eventClassifierCode: Type.Literal('ACT'),
        iotEventTypeCode: Type.Optional(Type.Literal('DETC')),
        reeferEventTypeCode: Type.Optional(Type.Union([Type.Literal('MEAS'), Type.Literal('ADJU')])),
      },
      { additionalProperties: false },
    ),
    equipmentDetails: Type.Object({ equipmentReference: Type.String(), ISOEquipmentCode: Type.String() }, { additionalProperties: false }),
    iotDetails: Type.Optional(
      Type.Object(
        { iotEventCode: Type.Union([Type.Literal('LOC'), Type.Literal('DRO'), Type.Literal('DRC')]) },
        { additionalProperties: false },
      ),
    ),
    reeferDetails: Type.Optional(
      Type.Object(
        {
          temperatureUnit: Type.Optional(Type.Literal('CEL')),
          internalSetpointTemperature: Type.Optional(Num),
          temperatureProbeMeasurements: Type.Optional(Type.Array(Probe)),
          ambientMeasuredTemperature: Type.Optional(Num),
          setpointParameters: Type.Optional(ReeferParameters),
          measuredParameters: Type.Optional(ReeferParameters),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { title: 'DcsaTntEvent', additionalProperties: false },
);
export type DcsaEvent = Static<typeof DcsaEvent>;
type ReeferDetails = NonNullable<DcsaEvent['reeferDetails']>;
type Params = Static<typeof ReeferParameters>;

// ---- Reading a reefer record's data: flat, or grouped as the alert engine reads it ----
type Json = Record<string, unknown>;
const obj = (v: unknown): Json | undefined => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined);
const GROUPS: readonly (readonly string[])[] = [
  ['cargo', 'sensors'],
  ['cargo', 'settings'],
  ['hardware', 'sensors'],
];

function member(data: Json, key: string): unknown {
  if (data[key] !== undefined) return data[key];
  for (const [a, b] of GROUPS) {
    const v = obj(obj(data[a!])?.[b!])?.[key];
    if (v !== undefined) return v;
  }
  return undefined;
}
/** A finite number, or numeric text (devices send both); anything else has no value. */
function num(data: Json, key: string): number | undefined {
  const v = member(data, key);
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN;
  return Number.isFinite(n) ? n : undefined;
}
function bool(data: Json, key: string): boolean | undefined {
  const v = member(data, key);
  return typeof v === 'boolean' ? v : undefined;
}

/** The probes: USDA probes 1-3 by number and COA key, the rest by label (API guide 18's table). */
const PROBES: readonly [key: string, probe: Omit<Static<typeof Probe>, 'measuredTemperatureValue'>][] = [
  ['usda1Temperature', { USDAProbeNumber: 1, COAProbeUDMKey: 'P19' }],
  ['usda2Temperature', { USDAProbeNumber: 2, COAProbeUDMKey: 'P20' }],
  ['usda3Temperature', { USDAProbeNumber: 3, COAProbeUDMKey: 'P21' }],
  ['usda4Temperature', { probeLabel: 'USDA probe 4' }],
  ['supplyAirTemperature', { probeLabel: 'Supply air' }],
  ['supplyAir2Temperature', { probeLabel: 'Supply air 2' }],
  ['returnAirTemperature', { probeLabel: 'Return air' }],
  ['returnAir2Temperature', { probeLabel: 'Return air 2' }],
];
const MEASURED: readonly [key: string, member: keyof Params][] = [
  ['o2', 'o2Percentage'],
  ['co2', 'co2Percentage'],
  ['humidity', 'humidityPercentage'],
  ['airExchange', 'airExchangeValue'],
];
const SET_POINTS: readonly [key: string, member: keyof Params][] = [
  ['o2Setpoint', 'o2Percentage'],
  ['co2Setpoint', 'co2Percentage'],
  ['humiditySetpoint', 'humidityPercentage'],
  ['airExchangeSetpoint', 'airExchangeValue'],
];
const FLAGS: readonly [key: string, member: keyof Params][] = [
  ['ventilationOpen', 'isVentilationOpen'],
  ['drainholesOpen', 'isDrainholesOpen'],
  ['bulbMode', 'isBulbMode'],
  ['coldTreatmentRequired', 'isColdTreatmentRequired'],
  ['controlledAtmosphereRequired', 'isControlledAtmosphereRequired'],
];

function parameters(data: Json, keys: readonly [string, keyof Params][], flags: boolean): Params | undefined {
  const out: Params = {};
  for (const [key, m] of keys) {
    const v = num(data, key);
    if (v !== undefined) (out as Record<string, number>)[m] = v;
  }
  if (out.airExchangeValue !== undefined) out.airExchangeUnit = 'MQH';
  if (flags)
    for (const [key, m] of FLAGS) {
      const v = bool(data, key);
      if (v !== undefined) (out as Record<string, boolean>)[m] = v;
    }
  return Object.keys(out).length ? out : undefined;
}

/** A reefer data record's `data` as reeferDetails (MEAS); undefined when it carries nothing the standard has. */
export function measuredDetails(raw: unknown): ReeferDetails | undefined {
  const data = obj(raw) ?? {};
  const d: ReeferDetails = {};
  const setpoint = num(data, 'temperatureSetpoint');
  if (setpoint !== undefined) d.internalSetpointTemperature = setpoint;
  const probes = PROBES.flatMap(([key, p]) => {
    const v = num(data, key);
    return v === undefined ? [] : [{ measuredTemperatureValue: v, ...p }];
  });
  if (probes.length) d.temperatureProbeMeasurements = probes;
  const ambient = num(data, 'ambientTemperature');
  if (ambient !== undefined) d.ambientMeasuredTemperature = ambient;
  const setpoints = parameters(data, SET_POINTS, true);
  if (setpoints) d.setpointParameters = setpoints;
  const measured = parameters(data, MEASURED, false);
  if (measured) d.measuredParameters = measured;
  if (!Object.keys(d).length) return undefined;
  if (d.internalSetpointTemperature !== undefined || probes.length || ambient !== undefined) d.temperatureUnit = 'CEL';
  return d;
}

/** An acknowledged set-point command (SET_TEMPERATURE, SET_HUMIDITY, SET_CO2, SET_O2) as reeferDetails (ADJU). */
export function adjustedDetails(type: string, parameters: unknown): ReeferDetails | undefined {
  const value = obj(parameters)?.value;
  if (typeof value !== 'number' || !Number.isFinite(value)) return undefined;
  switch (type) {
    case 'SET_TEMPERATURE':
      return { temperatureUnit: 'CEL', internalSetpointTemperature: value };
    case 'SET_HUMIDITY':
      return { setpointParameters: { humidityPercentage: value } };
    case 'SET_CO2':
      return { setpointParameters: { co2Percentage: value } };
    case 'SET_O2':
      return { setpointParameters: { o2Percentage: value } };
    default:
      return undefined;
  }
}
/** The command types an ADJU event is made from. */
export const SET_POINT_COMMANDS = ['SET_TEMPERATURE', 'SET_HUMIDITY', 'SET_CO2', 'SET_O2'] as const;

/** A door sensor's value as DRO (open) or DRC (closed); anything else makes no event. */
export function doorCode(value: unknown): 'DRO' | 'DRC' | undefined {
  const v = String(value).trim().toUpperCase();
  if (v === 'OPEN' || v === 'OPENED' || v === '1' || v === 'TRUE') return 'DRO';
  if (v === 'CLOSED' || v === 'CLOSE' || v === '0' || v === 'FALSE') return 'DRC';
  return undefined;
}

const isoSeconds = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');
/** Coordinates as the standard's strings (ISO 6709 decimal degrees), at most 20 characters. */
const coordinate = (v: number) => String(Number(v.toFixed(7)));

/** One source row as a DCSA event; undefined when the row makes none (a reefer record with nothing mappable). */
export function toDcsaEvent(row: SourceRow, party: Party | null): DcsaEvent | undefined {
  const base = {
    ...(party ? { eventRouting: { originatingParty: { ...party } } } : {}),
    eventDateTime: isoSeconds(row.time),
    eventUpdatedDateTime: isoSeconds(row.stored),
  };
  const equipmentDetails = { equipmentReference: row.equipmentReference, ISOEquipmentCode: row.isoEquipmentCode };
  const d = obj(row.data) ?? {};
  // A reefer event: a measurement (MEAS) or an acknowledged adjustment (ADJU), the same but for its details.
  const reefer = (code: 'MEAS' | 'ADJU', reeferDetails: Record<string, unknown> | undefined) =>
    reeferDetails &&
    ({
      ...base,
      eventID: `REEFER-${code}-${row.id}`,
      eventClassification: { eventTypeCode: 'REEFER', eventClassifierCode: 'ACT', reeferEventTypeCode: code },
      equipmentDetails,
      reeferDetails,
    } as DcsaEvent);
  switch (row.kind) {
    case 'MEAS':
      return reefer('MEAS', measuredDetails(row.data));
    case 'ADJU':
      return reefer('ADJU', adjustedDetails(String(d.type), d.parameters));
    case 'LOC': {
      const lat = Number(d.latitude);
      const lon = Number(d.longitude);
      if (!Number.isFinite(lat) || !Number.isFinite(lon)) return undefined;
      return {
        ...base,
        eventID: `IOT-LOC-${row.id}`,
        eventLocation: { geoCoordinate: { latitude: coordinate(lat), longitude: coordinate(lon) } },
        eventClassification: { eventTypeCode: 'IOT', eventClassifierCode: 'ACT', iotEventTypeCode: 'DETC' },
        equipmentDetails,
        iotDetails: { iotEventCode: 'LOC' },
      } as DcsaEvent;
    }
    case 'DOOR': {
      const code = doorCode(d.value);
      if (!code) return undefined;
      return {
        ...base,
        eventID: `IOT-${code}-${row.id}`,
        eventClassification: { eventTypeCode: 'IOT', eventClassifierCode: 'ACT', iotEventTypeCode: 'DETC' },
        equipmentDetails,
        iotDetails: { iotEventCode: code },
      } as DcsaEvent;
    }
  }
}

/**
 * The body of a dcsa-tnt-3 integration's test request (POST /webhooks/test): one location update of
 * DCSA's own example container (APZU4812090, a 45' reefer) in Amsterdam, marked as a test by its id.
 */
export function sampleEventsBody(now: Date): string {
  const e = toDcsaEvent(
    {
      kind: 'LOC',
      id: '0',
      equipmentReference: 'APZU4812090',
      isoEquipmentCode: '45R1',
      time: now,
      stored: now,
      data: { latitude: 52.379189, longitude: 4.899431 },
    },
    null,
  )!;
  return JSON.stringify({ events: [{ ...e, eventID: `TEST-IOT-LOC-${now.getTime()}` }] });
}
