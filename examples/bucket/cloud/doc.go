// Package cloud is the bucket example's stand-in for a cloud provider's
// object-storage API (and a message-queue API beside it, for a second
// operator on the same account): a small HTTP server ([Server]) and its client
// ([Client]). It is real enough to exercise what makes cloud-resource
// operators hard, and deterministic enough to test them:
//
//   - Persistence. Every mutation is written to a JSON state file (atomically:
//     temp file and rename) when one is configured, so buckets survive a
//     restart of the server.
//   - Idempotent create. CreateBucket requires an Idempotency-Key (the client
//     request token). Replaying a create with the same token, name and region
//     returns the existing bucket (200) instead of an error; the same name
//     under another token is 409 BucketAlreadyExists.
//   - Per-client rate limits. A token bucket per access key; an exhausted
//     bucket answers 429 SlowDown with a Retry-After header in seconds.
//   - Quota and validation. More than [WithMaxBuckets] buckets per account is
//     403 QuotaExceeded; a name breaking the naming rules ([ValidateName]) is
//     400 InvalidBucketName.
//   - Asynchronous delete. DeleteBucket answers 202 and the bucket stays
//     visible in state Deleting for [WithDeleteDelay] before it is gone (404).
//   - Fault injection, through Go methods ([Server.FailNext],
//     [Server.ThrottleNext], [Server.SlowNext], [Server.SetLatency]) or the
//     admin endpoint POST /admin/faults, a call log ([Server.Calls]) to
//     assert what a client did and when, and a hook at the instant a bucket
//     is made ([WithCreateHook]), to crash a client between the cloud's
//     create and its answer.
//
// Secrets (account secret keys, bucket secret keys) never appear in error
// messages of either side.
//
// The wire protocol (JSON bodies, errors as {"code": ..., "message": ...}):
//
//	POST   /v1/buckets          CreateBucket (Idempotency-Key header)  201, or 200 on replay
//	GET    /v1/buckets          ListBuckets (the caller's)             200
//	GET    /v1/buckets/{name}   GetBucket                              200 / 404 NoSuchBucket
//	PATCH  /v1/buckets/{name}   UpdateBucket                           200
//	DELETE /v1/buckets/{name}   DeleteBucket                           202
//	POST   /v1/queues           CreateQueue (Idempotency-Key header)   201, or 200 on replay
//	GET    /v1/queues/{name}    GetQueue                               200 / 404 NoSuchQueue
//	PATCH  /v1/queues/{name}    UpdateQueue                            200
//	DELETE /v1/queues/{name}    DeleteQueue (gone at once)             204
//	POST   /admin/faults        inject faults (see [Faults])           204
//	GET    /admin/calls         the call log                           200
//
// Every /v1 request authenticates with "Authorization: Bearer ACCESS_KEY:SECRET_KEY".
package cloud
