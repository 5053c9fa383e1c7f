// `import { Baton } from "baton/client"`: the SDK's public surface.
export { Baton, DEFAULT_URL } from "./baton.js";
export type { BatonOptions } from "./baton.js";
export { BatonError, EventsPrunedError, SeqAheadError, UnauthenticatedError } from "./errors.js";
export type { LockChange, LockChangesFilter } from "./lockChanges.js";
export type { RequestOptions } from "./request.js";
export { Blocked, Requeue } from "./work.js";
export type { Handler, Job, WorkIssue, WorkOptions, Worker } from "./work.js";
export * as Documents from "./generated/graphql.js";
