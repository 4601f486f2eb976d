// openapi-typescript builds its output with the TypeScript 5 compiler API, which the project's
// TypeScript 7 (the native compiler) no longer ships: this package gives it its own TypeScript 5.
import openapiTS, { astToString } from 'openapi-typescript';

/** The TypeScript declarations (`paths`, `components`, `operations`) of an OpenAPI 3.x document. */
export async function generateTypes(doc) {
  return astToString(await openapiTS(doc));
}
