import type { Run } from "../../domain/types.js";
import { builder } from "../builder.js";
import { RunStatusEnum } from "./enums.js";

export const HeartbeatRunRef = builder.objectRef<Run>("HeartbeatRun").implement({
  description: "An agent's unit of liveness: it may hold locks while RUNNING with an unexpired lease.",
  fields: (t) => ({
    id: t.exposeID("id"),
    companyId: t.exposeID("companyId"),
    agentId: t.exposeID("agentId"),
    status: t.expose("status", { type: RunStatusEnum }),
    startedAt: t.expose("startedAt", { type: "DateTime" }),
    lastHeartbeatAt: t.expose("lastHeartbeatAt", { type: "DateTime" }),
    leaseExpiresAt: t.expose("leaseExpiresAt", { type: "DateTime" }),
    finishedAt: t.expose("finishedAt", { type: "DateTime", nullable: true }),
  }),
});
