// ISO 6346 container numbers and size-type codes (src/dcsa/iso6346.ts; API guide 8, "Assets:
// equipment identity"): the check digit, the shapes, and what each refusal says. Pure unit test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { iso6346CheckDigit, iso6346Problem, isoSizeTypeProblem } from '../../src/dcsa/iso6346.js';

test('container numbers with their check digit pass, of each category; a check digit of 10 is written 0', () => {
  for (const ref of ['MSKU1234565', 'CSQU3054383', 'APZU4812090', 'HLXU8111403', 'ABCJ1234563', 'ABCZ0000005']) {
    assert.equal(iso6346Problem(ref), null, ref);
  }
  assert.equal(iso6346CheckDigit('CSQU305438'), 3);
  // A10 B12 C13 ... K21 L23 (22 skipped) ... U32 V34 (33 skipped) ... Z38, weights 1, 2, 4, ..., 512.
  assert.equal(iso6346CheckDigit('AAAU000000'), (10 + 20 + 40 + 32 * 8) % 11);
  assert.equal(iso6346CheckDigit('LLLU000000'), ((23 * 7 + 32 * 8) % 11) % 10);
  assert.equal(iso6346CheckDigit('VVVU000000'), ((34 * 7 + 32 * 8) % 11) % 10);
  // Every number whose sum leaves 10 has check digit 0.
  let tens = 0;
  for (let n = 0; n < 200; n++) {
    const first10 = `MSKU${String(n).padStart(6, '0')}`;
    const d = iso6346CheckDigit(first10);
    assert.ok(d >= 0 && d <= 9);
    assert.equal(iso6346Problem(`${first10}${d}`), null, first10);
    for (let other = 0; other <= 9; other++) if (other !== d) assert.notEqual(iso6346Problem(`${first10}${other}`), null);
    let sum = 0;
    for (let i = 0; i < 10; i++)
      sum += (/\d/.test(first10[i]!) ? Number(first10[i]) : { M: 24, S: 30, K: 21, U: 32 }[first10[i]!]!) * 2 ** i;
    if (sum % 11 === 10) tens++;
    assert.equal(d, (sum % 11) % 10, first10);
  }
  assert.ok(tens > 0, 'some of them have the check digit 10, written 0');
});

test('each wrong container number says what is wrong', () => {
  const cases: [string, RegExp][] = [
    ['MSKU1234561', /^check digit is 1, expected 5$/],
    ['CSQU3054384', /^check digit is 4, expected 3$/],
    ['msku1234565', /lower-case letters; ISO 6346 writes capitals \(MSKU1234565\)/],
    ['Msku1234560', /lower-case letters; ISO 6346 writes capitals$/],
    ['MSKU123456', /has 10 characters, expected 11/],
    ['MSKU12345655', /has 12 characters, expected 11/],
    ['', /has 0 characters/],
    ['MSKX1234565', /category \(4th character\) is "X", expected U .*, J .* or Z/],
    ['MS1U1234565', /owner code \(first 3 characters\) must be 3 capital letters, got "MS1"/],
    ['MSKU12A4565', /serial number \(characters 5 to 10\) must be 6 digits, got "12A456"/],
    ['MSKU123456X', /check digit \(11th character\) must be a digit, got "X"/],
    ['MSKU 123456', /serial number/],
  ];
  for (const [ref, says] of cases) assert.match(String(iso6346Problem(ref)), says, ref);
});

test('size-type codes: 4 characters, size, type group and type; capitals only', () => {
  for (const code of ['45R1', '22G1', '22GP', '42U1', 'L5G1', '2EG1', '45RT', '20P0']) assert.equal(isoSizeTypeProblem(code), null, code);
  const cases: [string, RegExp][] = [
    ['45R', /has 3 characters, expected 4/],
    ['45R10', /has 5 characters/],
    ['', /has 0 characters/],
    ['45r1', /lower-case letters; ISO 6346 writes capitals \(45R1\)/],
    ['4-R1', /size \(first 2 characters\) must be digits or capital letters, got "4-"/],
    ['4511', /type group \(3rd character\) must be a capital letter, got "1"/],
    ['45R-', /type \(4th character\) must be a digit or a capital letter, got "-"/],
    ['45 1', /type group/],
  ];
  for (const [code, says] of cases) assert.match(String(isoSizeTypeProblem(code)), says, code);
});
