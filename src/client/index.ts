// `import { Baton } from "baton/client"`: the SDK's public surface.
export { Baton, BatonError, DEFAULT_URL, EventsPrunedError, SeqAheadError, UnauthenticatedError } from "./baton.js";
export type { BatonOptions, LockChange, LockChangesFilter, RequestOptions } from "./baton.js";
export { Blocked, Requeue } from "./work.js";
export type { Handler, Job, WorkIssue, WorkOptions, Worker } from "./work.js";
export * as Documents from "./generated/graphql.js";
