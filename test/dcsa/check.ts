// A strict checker for DCSA Track & Trace 3.0.0 messages (issue 39), for the events this service
// produces: checkTnt(body, 'GetEventsResponse' | 'PostEventsRequest') lists every problem as
// `<JSON path>: <what>`, none when the body is valid. Four layers:
//   1. the vendored OpenAPI schema (vendor/dcsa-tnt-3.0.0/TNT_v3.0.0.yaml), its component for the
//      message, with ajv: `#/components/schemas/X` refs made ajv's own, `example` dropped, the
//      OpenAPI number formats (float, double, int32, int64) checked for range, date-time and date
//      validated (RFC 3339, a zone required);
//   2. no unknown member anywhere: every object schema gets `additionalProperties: false` (the
//      `{description, allOf: [{$ref}]}` wrappers the schema uses for described members become the
//      `$ref` itself);
//   3. every code-valued string against the codes its description lists (the schema gives codes
//      only there, as lines "- `MEAS` - Measured" or "- `CEL` (Celsius)"), extracted when this module
//      loads and made enums. At the pinned commit these properties get lists (codesOf() has them;
//      test/unit/dcsa-schema.test.ts checks this is the whole set):
//        ClassifiedDateTime.classifier, DocumentReference.typeCode, EquipmentDetails.emptyIndicatorCode,
//        EquipmentDetails.movementType, EventClassification.eventTypeCode, .eventClassifierCode,
//        .shipmentEventTypeCode, .transportEventTypeCode, .equipmentEventTypeCode, .iotEventTypeCode,
//        .reeferEventTypeCode, Facility.facilityCodeListProvider, FeedbackElement.severity,
//        IotDetails.iotEventCode, Location.facilityTypeCode, ReeferDetails.temperatureUnit,
//        ReeferParameters.airExchangeUnit, Seal.source, Seal.type, Seal.placement,
//        ShipmentDetails.shipmentLocationType, ShipmentReference.typeCode,
//        TemperatureProbeMeasurement.COAProbeUDMKey, TransportCall.modeOfTransport.
//      Left open on purpose: Party.codeListProvider and Party.codeListName (their lists say
//      "including but not limited to"). A list of other words (not all CODE-like) would be left
//      open too; none is at this commit (Event.eventID's list of key members is not "- `x` - ..." lines).
//   4. the DCSA Conformance Framework's own v300 content checks, transcribed from
//      https://github.com/dcsaorg/Conformance-Gateway at 283bf7a1dcbcd9ea8fa6a25230af7c45c136e892,
//      tnt/src/main/java/org/dcsa/conformance/standards/tnt/v300/checks/TntChecks.java (the checks) and
//      TntDataSets.java (the code sets), "non-empty" as its JsonUtil.isMissingOrEmpty: not absent, not
//      null, not blank text, not an empty object or array. Stricter than the framework where it checks
//      "at least one event has ...": here every event must have eventID, eventDateTime,
//      eventUpdatedDateTime and eventClassification.eventTypeCode. Ours, not the framework's: every
//      event has an eventClassifierCode (ACT, EST or PLN). A retracted event (isRetracted: true, whose
//      other data "is irrelevant" per the schema) needs only eventID and eventUpdatedDateTime.
import fs from 'node:fs';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';

const addFormats = addFormatsModule as unknown as (ajv: Ajv, formats: string[]) => Ajv;

export type TntMessage = 'GetEventsResponse' | 'PostEventsRequest';

export const SCHEMA_FILE = new URL('../../vendor/dcsa-tnt-3.0.0/TNT_v3.0.0.yaml', import.meta.url);
export const MESSAGES_DIR = new URL('../../vendor/dcsa-tnt-3.0.0/messages/', import.meta.url);

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

// ---------------------------------------------------------------------------------------------
// The schema, made strict.

const spec = parse(fs.readFileSync(SCHEMA_FILE, 'utf8')) as { components: { schemas: Record<string, Json> } };
const components = spec.components.schemas;

/** A list line of a description: "- `CODE` - meaning" or "- `CODE` (meaning)". */
const LIST_LINE = /^[ \t]*-[ \t]+`([^`\n]+)`[ \t]*(?:-[ \t]|\()/gm;
const CODE = /^[A-Z0-9][A-Z0-9_]*$/;

const codeLists = new Map<string, readonly string[]>();
/** The member schema given a code list (and its copy for ajv) -> `Schema.member`, to name the list in a message. */
const listKeys = new WeakMap<object, string>();
/** Descriptions with a list the checker leaves open, and why (for the test to pin). */
export const OPEN_LISTS = new Map<string, string>();

for (const [name, schema] of Object.entries(components)) {
  for (const [prop, sub] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) {
    const description = typeof sub.description === 'string' ? sub.description : '';
    const codes = [...description.matchAll(LIST_LINE)].map((m) => m[1]!);
    if (codes.length === 0) continue;
    const key = `${name}.${prop}`;
    if (/not limited to/i.test(description)) OPEN_LISTS.set(key, 'open list ("not limited to")');
    else if (!codes.every((c) => CODE.test(c))) OPEN_LISTS.set(key, `not codes: ${codes.join(', ')}`);
    else if (sub.type !== 'string') throw new Error(`${key}: a code list on a ${String(sub.type)} member; teach test/dcsa/check.ts`);
    else {
      codeLists.set(key, Object.freeze(codes));
      listKeys.set(sub, key);
      sub.enum = codes;
    }
  }
}

/** Every property given a code list, `Schema.member` -> its codes, in the schema's order. */
export const CODE_LISTS: ReadonlyMap<string, readonly string[]> = codeLists;

/** The codes the schema lists for `Schema.member` (e.g. 'ReeferDetails.temperatureUnit'). */
export function codesOf(key: string): readonly string[] {
  const codes = codeLists.get(key);
  if (!codes) throw new Error(`no code list for ${key}; known: ${[...codeLists.keys()].join(', ')}`);
  return codes;
}

const ID = 'dcsa-tnt-3.0.0';
const REF = '#/components/schemas/';

/** The schema for ajv: refs to its definitions, no `example`, objects closed, described refs as plain refs. */
function strict(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(strict);
  if (!isObject(node)) return node;
  const keys = Object.keys(node).filter((k) => k !== 'example' && k !== 'description');
  const allOf = node.allOf;
  if (keys.length === 1 && Array.isArray(allOf) && allOf.length === 1 && isObject(allOf[0]) && Object.keys(allOf[0]).join() === '$ref') {
    return strict(allOf[0]);
  }
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === 'example') continue;
    if (k === '$ref' && typeof v === 'string') {
      if (!v.startsWith(REF)) throw new Error(`unexpected $ref ${v}`);
      out.$ref = `${ID}#/definitions/${v.slice(REF.length)}`;
    } else out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v as Json).map(([p, s]) => [p, strict(s)])) : strict(v);
  }
  if ((out.type === 'object' || out.properties) && out.additionalProperties === undefined) out.additionalProperties = false;
  const key = listKeys.get(node);
  if (key) listKeys.set(out, key);
  return out;
}

const FLT_MAX = 3.4028234663852886e38;
const ajv = new Ajv({ allErrors: true, verbose: true, strict: true });
addFormats(ajv, ['date', 'date-time']);
ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 });
ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
ajv.addFormat('float', { type: 'number', validate: (n: number) => Number.isFinite(n) && Math.abs(n) <= FLT_MAX });
ajv.addFormat('double', { type: 'number', validate: (n: number) => Number.isFinite(n) });
ajv.addSchema({ $id: ID, definitions: Object.fromEntries(Object.entries(components).map(([k, v]) => [k, strict(v)])) });

const validators = new Map<TntMessage, ValidateFunction>();
const validatorOf = (message: TntMessage): ValidateFunction => {
  let v = validators.get(message);
  if (!v) {
    v = ajv.getSchema(`${ID}#/definitions/${message}`);
    if (!v) throw new Error(`no schema component ${message}`);
    validators.set(message, v);
  }
  return v;
};

// ---------------------------------------------------------------------------------------------
// Paths and messages.

const member = (name: string) => (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? `.${name}` : `[${JSON.stringify(name)}]`);
const at = (base: string, ...steps: (string | number)[]) =>
  base + steps.map((s) => (typeof s === 'number' ? `[${s}]` : member(s))).join('');

/** A JSON pointer (ajv's instancePath) as a JSONPath: /events/3/reeferDetails -> $.events[3].reeferDetails. */
function pathOf(pointer: string): string {
  if (pointer === '') return '$';
  const steps = pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^(0|[1-9][0-9]*)$/.test(s) ? Number(s) : s));
  return at('$', ...steps);
}

/** The `Schema.member` of a code-list enum (ajv inlines small refs, so its schemaPath may not name it). */
const listOf = (e: ErrorObject) => (isObject(e.parentSchema) ? listKeys.get(e.parentSchema) : undefined);

function describe(e: ErrorObject): string {
  const where = pathOf(e.instancePath);
  switch (e.keyword) {
    case 'additionalProperties':
      return `${at(where, (e.params as { additionalProperty: string }).additionalProperty)}: unknown member`;
    case 'enum': {
      const key = listOf(e);
      const allowed = (e.params as { allowedValues: unknown[] }).allowedValues;
      return `${where}: ${JSON.stringify(e.data)} is not a code${key ? ` of ${key}` : ''} (${allowed.join(', ')})`;
    }
    case 'format':
      return `${where}: ${JSON.stringify(e.data)} is not a valid ${(e.params as { format: string }).format}`;
    default:
      return `${where}: ${e.message}${e.data !== undefined && typeof e.data !== 'object' ? ` (is ${JSON.stringify(e.data)})` : ''}`;
  }
}

// ---------------------------------------------------------------------------------------------
// The Conformance Framework's v300 checks (TntChecks.java, TntDataSets.java at 283bf7a1).

const words = (text: string) => text.split(/\s+/).filter(Boolean);

/** TntDataSets.java: each event type's subtype member and its valid codes. */
export const FRAMEWORK_SUBTYPES: Readonly<Record<string, { member: string; codes: readonly string[] }>> = {
  SHIPMENT: {
    member: 'shipmentEventTypeCode',
    // VALID_SHIPMENT_EVENT_TYPE_CODES: narrower than the schema's list (no SURR, UPCF, UPCN, UPDC, UPDT, UPRE, VOID).
    codes: words(`AMCF AMCN AMDC AMPR AMRE APPR CACF CADC CANC CARE CMPL CONF DECL DRFT
      HOLD ISSU PENA PENM PENU PSAM PSDL RECE REJE RELS REQS SUAM SUBM SUDL`),
  },
  TRANSPORT: { member: 'transportEventTypeCode', codes: ['ARRI', 'DEPA'] },
  EQUIPMENT: {
    member: 'equipmentEventTypeCode',
    codes: words('AVDO AVPU CROS CUSI CUSR CUSS DISC DROP GTIN GTOT INSP LOAD PICK RMVD RSEA STRP STUF'),
  },
  IOT: { member: 'iotEventTypeCode', codes: ['DETC'] },
  REEFER: { member: 'reeferEventTypeCode', codes: ['MEAS', 'ADJU'] },
};
/** TntDataSets.VALID_DOCUMENT_REFERENCE_TYPE_CODES. */
const DOCUMENT_REFERENCE_TYPE_CODES = words(
  'AMF ARN BKG CAS CBR CEA CEO CQU CRO CUC DEI DEO DGD FCE HCE ICE INV OOG PCE PFD SHI TRD TRO VCE VGM',
);
/** TntDataSets.VALID_IOT_EVENT_CODES. */
const IOT_EVENT_CODES = ['DRC', 'DRO', 'LOC'];
/** Ours (the schema's list for EventClassification.eventClassifierCode), required on every event. */
const CLASSIFIER_CODES = ['ACT', 'EST', 'PLN'];

/** JsonUtil.isMissingOrEmpty, negated. */
function nonEmpty(v: unknown): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v === 'string') return v.trim() !== '';
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}
const field = (o: unknown, k: string): unknown => (isObject(o) ? o[k] : undefined);

function frameworkChecks(body: unknown): string[] {
  const problems: string[] = [];
  const events = field(body, 'events');
  // atLeastOneEventInMessageCheck
  if (!Array.isArray(events) || events.length === 0) {
    problems.push(`$.events: at least one event is required (TntChecks.atLeastOneEventInMessageCheck)`);
    return problems;
  }
  const mustBeNonEmpty = (value: unknown, path: string, why: string) => {
    if (!nonEmpty(value)) problems.push(`${path}: must be present and non-empty (${why})`);
  };
  const mustBeOneOf = (value: unknown, codes: readonly string[], path: string, why: string) => {
    if (!nonEmpty(value)) problems.push(`${path}: must be present, one of ${codes.join(', ')} (${why})`);
    else if (typeof value !== 'string' || !codes.includes(value))
      problems.push(`${path}: ${JSON.stringify(value)} must be one of ${codes.join(', ')} (${why})`);
  };

  events.forEach((event, i) => {
    const base = `$.events[${i}]`;
    if (!isObject(event)) {
      problems.push(`${base}: must be an object`);
      return;
    }
    // atLeastOneEventHas{EventId,EventUpdatedDateTime}Check, here for every event.
    mustBeNonEmpty(event.eventID, at(base, 'eventID'), 'every event');
    mustBeNonEmpty(event.eventUpdatedDateTime, at(base, 'eventUpdatedDateTime'), 'every event');
    if (event.isRetracted === true) return;
    mustBeNonEmpty(event.eventDateTime, at(base, 'eventDateTime'), 'every event');
    const classification = event.eventClassification;
    const cBase = at(base, 'eventClassification');
    const type = field(classification, 'eventTypeCode');
    mustBeOneOf(type, Object.keys(FRAMEWORK_SUBTYPES), at(cBase, 'eventTypeCode'), 'every event');
    mustBeOneOf(field(classification, 'eventClassifierCode'), CLASSIFIER_CODES, at(cBase, 'eventClassifierCode'), 'every event');
    if (typeof type !== 'string') return;
    const subtype = FRAMEWORK_SUBTYPES[type];
    if (!subtype) return;
    const why = `${type} event, TntChecks`;
    // {shipment,transport,equipment,iot,reefer}EventChecks: the subtype code, from TntDataSets.
    mustBeOneOf(field(classification, subtype.member), subtype.codes, at(cBase, subtype.member), why);

    if (type === 'SHIPMENT') {
      // shipmentEventChecks
      const details = event.shipmentDetails;
      const ref = field(details, 'documentReference');
      const rBase = at(base, 'shipmentDetails', 'documentReference');
      mustBeNonEmpty(details, at(base, 'shipmentDetails'), why);
      mustBeNonEmpty(ref, rBase, why);
      mustBeOneOf(field(ref, 'typeCode'), DOCUMENT_REFERENCE_TYPE_CODES, at(rBase, 'typeCode'), why);
      mustBeNonEmpty(field(ref, 'reference'), at(rBase, 'reference'), why);
    } else if (type === 'TRANSPORT') {
      // transportEventChecks
      mustBeNonEmpty(event.eventLocation, at(base, 'eventLocation'), why);
      const details = event.transportDetails;
      mustBeNonEmpty(details, at(base, 'transportDetails'), why);
      const call = field(details, 'transportCall');
      const tBase = at(base, 'transportDetails', 'transportCall');
      mustBeNonEmpty(call, tBase, why);
      const present = (k: string) => field(call, k) !== undefined && field(call, k) !== null;
      if (!present('vesselTransport') && !present('railTransport') && !present('truckTransport'))
        problems.push(`${tBase}: must have vesselTransport, railTransport or truckTransport (${why})`);
      const vessel = field(call, 'vesselTransport');
      if (vessel !== undefined && vessel !== null) {
        const imo = field(vessel, 'vesselIMONumber');
        const name = field(vessel, 'vesselName');
        const validImo = typeof imo === 'string' && /^\d{7,8}$/.test(imo);
        const validName = typeof name === 'string' && name.trim() !== '';
        if (!validImo && !validName)
          problems.push(`${at(tBase, 'vesselTransport')}: needs a 7-8 digit vesselIMONumber or a vesselName (${why})`);
      }
    } else {
      // commonEquipmentDetailsChecks (EQUIPMENT, IOT, REEFER)
      const equipment = event.equipmentDetails;
      mustBeNonEmpty(equipment, at(base, 'equipmentDetails'), why);
      mustBeNonEmpty(field(equipment, 'equipmentReference'), at(base, 'equipmentDetails', 'equipmentReference'), why);
      mustBeNonEmpty(field(equipment, 'ISOEquipmentCode'), at(base, 'equipmentDetails', 'ISOEquipmentCode'), why);
      if (type === 'IOT') {
        // iotEventChecks
        mustBeNonEmpty(event.iotDetails, at(base, 'iotDetails'), why);
        mustBeOneOf(field(event.iotDetails, 'iotEventCode'), IOT_EVENT_CODES, at(base, 'iotDetails', 'iotEventCode'), why);
      } else if (type === 'REEFER') {
        // reeferEventChecks
        mustBeNonEmpty(event.reeferDetails, at(base, 'reeferDetails'), why);
      }
    }
  });
  return problems;
}

// ---------------------------------------------------------------------------------------------

/** Every problem of a DCSA T&T 3.0.0 message body, each `<JSON path>: <what>`; empty when valid. */
export function checkTnt(body: unknown, message: TntMessage): string[] {
  const validate = validatorOf(message);
  const problems = validate(body) ? [] : (validate.errors ?? []).map(describe);
  problems.push(...frameworkChecks(body));
  return [...new Set(problems)];
}
