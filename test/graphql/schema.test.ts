// The committed schema.graphql in step with the schema the code builds
// (src/graphql/schema.ts): the SDK, the board and the tests' typed documents
// are generated from the committed file.
import { readFileSync } from "node:fs";
import { expect, it } from "vitest";
import { printedSchema } from "../../src/graphql/schema.js";

it("schema.graphql is the schema the code prints (run `npm run print-schema` after changing the schema)", () => {
  const committed = readFileSync(new URL("../../schema.graphql", import.meta.url), "utf8");
  expect(committed).toBe(printedSchema());
});
