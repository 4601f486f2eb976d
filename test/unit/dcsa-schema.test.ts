// The strict DCSA Track & Trace 3.0.0 checker (test/dcsa/check.ts, issue 39) against the vendored
// schema and DCSA's own example messages (vendor/dcsa-tnt-3.0.0/): the examples pass, and each layer
// (schema, closed objects, code lists from the descriptions, the Conformance Framework's v300 checks)
// refuses what it should, naming the JSON path. No service, no database.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { CODE_LISTS, checkTnt, codesOf, MESSAGES_DIR, OPEN_LISTS, type TntMessage } from '../dcsa/check.js';

type Json = Record<string, any>;
const example = (file: string): Json => JSON.parse(fs.readFileSync(new URL(file, MESSAGES_DIR), 'utf8'));
const reefer = () => example('tnt-300-request-reefer.json');
const iot = () => example('tnt-300-request-iot.json');
const response = () => example('tnt-300-response.json');

/** The problems of a body, which must include each of `expected` (whole lines). */
function refuses(body: unknown, message: TntMessage, ...expected: string[]) {
  const problems = checkTnt(body, message);
  assert.ok(problems.length > 0, 'refused');
  for (const e of expected) assert.ok(problems.includes(e), `expected ${JSON.stringify(e)} among:\n${problems.join('\n')}`);
  return problems;
}

test('DCSA’s own example messages pass', () => {
  for (const [file, message] of [
    ['tnt-300-request-reefer.json', 'PostEventsRequest'],
    ['tnt-300-request-iot.json', 'PostEventsRequest'],
    ['tnt-300-response.json', 'GetEventsResponse'],
  ] as const) {
    assert.deepEqual(checkTnt(example(file), message), [], file);
  }
});

test('the code lists come from the schema’s descriptions, every one of them', () => {
  assert.deepEqual([...CODE_LISTS.keys()].sort(), [
    'ClassifiedDateTime.classifier',
    'DocumentReference.typeCode',
    'EquipmentDetails.emptyIndicatorCode',
    'EquipmentDetails.movementType',
    'EventClassification.equipmentEventTypeCode',
    'EventClassification.eventClassifierCode',
    'EventClassification.eventTypeCode',
    'EventClassification.iotEventTypeCode',
    'EventClassification.reeferEventTypeCode',
    'EventClassification.shipmentEventTypeCode',
    'EventClassification.transportEventTypeCode',
    'Facility.facilityCodeListProvider',
    'FeedbackElement.severity',
    'IotDetails.iotEventCode',
    'Location.facilityTypeCode',
    'ReeferDetails.temperatureUnit',
    'ReeferParameters.airExchangeUnit',
    'Seal.placement',
    'Seal.source',
    'Seal.type',
    'ShipmentDetails.shipmentLocationType',
    'ShipmentReference.typeCode',
    'TemperatureProbeMeasurement.COAProbeUDMKey',
    'TransportCall.modeOfTransport',
  ]);
  assert.deepEqual(codesOf('ReeferDetails.temperatureUnit'), ['CEL', 'FAH']);
  assert.deepEqual(codesOf('EventClassification.reeferEventTypeCode'), ['MEAS', 'ADJU']);
  assert.deepEqual(codesOf('EventClassification.eventClassifierCode'), ['PLN', 'EST', 'ACT']);
  assert.deepEqual(codesOf('IotDetails.iotEventCode'), ['DRC', 'DRO', 'LOC']);
  assert.equal(codesOf('EventClassification.shipmentEventTypeCode').length, 35);
  assert.equal(codesOf('DocumentReference.typeCode').length, 25);
  // "including but not limited to": left open.
  assert.deepEqual([...OPEN_LISTS.keys()].sort(), ['Party.codeListName', 'Party.codeListProvider']);
  assert.throws(() => codesOf('ReeferDetails.temperatureUnits'), /no code list/);
});

test('an unknown member is refused wherever it is, named by its path', () => {
  const body = reefer();
  body.events[0].reeferDetails.foo = 1;
  body.events[0].reeferDetails.temperatureProbeMeasurements[1].probeColour = 'red';
  // Inside members the schema wraps as {description, allOf: [$ref]}.
  body.events[0].eventRouting.originatingParty.nickname = 'x';
  body.events[0].equipmentDetails['ISO equipment code'] = '45R1';
  body.extra = true;
  refuses(
    body,
    'PostEventsRequest',
    '$.events[0].reeferDetails.foo: unknown member',
    '$.events[0].reeferDetails.temperatureProbeMeasurements[1].probeColour: unknown member',
    '$.events[0].eventRouting.originatingParty.nickname: unknown member',
    '$.events[0].equipmentDetails["ISO equipment code"]: unknown member',
    '$.extra: unknown member',
  );
  // The path counts events: the fifth event of DCSA's response.
  const r = response();
  r.events[4].reeferDetails.foo = 'bar';
  assert.deepEqual(checkTnt(r, 'GetEventsResponse'), ['$.events[4].reeferDetails.foo: unknown member']);
  // feedbackElements belong to the GET response, not to the POST request.
  const post = iot();
  post.feedbackElements = [];
  refuses(post, 'PostEventsRequest', '$.feedbackElements: unknown member');
  const get = response();
  get.feedbackElements = [{ severity: 'INFO', message: 'fine' }];
  assert.deepEqual(checkTnt(get, 'GetEventsResponse'), []);
});

test('a code not in its description’s list is refused', () => {
  const body = reefer();
  body.events[0].eventClassification.reeferEventTypeCode = 'XXXX';
  body.events[0].reeferDetails.temperatureUnit = 'KEL';
  refuses(
    body,
    'PostEventsRequest',
    '$.events[0].eventClassification.reeferEventTypeCode: "XXXX" is not a code of EventClassification.reeferEventTypeCode (MEAS, ADJU)',
    '$.events[0].reeferDetails.temperatureUnit: "KEL" is not a code of ReeferDetails.temperatureUnit (CEL, FAH)',
  );
  const r = response();
  r.events[0].eventClassification.eventClassifierCode = 'ACTUAL';
  r.events[2].equipmentDetails.emptyIndicatorCode = 'FULL';
  r.events[1].eventLocation.facilityTypeCode = 'port';
  refuses(
    r,
    'GetEventsResponse',
    '$.events[0].eventClassification.eventClassifierCode: "ACTUAL" is not a code of EventClassification.eventClassifierCode (PLN, EST, ACT)',
    '$.events[2].equipmentDetails.emptyIndicatorCode: "FULL" is not a code of EquipmentDetails.emptyIndicatorCode (EMPTY, LADEN)',
    '$.events[1].eventLocation.facilityTypeCode: "port" is not a code of Location.facilityTypeCode (BORD, CLOC, COFS, OFFD, DEPO, INTE, POTE, RAMP, WAYP)',
  );
  // An open list stays open.
  const open = iot();
  open.events[0].eventRouting.originatingParty.codeListProvider = 'GLEIF';
  assert.deepEqual(checkTnt(open, 'PostEventsRequest'), []);
});

test('types and formats: date-time with a zone, OpenAPI number formats', () => {
  const body = reefer();
  const e = body.events[0];
  e.eventDateTime = '2026-01-20T18:00:00'; // no zone
  e.eventUpdatedDateTime = '2026-02-30T18:00:00Z'; // no such day
  e.reeferDetails.temperatureProbeMeasurements[0].USDAProbeNumber = 1.5; // int32
  e.reeferDetails.ambientMeasuredTemperature = '22.3';
  e.reeferDetails.setpointParameters.o2Percentage = 1e39; // beyond float
  e.equipmentDetails.equipmentReference = 'APZU48120901'; // 12 > maxLength 11
  refuses(
    body,
    'PostEventsRequest',
    '$.events[0].eventDateTime: "2026-01-20T18:00:00" is not a valid date-time',
    '$.events[0].eventUpdatedDateTime: "2026-02-30T18:00:00Z" is not a valid date-time',
    '$.events[0].reeferDetails.temperatureProbeMeasurements[0].USDAProbeNumber: must be integer (is 1.5)',
    '$.events[0].reeferDetails.ambientMeasuredTemperature: must be number (is "22.3")',
    '$.events[0].reeferDetails.setpointParameters.o2Percentage: 1e+39 is not a valid float',
    '$.events[0].equipmentDetails.equipmentReference: must NOT have more than 11 characters (is "APZU48120901")',
  );
  const r = response();
  r.events[0].shipmentDetails.priceCalculationDate = '2026-13-01';
  refuses(r, 'GetEventsResponse', '$.events[0].shipmentDetails.priceCalculationDate: "2026-13-01" is not a valid date');
  r.events[0].shipmentDetails.priceCalculationDate = '2026-01-13';
  assert.deepEqual(checkTnt(r, 'GetEventsResponse'), []);
});

test('an IOT event needs its equipment and a known iotEventCode (the framework’s checks)', () => {
  const body = iot();
  delete body.events[0].equipmentDetails.ISOEquipmentCode;
  assert.deepEqual(checkTnt(body, 'PostEventsRequest'), [
    '$.events[0].equipmentDetails.ISOEquipmentCode: must be present and non-empty (IOT event, TntChecks)',
  ]);
  const blank = iot();
  blank.events[0].equipmentDetails.equipmentReference = '  ';
  delete blank.events[0].iotDetails.iotEventCode;
  refuses(
    blank,
    'PostEventsRequest',
    '$.events[0].equipmentDetails.equipmentReference: must be present and non-empty (IOT event, TntChecks)',
    '$.events[0].iotDetails: must be present and non-empty (IOT event, TntChecks)',
    '$.events[0].iotDetails.iotEventCode: must be present, one of DRC, DRO, LOC (IOT event, TntChecks)',
  );
  const none = iot();
  delete none.events[0].equipmentDetails;
  refuses(none, 'PostEventsRequest', '$.events[0].equipmentDetails: must be present and non-empty (IOT event, TntChecks)');
});

test('a message needs at least one event', () => {
  for (const message of ['PostEventsRequest', 'GetEventsResponse'] as const) {
    assert.deepEqual(checkTnt({ events: [] }, message), [
      '$.events: at least one event is required (TntChecks.atLeastOneEventInMessageCheck)',
    ]);
    refuses({}, message, '$.events: at least one event is required (TntChecks.atLeastOneEventInMessageCheck)');
  }
  refuses([], 'PostEventsRequest', '$: must be object');
});

test('every event has its identity, times and classification; each type its framework checks', () => {
  const r = response();
  delete r.events[3].eventID;
  r.events[2].eventDateTime = '';
  delete r.events[1].eventClassification.eventClassifierCode;
  delete r.events[4].reeferDetails;
  r.events[0].eventClassification.shipmentEventTypeCode = 'VOID'; // in the schema's list, not in TntDataSets'
  delete r.events[0].shipmentDetails.documentReference.reference;
  delete r.events[1].transportDetails.transportCall.vesselTransport;
  refuses(
    r,
    'GetEventsResponse',
    '$.events[3].eventID: must be present and non-empty (every event)',
    '$.events[2].eventDateTime: must be present and non-empty (every event)',
    '$.events[1].eventClassification.eventClassifierCode: must be present, one of ACT, EST, PLN (every event)',
    '$.events[4].reeferDetails: must be present and non-empty (REEFER event, TntChecks)',
    '$.events[0].eventClassification.shipmentEventTypeCode: "VOID" must be one of AMCF, AMCN, AMDC, AMPR, AMRE, APPR, CACF, CADC, CANC, CARE, CMPL, CONF, DECL, DRFT, HOLD, ISSU, PENA, PENM, PENU, PSAM, PSDL, RECE, REJE, RELS, REQS, SUAM, SUBM, SUDL (SHIPMENT event, TntChecks)',
    '$.events[0].shipmentDetails.documentReference.reference: must be present and non-empty (SHIPMENT event, TntChecks)',
    '$.events[1].transportDetails.transportCall: must have vesselTransport, railTransport or truckTransport (TRANSPORT event, TntChecks)',
  );
  const t = response();
  t.events[1].transportDetails.transportCall.vesselTransport = { vesselIMONumber: '123', vesselFlag: 'GB' };
  assert.deepEqual(checkTnt(t, 'GetEventsResponse'), [
    '$.events[1].transportDetails.transportCall.vesselTransport: needs a 7-8 digit vesselIMONumber or a vesselName (TRANSPORT event, TntChecks)',
  ]);
  const c = reefer();
  delete c.events[0].eventClassification;
  refuses(
    c,
    'PostEventsRequest',
    '$.events[0].eventClassification.eventTypeCode: must be present, one of SHIPMENT, TRANSPORT, EQUIPMENT, IOT, REEFER (every event)',
  );
});

test('a retracted event needs only its eventID and eventUpdatedDateTime', () => {
  const body = { events: [{ eventID: 'evt-1', isRetracted: true, eventUpdatedDateTime: '2026-01-20T18:05:00Z' }] };
  assert.deepEqual(checkTnt(body, 'PostEventsRequest'), []);
  refuses(
    { events: [{ eventID: 'evt-1', isRetracted: true }] },
    'PostEventsRequest',
    '$.events[0].eventUpdatedDateTime: must be present and non-empty (every event)',
  );
});
