// `import { Baton } from "baton/client"`: the SDK's public surface.
export { Baton, DEFAULT_URL } from "./baton.js";
export type { BatonOptions } from "./baton.js";
export { BatonError, EventsPrunedError, ProblemError, SeqAheadError, UnauthenticatedError } from "./errors.js";
export type { LockChange, LockChangesFilter } from "./lockChanges.js";
export type { RequestOptions } from "./request.js";
export { Blocked, Failed, MAX_JSON_BYTES, MAX_RETRY_AFTER_SECONDS, Requeue } from "./outcomes.js";
export type { OutcomeOptions, RetryOptions } from "./outcomes.js";
export type { CreateIssueInput, Handler, Job, WorkIssue, WorkOptions, Worker } from "./work.js";
export * as Documents from "./generated/graphql.js";
