/** The TypeScript declarations (`paths`, `components`, `operations`) of an OpenAPI 3.x document. */
export function generateTypes(doc: object): Promise<string>;
