// Package storageversion migrates the objects of custom resources to their
// CRD's current storage version, so that older versions can be dropped from
// the CRD (seed §6, §13: CRD version conversion *and migration*).
//
// After a CRD's storage version changes, objects stay stored at the old
// version until something rewrites them, and the API server refuses to drop
// the old version from the CRD while status.storedVersions lists it
// (kube-storage-version-migrator #103 is still open; cluster-api solves it
// inside its own controllers). A [Migrator] does it for an operator's CRDs
// from inside the operator's manager:
//
//	mgr.Add(storageversion.New(mgr.GetClient(), []string{"webapps.apps.example.com"}))
//
// # Guarantees
//
//   - Every object is rewritten at the storage version: an Update of the
//     object as listed, with its resourceVersion. The API server encodes it
//     at the storage version and stores it (a write whose bytes differ from
//     the stored ones); an object already at the storage version costs the
//     request and no write. A conflict means someone else wrote the object,
//     which stored it at the storage version too. Nothing else in an object
//     changes, except that managedFields entries recorded at versions of the
//     CRD's group the CRD no longer serves are removed (they would otherwise
//     fail server-side apply once the version is gone).
//   - status.storedVersions is trimmed to [storage version] only after every
//     object was rewritten while that version was the storage version; if the
//     storage version changes during the run, the run starts over. A version
//     still stored is never trimmed.
//   - A failure to read or rewrite an object (a conversion webhook error, an
//     admission refusal) stops the migration of that CRD with the object's
//     namespace/name in the error and in the progress record, changes
//     nothing in any object, and trims nothing; the next run starts over.
//     A conversion failure on read fails the whole List without naming the
//     object; the migrator then lists the page's names (metadata only, at
//     the storage version or else at another served version) and reads
//     each at the storage version to name the first that fails.
//   - Paged (WithPageSize, default 500 per List), concurrent within a page
//     (WithConcurrency, default 4) and rate-limited (WithRateLimit, default
//     50 rewrites/s), so the operator's own requests are not crowded out; progress (storage version, objects rewritten, the
//     continue token, done or failed) is recorded on the CRD in
//     [AnnotationProgress] after each page, visible with kubectl, and a
//     restarted migrator resumes from the recorded page (an expired continue
//     token restarts the listing; rewrites already done cost no write).
//   - As a manager.Runnable it needs leader election (one replica migrates)
//     and runs once per start; a failed migration is logged and recorded, it
//     does not stop the operator.
//
// Assumptions: the client reads from the API server (unstructured objects
// are not cached by controller-runtime unless asked) and its scheme knows
// apiextensions.k8s.io/v1; the operator's role may list, get and update the
// custom resources and patch their CRDs (metadata and status).
//
// In tests, testenv.Env.ApplyCRD installs version N of a CRD and upgrades it
// to N+1 in place, as a cluster upgrade would.
package storageversion
