// Writes schema.graphql from the Pothos schema: `npm run print-schema`.
import { writeFileSync } from "node:fs";
import { printedSchema } from "../graphql/schema.js";

writeFileSync(new URL("../../schema.graphql", import.meta.url), printedSchema());
console.log("wrote schema.graphql");
