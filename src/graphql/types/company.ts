import type { Agent, Company } from "../../domain/types.js";
import type { Principal } from "../../domain/types.js";
import { builder } from "../builder.js";
import { RoleEnum } from "./enums.js";

export const PrincipalRef = builder.objectRef<Principal>("Principal").implement({
  description: "Who the token belongs to.",
  fields: (t) => ({
    role: t.expose("role", { type: RoleEnum }),
    companyId: t.exposeID("companyId", { nullable: true }),
    agentId: t.exposeID("agentId", { nullable: true }),
  }),
});

export const CompanyRef = builder.objectRef<Company>("Company").implement({
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

export const AgentRef = builder.objectRef<Agent>("Agent").implement({
  fields: (t) => ({
    id: t.exposeID("id"),
    companyId: t.exposeID("companyId"),
    name: t.exposeString("name"),
    nameKey: t.exposeString("nameKey", { description: "The name, normalised: unique within the company." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    disabledAt: t.expose("disabledAt", {
      type: "DateTime",
      nullable: true,
      description: "When the agent was disabled (disableAgent): none of its keys works and it gets no runs. Null while enabled.",
    }),
    disabledReason: t.exposeString("disabledReason", { nullable: true, description: "Why, as disableAgent was told. Null while enabled." }),
  }),
});
