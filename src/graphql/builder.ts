// The Pothos schema builder. Every field is non-null unless it says otherwise
// (the contract is written that way).
import SchemaBuilder from "@pothos/core";
import type { Timestamp } from "../domain/types.js";
import type { Context } from "./context.js";

export const builder = new SchemaBuilder<{
  Context: Context;
  DefaultFieldNullability: false;
  Scalars: {
    ID: { Input: string; Output: string };
    DateTime: { Input: Date; Output: Timestamp };
    JSON: { Input: unknown; Output: unknown };
  };
}>({
  defaultFieldNullability: false,
});

builder.scalarType("DateTime", {
  description: "An instant, as an ISO-8601 string in UTC.",
  serialize: (value) => {
    const date = value instanceof Date ? value : new Date(value);
    if (Number.isNaN(date.getTime())) throw new TypeError(`not a timestamp: ${String(value)}`);
    return date.toISOString();
  },
  parseValue: (value) => {
    const date = typeof value === "string" ? new Date(value) : null;
    if (!date || Number.isNaN(date.getTime())) throw new TypeError("DateTime must be an ISO-8601 string");
    return date;
  },
});

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});

builder.scalarType("JSON", {
  description: "Any JSON value (payload and result: at most 64 KB once serialised).",
  serialize: (value) => value,
  parseValue: (value) => value,
});
