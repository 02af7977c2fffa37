// Package helm builds operators that delegate their logic to a Helm chart:
// each custom resource is one Helm release, rendered from a chart with
// values taken from the resource, kept in Helm's own release history, and
// applied through opkit's ensure and workflow packages.
//
// It is its own Go module (github.com/opkit/opkit/helm), so a program that
// imports only github.com/opkit/opkit never downloads Helm.
//
// # Guarantees
//
//   - One release per object. The release is named after the object and
//     lives in its namespace; its records are Helm's Secret storage driver's
//     (owner=helm, name, version, status labels, gzip'd release in the data),
//     so `helm list`, `helm history`, `helm get values|manifest|hooks|notes`
//     show what the operator did.
//   - A revision per change of input, never per reconcile. The chart's
//     content and the values are digested ([ReleaseStatus.Digest]); a new
//     revision starts only when the digest changes — a values change, another
//     chart, [AnnotationRollbackTo]. A pending or failed revision of the same
//     digest is continued, not duplicated, after a lost status write or an
//     operator restart.
//   - Zero API requests in steady state. A reconcile whose digest matches a
//     deployed revision renders the chart in memory and compares each
//     rendered object with the cache through ensure: no release record is read
//     or written, and no object is written when none drifted. Measured in
//     this package's tests.
//   - Drift is corrected. A field of a rendered object someone changed is put
//     back, a deleted object is created again (at once for kinds the builder
//     Owns, whose events reconcile the object; otherwise at its next
//     reconcile) — without a new revision. Fields the chart does not declare
//     (server defaults, other controllers' fields) are left alone.
//   - Ordered apply, readiness from workflow. CRDs (the chart's crds/ and
//     templates) and Namespaces are applied first, everything else once they
//     are ready (a CRD Established); custom resources of a CRD the release
//     installs wait until the API server serves their kind. A revision is
//     deployed when every object is ready by workflow.Default (Deployments
//     rolled out, Jobs complete, kstatus Current for the rest) — Helm's
//     --wait — and the post-hooks succeeded.
//   - Objects dropped from the chart are pruned: at the end of a revision,
//     every object of an earlier revision that the new one no longer renders
//     is deleted if it is the object's (controlled by it or carrying ensure's
//     owner label), with a UID precondition. Kinds declared with the
//     builder's Owns are also pruned by ensure as soon as they are dropped.
//   - Hooks. pre/post-install, pre/post-upgrade and pre/post-rollback hooks
//     run in Helm's order (weight, then name), each created through ensure
//     and, for a Job, waited for without blocking a worker (the reconcile
//     returns DependencyNotReady and comes back); each finished hook is
//     recorded in the release record, so it never runs twice for a revision.
//     Delete policies before-hook-creation (always), hook-succeeded and
//     hook-failed apply. Test hooks are ignored, as by helm install; any
//     other hook (pre/post-delete) stalls the object with
//     [ReasonUnsupportedHook] naming it, before anything is applied.
//   - Bad input stalls, loudly, once. A chart that fails to render, values
//     that fail the chart's values.schema.json, an unsupported hook, an
//     unknown rollback revision: Stalled with the message (outcome.Terminal,
//     not retried until the object changes), [ConditionReleased] False, and
//     no revision written.
//   - A failure is reported, not half-hidden. An object the API server
//     rejects, or that fails (a Job), or a failed hook fails the revision:
//     its record says failed with the object in the description,
//     [ReleaseStatus.FailedObject] names it, the object is Stalled; the
//     objects applied before it stay (as with helm upgrade) and are listed in
//     the revision's manifest. The next change of input starts a new revision.
//   - Status. [ReleaseStatus] (revision, Helm status, chart name, version and
//     appVersion, digest, rolled-back-to, failed object), [ConditionReleased],
//     workflow's ChildrenReady naming the object not ready, and Ready /
//     Reconciling / Stalled from the reconciler's outcome handling.
//   - Uninstall on delete. The finalizer step [UninstallStep] deletes the
//     release's objects in reverse order (Namespaces and CRDs last, once
//     nothing depending on them is left), then the whole release history, and
//     only then lets the object go.
//
// # Usage
//
//	rel, err := helm.New(mgr.GetClient(), clientset.CoreV1(),
//		func(ctx context.Context, app *v1.ChartApp) (*chart.Chart, error) { return charts[app.Spec.Version], nil },
//		func(ctx context.Context, app *v1.ChartApp) (map[string]any, error) { return app.Spec.Values(), nil })
//	b := reconciler.For(mgr, "chartapp", func() *v1.ChartApp { return &v1.ChartApp{} }).
//		Owns(&appsv1.Deployment{}).Owns(&corev1.Service{}).Owns(&batchv1.Job{}, reconciler.WithoutPrune()).
//		Observability(obs)
//	err = rel.Register(b, "examples.opkit.dev/uninstall").Complete()
//
// The object type implements [Object]: its status embeds a [ReleaseStatus]
// returned by HelmRelease. Charts come from [Load] (a directory or .tgz on
// disk) or [LoadFS] (an embed.FS); nothing is fetched over the network.
// Templates see Helm's default capabilities ([WithCapabilities] to change
// them) and `lookup` returns nothing, as with `helm template`.
//
// # Rollback
//
// Set [AnnotationRollbackTo] to a revision number: the release gets a new
// revision with that revision's chart and values (pre/post-rollback hooks
// run; `helm history` says "Rollback to N") and stays there while the
// annotation is set, whatever the spec says. Remove the annotation to go
// back to the spec (an upgrade).
//
// # Compared with helm-operator-plugins
//
// operator-framework/helm-operator-plugins' pkg/reconciler is what
// operator-sdk's Helm operators run; point by point:
//
//   - Values: it passes the CR's whole spec as values (plus override values
//     from the watches file and a value mapper); here a [ValuesFunc] maps the
//     typed spec to values, so the CRD can have a real schema.
//   - Chart: one chart per GVK, fixed at start-up; here a [ChartFunc] picks
//     the chart per object (several bundled versions, a chart bump by spec).
//   - Detecting change: it reads the release (a Secret GET) and dry-runs an
//     upgrade on every reconcile, comparing manifests; here the inputs are
//     digested and compared with the status, so a steady reconcile costs no
//     request at all.
//   - Drift: it re-applies every object of the release on every reconcile
//     (its "reconcile" action, a patch per object) and requeues on a period;
//     here ensure compares with the cache and writes only what drifted, and
//     watches come from the builder's Owns. It installs watches on the kinds
//     it finds in each release at run time (dependent watches); we declare
//     them up front.
//   - Applying: it runs Helm's actions (kube client, three-way merge patch
//     or server-side apply, resources ordered by kind only, --wait blocking
//     the worker); here objects go through ensure (merge patch or
//     server-side apply, fields the chart stops declaring removed, others'
//     fields kept, owner references), in a workflow with CRDs and Namespaces
//     first, and waiting never blocks a worker.
//   - Hooks: it runs every Helm hook through Helm's action (blocking); we run
//     install, upgrade and rollback hooks without blocking and refuse delete
//     hooks with a Stalled condition.
//   - Status: its conditions are Initialized, Deployed, ReleaseFailed and
//     Irreconcilable plus deployedRelease (name, manifest); ours are kstatus'
//     Ready/Reconciling/Stalled, [ConditionReleased] and ChildrenReady, plus
//     [ReleaseStatus] with the revision, chart version and the failing object.
//   - Rollback: it offers none besides Helm's atomic upgrade options (via
//     annotations); here [AnnotationRollbackTo] rolls back to any revision
//     of the history and holds it.
//   - Uninstall: both uninstall on deletion behind a finalizer; it waits for
//     Helm's uninstall (and can keep history by annotation); we tear down in
//     reverse dependency order and always delete the history.
//   - Differences that remain: we render without a cluster (`lookup` is
//     empty, capabilities are Helm's defaults unless given), CRDs in crds/ are
//     upgraded like any object (Helm never upgrades them), post-renderers and
//     chart dependencies fetched at run time are not offered (vendor them in
//     charts/), and Lists rendered as one object are refused.
package helm
