// Request validation pieces (src/http/schemas.ts, envelope.ts; API guide 1): the derived body schema
// and the UTF-8 check. Pure unit tests, no service.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Type } from '@sinclair/typebox';
import { Ajv } from 'ajv';
import { firstInvalidUtf8 } from '../../src/http/envelope.js';
import { lenientSchema, Nullable, requestBodySchema, stripIgnored } from '../../src/http/schemas.js';

test('the body schema refuses unknown members, ignores and removes response-only ones, and keeps free objects open', () => {
  const body = Type.Object({
    name: Type.String(),
    circle: Type.Optional(Nullable(Type.Object({ r: Type.Number() }))),
    data: Type.Optional(Type.Object({}, { additionalProperties: true })),
    auth: Type.Optional(
      Type.Union([
        Type.Object({ type: Type.Literal('a'), token: Type.String() }),
        Type.Object({ type: Type.Literal('b'), username: Type.String() }),
      ]),
    ),
  });
  const response = Type.Object({
    id: Type.String(),
    name: Type.String(),
    circle: Nullable(Type.Object({ r: Type.Number(), area: Type.Number() })),
    data: Type.Object({}, { additionalProperties: true }),
    auth: Type.Object({ type: Type.String(), username: Type.Optional(Type.String()), hint: Type.String() }),
  });
  const { schema, strip } = requestBodySchema(body, [Type.Union([response, Type.Array(response)])]);
  const validate = new Ajv({ strict: false }).compile(schema as object);
  const input = { id: 'x', name: 'n', circle: { r: 1, area: 3 }, data: { id: 1, any: 2 }, auth: { type: 'a', token: 't', hint: 'h' } };
  assert.ok(validate(input), JSON.stringify(validate.errors));
  stripIgnored(input, strip);
  assert.deepEqual(input, { name: 'n', circle: { r: 1 }, data: { id: 1, any: 2 }, auth: { type: 'a', token: 't' } });
  for (const [bad, where] of [
    [{ name: 'n', lat: 1 }, ''],
    [{ name: 'n', circle: { r: 1, radius: 2 } }, '/circle'],
    // username is another kind's input, so not response-only here.
    [{ name: 'n', auth: { type: 'a', token: 't', username: 'u' } }, '/auth'],
  ] as const) {
    assert.equal(validate(bad), false, JSON.stringify(bad));
    assert.ok(
      validate.errors?.some((e) => e.keyword === 'additionalProperties' && e.instancePath === where),
      JSON.stringify(validate.errors),
    );
  }
  assert.ok(validate({ name: 'n', auth: { type: 'b', username: 'u', hint: 'h' } }));
  // Literal unions become enums (their error lists the values).
  assert.deepEqual(lenientSchema(Type.Union([Type.Literal('x'), Type.Literal('y')])), { enum: ['x', 'y'] });
});

test('UTF-8: the first byte that breaks it, or -1 (overlongs, surrogates and values past U+10FFFF break it)', () => {
  const at = (...b: number[]) => firstInvalidUtf8(Uint8Array.from(b));
  assert.equal(firstInvalidUtf8(Buffer.from('caf\u00e9 \u{1F600} \u20AC')), -1);
  assert.equal(at(0x41, 0xff), 1);
  assert.equal(at(0xc0, 0xaf), 0, 'an overlong "/"');
  assert.equal(at(0xe0, 0x80, 0x80), 0, 'an overlong three-byte form');
  assert.equal(at(0xed, 0xa0, 0x80), 0, 'a UTF-16 surrogate');
  assert.equal(at(0xf4, 0x90, 0x80, 0x80), 0, 'past U+10FFFF');
  assert.equal(at(0x41, 0xe2, 0x82), 1, 'cut short at the end');
  assert.equal(at(0xe2, 0x82, 0xac), -1, 'the euro sign');
  assert.equal(at(0xf0, 0x9f, 0x98, 0x80), -1, 'an emoji');
  assert.equal(at(0xef, 0xbf, 0xbd, 0x41, 0x80), 4, 'a U+FFFD the input carries is no break; the stray byte after it is');
  assert.equal(at(0xef, 0xbb, 0xbf, 0xff), 3, 'a byte order mark counts as the three bytes it is');
});
