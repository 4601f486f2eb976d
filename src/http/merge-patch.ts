// JSON merge patch (RFC 7396), for PATCH bodies whose members are themselves JSON objects.
const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** RFC 7396 MergePatch(target, patch): objects merge recursively, null removes a member, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return patch;
  // A null-prototype copy, so a member named __proto__ stays an ordinary member.
  const out: Record<string, unknown> = Object.assign(Object.create(null), isPlainObject(target) ? target : {});
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}
