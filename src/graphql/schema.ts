// The whole schema: importing each part registers it with the builder.
import { lexicographicSortSchema, printSchema } from "graphql";
import { builder } from "./builder.js";
import "./types/enums.js";
import "./types/company.js";
import "./types/run.js";
import "./types/issue.js";
import "./types/concurrencyLimit.js";
import "./types/lockEvent.js";
import "./types/problems.js";
import "./types/results.js";
import "./queries.js";
import "./mutations.js";
import "./subscriptions.js";

export const schema = builder.toSchema();

/** The SDL committed as schema.graphql (a test fails when they differ). */
export function printedSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}
