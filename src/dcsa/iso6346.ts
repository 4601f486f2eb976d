// ISO 6346 (freight containers: coding, identification and marking), as DCSA Track & Trace names a
// box: its container number (`equipmentReference`) and its size-type code (`isoEquipmentCode`).
// Pure: each check answers null when the text is good, else what is wrong with it, as a phrase the
// caller puts after the field's name ("/equipmentReference is not ...: check digit is 1, expected 0").

/**
 * The letters' values in the check digit: A is 10, then one up for each letter, skipping the
 * multiples of 11 (A10 B12 C13 ... K21 L23 ... U32 V34 ... Z38).
 */
const LETTER_VALUES: ReadonlyMap<string, number> = (() => {
  const out = new Map<string, number>();
  let v = 10;
  for (let c = 65; c <= 90; c++) {
    if (v % 11 === 0) v++;
    out.set(String.fromCharCode(c), v++);
  }
  return out;
})();

/** The equipment category letters: U freight container, J detachable freight container-related equipment, Z trailer or chassis. */
export const EQUIPMENT_CATEGORIES = ['U', 'J', 'Z'] as const;

/** The check digit of the first 10 characters of a container number (owner code, category, serial number). */
export function iso6346CheckDigit(first10: string): number {
  let sum = 0;
  for (let i = 0; i < 10; i++) {
    const c = first10[i]!;
    const v = /\d/.test(c) ? Number(c) : LETTER_VALUES.get(c)!;
    sum += v * 2 ** i;
  }
  return (sum % 11) % 10;
}

const shown = (s: string) => JSON.stringify(s);

/** Lower case is refused, never changed silently: the answer says what the capitals would be, when they would do. */
const lowerCase = (s: string, check: (s: string) => string | null) =>
  `it has lower-case letters; ISO 6346 writes capitals${check(s.toUpperCase()) === null ? ` (${s.toUpperCase()})` : ''}`;

/** What is wrong with an ISO 6346 container number (e.g. MSKU1234565), or null when it is one. */
export function iso6346Problem(ref: string): string | null {
  if (ref.length !== 11) return `it has ${ref.length} characters, expected 11 (e.g. MSKU1234565)`;
  if (/[a-z]/.test(ref)) return lowerCase(ref, iso6346Problem);
  const owner = ref.slice(0, 3);
  if (!/^[A-Z]{3}$/.test(owner)) return `the owner code (first 3 characters) must be 3 capital letters, got ${shown(owner)}`;
  const category = ref[3]!;
  if (!(EQUIPMENT_CATEGORIES as readonly string[]).includes(category)) {
    return `the category (4th character) is ${shown(category)}, expected U (freight container), J (detachable equipment) or Z (trailer or chassis)`;
  }
  const serial = ref.slice(4, 10);
  if (!/^\d{6}$/.test(serial)) return `the serial number (characters 5 to 10) must be 6 digits, got ${shown(serial)}`;
  const check = ref[10]!;
  if (!/^\d$/.test(check)) return `the check digit (11th character) must be a digit, got ${shown(check)}`;
  const expected = iso6346CheckDigit(ref.slice(0, 10));
  if (Number(check) !== expected) return `check digit is ${check}, expected ${expected}`;
  return null;
}

/**
 * What is wrong with an ISO 6346 size-type code, or null when it is one: 4 characters, the size
 * (2 digits or capital letters: length, then height and width), the type group (a capital letter)
 * and the detailed type (a digit, e.g. 45R1, 22G1) or the type group's second letter (22GP).
 */
export function isoSizeTypeProblem(code: string): string | null {
  if (code.length !== 4) return `it has ${code.length} characters, expected 4 (e.g. 45R1, 22G1 or 22GP)`;
  if (/[a-z]/.test(code)) return lowerCase(code, isoSizeTypeProblem);
  const size = code.slice(0, 2);
  if (!/^[0-9A-Z]{2}$/.test(size)) return `the size (first 2 characters) must be digits or capital letters, got ${shown(size)}`;
  if (!/^[A-Z]$/.test(code[2]!)) return `the type group (3rd character) must be a capital letter, got ${shown(code[2]!)}`;
  if (!/^[0-9A-Z]$/.test(code[3]!)) return `the type (4th character) must be a digit or a capital letter, got ${shown(code[3]!)}`;
  return null;
}
