"""The GraphQL operations the worker sends (as src/client/operations/client.graphql)."""

ISSUE_FIELDS = """
  id companyId title description status priority concurrencyKey assigneeAgentId
  checkoutRunId executionRunId attemptCount maxAttempts lockEpoch parentId
  blockedBy waitingOn notBefore idempotencyKey retryDelaySeconds maxExecutionSeconds payload result
"""

RUN_FIELDS = "id companyId agentId status lastHeartbeatAt leaseExpiresAt"

ME = "query Me { me { role companyId agentId } }"

START_RUN = "mutation WorkStartRun { startRun { %s } }" % RUN_FIELDS

HEARTBEAT = (
    """
mutation WorkHeartbeat($runId: ID!) {
  heartbeatRun(runId: $runId) { __typename ... on RunUpdated { run { %s } } ... on Problem { message } }
}"""
    % RUN_FIELDS
)

FINISH_RUN = """
mutation WorkFinishRun($runId: ID!, $status: RunStatus!) {
  finishRun(runId: $runId, status: $status) { __typename ... on Problem { message } }
}"""

CLAIM = (
    """
mutation WorkClaim($runId: ID!, $includeUnassigned: Boolean) {
  claimIssue(runId: $runId, includeUnassigned: $includeUnassigned) {
    __typename ... on IssueClaimed { issue { %s } } ... on Problem { message }
  }
}"""
    % ISSUE_FIELDS
)

CLAIM_MANY = (
    """
mutation WorkClaimMany($runId: ID!, $limit: Int!, $includeUnassigned: Boolean) {
  claimIssues(runId: $runId, limit: $limit, includeUnassigned: $includeUnassigned, acquireExecution: true) {
    __typename ... on IssuesClaimed { issues { %s } } ... on Problem { message }
  }
}"""
    % ISSUE_FIELDS
)

ACQUIRE = (
    """
mutation WorkAcquire($runId: ID!, $issueId: ID!) {
  acquireExecution(runId: $runId, issueId: $issueId) {
    __typename ... on ExecutionAcquired { issue { %s } } ... on Problem { message }
  }
}"""
    % ISSUE_FIELDS
)

RELEASE = """
mutation WorkRelease($runId: ID!, $issueId: ID!, $outcome: ReleaseOutcome!, $reason: String,
                     $retryAfterSeconds: Int, $result: JSON) {
  releaseIssue(runId: $runId, issueId: $issueId, outcome: $outcome, reason: $reason,
               retryAfterSeconds: $retryAfterSeconds, result: $result) {
    __typename ... on Problem { message }
  }
}"""

# Who holds an issue now: (checkoutRunId, lockEpoch) names one hold, since the epoch never comes back.
ISSUE_HOLD = "query IssueHold($id: ID!) { issue(id: $id) { checkoutRunId lockEpoch } }"

# The newest final seq of the company's ledger: the worker's watch starts after it.
NEWEST_SEQ = (
    "query NewestSeq($companyId: ID!) { lockEvents(companyId: $companyId, newestFirst: true, first: 1) { seq } }"
)

# An issue's newest events: whether a release whose answer was lost took effect, or the hold was lost before it.
ISSUE_EVENTS = """
query IssueEvents($companyId: ID!, $issueId: ID!, $first: Int!) {
  lockEvents(companyId: $companyId, issueId: $issueId, newestFirst: true, first: $first) {
    seq kind runId checkoutRunId reason
  }
}"""
