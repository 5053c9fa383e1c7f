import type { ConcurrencyLimit } from "../../locks/operator/concurrencyLimits.js";
import { builder } from "../builder.js";

export const ConcurrencyLimitRef = builder.objectRef<ConcurrencyLimit>("ConcurrencyLimit").implement({
  description: "A cap on how many issues of one concurrency key may be CLAIMED or IN_PROGRESS at once.",
  fields: (t) => ({
    key: t.exposeString("key"),
    maxActive: t.exposeInt("maxActive"),
    active: t.exposeInt("active", { description: "Issues of the key that are CLAIMED or IN_PROGRESS now; above maxActive only after the limit was lowered." }),
  }),
});
